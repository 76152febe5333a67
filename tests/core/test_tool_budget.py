"""Tool output budgets (issue 14 item 5): every tool result is capped, head and tail kept, the middle
elided with a marker that says how much and how to read more (protocol.md §12)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsh_daemon.agent.budget import GENERIC_HINT, elide_middle
from dsh_daemon.agent.tools import ToolContext, ToolOutcome
from dsh_daemon.llm.scripted import reply
from dsh_daemon.model import events as ev
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.tools.factory import build_tool_registry
from dsh_daemon.tools.workspace import Workspace
from tests.core.harness import FnTool, Harness, msg

LINES = "".join(f"line {i:05d}\n" for i in range(10_000))  # 110,000 characters


def test_elide_middle_keeps_whole_lines_and_counts() -> None:
    assert elide_middle("short", 10).text == "short"
    elided = elide_middle(LINES, 1000, "do less")
    head, _, tail = elided.text.partition("[…")
    tail = tail.split("…]\n", 1)[1]
    assert LINES.startswith(head) and LINES.endswith(tail)
    assert head.endswith("\n") and tail.startswith("line ")  # cut at line boundaries
    assert len(head) + len(tail) <= 1000
    assert elided.chars == len(LINES) - len(head) - len(tail)
    assert elided.lines == 10_000 - head.count("\n") - tail.count("\n")
    assert f"[… {elided.chars:,} characters ({elided.lines:,} lines) elided here; do less …]" in elided.text
    # No line break near the cut: exact character cut, still head + tail.
    flat = "x" * 5000
    cut = elide_middle(flat, 100)
    assert cut.text.startswith("x" * 50 + "\n[… 4,900 characters elided here; " + GENERIC_HINT)
    assert cut.text.endswith("…]\n" + "x" * 50)


def _big_tool(name: str, text: str, hint: str | None = None) -> FnTool:
    async def body(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome.text(text)

    tool = FnTool(name, body)
    if hint is not None:
        tool.truncation_hint = hint  # type: ignore[attr-defined]
    return tool


async def test_every_tool_result_is_capped_in_the_log_and_the_request(tmp_path: Path) -> None:
    h = Harness(
        tmp_path,
        [reply("", tool_calls=[("c1", "big", "{}"), ("c2", "small", "{}")]), reply("done")],
        tools=[_big_tool("big", LINES, "page with offset"), _big_tool("small", "tiny")],
    )
    h.registry.result_max_chars = 2000
    h.agent.followup(msg("go"))
    await h.idle()
    h.check()
    results = [UserMessage.from_log(e.data["message"]) for e in h.durable(ev.TOOL_RESULT)]
    big, small = (r.content[0].content[0].text for r in results)  # type: ignore[union-attr]
    assert small == "tiny"
    assert len(big) < 2000 + 200
    assert re.search(r"\[… [\d,]+ characters \([\d,]+ lines\) elided here; page with offset …\]", big)
    assert big.startswith("line 00000\n") and big.endswith("line 09999\n")
    # What the model got is what the log holds.
    assert any("elided here; page with offset" in t for t in h.request_texts(1))


def test_the_coding_tools_state_their_hints_and_share_the_cap(tmp_path: Path) -> None:
    kit = build_tool_registry(Workspace([tmp_path], tmp_path), config={"limits": {"result_max_chars": 5000}})
    assert kit.registry.result_max_chars == 5000
    hints = {name: getattr(tool, "truncation_hint", None) for name, tool in kit.registry.tools.items()}
    assert "offset" in str(hints["read_file"]) and "narrower command" in str(hints["run_command"])
    assert all(hints[n] for n in ("grep", "list_dir", "find_files"))
