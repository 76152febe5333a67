"""The front matter of a Markdown file (custom commands, skills): a `---` block of `key: value` lines.

Only the subset those files use is read, never a general YAML document: a scalar (`key: text`,
quotes optional), an inline list (`key: [a, b]`), or a block list (`key:` then `- item` lines). A
`#` line is a comment. Anything else is a problem named by line, and that key is left out; the
file's body (what follows the closing `---`) is never interpreted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

FrontValue = str | tuple[str, ...]

_KEY = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*)\s*:\s*(.*)$")


@dataclass(frozen=True, slots=True)
class FrontMatter:
    fields: Mapping[str, FrontValue]
    body: str
    problems: tuple[str, ...] = ()

    def text(self, key: str) -> str | None:
        value = self.fields.get(key)
        return value if isinstance(value, str) and value else None

    def items(self, key: str) -> tuple[str, ...] | None:
        """A list field; a scalar is read as a comma- or space-separated list (`Read, Grep`)."""
        value = self.fields.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            return tuple(part for part in re.split(r"[,\s]+", value) if part)
        return value


def _scalar(raw: str) -> str:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        return raw[1:-1]
    return raw


def parse_front_matter(text: str) -> FrontMatter:
    """Fields and body; a file without a leading `---` line is all body."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return FrontMatter({}, text)
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].rstrip() == "---")
    except StopIteration:
        return FrontMatter({}, text, ("the front matter has no closing '---' line",))
    fields: dict[str, FrontValue] = {}
    problems: list[str] = []
    listing: str | None = None
    for number, line in enumerate(lines[1:end], start=2):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if listing is not None and stripped.startswith("- "):
            current = fields.get(listing, ())
            assert isinstance(current, tuple)
            fields[listing] = (*current, _scalar(stripped[2:]))
            continue
        match = _KEY.match(line)
        if match is None:
            problems.append(f"line {number}: not 'key: value'")
            listing = None
            continue
        key, raw = match[1], match[2].strip()
        listing = None
        if not raw:
            fields[key] = ()
            listing = key
        elif raw.startswith("[") and raw.endswith("]"):
            fields[key] = tuple(_scalar(part) for part in raw[1:-1].split(",") if part.strip())
        else:
            fields[key] = _scalar(raw)
    body = "\n".join(lines[end + 1 :])
    return FrontMatter(fields, body.lstrip("\n"), tuple(problems))
