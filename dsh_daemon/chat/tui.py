"""The terminal view (prompt_toolkit): scrolling output above a fixed input line and a status line.

Finished lines go to the scrollback through prompt_toolkit's stdout proxy, so they never tear what is
being typed; a finished reply's markdown is rendered in a worker thread and written a slice a frame,
and what is printed after it waits for it (`message_done`).
Between the scrollback and the input line live, in this order: what is still streaming (word-wrapped,
its newest lines, "… N more lines" above them when clipped), the agent's plan while a turn runs
(☐ pending, ◐ in progress, ☑ done), the queue (one line per item, by
number), and an open permission question (a menu: see `permission` for the rules that keep typed
text from answering it). On a resize the visible screen is painted again from what was printed,
wrapped for the new width, so no fragment of the old layout stays. `/resume` and `/model` open a
picker (type to filter, ↑/↓, Enter, Esc) with a preview of the highlighted entry."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
import os
import shutil
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast
from urllib.parse import unquote, urlsplit

from prompt_toolkit import PromptSession
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import ANSI, FormattedText, StyleAndTextTuples, to_formatted_text
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.patch_stdout import StdoutProxy
from prompt_toolkit.styles import Style

from dsh_daemon.chat import plan as plans
from dsh_daemon.chat import sandbox as sandboxes
from dsh_daemon.chat.commands import MENTION_RE, available_commands
from dsh_daemon.chat.keys import terminal_input
from dsh_daemon.chat.permission import SETTLE_S
from dsh_daemon.chat.queue import NEXT_STEP, NEXT_TURN
from dsh_daemon.chat.render import (
    BOLD,
    CYAN,
    DIM,
    RESET,
    REVERSE,
    YELLOW,
    TailWrap,
    clip,
    osc52,
    render_reply,
    rows,
    sanitize,
    warm_markdown,
    word_wrap,
)

# The module (the package's `prompt` attribute is the function of that name).
pt_prompt: Any = importlib.import_module("prompt_toolkit.shortcuts.prompt")

if TYPE_CHECKING:
    from dsh_daemon.chat.core import Chat
    from dsh_daemon.chat.permission import Question

STYLE = Style.from_dict(
    {
        "bottom-toolbar": "noreverse bg:#262626 #bcbcbc",
        "bottom-toolbar.idle": "noreverse bg:#262626 #5faf5f bold",
        "bottom-toolbar.running": "noreverse bg:#262626 #d7af00 bold",
        "bottom-toolbar.permission": "noreverse bg:#262626 #d75fd7 bold",
        "bottom-toolbar.sandbox": "noreverse bg:#262626 #87afd7",
        "bottom-toolbar.warning": "noreverse bg:#5f0000 #ffd700 bold",
    }
)
LIVE_MAX_ROWS = 12  # the streaming area's height at most (the rest is "… N more lines")
QUEUE_MAX_ROWS = 4
TOOL_TAIL_LINES = 4  # a tool's last output lines kept in the scrollback (/show N has the rest)
TOOL_KEEP_CHARS = 20_000
PREVIEW_ROWS = 6
SCROLLBACK_BLOCKS = 500  # what is kept to paint the screen again after a resize
FRAME_S = 1 / 60  # the screen is painted at most this often
STREAM_FRAME_S = 1 / 25  # what streams is painted at most this often (typed keys: at once)
ESC_ESC_S = 0.6  # Esc twice within this on an idle prompt opens the rewind picker
SPLIT_SEQUENCE_S = 0.03  # an escape sequence cut between reads is waited for this long (chat/keys.py)
MULTI_KEY_S = 1.0  # the second key of Ctrl-X Ctrl-E is waited for this long
WRITE_SLICE_LINES = 500  # a finished reply is written this many lines a frame
RESIZE_SETTLE_S = 0.08  # a window dragged to a new size sends a burst of resizes: paint once


@dataclass(frozen=True)
class _Rendering:
    """A finished reply waiting for its markdown render; its streamed parts show in the live area."""

    render: Callable[[int], str]
    reasoning: str  # what streamed of it, shown meanwhile
    text: str
    fallback: str  # printed as it is should the render fail


@dataclass(frozen=True)
class Edit:
    """A line typed while editing queued prompt #number in the input (`/edit N` alone)."""

    number: int
    text: str


class Scrollback:
    """The last blocks printed, each able to render itself for a width (markdown again, other text as
    it was: the terminal wraps it)."""

    def __init__(self) -> None:
        self.blocks: deque[str | Callable[[int], str]] = deque(maxlen=SCROLLBACK_BLOCKS)

    def add(self, block: str | Callable[[int], str]) -> None:
        self.blocks.append(block)

    def tail(self, width: int, room: int) -> list[str]:
        """The last lines, as printed at `width`, that fill at most `room` rows."""
        out: list[str] = []
        used = 0
        for block in reversed(self.blocks):
            text = block(width) if callable(block) else block
            for line in reversed(text.rstrip("\n").split("\n")):
                need = rows(line, width)
                if used + need > room:
                    return out[::-1]
                out.append(line)
                used += need
        return out[::-1]


class ChatCompleter(Completer):
    """Slash commands at the start of the line; `@path` anywhere; paths after /attach; queue numbers
    after /edit and /drop; session ids after /resume; model ids after /model."""

    def __init__(self, chat: Callable[[], Chat | None]) -> None:
        self.chat = chat
        self.paths = PathCompleter(expanduser=True)

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor
        chat = self.chat()
        word = document.get_word_before_cursor(WORD=True)
        if word.startswith("@") and MENTION_RE.search(word):
            yield from self._paths(word[1:], complete_event, prefix="@")
            return
        if not text.startswith("/") or "\n" in text:
            return
        if " " not in text:
            builtin = available_commands(chat.capabilities if chat else {})
            for name, meta in builtin.items():
                if name.startswith(text):
                    yield Completion(name, start_position=-len(text), display_meta=meta)
            for name, command in (chat.custom_commands if chat else {}).items():
                if name.startswith(text) and name not in builtin:
                    meta = command.get("description", "")
                    yield Completion(name, start_position=-len(text), display_meta=meta)
            return
        name, _, arg = text.partition(" ")
        if chat is None:
            return
        if name == "/resume":
            for session in chat.session_list:
                if session["sessionId"].startswith(arg):
                    yield Completion(
                        session["sessionId"],
                        start_position=-len(arg),
                        display=session["sessionId"][:8],
                        display_meta=session.get("title") or "",
                    )
        elif name in ("/edit", "/drop") and " " not in arg:
            for item in [*chat.status.queue.pending(NEXT_TURN), *chat.status.queue.pending(NEXT_STEP)]:
                if str(item.number).startswith(arg.removeprefix("#")):
                    yield Completion(
                        str(item.number),
                        start_position=-len(arg),
                        display=item.label,
                        display_meta=clip(item.text, 40),
                    )
        elif name == "/attach":
            yield from self._paths(arg, complete_event)

    def _paths(self, partial: str, event: CompleteEvent, prefix: str = "") -> Iterable[Completion]:
        for completion in self.paths.get_completions(Document(partial, len(partial)), event):
            yield Completion(
                completion.text,
                start_position=completion.start_position,
                display=completion.display,
                display_meta=completion.display_meta,
            )


class TuiView:
    interactive = True
    color = True

    def __init__(self, history_file: Path | None = None) -> None:
        self.chat: Chat | None = None
        self.pull_last: Callable[[], Awaitable[str | None]] | None = None  # Alt-Up
        self.show_last: Callable[[], Awaitable[None]] | None = None  # Ctrl-O: /show of the last tool card
        self.open_rewind: Callable[[], Awaitable[None]] | None = None  # Esc Esc when idle
        self._wrap_reasoning = TailWrap(LIVE_MAX_ROWS)
        self._wrap_text = TailWrap(LIVE_MAX_ROWS)
        self.last_esc: float | None = None
        self.live_reasoning = ""
        self.live_text = ""
        self.live_tool = ""  # the running tool's output (its last TOOL_KEEP_CHARS)
        self.tool_lines = 0  # lines of it so far
        self.question: Question | None = None
        self.picker: dict[str, Any] | None = None
        self.editing: int | None = None  # the queued prompt the input line is rewording
        self.quitting = False
        self.ctrl_c_armed = False  # a second Ctrl-C when idle leaves
        self.scrollback = Scrollback()
        # Blocks to print behind a finished reply whose markdown is being rendered (`message_done`).
        self._output: deque[str | _Rendering] = deque()
        self._drain: asyncio.Task[None] | None = None
        self._resize_handle: asyncio.TimerHandle | None = None
        self._stream_frame: asyncio.TimerHandle | None = None  # the next paint of what streams
        self._message_cache: tuple[Any, FormattedText] | None = None  # (render count, size, input) -> prompt
        history: Any = InMemoryHistory()
        if history_file is not None:
            try:
                history_file.parent.mkdir(parents=True, exist_ok=True)
                history = FileHistory(str(history_file))
            except OSError:
                pass
        # The layout splits the prompt (the live area, then "› ") with `_split_multiline_prompt`, which
        # cuts it into one fragment per character and builds the part above the input by inserting
        # each at the head of a list, several times a frame: while a reply streams that cost more
        # than the rest of the frame. The same split, by runs of a style, is put in while the layout
        # is made (prompt_toolkit keeps the functions it returns).
        split, pt_prompt._split_multiline_prompt = pt_prompt._split_multiline_prompt, split_prompt_by_runs
        try:
            self.session: PromptSession[str] = PromptSession(
                message=self._message,
                input=terminal_input(),
                bottom_toolbar=self._toolbar,
                style=STYLE,
                history=history,
                completer=ChatCompleter(lambda: self.chat),
                complete_while_typing=True,
                key_bindings=self._bindings(),
                erase_when_done=True,
                prompt_continuation=lambda width, line, wrap: "  ",
            )
        finally:
            pt_prompt._split_multiline_prompt = split
        self.session.default_buffer.on_text_changed += self._on_typing
        # Esc must act at once (a person cancelling a turn presses it and goes on typing): a read that
        # ends in Esc is the Esc key, handled in that read (chat/keys.py), so prompt_toolkit's waits
        # for the rest of an escape sequence or a Meta key (0.5 s and 1.0 s by default; 30 ms twice
        # before) no longer delay it. What is left to them: a sequence a slow link cut between reads,
        # and a multi-key binding typed key by key (Ctrl-X, then Ctrl-E).
        # A burst of deltas invalidates the screen per delta: paint at most once a frame, from the
        # latest state, so typed keys are drawn between frames instead of behind every delta.
        self.session.app.min_redraw_interval = FRAME_S
        self.session.app.ttimeoutlen = SPLIT_SEQUENCE_S
        self.session.app.timeoutlen = MULTI_KEY_S
        # A resize paints the whole visible screen again (see `_repaint`), not just the input area.
        self.session.app._on_resize = self._on_resize  # type: ignore[method-assign]

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

    @property
    def buffer_text(self) -> str:
        return self.session.default_buffer.text

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def invalidate(self) -> None:
        app = self.session.app
        if app.is_running:
            app.invalidate()

    def print(self, text: str) -> None:
        if self._output:  # a finished reply is being rendered: what comes after it waits for it
            self._output.append(text)
            self.invalidate()  # (shown in the live area meanwhile: `_waiting_lines`)
            return
        self._write(text, text)

    def _write(self, block: str | Callable[[int], str], shown: str) -> None:
        self.scrollback.add(block)
        sys.stdout.write(shown if shown.endswith("\n") else shown + "\n")
        sys.stdout.flush()

    def _live_lines(self, width: int, room: int) -> list[str]:
        # Only the end of a long reply is shown, and only the end is wrapped again each frame
        # (`TailWrap`): wrapping all of a 200 KB reply per frame made typed keys wait half a second.
        live: list[str] = []
        total = 0
        held = [item for item in self._output if isinstance(item, _Rendering)]
        reasoning = "\n".join(part for part in [*(i.reasoning for i in held), self.live_reasoning] if part)
        text = "\n".join(part for part in [*(i.text for i in held), self.live_text] if part)
        if reasoning:
            count, lines = self._wrap_reasoning.lines(reasoning, width)
            total += count
            live += [f"{DIM}{line}{RESET}" for line in lines]
        if text:
            count, lines = self._wrap_text.lines(text, width)
            total += count
            live += lines
        if self.live_tool:
            tail = "\n".join(self.live_tool.rstrip("\n").split("\n")[-room:])
            lines = [f"{DIM}  │ {line}{RESET}" for line in word_wrap(tail, width - 4)]
            total += len(lines)
            live += lines
        waiting = self._waiting_lines()
        live += waiting
        total += len(waiting)
        if total > room:
            hidden = total - room + 1
            live = [f"{DIM}… {hidden} more line{'s' if hidden != 1 else ''}{RESET}", *live[-(room - 1) :]]
        return live

    def _waiting_lines(self) -> list[str]:
        """The lines printed after a finished reply whose render has not come back yet (the
        "[cancelled" of an Esc, say): they stay in order behind the reply, but are in view below its
        text at once, not after the render. Only while nothing new streams (its text would come
        before them)."""
        if self.live_text or self.live_reasoning or self.live_tool:
            return []
        last = max((i for i, item in enumerate(self._output) if isinstance(item, _Rendering)), default=-1)
        return [
            line
            for item in itertools.islice(self._output, last + 1, None)
            if isinstance(item, str)
            for line in item.rstrip("\n").split("\n")
        ]

    def _plan_lines(self, width: int) -> list[str]:
        """The agent's plan while a turn runs (idle, the scrollback's last plan line says it)."""
        chat = self.chat
        if chat is None or chat.idle.is_set():
            return []
        return plans.block_lines(chat.plan.current, width)

    def _queue_lines(self, width: int) -> list[str]:
        chat = self.chat
        if chat is None:
            return []
        items = [*chat.status.queue.pending(NEXT_TURN), *chat.status.queue.pending(NEXT_STEP)]
        lines = []
        for item in items[:QUEUE_MAX_ROWS]:
            mark = "⋯" if item.target == NEXT_TURN else "⤷"
            extra = f" 📎{len(item.context)}" if item.context else ""
            verb = f"{item.verb}: " if item.target == NEXT_STEP and item.verb else ""
            text = clip(verb + item.text, max(10, width - 12 - len(extra)))
            lines.append(f"{DIM}{mark} {RESET}{CYAN}{item.label}{RESET} {DIM}{text}{extra}{RESET}")
        if len(items) > QUEUE_MAX_ROWS:
            lines.append(f"{DIM}  … {len(items) - QUEUE_MAX_ROWS} more (/queue){RESET}")
        return lines

    def _question_lines(self, question: Question, width: int) -> list[str]:
        count = len(question.options)
        tool = sanitize(str(question.params.get("tool") or "this"))
        listening = self._menu_open()
        keys = f"↑/↓ or 1-{count}, then Enter" if listening else "the menu listens once you pause typing"
        escalation = question.escalation
        ask = "widen the sandbox?" if escalation is not None else f"allow {tool}?"
        if question.plan:
            ask = "approve the plan?"
        lines = [f"{YELLOW}? {ask}{RESET}  {DIM}{keys} · Esc cancels the turn{RESET}"]
        if escalation is not None:  # the exact widening stays in view while the menu is open
            lines.append(f"  {YELLOW}{clip(sandboxes.widening_words(escalation), width - 4)}{RESET}")
        for index, option in enumerate(question.options):
            label = clip(f"{index + 1}. {option.label}", width - 4)
            if index == question.selected:
                lines.append(f"{BOLD}{CYAN}❯ {REVERSE}{label}{RESET}")
            else:
                lines.append(f"  {label}")
        typed = self.buffer_text.strip()
        if typed and question.is_option(typed):
            lines.append(
                f"{YELLOW}  {typed} went into the input (the menu was not listening yet): Enter chooses "
                f"option {typed}, then Enter again confirms{RESET}"
            )
        elif self.buffer_text and question.plan:
            lines.append(f"{DIM}  (Enter sends the plan back to revise with what you typed){RESET}")
        elif self.buffer_text:
            lines.append(
                f"{DIM}  (the input line is not empty: Enter sends it as a prompt; empty it to answer){RESET}"
            )
        elif question.hint:
            lines.append(f"{YELLOW}  {question.hint}{RESET}")
        return lines

    def _picker_lines(self, width: int, height: int) -> list[str]:
        picker = self.picker
        assert picker is not None
        typed = picker["filter"]
        lines = [
            f"{YELLOW}{picker['title']}{RESET}  {CYAN}{typed}▏{RESET}"
            f"  {DIM}type to filter · ↑/↓ Enter Esc{RESET}"
        ]
        shown: list[int] = picker["shown"]
        if not shown:
            lines.append(f"{DIM}  (nothing matches){RESET}")
        index = picker["index"]
        room = max(3, height - 10 - PREVIEW_ROWS)
        first = min(max(0, index - room // 2), max(0, len(shown) - room))
        for position in range(first, min(len(shown), first + room)):
            option = sanitize(picker["options"][shown[position]])[: width - 4]
            marker = f"{BOLD}{CYAN}❯ " if position == index else "  "
            lines.append(f"{marker}{option}{RESET}")
        if shown and picker["preview"] is not None:
            chosen = shown[index]
            text = picker["previews"].get(chosen)
            if text is None:
                self._load_preview(chosen)
                text = "…"
            preview = word_wrap(sanitize(text), width - 4)
            if len(preview) > PREVIEW_ROWS:
                preview = [*preview[: PREVIEW_ROWS - 1], "…"]
            lines += [f"{DIM}  │ {line}{RESET}" for line in preview]
        return lines

    def _message(self) -> FormattedText:
        # prompt_toolkit asks for the prompt about ten times a frame (heights, line prefixes, filters)
        # and walks its fragments each time: it is made once a frame, for that frame's size, with one
        # fragment per run of a style (ANSI gives one per character: 1,500 walked ten times a frame).
        key = (self.session.app.render_counter, self.size, self.buffer_text)
        if self._message_cache is None or self._message_cache[0] != key:
            self._message_cache = (key, merged_fragments(to_formatted_text(self._make_message())))
        return self._message_cache[1]

    def _make_message(self) -> ANSI:
        width, height = self.size
        width -= 1
        lines: list[str] = []
        if self.picker is not None:
            lines += self._picker_lines(width, height)
        else:
            extra = self._plan_lines(width) + self._queue_lines(width)
            menu = self._question_lines(self.question, width) if self.question else []
            room = max(3, min(LIVE_MAX_ROWS, height - 8 - len(extra) - len(menu)))
            lines += self._live_lines(width, room)
            lines += extra + menu
        prompt = f"{YELLOW}edit #{self.editing} ›{RESET} " if self.editing is not None else f"{CYAN}› {RESET}"
        lines.append(prompt)
        return ANSI("\n".join(lines))

    def _toolbar(self) -> StyleAndTextTuples:
        chat = self.chat
        if chat is None:
            return [("class:bottom-toolbar", " starting…")]
        status = chat.status
        state = {"awaiting permission": "permission"}.get(status.label, status.label)
        parts: StyleAndTextTuples = [(f"class:bottom-toolbar.{state}", f" ● {status.label} ")]
        sandbox = status.sandbox_part()
        if sandbox:
            # Commands refused for want of confinement, or running unconfined: a look that stands out.
            look = "warning" if sandbox.startswith("⚠") else "sandbox"
            parts.append((f"class:bottom-toolbar.{look}", f" {sandbox} "))
        parts.append(("class:bottom-toolbar", f" {status.toolbar()}   /help · Esc cancels"))
        return parts

    # ---- a resize -----------------------------------------------------------------------------------

    def _on_resize(self) -> None:
        loop = asyncio.get_running_loop()
        if self._resize_handle is not None:
            self._resize_handle.cancel()
        self._resize_handle = loop.call_later(RESIZE_SETTLE_S, self._repaint)

    def _repaint(self) -> None:
        """Paint the visible screen again for the new size: the terminal has reflowed (or cut) what it
        showed, so the old input area cannot be erased by counting lines. The screen is cleared from its
        top (what scrolled off it stays in the terminal's history, untouched), the last printed lines
        are written again wrapped for the new width, and the input area is drawn below them."""
        self._resize_handle = None
        app = self.session.app
        if not app.is_running:
            return
        columns, lines = self.size
        try:
            needed = app.layout.container.preferred_height(columns, lines).preferred
        except Exception:  # the layout cannot say: leave it room for a typical input area
            needed = lines // 2
        tail = self.scrollback.tail(columns, max(0, lines - needed))

        def paint() -> None:
            output = app.output
            # Row by row: clearing the whole screen at once makes some terminals (tmux's default
            # scroll-on-clear) push the old screen into their history, a copy on every resize.
            output.write_raw("\x1b[H" + "\x1b[2K\x1b[B" * lines + "\x1b[H")
            if tail:
                output.write_raw("\r\n".join(tail) + "\r\n")
            output.flush()
            app.renderer.reset(leave_alternate_screen=False)

        run_in_terminal(paint)

    # ---- view protocol ------------------------------------------------------------------------------

    def stream(self, kind: str, text: str) -> None:
        text = sanitize(text)
        if kind == "reasoning":
            self.live_reasoning += text
        elif kind == "text":
            self.live_text += text
        else:
            # A tool's output runs in the live area (its tail); the scrollback keeps its last lines, and
            # `/show N` has all of it.
            self.live_tool += text
            self.tool_lines += text.count("\n")
            if len(self.live_tool) > TOOL_KEEP_CHARS:
                self.live_tool = self.live_tool[-TOOL_KEEP_CHARS // 2 :]
        self._paint_stream_soon()

    def _paint_stream_soon(self) -> None:
        """A delta is painted with the next frame of what streams, not at once: a 60-frame second of
        a big reply took the time typed keys need to show (a key still paints at once, with the
        latest of the stream)."""
        if self._stream_frame is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (the view alone, in tests)
            self.invalidate()
            return
        self._stream_frame = loop.call_later(STREAM_FRAME_S, self._stream_frame_due)

    def _stream_frame_due(self) -> None:
        self._stream_frame = None
        self.invalidate()

    def message_done(
        self, reasoning: str, text: str, *, streamed: bool, interrupted: bool, final: bool, first_block: int
    ) -> None:
        shown_live = (self.live_reasoning, self.live_text)  # it stays in view until the render prints
        self.live_reasoning = self.live_text = ""
        reasoning, text = sanitize(reasoning.strip()), sanitize(text)

        def render(width: int) -> str:  # (again for a new width, after a resize)
            return render_reply(reasoning, text, width, first_block, interrupted)

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (the view alone, in tests)
            self._write_rendered(render, render(self.width))
            return
        # Rendering a long reply's markdown takes a tenth of a second or more (rich walks all of it):
        # it runs in a worker thread, so typed keys still show, and lines printed meanwhile queue
        # behind it to keep their order. Its streamed text stays in the live area until it prints.
        self._output.append(_Rendering(render, *shown_live, fallback=f"{reasoning}\n{text}".strip()))
        if self._drain is None or self._drain.done():
            self._drain = loop.create_task(self._drain_output())
        self.invalidate()

    def _write_rendered(self, render: Callable[[int], str], shown: str) -> None:
        if shown:
            self._write(render, shown)
        self.invalidate()

    async def _drain_output(self) -> None:
        """Write what waits in `_output`, in order, rendering each finished reply off the loop."""
        while self._output:
            item = self._output[0]
            if not isinstance(item, _Rendering):
                self._output.popleft()
                self._write(item, item)
                continue
            try:
                shown = await asyncio.to_thread(item.render, self.width)
            except Exception as exc:  # the reply is not lost for a rendering bug
                self._output.popleft()
                plain = f"{item.fallback}\n{DIM}[not rendered: {type(exc).__name__}: {exc}]{RESET}"
                self._write(plain, plain)
                continue
            # A long reply goes to the terminal a slice a frame: written at once, 200 KB kept the loop
            # (and typed keys) waiting until the terminal had read it all.
            lines = shown.splitlines(keepends=True)
            while len(lines) > WRITE_SLICE_LINES:
                sys.stdout.write("".join(lines[:WRITE_SLICE_LINES]))
                sys.stdout.flush()
                del lines[:WRITE_SLICE_LINES]
                await asyncio.sleep(FRAME_S)
            self._output.popleft()
            if shown:
                self.scrollback.add(item.render)
            if lines:
                rest = "".join(lines)
                sys.stdout.write(rest if rest.endswith("\n") else rest + "\n")
                sys.stdout.flush()
            self.invalidate()

    async def settled(self) -> None:
        """Once every finished reply is rendered and written."""
        while self._drain is not None and not self._drain.done():
            await asyncio.shield(self._drain)

    def discard_stream(self) -> None:
        self.live_reasoning = self.live_text = self.live_tool = ""
        self.tool_lines = 0
        self.invalidate()

    def flush_stream(self) -> None:
        leftover = []
        if self.live_reasoning:
            leftover.append(f"{DIM}{self.live_reasoning}{RESET}")
        if self.live_text:
            leftover.append(self.live_text)
        if self.live_tool:
            lines = self.live_tool.rstrip("\n").split("\n")
            total = self.tool_lines + (0 if self.live_tool.endswith("\n") else 1)
            if total > TOOL_TAIL_LINES:
                leftover.append(f"{DIM}  │ … {total - TOOL_TAIL_LINES} more lines above{RESET}")
            leftover += [f"{DIM}  │ {line}{RESET}" for line in lines[-TOOL_TAIL_LINES:]]
        self.live_reasoning = self.live_text = self.live_tool = ""
        self.tool_lines = 0
        if leftover:
            self.print("\n".join(leftover))
        self.invalidate()

    def refresh(self) -> None:
        self.invalidate()

    def show_permission(self, question: Question | None) -> None:
        self.question = question
        self.invalidate()
        if question is not None:
            self._repaint_when_settled()

    async def pick(
        self, title: str, options: list[str], preview: Callable[[int], Awaitable[str]] | None = None
    ) -> int | None:
        future: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()
        self.picker = {
            "title": title,
            "options": options,
            "shown": list(range(len(options))),
            "index": 0,
            "filter": "",
            "future": future,
            "preview": preview,
            "previews": {},
            "loading": set(),
        }
        self.invalidate()
        try:
            return await future
        finally:
            self.picker = None
            self.invalidate()

    def copy(self, text: str) -> str:
        # Straight to the terminal (not through the scrollback): it is a control sequence, not text.
        self.session.app.output.write_raw(osc52(text))
        self.session.app.output.flush()
        return "copied to the clipboard (OSC 52)"

    def load_input(self, text: str, editing: int | None) -> bool:
        self.editing = editing
        self.session.default_buffer.document = Document(text, len(text))
        self.invalidate()
        return True

    # ---- the picker ---------------------------------------------------------------------------------

    def _load_preview(self, index: int) -> None:
        picker = self.picker
        if picker is None or index in picker["loading"]:
            return
        picker["loading"].add(index)

        async def load() -> None:
            try:
                text = await picker["preview"](index)
            except Exception as exc:  # a preview is a courtesy
                text = f"(no preview: {exc})"
            picker["previews"][index] = text
            self.invalidate()

        if self.chat is not None:
            self.chat.rpc.spawn(load())

    def _filter(self, typed: str) -> None:
        picker = self.picker
        if picker is None:
            return
        picker["filter"] = typed
        words = typed.lower().split()
        picker["shown"] = [
            i for i, option in enumerate(picker["options"]) if all(w in option.lower() for w in words)
        ]
        picker["index"] = 0
        self.invalidate()

    def _move(self, step: int) -> None:
        if self.picker and self.picker["shown"]:
            self.picker["index"] = (self.picker["index"] + step) % len(self.picker["shown"])
            self.invalidate()

    def _choose(self, index: int | None) -> None:
        if self.picker and not self.picker["future"].done():
            self.picker["future"].set_result(index)

    # ---- keys ---------------------------------------------------------------------------------------

    def _on_typing(self, _: object) -> None:
        if self.question is not None:
            self.question.typed(self.now())
            self.invalidate()  # the "input line is not empty" remark
            self._repaint_when_settled()

    def _repaint_when_settled(self) -> None:
        """The menu's hint says whether it listens: paint again once it starts to."""
        with contextlib.suppress(RuntimeError):  # no running loop (tests of the view alone)
            asyncio.get_running_loop().call_later(SETTLE_S + 0.05, self.invalidate)

    def _menu_open(self) -> bool:
        """The question menu takes keys: a question is open, the input line is empty and the person
        has stopped typing (`permission.SETTLE_S`)."""
        question = self.question
        return (
            question is not None
            and self.picker is None
            and not self.buffer_text
            and question.settled(self.now())
        )

    def _bindings(self) -> KeyBindings:
        kb = KeyBindings()
        menu = Condition(self._menu_open)
        after_digit = Condition(
            lambda: self.question is not None and bool(self.question.from_digit) and not self.buffer_text
        )
        picking = Condition(lambda: self.picker is not None)

        @kb.add("escape", "enter")
        def _(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @kb.add("c-c")
        def _(event: KeyPressEvent) -> None:
            self.interrupt(event, ctrl_c=True)

        @kb.add("escape")
        def _(event: KeyPressEvent) -> None:
            if not self._esc_esc():
                self.interrupt(event, ctrl_c=False)

        @kb.add("escape", "up", filter=~picking)
        def _(event: KeyPressEvent) -> None:
            self.pull_back()

        @kb.add(Keys.BracketedPaste, filter=~picking)
        def _(event: KeyPressEvent) -> None:
            # A file dragged into the terminal, or a path pasted, attaches it (as typing @PATH does);
            # any other paste goes in as it is (line breaks kept).
            text = event.data.replace("\r\n", "\n").replace("\r", "\n")
            cwd = self.chat.cwd if self.chat is not None else "."
            mention = pasted_mention(text, cwd)
            event.current_buffer.insert_text(mention if mention is not None else text)

        @kb.add("c-g", filter=~picking)
        @kb.add("c-x", "c-e", filter=~picking)
        def _(event: KeyPressEvent) -> None:
            # The input in $VISUAL / $EDITOR (as Claude Code's Ctrl-G and a shell's Ctrl-X Ctrl-E):
            # the saved text comes back into the input line, not sent, so it can be looked at first.
            event.current_buffer.open_in_editor(validate_and_handle=False)

        @kb.add("c-o", filter=~picking)
        def _(event: KeyPressEvent) -> None:
            if self.chat is not None and self.show_last is not None:
                self.chat.rpc.spawn(self.show_last())

        @kb.add("s-tab", filter=~picking)
        def _(event: KeyPressEvent) -> None:
            # Shift-Tab cycles the session's mode (as in Claude Code and Codex); in an open
            # completion menu it still goes back one completion.
            buffer = event.current_buffer
            if buffer.complete_state is not None:
                buffer.complete_previous()
            elif self.chat is not None:
                self.chat.rpc.spawn(self.chat.cycle_mode())

        # -- the permission menu (only on an empty input line, once the person stopped typing) --

        @kb.add("up", filter=menu & ~picking)
        def _(event: KeyPressEvent) -> None:
            if self.question:
                self.question.move(-1)
                self.invalidate()

        @kb.add("down", filter=menu & ~picking)
        def _(event: KeyPressEvent) -> None:
            if self.question:
                self.question.move(1)
                self.invalidate()

        @kb.add("enter", filter=menu & ~picking)
        def _(event: KeyPressEvent) -> None:
            question = self.question
            if question is None:
                return
            outcome = question.confirm()
            if outcome is not None:
                question.resolve(outcome)
            self.invalidate()

        for digit in "0123456789":

            @kb.add(digit, filter=(menu | after_digit) & ~picking)
            def _(event: KeyPressEvent, digit: str = digit) -> None:
                question = self.question
                if question is None:
                    return
                if not question.digit(digit):  # no option's number: typing (with any digits before it)
                    event.current_buffer.insert_text(question.take_back_digit() + digit)
                self.invalidate()

        @kb.add("backspace", filter=after_digit & ~picking)
        def _(event: KeyPressEvent) -> None:
            if self.question is not None:
                self.question.take_back_digit()  # the choice is undone, and the digit with it
            self.invalidate()

        @kb.add(Keys.Any, filter=after_digit & ~picking)
        def _(event: KeyPressEvent) -> None:
            # Text after the digit: the digit began a prompt. It goes back into the input with this key.
            question = self.question
            if question is not None:
                typed = event.data if event.data.isprintable() else ""
                event.current_buffer.insert_text(question.take_back_digit() + typed)
            self.invalidate()

        # -- the picker --

        @kb.add("up", filter=picking, eager=True)
        def _(event: KeyPressEvent) -> None:
            self._move(-1)

        @kb.add("down", filter=picking, eager=True)
        def _(event: KeyPressEvent) -> None:
            self._move(1)

        @kb.add("enter", filter=picking, eager=True)
        def _(event: KeyPressEvent) -> None:
            picker = self.picker
            if picker and picker["shown"]:
                self._choose(picker["shown"][picker["index"]])

        @kb.add("backspace", filter=picking, eager=True)
        def _(event: KeyPressEvent) -> None:
            if self.picker:
                self._filter(self.picker["filter"][:-1])

        @kb.add(Keys.Any, filter=picking)
        def _(event: KeyPressEvent) -> None:
            if self.picker and event.data.isprintable():
                self._filter(self.picker["filter"] + event.data)

        return kb

    def _esc_esc(self) -> bool:
        """A second Esc soon after the first on an idle, empty prompt: the rewind picker."""
        chat = self.chat
        idle = chat is not None and chat.status.state == "idle" and not chat.asking
        if not idle or self.picker is not None or self.buffer_text or self.editing is not None:
            self.last_esc = None  # this Esc closes or cancels something: it starts no pair
            return False
        now, before = self.now(), self.last_esc
        self.last_esc = now
        if chat is None or before is None or now - before > ESC_ESC_S:
            return False
        self.last_esc = None
        if self.open_rewind is not None:
            chat.rpc.spawn(self.open_rewind())
        return True

    def interrupt(self, event: KeyPressEvent, *, ctrl_c: bool) -> None:
        """Esc and Ctrl-C: close what is open (picker, question, shell command, an edit), else cancel
        the running turn keeping the queue; Ctrl-C also clears a typed line, and twice when idle leaves."""
        chat = self.chat
        buffer = event.current_buffer
        if not ctrl_c and buffer.complete_state is not None:
            buffer.cancel_completion()
            return
        if self.picker is not None:
            self._choose(None)
        elif chat is not None and chat.asking:
            chat.answer("cancelled")
        elif chat is not None and chat.shell is not None:
            chat.shell.cancel()
        elif self.editing is not None:
            if chat is not None:
                chat.note(f"[edit #{self.editing} left as it was]")
            self.editing = None
            buffer.reset()
        elif ctrl_c and buffer.text:
            buffer.reset()
        elif chat is not None and chat.status.state == "running":
            chat.rpc.spawn(chat.rpc.request("dsh/cancel", {"sessionId": chat.session_id, "keepInbox": True}))
        elif not ctrl_c:
            return
        elif self.ctrl_c_armed:
            self.quit()
        else:
            self.ctrl_c_armed = True
            self.print(f"{DIM}[Ctrl-C again (or Ctrl-D) leaves]{RESET}")
            return
        self.ctrl_c_armed = False

    def pull_back(self) -> None:
        """Alt-Up: the last queued prompt comes back into the (empty) input line."""
        chat = self.chat
        if chat is None or self.pull_last is None:
            return
        if self.buffer_text.strip():
            chat.note(
                "[the input line is not empty: send or clear it first (Alt-Up pulls into an empty line)]"
            )
            return
        pull = self.pull_last

        async def pull_into_input() -> None:
            text = await pull()
            if text is not None:
                self.load_input(text, None)

        chat.rpc.spawn(pull_into_input())

    def quit(self) -> None:
        self.quitting = True
        app = self.session.app
        if app.is_running and not app.future.done():  # type: ignore[union-attr]
            app.exit(exception=EOFError())

    # ---- the input loop -----------------------------------------------------------------------------

    async def run(self, on_line: Callable[[str | Edit], None]) -> None:
        """Read lines until Ctrl-D, /quit or Ctrl-C when idle; hand each to `on_line` (a line typed while
        editing a queued prompt as an `Edit`). A line typed while a question is open is a prompt."""
        # The first markdown render imports rich, markdown-it and pygments (a third of a second on a
        # busy machine): done while the person types their first prompt, not when a reply ends.
        warm = asyncio.ensure_future(asyncio.to_thread(warm_markdown))
        with prompt_output():
            while not self.quitting:
                try:
                    text = await self.session.prompt_async()
                except (EOFError, KeyboardInterrupt):
                    break
                self.ctrl_c_armed = False
                if self.question is not None:
                    if self.editing is None and self.question.chosen_by_line(text):
                        self.invalidate()  # a digit typed early: chosen now, not sent as a prompt
                        continue
                    if self.editing is None and self.question.revise_with(text):
                        continue  # a plan's approval: the line is what to change, not a prompt
                    self.question.typed(self.now())
                if self.editing is not None:
                    number, self.editing = self.editing, None
                    on_line(Edit(number, text))
                    continue
                on_line(text)
            await self.settled()  # the last reply is written before the terminal is let go
        with contextlib.suppress(Exception):
            await warm


@contextlib.contextmanager
def prompt_output() -> Iterator[None]:
    """prompt_toolkit's `patch_stdout(raw=True)` (what is printed goes above the input area), with
    writes put together for a frame instead of 0.2 s: a line printed just after another (the
    "[cancelled]" after Esc) showed up to 0.2 s late."""
    with StdoutProxy(raw=True, sleep_between_writes=FRAME_S) as proxy:
        stdout, stderr = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = cast(TextIO, proxy)
        try:
            yield
        finally:
            sys.stdout, sys.stderr = stdout, stderr


def split_prompt_by_runs(
    get_prompt_text: Callable[[], StyleAndTextTuples],
) -> tuple[Callable[[], bool], Callable[[], StyleAndTextTuples], Callable[[], StyleAndTextTuples]]:
    """prompt_toolkit's `_split_multiline_prompt` (whether the prompt has lines above the input, those
    lines, and the input's first line) made by cutting the fragments at the last line break, instead
    of character by character."""

    def parts() -> tuple[StyleAndTextTuples, StyleAndTextTuples]:
        fragments = to_formatted_text(get_prompt_text())
        for index in range(len(fragments) - 1, -1, -1):
            style, text = fragments[index][0], fragments[index][1]
            cut = text.rfind("\n")
            if cut >= 0:
                return [*fragments[:index], (style, text[:cut])], [
                    (style, text[cut + 1 :]),
                    *fragments[index + 1 :],
                ]
        return [], list(fragments)

    def has_before_fragments() -> bool:
        return any("\n" in fragment[1] for fragment in to_formatted_text(get_prompt_text()))

    return has_before_fragments, lambda: parts()[0], lambda: parts()[1]


def merged_fragments(fragments: StyleAndTextTuples) -> FormattedText:
    """The same text and styles in as few fragments as can be: one per run of a style."""
    out: list[tuple[str, str]] = []
    for fragment in fragments:
        style, text = fragment[0], fragment[1]
        if out and out[-1][0] == style and "[ZeroWidthEscape]" not in style:
            out[-1] = (style, out[-1][1] + text)
        else:
            out.append((style, text))
    return FormattedText(out)


def pasted_mention(text: str, cwd: str) -> str | None:
    """`@path ` for a paste that is one existing file's path (plain, quoted, or a file:// URI, as a
    terminal gives a file dragged into it), relative to `cwd` when it is inside; None for anything
    else."""
    candidate = text.strip()
    if not candidate or "\n" in candidate:
        return None
    if len(candidate) >= 2 and candidate[0] == candidate[-1] and candidate[0] in "'\"":
        candidate = candidate[1:-1]
    if candidate.startswith("file://"):
        candidate = unquote(urlsplit(candidate).path)
    candidate = candidate.replace("\\ ", " ")  # a shell-escaped space
    path = Path(candidate).expanduser()
    full = path if path.is_absolute() else Path(cwd) / path
    try:
        if not full.is_file():
            return None
        shown = os.path.relpath(full, cwd)
    except (OSError, ValueError):
        return None
    if shown.startswith(".."):
        shown = str(full)
    return None if any(c.isspace() for c in shown) else f"@{shown} "
