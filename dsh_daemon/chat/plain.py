"""The plain-text view: for pipes and dumb terminals; text streams straight to stdout as it comes."""

from __future__ import annotations

from typing import TextIO

from dsh_daemon.chat.render import DIM, paint


class PlainView:
    interactive = False

    def __init__(self, out: TextIO, *, color: bool) -> None:
        self.out = out
        self.color = color
        self.at_line_start = True
        self.mode = ""  # what streamed last: reasoning | text | tool

    def write(self, text: str) -> None:
        if not text:
            return
        self.out.write(text)
        self.out.flush()
        self.at_line_start = text.endswith("\n")

    def print(self, text: str) -> None:
        if not self.at_line_start:
            self.write("\n")
        self.write(text if text.endswith("\n") else text + "\n")
        self.mode = ""

    def stream(self, kind: str, text: str) -> None:
        if kind == "text" and self.mode == "reasoning" and not self.at_line_start:
            self.write("\n")
        self.mode = kind
        self.write(paint(self.color, DIM, text) if kind in ("reasoning", "tool") else text)

    def message_done(self, reasoning: str, text: str, *, streamed: bool, interrupted: bool) -> None:
        if not streamed and text:
            self.print(text)
        if interrupted:
            self.print(paint(self.color, DIM, "[interrupted]"))

    def discard_stream(self) -> None:
        self.flush_stream()

    def flush_stream(self) -> None:
        if not self.at_line_start:
            self.write("\n")
        self.mode = ""

    def refresh(self) -> None:
        pass

    def show_permission(self, question: str | None) -> None:
        if question:
            self.write("  " + question + ": ")
            self.at_line_start = True  # the answer line ends it

    async def pick(self, title: str, options: list[str]) -> int | None:
        return None
