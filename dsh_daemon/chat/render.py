"""Text helpers: ANSI colours, message text, clipped one-liners, coloured diffs, markdown via rich."""

from __future__ import annotations

import io
import re
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


def sanitize(text: str) -> str:
    """Text from the model or a tool, safe to show at a terminal: no escape or control codes."""
    return CONTROL.sub("", text)


def clip(text: str, limit: int) -> str:
    text = " ".join(sanitize(str(text)).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


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


def hard_wrap(text: str, width: int) -> list[str]:
    """Plain text cut into lines no wider than `width` cells (for the live area, which does not wrap)."""
    width = max(width, 10)
    out: list[str] = []
    for raw in text.split("\n"):
        line, cells = "", 0
        for ch in raw.replace("\t", "    "):
            w = get_cwidth(ch)
            if cells + w > width:
                out.append(line)
                line, cells = "", 0
            line += ch
            cells += w
        out.append(line)
    return out


def markdown_ansi(text: str, width: int) -> str:
    """`text` rendered as markdown (headings, lists, highlighted code blocks) into ANSI text."""
    from rich.console import Console
    from rich.markdown import Markdown

    buffer = io.StringIO()
    console = Console(
        file=buffer, force_terminal=True, color_system="256", width=max(width, 20), soft_wrap=False
    )
    console.print(Markdown(text, code_theme="monokai"))
    return buffer.getvalue().rstrip("\n") + "\n"
