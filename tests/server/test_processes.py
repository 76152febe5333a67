"""Background processes over the real wire (issue 33.2): a scripted model starts an HTTP server on
a free loopback port with `run_command {background: true}`, waits for it with `process_read`, fetches
from it with a second command, and stops it; every exit is a durable `process/exited`; the person
lists, reads and stops them (`dsh/process/*`); and no process survives the session's close, the
daemon's SIGTERM, a cancel that stops processes, or a SIGKILL of the daemon (checked by pid and by a
scan of /proc for the command's marker)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.sandbox.level import probe_level
from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import UNCONFINED, Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream
from tests.server.test_sandbox_wire import text

LEVEL = probe_level()
confined_here = pytest.mark.skipif(not LEVEL.confined, reason=f"no confinement here: {LEVEL.describe()}")
layer1_here = pytest.mark.skipif(not LEVEL.namespaces, reason=f"no namespaces here: {LEVEL.describe()}")
WORKSPACE_WRITE = {"thinking": False, "tools": {"sandbox": "workspace-write"}}


def call(call_id: str, name: str, args: Mapping[str, Any]) -> Reply:
    return Reply.stream(tool_call_stream([(call_id, name, args)]))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fetch(port: int, path: str) -> str:
    """A second command that fetches from the server directly (a confined command's HTTP clients
    are pointed at the egress proxy, which does not reach the session's loopback)."""
    code = (
        "import urllib.request as u; "
        f"print(u.build_opener(u.ProxyHandler({{}})).open('http://127.0.0.1:{port}/{path}', timeout=10)"
        ".read().decode())"
    )
    return f'{sys.executable} -c "{code}"'


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


def with_marker(marker: str) -> list[int]:
    """Pids of live processes whose command line holds `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = (
                Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            )
        except OSError:
            continue
        if marker in cmdline and alive(int(entry)):
            found.append(int(entry))
    return found


async def gone(pid: int, marker: str, within: float = 15.0) -> None:
    """The process and everything with its marker are gone (polled: the kill is asynchronous)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while alive(pid) or with_marker(marker):
        assert loop.time() < deadline, f"still alive: {pid} {with_marker(marker)}"
        await asyncio.sleep(0.05)


def results(d: Daemon, sid: str) -> list[dict[str, Any]]:
    return [e["data"] for e in d.of(sid, "tool/result")]


async def prompt(d: Daemon, sid: str, text_: str = "go") -> None:
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": text_}})


async def run_turn(d: Daemon, sid: str, turns: int) -> None:
    await prompt(d, sid)
    await d.wait_idle_turn(sid, turns)


def sleeper(marker: str) -> str:
    """A background command that runs until killed, holding `marker` on its command line (in a
    child of the shell, so the tree is killed, not just the shell)."""
    return f"sh -c 'sleep {marker}; true' & echo started; wait"


def new_marker() -> str:
    return f"{random.randint(100000, 999999)}.{random.randint(1000, 9999)}"


async def started_pid(d: Daemon, sid: str, index: int = 0) -> int:
    event = await d.wait_event(sid, "process/started", index + 1)
    assert isinstance(event["seq"], int)  # durable
    return int(event["data"]["pid"])


async def http_scenario(
    tmp_path: Path, fake: FakeDeepSeek, init: Mapping[str, Any], env: dict[str, str]
) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    (work / "hello.txt").write_text("hello from the workspace\n")
    port = free_port()
    # Its banner comes after the start's first-output window (1 s), so `wait_for` sees it unread; said
    # within that window, the start's result had read it and the wait ran out its 30 s.
    server = f"sleep 2; exec {sys.executable} -u -m http.server {port} --bind 127.0.0.1"
    fake.script(
        call("call_1", "run_command", {"command": server, "background": True, "name": "web"}),
        call("call_2", "process_read", {"process_id": "p1", "wait_for": "Serving HTTP", "timeout": 30}),
        call("call_3", "run_command", {"command": fetch(port, "hello.txt")}),
        call("call_4", "process_stop", {"process_id": "p1"}),
        text_reply("served, fetched and stopped"),
    )
    d = await start_daemon(state, fake, root=work, init_options=init, env=env)
    try:
        sid = await d.new_session(cwd=str(work))
        await run_turn(d, sid, 1)
        assert [r.get("error") for r in results(d, sid)] == [None] * 4, [
            text(r["message"]) for r in results(d, sid)
        ]
        system = fake.requests[0].json["messages"][0]["content"]
        assert "background: true" in system and "process_read" in system  # the guidance, with the tools
        started, waited, fetched, stopped = (text(r["message"]) for r in results(d, sid))
        assert started.startswith("Started p1 in the background")
        assert "Serving HTTP" in waited and "[p1 running]" in waited
        assert results(d, sid)[1]["meta"]["waited"] == "matched"
        assert "hello from the workspace" in fetched and "[exit code 0]" in fetched
        assert "GET /hello.txt" in stopped and "stopped by agent" in stopped
        assert d.permission_requests == [] or init is UNCONFINED  # confined: nobody is asked

        (event,) = d.of(sid, "process/started")
        ids = [c["data"]["callId"] for c in d.of(sid, "tool/call")]
        assert {k: v for k, v in event["data"].items() if k != "pid"} == {
            "processId": "p1",
            "name": "web",
            "command": server,
            "confined": init is not UNCONFINED,
            "turn": 1,
            "callId": ids[0],
        }
        (exited,) = d.of(sid, "process/exited")
        assert isinstance(exited["seq"], int)
        assert exited["data"]["processId"] == "p1" and exited["data"]["stoppedBy"] == "agent"
        seqs = [e["seq"] for e in d.of(sid) if e.get("seq") is not None and e["type"] != "log/gap"]
        assert seqs == sorted(seqs)
        pid = int(event["data"]["pid"])
        await gone(pid, f"http.server {port}")

        # The person's view: the list, and the output from its file (the output is not in the log).
        listed = await d.request("dsh/process/list", {"sessionId": sid})
        (info,) = listed["processes"]
        assert info["processId"] == "p1" and info["running"] is False and info["stoppedBy"] == "agent"
        output = await d.request("dsh/process/output", {"sessionId": sid, "processId": "p1"})
        assert "GET /hello.txt" in output["text"] and output["truncated"] is False
        assert not any(
            "GET /hello.txt" in str(e["data"]) for e in d.of(sid, "process/started", "process/exited")
        )
    finally:
        await stop_daemon(d)


async def test_an_http_server_in_the_background_unconfined(tmp_path: Path, fake: FakeDeepSeek) -> None:
    await http_scenario(tmp_path, fake, UNCONFINED, {})


@layer1_here
async def test_an_http_server_in_the_background_confined_shares_the_sessions_loopback(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Layer 1: the session's commands share their own network namespace, so the server and the
    later command reach each other; nothing outside that namespace could."""
    await http_scenario(tmp_path, fake, WORKSPACE_WRITE, {})


@confined_here
async def test_in_layer_0_alone_a_local_server_is_refused_and_the_result_says_a_widening_is_needed(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    port = free_port()
    fake.script(
        call(
            "call_1",
            "run_command",
            {"command": f"{sys.executable} -u -m http.server {port}", "background": True},
        ),
        call("call_2", "process_read", {"process_id": "p1", "timeout": 30}),
        text_reply("no server"),
    )
    d = await start_daemon(
        state, fake, root=work, init_options=WORKSPACE_WRITE, env={"DSH_SANDBOX_LAYERS": "landlock-only"}
    )
    try:
        sid = await d.new_session(cwd=str(work))
        await run_turn(d, sid, 1)
        started, read = (text(r["message"]) for r in results(d, sid))
        assert "a local server needs the person to widen the sandbox" in started
        assert "PermissionError" in started + read and "exited (exit code 1)" in read
        (exited,) = d.of(sid, "process/exited")
        assert exited["data"]["exitCode"] == 1 and "stoppedBy" not in exited["data"]
    finally:
        await stop_daemon(d)


async def start_sleeper(d: Daemon, fake: FakeDeepSeek, work: Path, marker: str) -> tuple[str, int]:
    fake.script(
        call("call_1", "run_command", {"command": sleeper(marker), "background": True}), text_reply("ok")
    )
    sid = await d.new_session(cwd=str(work))
    await run_turn(d, sid, 1)
    assert "started" in text(results(d, sid)[0]["message"])
    pid = await started_pid(d, sid)
    assert alive(pid) and with_marker(marker)
    return sid, pid


async def test_processes_live_across_turns_and_die_when_the_session_closes(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    marker = new_marker()
    d = await start_daemon(state, fake, root=work, init_options=UNCONFINED)
    try:
        sid, pid = await start_sleeper(d, fake, work, marker)
        fake.script(text_reply("still there"))
        await run_turn(d, sid, 2)
        assert alive(pid) and with_marker(marker)  # kept across turns
        listed = (await d.request("dsh/process/list", {"sessionId": sid}))["processes"]
        assert [(p["processId"], p["running"]) for p in listed] == [("p1", True)]
        await d.request("dsh/session/detach", {"sessionId": sid})  # idle: released, i.e. closed here
        await gone(pid, marker)
        await d.request("dsh/session/attach", {"sessionId": sid})
        listed = (await d.request("dsh/process/list", {"sessionId": sid}))["processes"]
        assert [(p["processId"], p["running"], p.get("stoppedBy")) for p in listed] == [
            ("p1", False, "session-close")
        ]
        # The numbering goes on in the session: the next process is p2, not a second p1.
        marker2 = new_marker()
        fake.script(
            call("call_2", "run_command", {"command": sleeper(marker2), "background": True}), text_reply("ok")
        )
        await run_turn(d, sid, 3)
        assert "Started p2" in text(results(d, sid)[-1]["message"])
        # The person's stop.
        pid2 = await started_pid(d, sid, 1)
        stopped = await d.request("dsh/process/stop", {"sessionId": sid, "processId": "p2"})
        assert stopped["stopped"] is True
        await gone(pid2, marker2)
        again = await d.request("dsh/process/stop", {"sessionId": sid, "processId": "p2"})
        assert again["stopped"] is False
        with pytest.raises(Exception, match="no background process"):
            await d.request("dsh/process/stop", {"sessionId": sid, "processId": "p9"})
        exited = [e["data"] for e in d.of(sid, "process/exited") if e["data"]["processId"] == "p2"]
        assert [e["stoppedBy"] for e in exited] == ["person"]
    finally:
        await stop_daemon(d)


@pytest.mark.parametrize(
    "init", [UNCONFINED, pytest.param(WORKSPACE_WRITE, marks=confined_here)], ids=["unconfined", "confined"]
)
async def test_sigterm_to_the_daemon_kills_every_background_process(
    tmp_path: Path, fake: FakeDeepSeek, init: Mapping[str, Any]
) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    marker = new_marker()
    d = await start_daemon(state, fake, root=work, init_options=init)
    server = d.client._server
    assert server is not None
    sid, pid = await start_sleeper(d, fake, work, marker)
    os.kill(server.pid, signal.SIGTERM)
    await asyncio.wait_for(server.wait(), 30)
    with contextlib.suppress(Exception):
        await d.client.stop()
    await gone(pid, marker)
    d = await start_daemon(state, fake, root=work, init_options=init)
    try:
        await d.request("dsh/session/attach", {"sessionId": sid})
        exits = [e["data"] for e in d.of(sid, "process/exited")]
        assert len(exits) == 1, exits
        assert (
            exits[0]["stoppedBy"] == "shutdown"
        )  # written by the daemon that stopped, before its store closed
        output = await d.request("dsh/process/output", {"sessionId": sid, "processId": "p1"})
        assert output["text"] == "started\n" and output["running"] is False  # the file outlives the daemon
    finally:
        await stop_daemon(d)


async def test_sigkill_to_the_daemon_the_next_driver_records_the_process_ended(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    marker = new_marker()
    d = await start_daemon(state, fake, root=work, init_options=UNCONFINED)
    server = d.client._server
    assert server is not None
    sid, pid = await start_sleeper(d, fake, work, marker)
    os.kill(server.pid, signal.SIGKILL)
    await asyncio.wait_for(server.wait(), 30)
    with contextlib.suppress(Exception):
        await d.client.stop()
    await gone(pid, marker)  # the sandbox's fork server takes its trees down with the daemon
    d = await start_daemon(state, fake, root=work, init_options=UNCONFINED)
    try:
        # Before anyone drives it again: its log never says p1 ended, but its daemon is dead.
        (listed,) = (await d.request("dsh/process/list", {"sessionId": sid}))["processes"]
        assert listed["running"] is False and "stoppedBy" not in listed
        output = await d.request("dsh/process/output", {"sessionId": sid, "processId": "p1"})
        assert output == {"processId": "p1", "text": "started\n", "truncated": False, "running": False}
        await d.request("dsh/session/attach", {"sessionId": sid})
        (exited,) = [e["data"] for e in d.of(sid, "process/exited")]
        assert exited == {"processId": "p1", "stoppedBy": "daemon-stopped"}
    finally:
        await stop_daemon(d)


async def test_a_cancel_that_stops_processes_kills_them_and_one_that_does_not_keeps_them(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    work.mkdir()
    marker = new_marker()
    d = await start_daemon(state, fake, root=work, init_options=UNCONFINED)
    try:
        sid, pid = await start_sleeper(d, fake, work, marker)
        waiting = call(
            "call_2", "process_read", {"process_id": "p1", "wait_for": "never printed", "timeout": 300}
        )
        # A plain cancel: the turn ends, the process runs on.
        fake.script(waiting)
        await prompt(d, sid)
        await d.wait_event(sid, "tool/call", 2)
        await d.request("dsh/cancel", {"sessionId": sid})
        await d.wait_idle_turn(sid, 2)
        assert "cancelled while waiting; the process keeps running" in text(results(d, sid)[-1]["message"])
        assert alive(pid)
        # A cancel that stops processes: by its reply, they are gone.
        fake.script(call("call_3", "process_read", {"process_id": "p1", "wait_for": "never", "timeout": 300}))
        await prompt(d, sid)
        await d.wait_event(sid, "tool/call", 3)
        await d.request("dsh/cancel", {"sessionId": sid, "stopProcesses": True})
        assert not alive(pid)  # stopped by the time the cancel answers
        await gone(pid, marker)
        reasons = await d.wait_idle_turn(sid, 3)
        assert reasons[-1]["kind"] == "aborted"
        (exited,) = [e["data"] for e in d.of(sid, "process/exited")]
        assert exited["stoppedBy"] == "cancel"
    finally:
        await stop_daemon(d)
