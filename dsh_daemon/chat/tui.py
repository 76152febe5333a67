"""The terminal view (prompt_toolkit): scrolling output above a fixed input line and a status line.

Finished lines go to the scrollback through `patch_stdout`, so they never tear what is being typed.
What is still streaming (the reply being written, tool output) lives in a small area just above the
input line; once a message completes it is printed to the scrollback, rendered as markdown by rich.
Permission questions take single keys (y/a/n/c); `/resume` opens a picker (↑/↓, Enter, Esc)."""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import ANSI, StyleAndTextTuples
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.patch_stdout import patch_stdout
from prompt_toolkit.styles import Style

from dsh_daemon.chat.commands import COMMANDS
from dsh_daemon.chat.core import PERMISSION_KEYS, PERMISSION_WORDS
from dsh_daemon.chat.render import BOLD, CYAN, DIM, RESET, YELLOW, hard_wrap, markdown_ansi, sanitize

if TYPE_CHECKING:
    from dsh_daemon.chat.core import Chat

STYLE = Style.from_dict(
    {
        "bottom-toolbar": "noreverse bg:#262626 #bcbcbc",
        "bottom-toolbar.idle": "noreverse bg:#262626 #5faf5f bold",
        "bottom-toolbar.running": "noreverse bg:#262626 #d7af00 bold",
        "bottom-toolbar.permission": "noreverse bg:#262626 #d75fd7 bold",
    }
)


class SlashCompleter(Completer):
    """Slash commands at the start of the line; session ids after /resume; paths after /attach."""

    def __init__(self, chat: Callable[[], Chat | None]) -> None:
        self.chat = chat
        self.paths = PathCompleter(expanduser=True)

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or "\n" in text:
            return
        if " " not in text:
            for name, meta in COMMANDS.items():
                if name.startswith(text):
                    yield Completion(name, start_position=-len(text), display_meta=meta)
            return
        name, _, arg = text.partition(" ")
        chat = self.chat()
        if name == "/resume" and chat is not None:
            for session in chat.session_list:
                if session["sessionId"].startswith(arg):
                    yield Completion(
                        session["sessionId"],
                        start_position=-len(arg),
                        display=session["sessionId"][:8],
                        display_meta=session.get("title") or "",
                    )
        elif name == "/attach":
            yield from self.paths.get_completions(Document(arg, len(arg)), complete_event)


class TuiView:
    interactive = True
    color = True

    def __init__(self, history_file: Path | None = None) -> None:
        self.chat: Chat | None = None
        self.live_reasoning = ""
        self.live_text = ""
        self.live_tool = ""
        self.question: str | None = None
        self.picker: dict[str, Any] | None = None
        self.quitting = False
        self.ctrl_c_armed = False  # a second Ctrl-C when idle leaves
        history: Any = InMemoryHistory()
        if history_file is not None:
            try:
                history_file.parent.mkdir(parents=True, exist_ok=True)
                history = FileHistory(str(history_file))
            except OSError:
                pass
        self.session: PromptSession[str] = PromptSession(
            message=self._message,
            bottom_toolbar=self._toolbar,
            style=STYLE,
            history=history,
            completer=SlashCompleter(lambda: self.chat),
            complete_while_typing=True,
            key_bindings=self._bindings(),
            erase_when_done=True,
            prompt_continuation=lambda width, line, wrap: "  ",
        )

    # ---- the screen ---------------------------------------------------------------------------------

    @property
    def size(self) -> tuple[int, int]:
        """(columns, rows) of the terminal."""
        try:
            size = self.session.app.output.get_size()
            return size.columns, size.rows
        except Exception:
            fallback = shutil.get_terminal_size((100, 30))
            return fallback.columns, fallback.lines

    @property
    def width(self) -> int:
        return self.size[0]

    def invalidate(self) -> None:
        app = self.session.app
        if app.is_running:
            app.invalidate()

    def print(self, text: str) -> None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()

    def _message(self) -> ANSI:
        width = self.width - 1
        lines: list[str] = []
        if self.picker is not None:
            lines.append(f"{YELLOW}{self.picker['title']}{RESET}  {DIM}↑/↓ Enter Esc{RESET}")
            options, index = self.picker["options"], self.picker["index"]
            shown = max(3, self.size[1] - 8)
            first = min(max(0, index - shown // 2), max(0, len(options) - shown))
            for i in range(first, min(len(options), first + shown)):
                marker = f"{BOLD}{CYAN}❯ " if i == index else "  "
                lines.append(f"{marker}{i + 1}. {sanitize(options[i])[: width - 6]}{RESET}")
        else:
            live: list[str] = []
            if self.live_reasoning:
                live += [f"{DIM}{line}{RESET}" for line in hard_wrap(self.live_reasoning, width)]
            if self.live_text:
                live += hard_wrap(self.live_text, width)
            if self.live_tool:
                live += [f"{DIM}{line}{RESET}" for line in hard_wrap(self.live_tool, width)]
            rows = self.size[1]
            lines += live[-max(3, min(12, rows - 8)) :]
        if self.question:
            lines.append(f"{YELLOW}{self.question}{RESET}")
        lines.append(f"{CYAN}› {RESET}")
        return ANSI("\n".join(lines))

    def _toolbar(self) -> StyleAndTextTuples:
        chat = self.chat
        if chat is None:
            return [("class:bottom-toolbar", " starting…")]
        status = chat.status
        state = {"awaiting permission": "permission"}.get(status.label, status.label)
        rest = status.line().split(" · ", 1)[1] if " · " in status.line() else ""
        return [
            (f"class:bottom-toolbar.{state}", f" ● {status.label} "),
            ("class:bottom-toolbar", f" {rest}   /help · Ctrl-C cancels"),
        ]

    # ---- view protocol ------------------------------------------------------------------------------

    def stream(self, kind: str, text: str) -> None:
        text = sanitize(text)
        if kind == "reasoning":
            self.live_reasoning += text
        elif kind == "text":
            self.live_text += text
        else:
            done, _, partial = (self.live_tool + text).rpartition("\n")
            if done:
                self.print("\n".join(f"{DIM}  │ {line}{RESET}" for line in done.split("\n")))
            self.live_tool = partial
        self.invalidate()

    def message_done(self, reasoning: str, text: str, *, streamed: bool, interrupted: bool) -> None:
        self.live_reasoning = self.live_text = ""
        parts = []
        if reasoning.strip():
            parts.append(f"{DIM}{sanitize(reasoning.strip())}{RESET}\n")
        if text.strip():
            parts.append(markdown_ansi(sanitize(text), self.width))
        if interrupted:
            parts.append(f"{DIM}[interrupted]{RESET}\n")
        if parts:
            self.print("".join(parts))
        self.invalidate()

    def discard_stream(self) -> None:
        self.live_reasoning = self.live_text = self.live_tool = ""
        self.invalidate()

    def flush_stream(self) -> None:
        leftover = []
        if self.live_reasoning:
            leftover.append(f"{DIM}{self.live_reasoning}{RESET}")
        if self.live_text:
            leftover.append(self.live_text)
        if self.live_tool:
            leftover.append(f"{DIM}  │ {self.live_tool}{RESET}")
        self.live_reasoning = self.live_text = self.live_tool = ""
        if leftover:
            self.print("\n".join(leftover))
        self.invalidate()

    def refresh(self) -> None:
        self.invalidate()

    def show_permission(self, question: str | None) -> None:
        self.question = question
        self.invalidate()

    async def pick(self, title: str, options: list[str]) -> int | None:
        future: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        self.picker = {"title": title, "options": options, "index": 0, "future": future}
        self.invalidate()
        try:
            return await future
        finally:
            self.picker = None
            self.invalidate()

    # ---- keys ---------------------------------------------------------------------------------------

    def _bindings(self) -> KeyBindings:
        kb = KeyBindings()
        asking = Condition(lambda: self.question is not None and not self.session.default_buffer.text)
        picking = Condition(lambda: self.picker is not None)

        @kb.add("escape", "enter")
        def _(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @kb.add("c-c")
        def _(event: KeyPressEvent) -> None:
            self.on_ctrl_c(event)

        for key in ("y", "a", "n", "c"):

            @kb.add(key, filter=asking, eager=True)
            def _(event: KeyPressEvent, key: str = key) -> None:
                if self.chat is not None:
                    self.chat.give_answer(key)

        @kb.add("up", filter=picking, eager=True)
        def _(event: KeyPressEvent) -> None:
            self._move(-1)

        @kb.add("down", filter=picking, eager=True)
        def _(event: KeyPressEvent) -> None:
            self._move(1)

        @kb.add("enter", filter=picking, eager=True)
        def _(event: KeyPressEvent) -> None:
            self._choose(self.picker["index"] if self.picker else None)

        @kb.add("escape", filter=picking, eager=True)
        def _(event: KeyPressEvent) -> None:
            self._choose(None)

        for digit in "123456789":

            @kb.add(digit, filter=picking, eager=True)
            def _(event: KeyPressEvent, digit: str = digit) -> None:
                if self.picker and int(digit) <= len(self.picker["options"]):
                    self._choose(int(digit) - 1)

        return kb

    def _move(self, step: int) -> None:
        if self.picker:
            self.picker["index"] = (self.picker["index"] + step) % len(self.picker["options"])
            self.invalidate()

    def _choose(self, index: int | None) -> None:
        if self.picker and not self.picker["future"].done():
            self.picker["future"].set_result(index)

    def on_ctrl_c(self, event: KeyPressEvent) -> None:
        chat = self.chat
        buffer = event.current_buffer
        if self.picker is not None:
            self._choose(None)
        elif chat is not None and chat.give_answer("c"):
            pass
        elif buffer.text:
            buffer.reset()
        elif chat is not None and chat.status.state == "running":
            chat.rpc.spawn(chat.rpc.request("dsh/cancel", {"sessionId": chat.session_id, "keepInbox": True}))
        elif self.ctrl_c_armed:
            self.quit()
        else:
            self.ctrl_c_armed = True
            self.print(f"{DIM}[Ctrl-C again (or Ctrl-D) leaves]{RESET}")
            return
        self.ctrl_c_armed = False

    def quit(self) -> None:
        self.quitting = True
        app = self.session.app
        if app.is_running and not app.future.done():  # type: ignore[union-attr]
            app.exit(exception=EOFError())

    # ---- the input loop -----------------------------------------------------------------------------

    async def run(self, on_line: Callable[[str], None]) -> None:
        """Read lines until Ctrl-D, /quit or Ctrl-C when idle; hand each to `on_line`."""
        with patch_stdout(raw=True):
            while not self.quitting:
                try:
                    text = await self.session.prompt_async()
                except (EOFError, KeyboardInterrupt):
                    break
                self.ctrl_c_armed = False
                chat = self.chat
                answer = text.strip().lower()
                if chat is not None and chat.asking and answer in (*PERMISSION_KEYS, *PERMISSION_WORDS):
                    chat.give_answer(answer)
                    continue
                on_line(text)  # a line typed while a question is open is a prompt like any other
