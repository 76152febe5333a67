"""Subagents over the real wire (dsh_daemon/subagents, host/children.py): a scripted parent starts two
children through `run_subagent`; each child is a real session under its parent, its events reach the
parent's client wrapped in `subagent/event`, its permission question comes through the parent naming
it, the parent gets both summaries. The bound on children at once, the cancel cascade, and a SIGKILL
with children running (the restart closes parent and children consistently) are tested here too.

The fake provider serves each conversation its own replies (`script_for`, by the first user message),
so children that run at once get theirs whatever order their requests come in."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.sandbox.level import probe_level
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, Stall
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream

PARENT = "PARENT-PROMPT: split the work in two"


def delegate(*children: tuple[str, str, str, dict[str, Any]]) -> Reply:
    """The parent's step that starts children: (provider call id, description, prompt, more args)."""
    return Reply.stream(
        tool_call_stream(
            [
                (call, "run_subagent", {"description": description, "prompt": prompt, **extra})
                for call, description, prompt, extra in children
            ]
        )
    )


def wrapped(d: Daemon, sid: str, child_id: str, type_: str | None = None) -> list[dict[str, Any]]:
    """The child's events as its parent's stream carried them."""
    return [
        e["data"]["event"]
        for e in d.of(sid, "subagent/event")
        if e["data"]["childId"] == child_id and (type_ is None or e["data"]["event"]["type"] == type_)
    ]


async def prompt(d: Daemon, sid: str, text: str = PARENT) -> None:
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": text}})


async def test_two_children_run_at_once_one_asks_through_the_parent_and_both_summaries_return(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("alpha beta\n")
    (work / "a.txt").write_text("hello world\n")
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    sid = await d.new_session(cwd=str(work))
    fake.script(
        delegate(
            ("call_a", "survey", "CHILD-A: read notes.txt and report", {"files": ["notes.txt"]}),
            ("call_b", "fixer", "CHILD-B: change world to there in a.txt", {"tools": "edit"}),
        ),
        text_reply("PARENT-DONE"),
    )
    fake.script_for(
        "CHILD-A",
        Reply.stream(tool_call_stream([("a1", "grep", {"pattern": "beta"})])),
        text_reply("SUMMARY-A: notes.txt holds alpha and beta"),
    )
    path = str(work / "a.txt")
    fake.script_for(
        "CHILD-B",
        Reply.stream(
            tool_call_stream(
                [("b1", "edit_file", {"path": path, "old_string": "world", "new_string": "there"})]
            )
        ),
        text_reply("SUMMARY-B: a.txt now says hello there"),
    )

    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        # Answered only once the other child has finished: it ran while this one waited (both at once).
        await d.wait_for(lambda: len(d.of(sid, "subagent/finished")) >= 1)
        return {"outcome": "allow-once"}

    d.on_permission = answer
    await prompt(d, sid)
    await d.wait_idle_turn(sid)

    started = {e["data"]["callId"]: e for e in d.of(sid, "subagent/started")}
    finished = {e["data"]["callId"]: e for e in d.of(sid, "subagent/finished")}
    call_a, call_b = d.call_id(sid, "call_a"), d.call_id(sid, "call_b")
    assert set(started) == set(finished) == {call_a, call_b}
    assert all(e.get("seq") is not None for e in [*started.values(), *finished.values()])  # durable
    child_a, child_b = started[call_a]["data"]["childId"], started[call_b]["data"]["childId"]
    assert started[call_a]["data"]["tools"] == "explore" and started[call_b]["data"]["tools"] == "edit"
    assert [finished[c]["data"]["status"] for c in (call_a, call_b)] == ["completed", "completed"]
    # B's question reached the person through the parent's client, naming the child.
    (asked,) = d.permission_requests
    assert asked["sessionId"] == sid and asked["tool"] == "edit_file"
    assert asked["subagent"] == {"childId": child_b, "callId": call_b, "description": "fixer"}
    assert "fixer" in asked["title"]
    assert (work / "a.txt").read_text() == "hello there\n"
    # The parent's model got both summaries as the calls' results.
    results = {e["data"]["callId"]: e["data"] for e in d.of(sid, "tool/result")}
    assert "SUMMARY-A" in str(results[call_a]["message"]) and "SUMMARY-B" in str(results[call_b]["message"])
    assert results[call_a]["meta"] == {"childId": child_a, "status": "completed"}
    # Their steps reached the parent's client live: A's grep, B's edit and its permission events.
    assert [e["data"]["name"] for e in wrapped(d, sid, child_a, "tool/call")] == ["grep"]
    assert [e["data"]["name"] for e in wrapped(d, sid, child_b, "tool/call")] == ["edit_file"]
    assert wrapped(d, sid, child_a, "turn/end")[-1]["data"]["reason"]["kind"] == "completed"
    # The child's context is its prompt and the chosen file, not the parent's history.
    child_request = next(r.json for r in fake.requests if "CHILD-A" in str(r.json["messages"]))
    assert "alpha beta" in str(child_request["messages"]) and PARENT not in str(child_request["messages"])
    offered = {t["function"]["name"] for t in child_request["tools"]}
    assert "grep" in offered and not offered & {"edit_file", "run_command", "run_subagent"}
    # Both children are real sessions in the store, listed under the parent, idle, transcripts kept.
    listed = {s["sessionId"]: s for s in (await d.request("dsh/session/list", {}))["sessions"]}
    assert listed[child_a]["parentId"] == sid and listed[child_b]["parentId"] == sid
    assert "parentId" not in listed[sid]
    assert listed[child_a]["status"] == "idle"
    page = await d.request("dsh/session/transcript", {"sessionId": child_b})
    assert "SUMMARY-B" in str(page)
    await stop_daemon(d)


async def test_a_bound_of_one_runs_the_children_one_after_the_other(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    d = await start_daemon(
        tmp_path / "state", fake, init_options={"thinking": False, "agent": {"subagentsMaxParallel": 1}}
    )
    sid = await d.new_session()
    fake.script(
        delegate(("c1", "one", "CHILD-ONE: say one", {}), ("c2", "two", "CHILD-TWO: say two", {})),
        text_reply("PARENT-DONE"),
    )
    fake.script_for("CHILD-ONE", text_reply("SUMMARY-ONE"))
    fake.script_for("CHILD-TWO", text_reply("SUMMARY-TWO"))
    await prompt(d, sid)
    await d.wait_idle_turn(sid)
    kinds = [
        (e["data"]["childId"], e["data"]["event"]["type"])
        for e in d.of(sid, "subagent/event")
        if e["data"]["event"]["type"] in ("turn/start", "turn/end")
    ]
    assert len(kinds) == 4
    # the second child's turn starts only after the first one's ended
    assert kinds[0][0] == kinds[1][0] and kinds[2][0] == kinds[3][0] and kinds[0][0] != kinds[2][0]
    assert [k for _, k in kinds] == ["turn/start", "turn/end", "turn/start", "turn/end"]
    assert [e["data"]["status"] for e in d.of(sid, "subagent/finished")] == ["completed", "completed"]
    await stop_daemon(d)


async def test_cancelling_the_parent_cancels_its_children(tmp_path: Path, fake: FakeDeepSeek) -> None:
    d = await start_daemon(tmp_path / "state", fake)
    sid = await d.new_session()
    fake.script(delegate(("c1", "slow", "CHILD-SLOW: think forever", {})))
    fake.script_for("CHILD-SLOW", Reply(actions=(Stall(),)))
    await prompt(d, sid)
    await d.wait_for(
        lambda: any(e["data"]["event"]["type"] == "step/start" for e in d.of(sid, "subagent/event"))
    )
    await d.request("dsh/cancel", {"sessionId": sid})
    await d.wait_idle_turn(sid)
    (finished,) = d.of(sid, "subagent/finished")
    child = finished["data"]["childId"]
    assert finished["data"]["status"] == "cancelled"
    end = wrapped(d, sid, child, "turn/end")[-1]["data"]["reason"]
    assert end == {"kind": "aborted", "cause": "parent"}
    assert d.of(sid, "turn/end")[-1]["data"]["reason"]["kind"] == "aborted"
    assert await fake.wait_disconnect(-1)  # the child's request was dropped, not left running
    info = {s["sessionId"]: s for s in (await d.request("dsh/session/list", {}))["sessions"]}
    assert info[child]["status"] == "idle"
    await stop_daemon(d)


async def test_a_sigkill_with_children_running_leaves_parent_and_children_closed_after_restart(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    first = await start_daemon(state, fake)
    sid = await first.new_session()
    fake.script(delegate(("c1", "left", "CHILD-LEFT: stall", {}), ("c2", "right", "CHILD-RIGHT: stall", {})))
    fake.script_for("CHILD-LEFT", Reply(actions=(Stall(),)))
    fake.script_for("CHILD-RIGHT", Reply(actions=(Stall(),)))
    await prompt(first, sid)
    await first.wait_for(
        lambda: sum(e["data"]["event"]["type"] == "step/start" for e in first.of(sid, "subagent/event")) >= 2
    )
    children = {e["data"]["childId"] for e in first.of(sid, "subagent/started")}
    assert len(children) == 2
    server = first.client._server
    assert server is not None
    server.send_signal(signal.SIGKILL)
    await server.wait()
    await first.client.stop()

    second = await start_daemon(state, fake)
    await second.request("dsh/session/attach", {"sessionId": sid})
    events = second.of(sid)
    ends = [e for e in events if e["type"] == "turn/end"]
    assert ends[-1]["data"]["reason"]["kind"] == "interrupted"
    closed = [e["data"] for e in events if e["type"] == "subagent/finished"]
    assert {c["childId"] for c in closed} == children
    assert {c["status"] for c in closed} == {"interrupted"}
    results = [e["data"] for e in events if e["type"] == "tool/result"]
    assert {r["error"]["code"] for r in results} == {"TOOL_OUTCOME_UNKNOWN"}
    listed = {s["sessionId"]: s for s in (await second.request("dsh/session/list", {}))["sessions"]}
    for child in children:
        assert listed[child]["parentId"] == sid and listed[child]["status"] == "idle"
        page = await second.request("dsh/session/transcript", {"sessionId": child})
        assert page["turns"][-1]["end"]["kind"] == "interrupted", page
    await stop_daemon(second)
    await asyncio.sleep(0)


async def test_a_child_is_held_to_its_tool_set_and_a_file_outside_the_workspace_starts_none(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.txt").write_text("keep me\n")
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    sid = await d.new_session(cwd=str(work))
    outside = tmp_path / "secret.txt"
    outside.write_text("not for the child\n")
    fake.script(
        delegate(
            ("c1", "reader", "CHILD-READER: try to edit", {}),
            ("c2", "nosy", "CHILD-NOSY: never runs", {"files": [str(outside)]}),
        ),
        text_reply("PARENT-DONE"),
    )
    path = str(work / "a.txt")
    fake.script_for(
        "CHILD-READER",
        Reply.stream(
            tool_call_stream(
                [
                    ("r1", "edit_file", {"path": path, "old_string": "keep", "new_string": "lose"}),
                    ("r2", "run_subagent", {"description": "deeper", "prompt": "CHILD-DEEPER"}),
                ]
            )
        ),
        text_reply("SUMMARY-READER: could not edit"),
    )
    await prompt(d, sid)
    await d.wait_idle_turn(sid)
    (started,) = d.of(sid, "subagent/started")  # the nosy one never started
    child = started["data"]["childId"]
    refused = [e["data"] for e in wrapped(d, sid, child, "tool/result")]
    assert [r["error"]["code"] for r in refused] == ["DENIED", "UNKNOWN_TOOL"]  # no grandchildren
    assert (work / "a.txt").read_text() == "keep me\n" and d.permission_requests == []
    results = {e["data"]["callId"]: e["data"] for e in d.of(sid, "tool/result")}
    nosy = results[d.call_id(sid, "c2")]
    assert nosy["error"]["code"] == "OUTSIDE_WORKSPACE"
    firsts = [next(m for m in r.json["messages"] if m["role"] == "user") for r in fake.requests]
    assert not any("CHILD-NOSY" in str(first) for first in firsts)  # no conversation began with it
    assert "SUMMARY-READER" in str(results[d.call_id(sid, "c1")]["message"])
    await stop_daemon(d)


async def test_the_subagent_stop_hook_hears_the_child_end_and_adds_to_its_result(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    from tests.server.test_hooks import hook, hook_program, start

    program = hook_program(tmp_path)
    d, sid, _work = await start(tmp_path, fake, {"subagentStop": [hook(program, "context")]})
    fake.script(delegate(("c1", "quick", "CHILD-QUICK: answer", {})), text_reply("PARENT-DONE"))
    fake.script_for("CHILD-QUICK", text_reply("SUMMARY-QUICK"))
    await prompt(d, sid)
    await d.wait_idle_turn(sid)
    (result,) = [e["data"] for e in d.of(sid, "tool/result")]
    text = str(result["message"])
    assert "SUMMARY-QUICK" in text and "subagentStop context" in text
    await stop_daemon(d)


async def test_a_child_runs_commands_under_its_parents_sandbox_widenings(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    from tests.server.test_sandbox_wire import code, session

    if not probe_level().confined:
        pytest.skip(f"no confinement on this machine: {probe_level().describe()}")
    outside = tmp_path / "outside"
    outside.mkdir()
    widen = {"reason": "artefacts go there", "writable": [str(outside)]}
    d, sid, _work = await session(tmp_path, fake)
    d.on_permission = lambda p: {"outcome": "allow-always"}
    fake.script(
        Reply.stream(
            tool_call_stream(
                [("w", "run_command", {"command": f"echo p > {outside}/p.txt", "escalate": widen})]
            )
        ),
        delegate(("c1", "builder", "CHILD-BUILDER: write outside", {"tools": "all"})),
        text_reply("PARENT-DONE"),
    )
    fake.script_for(
        "CHILD-BUILDER",
        Reply.stream(tool_call_stream([("k", "run_command", {"command": f"echo c > {outside}/c.txt"})])),
        text_reply("SUMMARY-BUILDER"),
    )
    await prompt(d, sid)
    await d.wait_idle_turn(sid)
    (child,) = [e["data"]["childId"] for e in d.of(sid, "subagent/started")]
    (result,) = [e["data"] for e in wrapped(d, sid, child, "tool/result")]
    assert code(result) is None, result
    assert (outside / "c.txt").read_text() == "c\n" and len(d.permission_requests) == 1  # asked once
    await stop_daemon(d)


async def test_rewinding_the_parent_takes_back_its_childs_edits(tmp_path: Path, fake: FakeDeepSeek) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "a.txt"
    target.write_text("one\n")
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    sid = await d.new_session(cwd=str(work))
    fake.script(
        delegate(("c1", "editor", "CHILD-EDITOR: edit", {"tools": "edit"})), text_reply("PARENT-DONE")
    )
    fake.script_for(
        "CHILD-EDITOR",
        Reply.stream(
            tool_call_stream(
                [("e1", "edit_file", {"path": str(target), "old_string": "one", "new_string": "two"})]
            )
        ),
        text_reply("SUMMARY-EDITOR"),
    )
    await prompt(d, sid)
    await d.wait_idle_turn(sid)
    assert target.read_text() == "two\n"
    turns = (await d.request("dsh/session/checkpoints", {"sessionId": sid}))["turns"]
    assert [t["turn"] for t in turns] == [1] and str(target) in str(turns)
    result = await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1, "conversation": False})
    assert result["restored"] == [str(target)] and target.read_text() == "one\n"
    await stop_daemon(d)


async def test_a_shutdown_with_a_child_running_ends_both_and_a_restart_finds_them_closed(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    first = await start_daemon(state, fake)
    sid = await first.new_session()
    fake.script(delegate(("c1", "slow", "CHILD-SLOW: stall", {})))
    fake.script_for("CHILD-SLOW", Reply(actions=(Stall(),)))
    await prompt(first, sid)
    await first.wait_for(
        lambda: any(e["data"]["event"]["type"] == "step/start" for e in first.of(sid, "subagent/event"))
    )
    (child,) = [e["data"]["childId"] for e in first.of(sid, "subagent/started")]
    await stop_daemon(first)  # a clean shutdown, the child's request still open

    second = await start_daemon(state, fake)
    await second.request("dsh/session/attach", {"sessionId": sid})
    events = second.of(sid)
    finished = [e["data"] for e in events if e["type"] == "subagent/finished"]
    assert [f["childId"] for f in finished] == [child]
    assert finished[0]["status"] in ("interrupted", "cancelled")
    assert [e for e in events if e["type"] == "turn/end"][-1]["data"]["reason"]["kind"] in (
        "aborted",
        "interrupted",
    )
    listed = {s["sessionId"]: s for s in (await second.request("dsh/session/list", {}))["sessions"]}
    assert listed[sid]["status"] == "idle" and listed[child]["status"] == "idle"
    page = await second.request("dsh/session/transcript", {"sessionId": child})
    assert page["turns"][-1]["end"] == {"kind": "aborted", "cause": "shutdown"}, page
    await stop_daemon(second)


async def test_a_named_agent_runs_with_its_instructions_and_tools_and_is_listed(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    agents = work / ".dsh" / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.md").write_text(
        "---\ndescription: Reviews a change for bugs\ntools: explore\n---\nREVIEWER-INSTRUCTIONS: be strict.\n"
    )
    (agents / "broken.md").write_text("no header here\n")  # left out, never fatal
    d = await start_daemon(tmp_path / "state", fake, apply_edit=False, root=work)
    sid = await d.new_session(cwd=str(work))
    listed = await d.request("dsh/agents/list", {"sessionId": sid})
    assert listed == {
        "agents": [{"name": "reviewer", "description": "Reviews a change for bugs", "tools": "explore"}]
    }
    fake.script(
        delegate(("c1", "review", "CHILD-REVIEW: review it", {"agent": "reviewer", "tools": "all"})),
        text_reply("PARENT-DONE"),
    )
    fake.script_for("CHILD-REVIEW", text_reply("SUMMARY-REVIEW"))
    await prompt(d, sid)
    await d.wait_idle_turn(sid)
    (started,) = [e["data"] for e in d.of(sid, "subagent/started")]
    assert started["agent"] == "reviewer" and started["tools"] == "explore"  # the definition's set
    parent_request = fake.requests[0].json
    spec = next(t for t in parent_request["tools"] if t["function"]["name"] == "run_subagent")
    assert "Reviews a change for bugs" in spec["function"]["description"]
    assert spec["function"]["parameters"]["properties"]["agent"]["enum"] == ["reviewer"]
    child = next(r.json for r in fake.requests if "REVIEWER-INSTRUCTIONS" in str(r.json["messages"]))
    first_user = next(m for m in child["messages"] if m["role"] == "user")
    assert "REVIEWER-INSTRUCTIONS: be strict." in str(first_user) and "CHILD-REVIEW" in str(first_user)
    assert not {t["function"]["name"] for t in child["tools"]} & {"edit_file", "run_command"}
    await stop_daemon(d)


async def test_a_running_child_can_be_followed_read_only_never_sent_to(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """A subagent's session is attachable while it runs, read-only (its parent's call drives it): the
    attach says so and names the parent; a send, a cancel, a queue edit or a mode change of it is
    refused with `session_busy` naming the parent, and the child goes on untouched."""
    d = await start_daemon(tmp_path / "state", fake)
    sid = await d.new_session()
    fake.script(delegate(("c1", "slow", "CHILD-SLOW: think forever", {})))
    fake.script_for("CHILD-SLOW", Reply(actions=(Stall(),)))
    await prompt(d, sid)
    await d.wait_for(lambda: bool(d.of(sid, "subagent/started")))
    child = d.of(sid, "subagent/started")[0]["data"]["childId"]
    attached = await d.request("dsh/session/attach", {"sessionId": child})
    assert attached["readOnly"] is True and attached["parentId"] == sid
    refusals = []
    for method, params in (
        ("dsh/followup", {"sessionId": child, "message": {"content": "psst"}}),
        ("dsh/cancel", {"sessionId": child}),
        ("dsh/wake", {"sessionId": child}),
        ("dsh/session/setMode", {"sessionId": child, "mode": "plan"}),
    ):
        try:
            await d.request(method, params)
        except Exception as exc:
            refusals.append(str(exc))
    assert len(refusals) == 4 and all("subagent's session" in r and sid[:8] in r for r in refusals), refusals
    assert not [e for e in d.of(child, "user/message") if "psst" in str(e["data"])]
    assert not [e for e in d.of(sid, "subagent/finished")]  # still running
    await d.request("dsh/cancel", {"sessionId": sid})  # the parent's cancel still reaches it
    await d.wait_idle_turn(sid)
    (finished,) = d.of(sid, "subagent/finished")
    assert finished["data"]["status"] == "cancelled"
    await stop_daemon(d)
