"""Text helpers: ANSI colours, message text, clipped one-liners, coloured diffs, word wrapping, markdown
via rich with code blocks left exactly as written, and the OSC 52 clipboard sequence."""

from __future__ import annotations

import base64
import functools
import io
import re
from dataclasses import dataclass
from typing import Any

from prompt_toolkit.utils import get_cwidth

DIM, BOLD, RED, GREEN, YELLOW, CYAN, RESET = (
    "\x1b[2m",
    "\x1b[1m",
    "\x1b[31m",
    "\x1b[32m",
    "\x1b[33m",
    "\x1b[36m",
    "\x1b[0m",
)
REVERSE = "\x1b[7m"


def paint(color: bool, code: str, text: str) -> str:
    return f"{code}{text}{RESET}" if color and text else text


def message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


def message_reasoning(content: Any) -> str:
    if isinstance(content, str):
        return ""
    return "".join(b.get("text", "") for b in content if b.get("type") == "reasoning")


CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
ANSI_CODE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def sanitize(text: str) -> str:
    """Text from the model or a tool, safe to show at a terminal: no escape or control codes."""
    return CONTROL.sub("", text)


def clip(text: str, limit: int) -> str:
    text = " ".join(sanitize(str(text)).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cells(text: str) -> int:
    """How many terminal cells `text` takes (colour codes take none)."""
    if text.isascii() and text.isprintable():  # the common case, one cell a character: no walk
        return len(text)
    return sum(get_cwidth(ch) for ch in ANSI_CODE.sub("", text))


def rows(text: str, width: int) -> int:
    """How many rows the line `text` takes in a terminal `width` cells wide (which wraps it)."""
    return max(1, -(-cells(text) // max(width, 1)))


def diff_lines(diff: str, color: bool) -> list[str]:
    """A unified diff, one coloured line each: additions green, removals red, hunks cyan."""
    lines = []
    for line in sanitize(diff).splitlines():
        if line.startswith(("+++", "---")):
            lines.append(paint(color, BOLD, line))
        elif line.startswith("+"):
            lines.append(paint(color, GREEN, line))
        elif line.startswith("-"):
            lines.append(paint(color, RED, line))
        elif line.startswith("@@"):
            lines.append(paint(color, CYAN, line))
        else:
            lines.append(line)
    return lines


def diff_stat(diff: str) -> tuple[int, int]:
    """(lines added, lines removed) of a unified diff."""
    added = removed = 0
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def hard_wrap(text: str, width: int) -> list[str]:
    """Plain text cut into lines no wider than `width` cells, wherever the edge falls."""
    width = max(width, 10)
    out: list[str] = []
    for raw in text.split("\n"):
        line, used = "", 0
        for ch in raw.replace("\t", "    "):
            w = get_cwidth(ch)
            if used + w > width:
                out.append(line)
                line, used = "", 0
            line += ch
            used += w
        out.append(line)
    return out


WORD = re.compile(r"\s+|\S+")


def word_wrap(text: str, width: int) -> list[str]:
    """Plain text in lines no wider than `width` cells, broken between words (a word longer than a
    whole line is cut); the spaces at a break are dropped, so no line starts with one it did not have."""
    width = max(width, 10)
    out: list[str] = []
    for raw in text.replace("\t", "    ").split("\n"):
        line, used = "", 0
        for piece in WORD.findall(raw):
            w = cells(piece)
            if piece.isspace():
                if used + w <= width:
                    line, used = line + piece, used + w
                else:  # the break falls in these spaces
                    out.append(line.rstrip(" "))
                    line, used = "", 0
                continue
            if used + w > width and line.strip():
                out.append(line.rstrip(" "))
                line, used = "", 0
            while w > width:  # a word wider than the line: cut it
                for cut in range(len(piece), 0, -1):
                    if used + cells(piece[:cut]) <= width:
                        break
                out.append(line + piece[:cut])
                piece, line, used = piece[cut:], "", 0
                w = cells(piece)
            line, used = line + piece, used + w
        out.append(line.rstrip(" ") if line.strip() else line)
    return out


# ---- markdown with exact code blocks -------------------------------------------------------------


@dataclass(frozen=True)
class CodeBlock:
    code: str  # exactly as the model wrote it, ending with a newline
    language: str


def markdown_parts(text: str) -> list[str | CodeBlock]:
    """`text` split into markdown prose and its top-level code blocks (fenced or indented), in order."""
    return list(_markdown_parts(text))


# A code block needs a fence (``` or ~~~) or a line indented four columns (a tab counts four); markdown-it
# breaks lines at \n and \r.
MAY_HOLD_CODE = re.compile(r"```|~~~|(?:^|[\r\n])(?: {0,3}\t| {4})")


@functools.lru_cache(maxsize=4)
def _markdown_parts(text: str) -> tuple[str | CodeBlock, ...]:
    # A finished reply is parsed for its code blocks (/copy N) and again to be drawn: once is enough
    # (a 200 KB reply takes a tenth of a second to parse).
    if not MAY_HOLD_CODE.search(text):  # no fence and no indented line: no code block, no parse
        return (text,) if text.strip() else ()
    from markdown_it import MarkdownIt

    lines = text.splitlines(keepends=True)
    parts: list[str | CodeBlock] = []
    done = 0
    for token in MarkdownIt().enable("strikethrough").enable("table").parse(text):
        if token.type not in ("fence", "code_block") or token.level != 0 or token.map is None:
            continue
        first, end = token.map
        if first > done:
            parts.append("".join(lines[done:first]))
        language = token.info.split()[0] if token.info.strip() else ""
        parts.append(CodeBlock(token.content, language))
        done = end
    if done < len(lines):
        parts.append("".join(lines[done:]))
    return tuple(part for part in parts if not isinstance(part, str) or part.strip())


def code_blocks(text: str) -> list[CodeBlock]:
    return [part for part in markdown_parts(text) if isinstance(part, CodeBlock)]


def highlight_code(block: CodeBlock) -> str:
    """The block's code with ANSI colours (foreground only: no background, no padding, no wrapping);
    as it is when its language is unknown."""
    from rich.console import Console
    from rich.syntax import Syntax

    code = sanitize(block.code)
    code = code if code.endswith("\n") else code + "\n"
    syntax = Syntax(code, block.language or "text", theme="ansi_dark", background_color="default")
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, color_system="256", width=10_000, soft_wrap=True)
    console.print(syntax.highlight(code), end="")
    return buffer.getvalue()


def markdown_ansi(text: str, width: int, first_block: int = 0) -> str:
    """`text` rendered as markdown (headings, lists, tables) into ANSI text. Code blocks are not
    rendered by rich: each is a dim label line (`python · /copy N`, N counting from `first_block`)
    then the code at column 0, without padding or hard wraps, so copying it from the terminal gives
    the exact code (the terminal soft-wraps long lines). With `first_block` 0 blocks are unnumbered."""
    from rich.console import Console
    from rich.markdown import Markdown

    out: list[str] = []
    number = first_block
    for part in markdown_parts(text):
        if isinstance(part, CodeBlock):
            label = part.language or "code"
            if number:
                label += f" · /copy {number}"
                number += 1
            out.append(f"{DIM}╶─ {label}{RESET}\n{highlight_code(part)}")
            continue
        buffer = io.StringIO()
        console = Console(
            file=buffer, force_terminal=True, color_system="256", width=max(width, 20), soft_wrap=False
        )
        console.print(Markdown(part, code_theme="monokai"))
        # rich pads every line to the width: trailing blanks would wrap (and copy) after a resize
        lines = [TRAILING_BLANKS.sub(r"\1", line) for line in buffer.getvalue().split("\n")]
        out.append("\n".join(lines).strip("\n") + "\n")
    return "\n".join(out) if out else "\n"


def render_reply(reasoning: str, text: str, width: int, first_block: int, interrupted: bool) -> str:
    """A finished reply as the chat prints it: its reasoning dim, its text as markdown, a note when it
    was interrupted (both already sanitized)."""
    parts = []
    if reasoning:
        parts.append(f"{DIM}{reasoning}{RESET}\n")
    if text.strip():
        parts.append(markdown_ansi(text, width, first_block))
    if interrupted:
        parts.append(f"{DIM}[interrupted]{RESET}\n")
    return "".join(parts)


def warm_markdown() -> None:
    """Import what a markdown render needs (rich, markdown-it, pygments and its Python lexer)."""
    markdown_ansi("# a\n\n*b*\n\n```python\nx = 1\n```\n", 40, 1)


TRAILING_BLANKS = re.compile(r"[ \t]+((?:\x1b\[[0-9;]*m)*)$")


def osc52(text: str) -> str:
    """The terminal sequence that puts `text` on the system clipboard (OSC 52; tmux and most terminal
    emulators pass it on)."""
    return f"\x1b]52;c;{base64.b64encode(text.encode()).decode()}\x07"


class TailWrap:
    """The last lines of a growing text, word-wrapped, without wrapping all of it again each frame.

    A streamed reply only grows, and its finished paragraphs (up to the last line break) wrap the
    same every time: they are wrapped once, counted and only their last `keep` lines kept. Only the
    open paragraph is wrapped again each frame, and only its end when it is very long (then the
    lines above that end are counted by estimate). A new width, or a text that is not the last one
    grown, starts over."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._width = 0
        self._text = ""
        self._done = 0  # the finished paragraphs end here (just after a line break)
        self._count = 0  # wrapped lines of the finished paragraphs
        self._tail: list[str] = []  # their last `keep` wrapped lines
        # In a very long open paragraph, the cells up to `_skip_end` (from `_done`) are counted once.
        self._skip_end = 0
        self._skip_cells = 0

    def lines(self, text: str, width: int) -> tuple[int, list[str]]:
        """(how many wrapped lines the whole text makes, its last `keep` of them)."""
        if width != self._width or not text.startswith(self._text[: self._done + self._skip_end]):
            self._width, self._done, self._count, self._tail = width, 0, 0, []
            self._skip_end = self._skip_cells = 0
        self._text = text
        end = text.rfind("\n", self._done) + 1
        if end > self._done:
            finished = word_wrap(text[self._done : end - 1], width)
            self._count += len(finished)
            self._tail = (self._tail + finished)[-self.keep :]
            self._done = end
            self._skip_end = self._skip_cells = 0
        open_paragraph = text[self._done :]
        reach = max(width, 10) * (self.keep + 1) * 2
        skipped = 0
        if len(open_paragraph) > reach:
            cut = open_paragraph.find(" ", len(open_paragraph) - reach)
            cut = cut if cut > 0 else len(open_paragraph) - reach
            # Only what the cut newly passed is counted (the cut only moves on as the text grows): a
            # 200 KB paragraph cost a walk of all of it per frame.
            if cut < self._skip_end:
                self._skip_end = self._skip_cells = 0
            self._skip_cells += cells(open_paragraph[self._skip_end : cut])
            self._skip_end = cut
            skipped = -(-self._skip_cells // max(width, 10))
            open_paragraph = open_paragraph[cut:].lstrip(" ")
        current = word_wrap(open_paragraph, width)  # [""] after a final line break, as the whole gives
        total = self._count + skipped + len(current)
        return total, (self._tail + current)[-self.keep :]
