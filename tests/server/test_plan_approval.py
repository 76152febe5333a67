"""Plan mode ends in a plan the person approves (protocol.md §3 "Plan approval"), through the real
daemon process and a scripted model: `propose_plan` offered only in plan mode, its call a permission
request of kind `plan`; Approve switches the mode the person picked and runs the plan as the next
prompt with no retyping, Revise gives the model their words and stays in plan mode; bad answers are
refused; a SIGKILL at either side of the approval's commit leaves both the mode and the queued plan
or neither; the mode survives a restart and a rewind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from dsh_daemon.session.store import SessionStore
from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream
from tests.server.test_tools_e2e import edit_call, run_turn, tool_results

PLAN = "1. Change `one` to `two` in a.txt.\n2. Run the tests."
REVISED = PLAN + "\n3. Add a test for it."
EDIT_TOOLS = {"edit_file", "write_file"}


def propose(plan: str, call_id: str = "call_p") -> Reply:
    return Reply.stream(tool_call_stream([(call_id, "propose_plan", {"plan": plan})]))


def offered(fake: FakeDeepSeek, index: int) -> set[str]:
    return {t["function"]["name"] for t in fake.requests[index].json.get("tools", [])}


def text_of(result: dict[str, Any]) -> str:
    return str(result["message"]["content"][0]["content"][0]["text"])


async def kill(daemon: Daemon) -> None:
    server = daemon.client._server
    assert server is not None
    os.kill(server.pid, signal.SIGKILL)
    await asyncio.wait_for(server.wait(), 15)
    with contextlib.suppress(Exception):
        await daemon.client.stop()


async def plan_session(d: Daemon, work: Path) -> str:
    sid = await d.new_session(cwd=str(work))
    await d.request("dsh/session/setMode", {"sessionId": sid, "mode": "plan"})
    return sid


async def test_approve_switches_to_the_chosen_mode_and_runs_the_plan_as_the_next_prompt(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    target = work / "a.txt"
    target.write_text("one\n")
    d = await start_daemon(state, fake, root=work)
    asked: list[str] = []

    def answer(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["tool"])
        if (params.get("preview") or {}).get("kind") == "plan":
            return {"outcome": "allow-once", "mode": "accept-edits"}
        return {"outcome": "reject"}  # nothing else may ask: accept-edits allows the edit

    d.on_permission = answer
    fake.script(propose(PLAN), edit_call(target, "one", "two"), text_reply("done"))
    sid = await plan_session(d, work)
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "plan the change"}})
    await d.wait_idle_turn(sid, 2)  # the proposing turn, then the plan's own turn with no new prompt

    # Plan mode offers the tool and no edit tool, and the system prompt tells the model to use it.
    assert "propose_plan" in offered(fake, 0) and not EDIT_TOOLS & offered(fake, 0)
    assert "propose_plan" in fake.requests[0].json["messages"][0]["content"]
    (request,) = d.permission_requests
    call_id = request["callId"]
    assert request["tool"] == "propose_plan" and request["title"] == "Approve the plan?"
    assert request["preview"] == {"kind": "plan", "plan": PLAN}
    assert asked == ["propose_plan"]

    # The mode switch and the queued plan come before the call's result, and the turn ends there.
    modes = d.of(sid, "session/mode")
    assert [m["data"] for m in modes] == [{"mode": "plan"}, {"mode": "accept-edits", "planCallId": call_id}]
    (queued,) = [
        e
        for e in d.of(sid, "agent/inbox/inserted")
        if e["data"]["message"]["source"].get("approvedPlan") is not None
    ]
    message = queued["data"]["message"]
    assert message["source"] == {"kind": "user", "approvedPlan": {"callId": call_id, "mode": "accept-edits"}}
    assert PLAN in message["content"][0]["text"]
    first_result = tool_results(d, sid)[0]
    assert first_result["callId"] == call_id and "isError" not in first_result
    assert "approved" in text_of(first_result)
    result_seq = int(d.of(sid, "tool/result")[0]["seq"])
    assert modes[1]["seq"] < result_seq < d.of(sid, "turn/end")[0]["seq"]
    ends = d.of(sid, "turn/end")
    assert [e["data"]["reason"]["kind"] for e in ends] == ["completed", "completed"]

    # The model had no request after the approval in turn 1: its next request is turn 2, whose prompt
    # is the plan, with the edit tools offered and propose_plan gone; the edit ran without a question.
    assert len(fake.requests) == 3
    last_user = [m for m in fake.requests[1].json["messages"] if m["role"] == "user"][-1]
    assert PLAN in str(last_user["content"])
    assert EDIT_TOOLS <= offered(fake, 1) and "propose_plan" not in offered(fake, 1)
    assert len(d.permission_requests) == 1 and len(d.applied_edits) == 1

    # The mode is the session's: a SIGKILL and a new process keep it; a rewind to before the approval
    # leaves it too (the mode is the person's setting, not part of the conversation).
    await kill(d)
    d = await start_daemon(state, fake, root=work)
    assert (await d.request("dsh/session/attach", {"sessionId": sid}))["mode"] == "accept-edits"
    await d.request("dsh/session/rewind", {"sessionId": sid, "beforeTurn": 1})
    assert (await d.request("dsh/session/attach", {"sessionId": sid}))["mode"] == "accept-edits"
    await stop_daemon(d)


async def test_revise_gives_the_model_the_persons_words_and_stays_in_plan_mode(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    d = await start_daemon(tmp_path / "state", fake, root=work)
    answers = [
        {"outcome": "reject", "feedback": "Add a test step."},
        {"outcome": "allow-always"},  # no mode: ask; "always" is not remembered for plans
    ]
    d.on_permission = lambda params: answers.pop(0)
    fake.script(
        propose(PLAN, "call_1"),
        propose(REVISED, "call_2"),
        text_reply("doing it"),
        propose("again", "call_3"),
    )
    try:
        sid = await plan_session(d, work)
        await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "plan it"}})
        await d.wait_idle_turn(sid, 2)
        rejected, approved = tool_results(d, sid)
        assert rejected["error"] == {"name": "propose_plan", "code": "REJECTED"}
        said = text_of(rejected)
        assert "Add a test step." in said and "still in plan mode" in said
        # Still plan mode for the revision: the second request offers propose_plan and no edits.
        assert "propose_plan" in offered(fake, 1) and not EDIT_TOOLS & offered(fake, 1)
        assert [r["preview"]["plan"] for r in d.permission_requests] == [PLAN, REVISED]
        assert "isError" not in approved
        assert [m["data"]["mode"] for m in d.of(sid, "session/mode")] == ["plan", "ask"]
        assert (await d.request("dsh/session/attach", {"sessionId": sid}))["mode"] == "ask"
        # propose_plan is not offered outside plan mode, and a call to it is refused unasked.
        assert "propose_plan" not in offered(fake, 2)
        fake.script(propose("again", "call_3"), text_reply("ok"))
        await run_turn(d, sid, "go on")
        assert len(d.permission_requests) == 2
        assert "only available in plan mode" in text_of(tool_results(d, sid)[-1])
    finally:
        await stop_daemon(d)


async def test_an_answer_a_plan_cannot_take_is_refused_and_the_request_stays_open(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    d = await start_daemon(tmp_path / "state", fake, root=work)
    opened = asyncio.get_running_loop().create_future()

    async def wait_forever(params: dict[str, Any]) -> dict[str, Any]:
        opened.set_result(params)
        await asyncio.sleep(3600)
        return {"outcome": "cancelled"}

    d.on_permission = wait_forever
    fake.script(propose(PLAN), text_reply("ran it"))
    try:
        sid = await plan_session(d, work)
        await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "plan"}})
        params = await asyncio.wait_for(opened, 30)
        call = {"sessionId": sid, "callId": params["callId"]}
        for bad in (
            {"outcome": "allow-once", "mode": "plan"},  # not a mode an approval may pick
            {"outcome": "reject", "mode": "ask"},  # a mode only with an approval
            {"outcome": "allow-once", "feedback": "x"},  # feedback only with a rejection
            {"outcome": "reject", "feedback": "x" * 20_001},
        ):
            with pytest.raises(JsonRpcException) as refused:
                await d.request("dsh/permissions/respond", {**call, **bad})
            assert refused.value.data["code"] == "invalid_params", bad
        listed = await d.request("dsh/permissions/list", {"sessionId": sid})
        assert [o["callId"] for o in listed["open"]] == [params["callId"]]  # still open
        answered = await d.request(
            "dsh/permissions/respond", {**call, "outcome": "allow-once", "mode": "ask"}
        )
        assert answered == {"answered": True}
        await d.wait_idle_turn(sid, 2)
        assert [m["data"]["mode"] for m in d.of(sid, "session/mode")] == ["plan", "ask"]
    finally:
        await stop_daemon(d)


async def test_a_reply_with_a_mode_on_an_edit_request_counts_as_cancelled(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    target = work / "a.txt"
    target.write_text("one\n")
    d = await start_daemon(tmp_path / "state", fake, root=work)
    d.on_permission = lambda params: {"outcome": "allow-once", "mode": "accept-edits"}
    fake.script(edit_call(target, "one", "two"), text_reply("never"))
    try:
        sid = await d.new_session(cwd=str(work))
        await run_turn(d, sid)
        assert target.read_text() == "one\n"  # fail closed: nothing written, the turn cancelled
        assert d.of(sid, "turn/end")[-1]["data"]["reason"]["kind"] == "aborted"
        assert [m["data"]["mode"] for m in d.of(sid, "session/mode")] == []
    finally:
        await stop_daemon(d)


MOST_POINTS = 10


async def test_a_sigkill_at_the_approval_leaves_both_the_mode_and_the_plan_or_neither(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    base = tmp_path / "base"
    d = await start_daemon(base, fake, root=work)
    sid = await plan_session(d, work)
    await stop_daemon(d)

    outcomes: list[tuple[bool, bool]] = []
    for point in range(MOST_POINTS):
        state = tmp_path / f"plan-{point}"
        shutil.copytree(base, state)
        fake.script(propose(PLAN))  # the plan's own turn takes the default reply
        d = await start_daemon(
            state,
            fake,
            root=work,
            module="tests.fakes.kill_points",
            env={"DSH_TEST_KILL_AT": f"plan:{point}"},
        )
        d.on_permission = lambda params: {"outcome": "allow-once", "mode": "accept-edits"}
        server = d.client._server
        assert server is not None
        killed = False
        try:
            await d.request("dsh/session/attach", {"sessionId": sid})
            await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "plan"}})
            idle = asyncio.ensure_future(d.wait_idle_turn(sid, 2))
            died = asyncio.ensure_future(server.wait())
            await asyncio.wait([idle, died], return_when=asyncio.FIRST_COMPLETED)
            if not idle.done():
                idle.cancel()
                raise ConnectionError("the daemon died")
            died.cancel()
            await idle
            await stop_daemon(d)
        except Exception:
            await asyncio.wait_for(server.wait(), 15)
            assert server.returncode == -signal.SIGKILL, point
            with contextlib.suppress(Exception):
                await d.client.stop()
            killed = True
        store = SessionStore(state)
        events = store.load_events(sid)
        store.close()
        approved_mode = any(e.type == "session/mode" and e.data.get("planCallId") for e in events)
        queued = any(
            e.type == "agent/inbox/spliced"
            and any(i["source"].get("approvedPlan") for i in e.data.get("inserted") or ())
            for e in events
        )
        assert approved_mode == queued, (point, approved_mode, queued)
        outcomes.append((killed, approved_mode))
        if not killed:
            break
    # Killed before the commit (nothing), after it (both), then a run that completes (both).
    assert outcomes[0] == (True, False) and (True, True) in outcomes and outcomes[-1] == (False, True)
    # A new process opens the session in the approved mode and runs the queued plan.
    d = await start_daemon(tmp_path / f"plan-{outcomes.index((True, True))}", fake, root=work)
    try:
        fake.script(text_reply("carried out"))
        attached = await d.request("dsh/session/attach", {"sessionId": sid})
        assert attached["mode"] == "accept-edits"
        pending = attached["inbox"]["nextTurn"]
        assert [p["source"]["approvedPlan"]["mode"] for p in pending] == ["accept-edits"]
    finally:
        await stop_daemon(d)
