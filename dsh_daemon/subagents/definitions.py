"""Named agent definitions: `.dsh/agents/NAME.md` in the session's cwd, each a short header and a
prompt, that the model picks by name (`run_subagent {agent: NAME}`)::

    ---
    description: Reviews a diff for bugs and missing tests
    tools: explore
    model: deepseek-v4-pro
    ---
    You review code. Read the changed files, then ...

`description` is required (the model chooses by it); `tools` (explore, edit, all; default explore) and
`model` (one the daemon offers; default the parent's) are optional; the body is the child's
instructions, given before the parent's prompt. A definition that cannot be read is left out and
said in the daemon's log: a project's file never stops a session. The files are read when the
session's tools are wired (a definition added later counts from the session's next open)."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dsh_daemon.model.payloads import SubagentTools
from dsh_daemon.subagents.toolsets import TOOLSETS
from dsh_daemon.tools.safefile import read_prefix
from dsh_daemon.tools.workspace import Workspace

logger = logging.getLogger(__name__)

AGENTS_DIR = Path(".dsh") / "agents"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
MAX_DEFINITION_BYTES = 32_000
MAX_DEFINITIONS = 50
HEADER_KEYS = frozenset({"description", "tools", "model"})


class DefinitionError(ValueError):
    """A definition file that is not one (named in the message)."""


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    name: str
    description: str
    tools: SubagentTools
    model: str | None
    prompt: str
    path: str

    def wire(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name, "description": self.description, "tools": self.tools}
        if self.model is not None:
            out["model"] = self.model
        return out


def parse_definition(name: str, text: str, path: str) -> AgentDefinition:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise DefinitionError(f"{path}: must start with a '---' header")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise DefinitionError(f"{path}: the header has no closing '---'") from None
    header: dict[str, str] = {}
    for line in lines[1:end]:
        if not line.strip():
            continue
        key, colon, value = line.partition(":")
        key = key.strip()
        if not colon or key not in HEADER_KEYS:
            raise DefinitionError(f"{path}: unknown header line {line.strip()[:60]!r}")
        header[key] = value.strip()
    description = " ".join(header.get("description", "").split())
    if not description:
        raise DefinitionError(f"{path}: 'description' is required")
    tools = header.get("tools") or "explore"
    toolset = next((t for t in TOOLSETS if t == tools), None)
    if toolset is None:
        raise DefinitionError(f"{path}: 'tools' must be one of {', '.join(TOOLSETS)}")
    prompt = "\n".join(lines[end + 1 :]).strip()
    return AgentDefinition(name, description[:300], toolset, header.get("model") or None, prompt, path)


def load_definitions(workspace: Workspace) -> dict[str, AgentDefinition]:
    """The definitions of the session's cwd, by name (sorted); unreadable ones left out, logged."""
    folder = workspace.cwd / AGENTS_DIR
    try:
        entries: Sequence[Path] = sorted(p for p in folder.iterdir() if p.suffix == ".md")
    except OSError:
        return {}
    found: dict[str, AgentDefinition] = {}
    for path in entries[:MAX_DEFINITIONS]:
        name = path.stem
        if not NAME.match(name):
            logger.warning("agent definition %s left out: its name must be letters, digits, - and _", path)
            continue
        try:
            real = workspace.resolve(str(path))
            read = read_prefix(real, str(path), MAX_DEFINITION_BYTES, workspace)
            if read.truncated:
                raise DefinitionError(f"{path}: over {MAX_DEFINITION_BYTES} bytes")
            found[name] = parse_definition(name, read.data.decode("utf-8", errors="replace"), str(path))
        except Exception as exc:  # a project's file never stops a session
            logger.warning("agent definition %s left out: %s", path, exc)
    return found
