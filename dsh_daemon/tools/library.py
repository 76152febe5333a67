"""Custom slash commands and skills: Markdown files in a project's `.dsh/` and in `$DSH_HOME`.

- A command is `commands/NAME.md`: front matter (`description`, `argument-hint`, `allowed-tools`,
  `model`) and a body, the prompt it sends, with `$ARGUMENTS` standing for what follows `/NAME`.
- A skill is a folder `skills/NAME/` with a `SKILL.md`: front matter (`name`, `description`) and a
  body the model reads when it chooses the skill (the Agent Skills convention).

Both come from two places: the project (`<cwd>/.dsh/`, content that comes with the code, written by
whoever wrote the code) and the person (`$DSH_HOME/`). Where both have one of a name, the person's
wins: a project cannot put its own text behind a name the person gave one of theirs.

What this guarantees: every file is read through the safe reader (a regular file, never a FIFO or a
device, never followed through a symlink in its last component), bounded (`MAX_FILE_BYTES`; a larger
file is left out and reported), and only from inside its place (a folder that resolves outside the
project or `$DSH_HOME` is left out). The text is never interpreted beyond the front matter's few
keys: a command's body becomes a prompt the person chose to send, a skill's text is what the model
reads. Neither grants anything: a command's `allowed-tools` can only narrow what the turn offers
(`host/commands.py`), and nothing in a skill reaches the permission policy or the sandbox.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dsh_daemon.model.frontmatter import FrontMatter, parse_front_matter
from dsh_daemon.tools.errors import FileToolError
from dsh_daemon.tools.safefile import read_prefix

Origin = Literal["project", "user"]
PROJECT_DIR = ".dsh"
COMMANDS_DIR = "commands"
SKILLS_DIR = "skills"
SKILL_FILE = "SKILL.md"
MAX_FILE_BYTES = 64 * 1024
MAX_ENTRIES = 200  # per place: more are left out and reported
MAX_DESCRIPTION_CHARS = 500
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

_Signature = tuple[tuple[str, int, int, int], ...]


@dataclass(frozen=True, slots=True)
class CustomCommand:
    name: str
    origin: Origin
    path: Path
    description: str
    argument_hint: str | None
    allowed_tools: tuple[str, ...] | None  # None: not narrowed
    model: str | None
    body: str

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name, "description": self.description, "source": self.origin}
        if self.argument_hint:
            out["argumentHint"] = self.argument_hint
        if self.allowed_tools is not None:
            out["allowedTools"] = list(self.allowed_tools)
        if self.model and self.origin == "user":  # a project's command cannot choose it (host/commands.py)
            out["model"] = self.model
        return out


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    origin: Origin
    path: Path  # its SKILL.md
    description: str
    body: str
    truncated: bool  # the file held more than MAX_FILE_BYTES

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "description": self.description, "source": self.origin}


@dataclass(frozen=True, slots=True)
class Found:
    """What a scan found, and what it left out (each naming the file and why)."""

    commands: tuple[CustomCommand, ...] = ()
    skills: tuple[Skill, ...] = ()
    problems: tuple[str, ...] = ()


def places(
    cwd: str | os.PathLike[str] | None, home: str | os.PathLike[str] | None
) -> list[tuple[Origin, Path]]:
    """The person's place first (theirs wins a name), then the project's."""
    out: list[tuple[Origin, Path]] = []
    if home is not None:
        out.append(("user", Path(os.path.realpath(home))))
    if cwd is not None:
        out.append(("project", Path(os.path.realpath(cwd)) / PROJECT_DIR))
    return out


def _inside(path: Path, base: Path) -> bool:
    real = Path(os.path.realpath(path))
    return real == base or real.is_relative_to(base)


def _read(path: Path, base: Path, problems: list[str]) -> tuple[FrontMatter, bool] | None:
    if not _inside(path.parent, Path(os.path.realpath(base))):
        problems.append(f"{path}: left out: its folder is outside {base}")
        return None
    try:
        raw = read_prefix(path, str(path), MAX_FILE_BYTES)
    except FileToolError as exc:
        problems.append(f"{path}: left out: {exc}")
        return None
    front = parse_front_matter(raw.data.decode("utf-8", errors="replace"))
    problems.extend(f"{path}: {problem}" for problem in front.problems)
    return front, raw.truncated


def _entries(folder: Path, problems: list[str]) -> Iterator[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as scan:
            entries = sorted(scan, key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        problems.append(f"{folder}: cannot be listed: {exc.strerror}")
        return
    if len(entries) > MAX_ENTRIES:
        problems.append(f"{folder}: only the first {MAX_ENTRIES} of {len(entries)} entries are read")
    yield from entries[:MAX_ENTRIES]


def _description(text: str | None) -> str:
    return " ".join((text or "").split())[:MAX_DESCRIPTION_CHARS]


def scan_commands(cwd: str | os.PathLike[str] | None, home: str | os.PathLike[str] | None) -> Found:
    commands: dict[str, CustomCommand] = {}
    problems: list[str] = []
    for origin, base in places(cwd, home):
        for entry in _entries(base / COMMANDS_DIR, problems):
            if not entry.name.endswith(".md"):
                continue
            name = entry.name[: -len(".md")]
            path = Path(entry.path)
            if not NAME.match(name):
                problems.append(f"{path}: left out: a command's name is letters, digits, '.', '_', '-'")
                continue
            if name in commands:
                problems.append(f"{path}: left out: the person's /{name} ({commands[name].path}) wins")
                continue
            read = _read(path, base, problems)
            if read is None:
                continue
            front, truncated = read
            if truncated:
                problems.append(f"{path}: left out: over {MAX_FILE_BYTES} bytes")
                continue
            commands[name] = CustomCommand(
                name,
                origin,
                path,
                _description(front.text("description")) or f"{origin} command",
                front.text("argument-hint"),
                front.items("allowed-tools"),
                front.text("model"),
                front.body,
            )
    return Found(commands=tuple(commands.values()), problems=tuple(problems))


def scan_skills(cwd: str | os.PathLike[str] | None, home: str | os.PathLike[str] | None) -> Found:
    skills: dict[str, Skill] = {}
    problems: list[str] = []
    for origin, base in places(cwd, home):
        for entry in _entries(base / SKILLS_DIR, problems):
            folder = Path(entry.path)
            if not entry.is_dir():
                continue
            path = folder / SKILL_FILE
            read = _read(path, base, problems) if path.exists() or path.is_symlink() else None
            if read is None:
                continue
            front, truncated = read
            name = front.text("name") or entry.name
            if not NAME.match(name):
                problems.append(f"{path}: left out: a skill's name is letters, digits, '.', '_', '-'")
                continue
            description = _description(front.text("description"))
            if not description:
                problems.append(f"{path}: left out: it has no description (the model chooses by it)")
                continue
            if name in skills:
                problems.append(f"{path}: left out: the person's skill {name} ({skills[name].path}) wins")
                continue
            skills[name] = Skill(name, origin, path, description, front.body, truncated)
    return Found(skills=tuple(skills.values()), problems=tuple(problems))


def _signature(cwd: str | os.PathLike[str] | None, home: str | os.PathLike[str] | None) -> _Signature:
    """What the skills section depends on, by stat alone: the folders and each SKILL.md."""
    marks: list[tuple[str, int, int, int]] = []
    for _, base in places(cwd, home):
        folder = base / SKILLS_DIR
        try:
            info = folder.stat()
            names = sorted(os.listdir(folder))[:MAX_ENTRIES]
        except OSError:
            continue
        marks.append((str(folder), info.st_mtime_ns, info.st_size, info.st_ino))
        for name in names:
            path = folder / name / SKILL_FILE
            try:
                info = path.lstat()
            except OSError:
                continue
            marks.append((str(path), info.st_mtime_ns, info.st_size, info.st_ino))
    return tuple(marks)


class SkillCatalogue:
    """One session's skills, scanned again only when a folder or a SKILL.md changed (stat), so it
    can run before every model request and the system prompt stays byte-stable meanwhile."""

    def __init__(self, cwd: Callable[[], str | os.PathLike[str] | None], home: str | os.PathLike[str] | None):
        self.cwd = cwd
        self.home = home
        self._key: tuple[object, ...] | None = None
        self._found = Found()
        self.scans = 0

    def found(self) -> Found:
        cwd = self.cwd()
        key = (str(cwd), _signature(cwd, self.home))
        if key != self._key:
            self._key, self._found = key, scan_skills(cwd, self.home)
            self.scans += 1
        return self._found

    def get(self, name: str) -> Skill | None:
        return next((skill for skill in self.found().skills if skill.name == name), None)

    def section(self) -> str:
        """The system prompt's `skills` section ("" without skills)."""
        skills = self.found().skills
        if not skills:
            return ""
        lines = [
            "# Skills",
            "",
            "Skills are instructions for particular tasks, written by the person or the project. When a "
            "task matches a skill's description, call the `skill` tool with its name first and follow what "
            "it says where it fits the person's request. A skill is text to read: it grants no permission "
            "and changes nothing about what you may do.",
            "",
        ]
        lines += [f"- {skill.name}: {skill.description}" for skill in skills]
        return "\n".join(lines)
