"""Issue 24.1: `session/load` of a session another live process holds (CodeCompanion runs one process
per chat). Two `dsh-daemon acp` processes on one state directory, spoken to with the official SDK."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest
from acp import RequestError, text_block

from dsh_daemon.session.lease import LeaseHolder
from dsh_daemon.session.store import SessionStore
from tests.acp.harness import AcpDaemon, acp_daemon, raw_acp, settle
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import tool_call_stream


def chat_text(d: AcpDaemon, sid: str) -> str:
    return d.client.text(sid)


async def test_loading_a_chat_an_idle_process_holds_replays_it_and_drives_it(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    async with acp_daemon(state, fake) as first, acp_daemon(state, fake) as second:
        fake.script(Reply.stream(text_stream(["first answer"])), Reply.stream(text_stream(["second answer"])))
        sid = await first.new_session()
        assert (
            await settle(first.conn.prompt(session_id=sid, prompt=[text_block("hello")]))
        ).stop_reason == "end_turn"

        await settle(second.conn.load_session(cwd=str(second.work), session_id=sid, mcp_servers=[]))
        assert "first answer" in chat_text(second, sid)  # replayed
        response = await settle(second.conn.prompt(session_id=sid, prompt=[text_block("still there?")]))
        assert response.stop_reason == "end_turn"
        assert "second answer" in chat_text(second, sid)
        contents = [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "user"]
        assert contents[-2:] == ["hello", "still there?"]  # the whole history, in the loading process

        # The first process follows on, read-only, and says so in words; its next prompt takes the
        # chat back (the second is idle) and runs there.
        await first.wait_for(lambda: "second answer" in chat_text(first, sid))
        # The lease change is told when this process's follower sees the new holder, which can be
        # after it has delivered the other's first events (a CI run read the chat in between).
        await first.wait_for(lambda: "driven by another dsh-daemon" in chat_text(first, sid))
        fake.script(Reply.stream(text_stream(["third answer"])))
        response = await settle(first.conn.prompt(session_id=sid, prompt=[text_block("back here")]))
        assert response.stop_reason == "end_turn"
        assert "third answer" in chat_text(first, sid)
        assert "session_busy" not in (state / "daemon.log").read_text()
        # Each take-over is said in the chat of the process that lost the session, from the log.
        await second.wait_for(lambda: "took this chat over" in chat_text(second, sid))
    # ... so a later replay shows both where they happened (issue 24.11).
    fake.script()
    async with acp_daemon(state, fake) as third:
        await settle(third.conn.load_session(cwd=str(third.work), session_id=sid, mcp_servers=[]))
        text = chat_text(third, sid)
        assert text.count("took this chat over") == 2
        assert text.index("first answer") < text.index("took this chat over") < text.index("second answer")


async def test_a_prompt_sent_while_the_holder_runs_a_turn_is_kept_and_runs_when_it_ends(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    async with acp_daemon(state, fake) as first, acp_daemon(state, fake) as second:
        fake.script(
            Reply.stream(text_stream(["long ", "answer"]), gate_after=(2, "long")),
            Reply.stream(text_stream(["queued answer"])),
        )
        sid = await first.new_session()
        running = asyncio.ensure_future(first.conn.prompt(session_id=sid, prompt=[text_block("long")]))
        await first.wait_for(lambda: len(fake.requests) == 1)

        await settle(second.conn.load_session(cwd=str(second.work), session_id=sid, mcp_servers=[]))
        assert "running a turn" in chat_text(second, sid)  # said in words, not refused
        waiting = asyncio.ensure_future(second.conn.prompt(session_id=sid, prompt=[text_block("after that")]))
        await asyncio.sleep(0.5)
        assert not waiting.done()  # kept until the holder lets go
        fake.open_gate("long")
        assert (await settle(running)).stop_reason == "end_turn"
        assert (await settle(waiting)).stop_reason == "end_turn"
        assert "long answer" in chat_text(second, sid)  # the holder's turn, followed live
        assert "queued answer" in chat_text(second, sid)
        contents = [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "user"]
        assert contents == ["long", "after that"]


async def test_a_kept_prompt_survives_the_loading_process(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """Queued durably: the loader ends before the holder lets go; the prompt runs in the holder's
    process the next time it opens the session."""
    state = tmp_path / "state"
    fake.script(
        Reply.stream(text_stream(["long"]), gate_after=(0, "long")),
        Reply.stream(text_stream(["kept answer"])),
    )
    async with acp_daemon(state, fake) as first:
        sid = await first.new_session()
        running = asyncio.ensure_future(first.conn.prompt(session_id=sid, prompt=[text_block("long")]))
        await first.wait_for(lambda: len(fake.requests) == 1)
        async with acp_daemon(state, fake) as second:
            await settle(second.conn.load_session(cwd=str(second.work), session_id=sid, mcp_servers=[]))
            kept = asyncio.ensure_future(second.conn.prompt(session_id=sid, prompt=[text_block("keep me")]))
            await second.wait_for(lambda: "kept until" in (state / "daemon.log").read_text())
        kept.cancel()  # the loading process (and its connection) ended with the prompt kept
        fake.open_gate("long")
        assert (await settle(running)).stop_reason == "end_turn"
        await settle(first.conn.close_session(session_id=sid))
        await settle(first.conn.load_session(cwd=str(first.work), session_id=sid, mcp_servers=[]))
        await first.wait_for(lambda: "kept answer" in chat_text(first, sid))
        contents = [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "user"]
        assert contents == ["long", "keep me"]


@pytest.mark.parametrize("ending", ["stdin closed", "SIGTERM"])
async def test_a_process_holding_a_kept_prompt_exits_when_its_client_goes(
    tmp_path: Path, fake: FakeDeepSeek, ending: str
) -> None:
    """The kept prompt is durable in the store (the holder runs it later): nothing is left for the
    loading process to wait for when its input ends or it is told to stop. It answers the prompt
    `cancelled` and exits by itself (it waited for the prompt's answer until killed)."""
    state = tmp_path / "state"
    fake.script(Reply.stream(text_stream(["long"]), gate_after=(0, "long")))
    async with acp_daemon(state, fake) as first:
        sid = await first.new_session()
        running = asyncio.ensure_future(first.conn.prompt(session_id=sid, prompt=[text_block("long")]))
        await first.wait_for(lambda: len(fake.requests) == 1)
        async with raw_acp(state, fake) as second:
            await second.call("initialize", {"protocolVersion": 1, "_meta": {"dsh": {"thinking": False}}})
            loaded = await second.call(
                "session/load", {"sessionId": sid, "cwd": str(state / "work"), "mcpServers": []}
            )
            assert "error" not in loaded, loaded
            kept = second.request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "keep me"}]}
            )
            await first.wait_for(lambda: "kept until" in (state / "daemon.log").read_text())
            process = second.process
            if ending == "SIGTERM":
                process.send_signal(signal.SIGTERM)
            else:
                assert process.stdin is not None
                process.stdin.close()
            try:
                returncode = await asyncio.wait_for(process.wait(), 20)
            except TimeoutError:
                returncode = None
            assert returncode == 0, f"the daemon did not exit by itself ({ending}): {returncode}"
            answer = await second.response(kept)
            assert answer["result"]["stopReason"] == "cancelled"
        store = SessionStore(state)
        try:
            contents = [json.loads(data)["message"]["content"] for _id, data in store.deferred_sends(sid)]
            assert contents == [[{"type": "text", "text": "keep me"}]]  # still kept, for the holder to run
        finally:
            store.close()
        fake.open_gate("long")
        assert (await settle(running)).stop_reason == "end_turn"


async def test_a_busy_holder_runs_its_whole_queue_before_it_lets_go(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """A take over that does not force waits for the holder to finish what it was asked to do: the
    turn running and the prompts queued there before the loader's prompt (the queue is the person's
    work in that window; a forced take over is the way to stop it)."""
    state = tmp_path / "state"
    async with acp_daemon(state, fake) as first, acp_daemon(state, fake) as second:
        fake.script(
            Reply.stream(text_stream(["long answer"]), gate_after=(0, "long")),
            Reply.stream(text_stream(["queued there"])),
            Reply.stream(text_stream(["from here"])),
        )
        sid = await first.new_session()
        running = asyncio.ensure_future(first.conn.prompt(session_id=sid, prompt=[text_block("long")]))
        await first.wait_for(lambda: len(fake.requests) == 1)
        queued = asyncio.ensure_future(first.conn.prompt(session_id=sid, prompt=[text_block("second")]))
        await asyncio.sleep(0.3)  # the second prompt is in the holder's queue (queued durably on arrival)
        await settle(second.conn.load_session(cwd=str(second.work), session_id=sid, mcp_servers=[]))
        mine = asyncio.ensure_future(second.conn.prompt(session_id=sid, prompt=[text_block("third")]))
        fake.open_gate("long")
        assert (await settle(running)).stop_reason == "end_turn"
        assert (await settle(queued)).stop_reason == "end_turn"
        assert (await settle(mine)).stop_reason == "end_turn"
        users = [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "user"]
        assert users == ["long", "second", "third"]
        assert "from here" in chat_text(second, sid) and "queued there" in chat_text(second, sid)


async def test_a_chat_loaded_while_the_holder_runs_a_command_shows_its_output_live(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """The holder's running command prints on in the loading process's chat (`followerOutput`): its
    output after the load arrives as `tool_call_update`s, after a line saying what came before."""
    state = tmp_path / "state"
    go = tmp_path / "go"
    command = f"echo before; while [ ! -f {go} ]; do sleep 0.02; done; echo after"
    async with acp_daemon(state, fake) as first, acp_daemon(state, fake) as second:
        fake.script(
            Reply.stream(tool_call_stream([("call_run", "run_command", {"command": command})])),
            Reply.stream(text_stream(["ran it"])),
        )
        sid = await first.new_session()
        running = asyncio.ensure_future(first.conn.prompt(session_id=sid, prompt=[text_block("run")]))
        await first.wait_for(lambda: "before" in output_shown(first, sid))

        await settle(second.conn.load_session(cwd=str(second.work), session_id=sid, mcp_servers=[]))
        go.write_text("")
        assert (await settle(running)).stop_reason == "end_turn"
        await second.wait_for(lambda: "ran it" in chat_text(second, sid))
        shown = output_shown(second, sid)
        assert shown.startswith("[… 7 characters of output not shown here")  # "before\n", printed earlier
        assert shown.endswith("\nafter\n")
        updates = call_updates(second, sid)
        live = [i for i, u in enumerate(updates) if u.get("status") == "in_progress" and u.get("content")]
        done = [i for i, u in enumerate(updates) if u.get("status") == "completed"]
        assert live and done and max(live) < done[0]  # the output before the result


def call_updates(d: AcpDaemon, sid: str) -> list[dict[str, object]]:
    return d.client.call_updates(sid)


def output_shown(d: AcpDaemon, sid: str) -> str:
    """The text of the call's last live (`in_progress`) update with content: its output so far."""
    shown = ""
    for update in call_updates(d, sid):
        content = update.get("content")
        if update.get("status") == "in_progress" and isinstance(content, list) and content:
            shown = content[0]["content"]["text"]
    return shown


async def test_another_windows_prompt_separates_its_answer_from_the_last_reply(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 39.9: a process following a session another drives showed that process's answer glued
    onto the reply it showed last (agent chunks continue the last agent message). The other
    window's prompt is shown as a user message first; this window's own prompts are not repeated."""
    state = tmp_path / "state"
    async with acp_daemon(state, fake) as first, acp_daemon(state, fake) as second:
        fake.script(Reply.stream(text_stream(["first answer"])), Reply.stream(text_stream(["second answer"])))
        sid = await first.new_session()
        await settle(first.conn.prompt(session_id=sid, prompt=[text_block("hello")]))
        await settle(second.conn.load_session(cwd=str(second.work), session_id=sid, mcp_servers=[]))
        shown = len(second.client.updates(sid))
        await settle(first.conn.prompt(session_id=sid, prompt=[text_block("from the first window")]))
        await second.wait_for(lambda: "second answer" in chat_text(second, sid))
        later = second.client.updates(sid)[shown:]
        kinds = [u["sessionUpdate"] for u in later]
        user = kinds.index("user_message_chunk")
        assert later[user]["content"]["text"] == "from the first window"
        assert user < next(i for i, u in enumerate(later) if u["sessionUpdate"] == "agent_message_chunk")
        # The window that sent it is not shown its own prompt again.
        assert [u for u in first.client.updates(sid, "user_message_chunk")] == []


async def test_a_prompt_to_a_chat_a_live_foreign_pid_holds_is_answered_at_once_naming_it(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """The lease names a process on this host that lives but is no daemon answering handovers (it
    never heartbeats: a crashed daemon's pid taken by another program, a stopped one): it keeps its
    lease, and a prompt after `session/load` gets `session_busy` naming it at once, never a wait for
    a handover that cannot come."""
    state = tmp_path / "state"
    fake.script(Reply.stream(text_stream(["first answer"])))
    async with acp_daemon(state, fake) as first:
        sid = await first.new_session()
        answer = await settle(first.conn.prompt(session_id=sid, prompt=[text_block("hi")]))
        assert answer.stop_reason == "end_turn"
    foreign = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(120)")
    try:
        store = SessionStore(state)
        LeaseHolder(store, pid=foreign.pid).acquire(sid)
        with store.transaction() as db:  # it has not beaten since
            db.execute("UPDATE leases SET heartbeat = heartbeat - 120000")
        store.close()
        async with acp_daemon(state, fake) as second:
            await settle(second.conn.load_session(cwd=str(second.work), session_id=sid, mcp_servers=[]))
            assert "first answer" in chat_text(second, sid)  # replayed
            assert f"held by process {foreign.pid} on this host" in chat_text(second, sid)
            with pytest.raises(RequestError) as refused:
                await settle(second.conn.prompt(session_id=sid, prompt=[text_block("anyone?")]))
            data = refused.value.data
            assert data["code"] == "session_busy" and data["holderPid"] == foreign.pid, data
            assert f"held by process {foreign.pid}" in str(refused.value)
            # Nothing was kept for a handover that cannot come.
            assert "kept until" not in (state / "daemon.log").read_text()
            assert len(fake.requests) == 1
    finally:
        foreign.kill()
        await foreign.wait()


async def test_prompts_kept_for_a_holder_that_stops_answering_are_withdrawn_and_answered_busy(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """The holder beat when the prompt came (so it was kept for the handover), then fell silent: the
    kept prompt is withdrawn from the store and answered `session_busy` naming the holder."""
    state = tmp_path / "state"
    fake.script(Reply.stream(text_stream(["first answer"])))
    async with acp_daemon(state, fake) as first:
        sid = await first.new_session()
        answer = await settle(first.conn.prompt(session_id=sid, prompt=[text_block("hi")]))
        assert answer.stop_reason == "end_turn"
    foreign = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(120)")
    store = SessionStore(state)
    try:
        LeaseHolder(store, pid=foreign.pid).acquire(sid)  # a fresh heartbeat: it seems to answer
        async with acp_daemon(state, fake) as second:
            await settle(second.conn.load_session(cwd=str(second.work), session_id=sid, mcp_servers=[]))
            kept = asyncio.ensure_future(second.conn.prompt(session_id=sid, prompt=[text_block("kept?")]))
            await second.wait_for(lambda: "kept until" in (state / "daemon.log").read_text())
            assert len(store.deferred_sends(sid)) == 1 and not kept.done()
            with store.transaction() as db:  # it stops beating
                db.execute("UPDATE leases SET heartbeat = heartbeat - 120000")
            with pytest.raises(RequestError) as refused:
                await settle(kept)
            data = refused.value.data
            assert data["code"] == "session_busy" and data["holderPid"] == foreign.pid, data
            assert data["reason"] == "silent"
            assert store.deferred_sends(sid) == []  # not run later by whoever drives it next
            assert len(fake.requests) == 1
    finally:
        store.close()
        foreign.kill()
        await foreign.wait()


def shown_options(d: AcpDaemon, sid: str) -> dict[str, object]:
    """What the client's pickers show: the options of the last `config_option_update`."""
    updates = d.client.updates(sid, "config_option_update")
    return {o["id"]: o["currentValue"] for o in updates[-1]["configOptions"]} if updates else {}


async def test_settings_another_window_changes_reach_this_one_and_stay_when_it_takes_the_chat_back(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 39.5: the model, mode and sandbox are the session's own. A window that follows the chat
    while another process drives it sees that process's changes in its pickers
    (`config_option_update`, `current_mode_update`), and taking the chat back keeps them."""
    state = tmp_path / "state"
    async with acp_daemon(state, fake) as first, acp_daemon(state, fake) as second:
        fake.script(*(Reply.stream(text_stream([f"answer {n}"])) for n in range(3)))
        sid = await first.new_session()
        await settle(first.conn.set_config_option(config_id="model", session_id=sid, value="deepseek-v4-pro"))
        await settle(first.conn.prompt(session_id=sid, prompt=[text_block("hello")]))

        loaded = await settle(second.conn.load_session(cwd=str(second.work), session_id=sid, mcp_servers=[]))
        assert {o.id: o.current_value for o in loaded.config_options or []}["model"] == "deepseek-v4-pro"
        await settle(second.conn.prompt(session_id=sid, prompt=[text_block("from the second window")]))
        assert fake.requests[-1].json["model"] == "deepseek-v4-pro"
        await first.wait_for(lambda: "answer 1" in chat_text(first, sid))  # following read-only now

        await settle(
            second.conn.set_config_option(config_id="model", session_id=sid, value="deepseek-v4-flash")
        )
        await first.wait_for(lambda: shown_options(first, sid).get("model") == "deepseek-v4-flash")
        await settle(second.conn.set_session_mode(session_id=sid, mode_id="plan"))
        await first.wait_for(lambda: shown_options(first, sid).get("mode") == "plan")
        assert first.client.updates(sid, "current_mode_update")[-1]["currentModeId"] == "plan"
        await settle(second.conn.set_config_option(config_id="sandbox", session_id=sid, value="read-only"))
        await first.wait_for(lambda: shown_options(first, sid).get("sandbox") == "read-only")

        await settle(first.conn.prompt(session_id=sid, prompt=[text_block("back here")]))
        assert (
            fake.requests[-1].json["model"] == "deepseek-v4-flash"
        )  # the session's choice, not this process's
        assert shown_options(first, sid) | {"thinking": None} == {
            "mode": "plan",
            "model": "deepseek-v4-flash",
            "thinking": None,
            "reasoning_effort": shown_options(first, sid)["reasoning_effort"],
            "sandbox": "read-only",
        }
