"""`skill`: the body of one of the session's skills (`tools/library.py`), read when the model
chooses it. Read-only and bounded; the text is the skill's author's, handed to the model as a
tool result, never acted on by the daemon."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsh_daemon.agent.tools import ToolContext, ToolOutcome
from dsh_daemon.model.frontmatter import parse_front_matter
from dsh_daemon.tools.base import ToolBase, get_str, make_spec
from dsh_daemon.tools.errors import InvalidArgumentsError
from dsh_daemon.tools.library import MAX_FILE_BYTES, SkillCatalogue
from dsh_daemon.tools.safefile import read_prefix_async

SKILL_TOOL = "skill"


class SkillTool(ToolBase):
    spec = make_spec(
        SKILL_TOOL,
        "Read one of the skills listed in the system prompt (its instructions for a kind of task), by "
        "name. Call it when the task matches the skill's description, before you start the task.",
        {"name": {"type": "string", "description": "The skill's name, as listed."}},
        ["name"],
    )

    def __init__(self, catalogue: SkillCatalogue) -> None:
        self.catalogue = catalogue

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        name = get_str(args, "name", allow_empty=False)
        skill = self.catalogue.get(name)
        if skill is None:
            known = ", ".join(s.name for s in self.catalogue.found().skills) or "none"
            raise InvalidArgumentsError(f"no skill named {name!r} (the skills: {known})")
        # Read again now, through the safe reader: the file may have changed since the scan.
        raw = await read_prefix_async(skill.path, str(skill.path), MAX_FILE_BYTES)
        body = parse_front_matter(raw.data.decode("utf-8", errors="replace")).body.strip()
        cut = (
            f"\n\n[truncated: {skill.path} is over {MAX_FILE_BYTES} bytes; the rest is not shown]"
            if raw.truncated
            else ""
        )
        return ToolOutcome.text(
            f"Skill {skill.name} ({skill.origin}: {skill.path}; files it names are relative to "
            f"{skill.path.parent}):\n\n{body}{cut}"
        )
