"""The plain-text view: for pipes and dumb terminals.

It composes in shell pipelines: the answers go to one stream (stdout), everything else (the prompts
echoed, reasoning, tool cards, notes, questions) to another (stderr). When the answers' stream is a
terminal, text streams to it as it comes; otherwise each turn's answer is written whole once it is
final (a reply that goes on to call tools is commentary, written with the rest). With `--json` the
answers' stream carries JSONL events instead (written by the app), and no text."""

from __future__ import annotations

import shutil
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TextIO

from dsh_daemon.chat.render import DIM, osc52, paint

if TYPE_CHECKING:
    from dsh_daemon.chat.permission import Question


class PlainView:
    interactive = False

    def __init__(
        self, answers: TextIO, notes: TextIO, *, color: bool, stream_answers: bool, answers_off: bool = False
    ) -> None:
        self.answers = answers
        self.notes = notes
        self.color = color
        self.stream_answers = stream_answers and not answers_off
        self.answers_off = answers_off  # --json: stdout carries events only
        self.line_start = {id(answers): True, id(notes): True}
        self.mode = ""  # what streamed last: reasoning | text | tool
        self.streamed_text = False  # this message's text already went out
        self.on_closed: Callable[[], None] = lambda: None  # a reader of ours went away (`| head`)
        self.closed = False

    @property
    def width(self) -> int:
        """Columns of the terminal (100 when there is none)."""
        return shutil.get_terminal_size((100, 30)).columns

    def _write(self, out: TextIO, text: str) -> None:
        if not text or self.closed:
            return
        try:
            out.write(text)
            out.flush()
        except BrokenPipeError:
            self.closed = True
            self.on_closed()
            return
        self.line_start[id(out)] = text.endswith("\n")

    def _end_line(self, out: TextIO) -> None:
        if not self.line_start[id(out)]:
            self._write(out, "\n")

    def _end_lines(self) -> None:
        self._end_line(self.answers)
        self._end_line(self.notes)

    def print(self, text: str) -> None:
        self._end_lines()
        self._write(self.notes, text if text.endswith("\n") else text + "\n")
        self.mode = ""

    def stream(self, kind: str, text: str) -> None:
        if kind != self.mode:
            self._end_lines()
        self.mode = kind
        if kind == "text":
            if self.stream_answers:
                self._write(self.answers, text)
                self.streamed_text = True
            return
        if kind == "tool":  # a tool's output, each line set off from the rest
            at_start = self.line_start[id(self.notes)]
            pieces = text.split("\n")
            text = "\n".join(
                ("  │ " if piece and (i or at_start) else "") + piece for i, piece in enumerate(pieces)
            )
        self._write(self.notes, paint(self.color, DIM, text))

    def message_done(
        self, reasoning: str, text: str, *, streamed: bool, interrupted: bool, final: bool, first_block: int
    ) -> None:
        self._end_lines()
        already = streamed and self.streamed_text
        self.streamed_text = False
        self.mode = ""
        if text and not already:
            if final and not self.answers_off:
                self._write(self.answers, text if text.endswith("\n") else text + "\n")
            else:
                self._write(self.notes, text if text.endswith("\n") else text + "\n")
        if interrupted:
            self.print(paint(self.color, DIM, "[interrupted]"))

    def discard_stream(self) -> None:
        self.flush_stream()

    def flush_stream(self) -> None:
        self._end_lines()
        self.mode = ""

    def refresh(self) -> None:
        pass

    def show_permission(self, question: Question | None) -> None:
        if question is None:
            return
        for number, option in enumerate(question.options, 1):
            self.print(f"  {number}. {option.label}")
        words = question.words()
        self._write(self.notes, f"  answer with a line: 1-{len(question.options)} (or {', '.join(words)}): ")
        self.line_start[id(self.notes)] = True  # the answer line ends it

    async def pick(
        self, title: str, options: list[str], preview: Callable[[int], Awaitable[str]] | None = None
    ) -> int | None:
        return None

    def copy(self, text: str) -> str:
        if self.answers.isatty():
            self._write(self.answers, osc52(text))
            return "copied to the clipboard (OSC 52)"
        self._end_lines()
        self._write(self.answers, text)
        return "written to stdout (no terminal for a clipboard)"

    def load_input(self, text: str, editing: int | None) -> bool:
        return False
