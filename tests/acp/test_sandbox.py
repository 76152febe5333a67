"""Issue 41 over ACP: the sandbox mode as a per-session config option (durable, like the model), an
escalation asked through `session/request_permission` with the exact widening shown (41.5), and a
confined command shown in the client's terminal while it runs in the session's sandbox (41.4)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import text_block

from dsh_daemon.sandbox.level import probe_level
from tests.acp.harness import acp_daemon, settle
from tests.acp.terminal_client import TerminalClient
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import tool_call_stream

confined = pytest.mark.skipif(not probe_level().confined, reason=probe_level().describe())


def run_then_done(command: str, **extra: Any) -> tuple[Reply, Reply]:
    call = ("call_run_1", "run_command", {"command": command, **extra})
    return Reply.stream(tool_call_stream([call])), Reply.stream(text_stream(["ran"]))


def tool_result(fake: FakeDeepSeek) -> str:
    """The last tool result the model got."""
    tools = [m for m in fake.requests[-1].json["messages"] if m["role"] == "tool"]
    return str(tools[-1]["content"])


def sandbox_of(options: Any) -> Any:
    return next(o for o in options if (o.id if hasattr(o, "id") else o["id"]) == "sandbox")


def configured(state: Path, mode: str) -> None:
    state.mkdir(parents=True, exist_ok=True)
    (state / "config.json").write_text(json.dumps({"tools": {"sandbox": mode}}))


@confined
async def test_the_sandbox_is_a_config_option_of_the_session_kept_across_processes(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state, project = tmp_path / "state", tmp_path / "project"
    project.mkdir()
    configured(state, "workspace-write")
    async with acp_daemon(state, fake) as d:
        created = await d.conn.new_session(cwd=str(project), mcp_servers=[])
        sid = created.session_id
        option = sandbox_of(created.config_options)
        assert option.current_value == "workspace-write"
        assert [o.value for o in option.options] == ["read-only", "workspace-write", "full-access"]
        assert "configured: workspace-write" in (option.description or "")
        changed = await settle(
            d.conn.set_config_option(config_id="sandbox", session_id=sid, value="read-only")
        )
        assert sandbox_of(changed.config_options).current_value == "read-only"
        await d.wait_for(lambda: bool(d.client.updates(sid, "config_option_update")))
        (update,) = d.client.updates(sid, "config_option_update")
        assert sandbox_of(update["configOptions"])["currentValue"] == "read-only"
        # In effect from the next command: a write in the workspace is refused, unasked.
        fake.script(*run_then_done("echo hi > made.txt"))
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
        ).stop_reason == "end_turn"
        assert not (project / "made.txt").exists() and d.client.permission_requests == []
        assert "ran confined in read-only mode" in tool_result(fake)
        # A mode not offered is refused naming the choices; the choice stays.
        with pytest.raises(Exception, match="sandbox must be one of read-only, workspace-write, full-access"):
            await settle(d.conn.set_config_option(config_id="sandbox", session_id=sid, value="yolo"))
    # The next process that loads the session shows and uses the session's choice.
    async with acp_daemon(state, fake) as d:
        loaded = await settle(d.conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[]))
        assert sandbox_of(loaded.config_options).current_value == "read-only"
        fake.script(*run_then_done("echo again > made.txt"))
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
        ).stop_reason == "end_turn"
        assert not (project / "made.txt").exists()
        # full-access chosen in the client: the command runs unconfined, after asking.
        await settle(d.conn.set_config_option(config_id="sandbox", session_id=sid, value="full-access"))
        fake.script(*run_then_done(f"echo out > {tmp_path}/outside.txt"))
        d.client.permission_answer = "allow-once"
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
        ).stop_reason == "end_turn"
        assert (tmp_path / "outside.txt").read_text() == "out\n"
        assert len(d.client.permission_requests) == 1
    # The durable choice is in the session's log, the latest one whole.
    async with acp_daemon(state, fake) as d:
        resumed = await settle(d.conn.resume_session(cwd=str(project), session_id=sid, mcp_servers=[]))
        assert sandbox_of(resumed.config_options).current_value == "full-access"


@confined
async def test_an_escalation_shows_the_reason_and_the_exact_widening(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state, project, cache = tmp_path / "state", tmp_path / "project", tmp_path / "cache"
    project.mkdir()
    cache.mkdir()
    configured(state, "workspace-write")
    escalate = {"reason": "the build keeps its cache there", "writable": [str(cache)]}
    async with acp_daemon(state, fake) as d:
        sid = await d.new_session(cwd=project)
        fake.script(*run_then_done(f"echo kept > {cache}/c.txt", escalate=escalate))
        d.client.permission_answer = "allow-once"
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
        ).stop_reason == "end_turn"
        assert (cache / "c.txt").read_text() == "kept\n"
        (request,) = d.client.permission_requests
        call = request["toolCall"]
        assert call["title"] == f"Widen the sandbox (writable: {cache}) to run: echo kept > {cache}/c.txt"
        text = call["content"][0]["content"]["text"]
        assert "Reason: the build keeps its cache there" in text and f"Writable: {cache}" in text
        assert "(workspace-write)" in text and "every later command" in text
        assert "Always (saved to config): every later session too" in text
        assert [(o["optionId"], o["kind"], o["name"]) for o in request["options"]] == [
            ("allow-once", "allow_once", "Allow once"),
            ("allow-always", "allow_always", "Allow for this session"),
            ("allow-always-persist", "allow_always", "Always (saved to config)"),
            ("reject", "reject_once", "Reject"),
        ]
        # Rejected: nothing runs.
        fake.script(*run_then_done(f"echo again > {cache}/d.txt", escalate=escalate))
        d.client.permission_answer = "reject"
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
        ).stop_reason == "end_turn"
        assert not (cache / "d.txt").exists()
        # An unconfined escalation says so, and what "for this session" covers.
        fake.script(*run_then_done("true", escalate={"reason": "needs it", "unconfined": True}))
        d.client.permission_answer = "reject"
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
        ).stop_reason == "end_turn"
        text = d.client.permission_requests[-1]["toolCall"]["content"][0]["content"]["text"]
        assert "Unconfined: no sandbox at all" in text and "this exact command unconfined" in text
        assert "saved to config" not in text  # an unconfined widening is never kept
        options = d.client.permission_requests[-1]["options"]
        assert [o["name"] for o in options] == ["Allow once", "Allow for this session", "Reject"]


def wrapper_of(client: TerminalClient) -> tuple[str, str, dict[str, str]]:
    """(the attach socket's path, the token, the env) the daemon gave the client's terminal."""
    created = client.created[-1]
    env = {e.name: e.value for e in created["env"]}
    args = created["args"]
    return args[args.index("--") - 1], env["DSH_ATTACH_TOKEN"], env


def attach_with(path: str, token: str, fds: list[int]) -> bytes:
    """What the daemon answers a wrapper that connects with `token` and hands over `fds`."""
    from dsh_daemon.sandbox.attach_client import _connect  # the wrapper's own: a long path via /proc/self/fd

    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
        sock.settimeout(10)
        _connect(sock, path)  # pytest's temp path can pass sun_path's 107 bytes (the CI's did)
        socket.send_fds(sock, [b"T" + token.encode()], fds)
        return sock.recv(4096)


def tree_alive(marker: str) -> bool:
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return True
            except OSError:
                pass
    return False


@confined
async def test_a_confined_command_runs_in_the_clients_terminal_inside_the_sandbox(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 41.4: the client's terminal runs the attach wrapper; the command runs in the session's
    sandbox on the terminal's stdio (a write outside the workspace refused, unasked), and the token
    the terminal was given cannot be used again, nor can a forged one."""
    state, project = tmp_path / "state", tmp_path / "project"
    project.mkdir()
    configured(state, "workspace-write")
    fake.script(
        *run_then_done(f"echo inside > made.txt && echo printed && echo outside > {tmp_path}/escaped.txt")
    )
    client = TerminalClient()
    try:
        async with acp_daemon(state, fake, client=client, terminal=True) as d:
            sid = await d.new_session(cwd=project)
            response = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("run")]))
            assert response.stop_reason == "end_turn"
            assert client.permission_requests == []  # confined: unasked
            (created,) = client.created
            assert created["command"] == sys.executable
            assert created["args"][:3] == ["-I", "-S", str(Path(created["args"][2]))]
            assert created["args"][2].endswith("attach_client.py") and created["cwd"] == str(project)
            path, token, env = wrapper_of(client)
            assert Path(path).is_relative_to(state / "run") and len(token) >= 40
            assert env["DEEPSEEK_API_KEY"] == "" and env["DSH_HOME"] == ""
            assert (project / "made.txt").read_text() == "inside\n"
            assert not (tmp_path / "escaped.txt").exists()
            # The terminal showed what the command printed (its stdio were the terminal's).
            terminal = client.terminals["term-1"]
            assert "printed" in terminal.output.decode() and terminal.process.returncode == 1
            updates = d.client.call_updates(sid)
            embedded = {"type": "terminal", "terminalId": "term-1"}
            # Refused by the sandbox: failed, the terminal still embedded.
            assert updates[-1]["content"][0] == embedded and updates[-1]["status"] == "failed"
            tool = tool_result(fake)
            assert "printed" in tool and "[exit code 1]" in tool
            assert "Only the person can widen the sandbox" in tool
            assert client.released == ["term-1"]
            # The token was for one command: used again, or forged, the daemon refuses it and runs nothing.
            r, w = os.pipe()
            try:
                for attempt in (token, "forged-" + token[7:], ""):
                    answer = await asyncio.to_thread(attach_with, path, attempt, [r, w, w])
                    assert answer.startswith(b"Erefused"), (attempt, answer)
                answer = await asyncio.to_thread(attach_with, path, token, [])
                assert answer.startswith(b"Erefused")
            finally:
                os.close(r)
                os.close(w)
    finally:
        await client.close()


@confined
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
async def test_the_wrapper_killed_or_interrupted_kills_the_commands_tree(
    tmp_path: Path, fake: FakeDeepSeek, how: signal.Signals
) -> None:
    state, project = tmp_path / "state", tmp_path / "project"
    project.mkdir()
    configured(state, "workspace-write")
    marker = f"36{os.getpid() % 1000:03d}.{how.value}"
    fake.script(*run_then_done(f"echo started; sleep {marker}1 & sleep {marker}2; echo never"))
    client = TerminalClient()
    try:
        async with acp_daemon(state, fake, client=client, terminal=True) as d:
            sid = await d.new_session(cwd=project)
            prompt = asyncio.ensure_future(d.conn.prompt(session_id=sid, prompt=[text_block("run")]))
            await d.wait_for(
                lambda: bool(client.terminals) and b"started" in client.terminals["term-1"].output
            )
            await d.wait_for(lambda: tree_alive(f"sleep {marker}1") and tree_alive(f"sleep {marker}2"))
            wrapper = client.terminals["term-1"].process
            os.kill(wrapper.pid, how)
            assert (await settle(prompt)).stop_reason == "end_turn"
            await d.wait_for(lambda: not tree_alive(f"sleep {marker}"))
            tool = tool_result(fake)
            assert "stopped from the editor's terminal" in tool and "never" not in tool
            if how == signal.SIGINT:  # forwarded: the wrapper exits with the command's status
                assert wrapper.returncode == 128 + signal.SIGTERM
    finally:
        await client.close()


@confined
@pytest.mark.parametrize("layers", ["auto", "landlock-only"])
async def test_a_confined_command_cannot_reach_the_attach_socket(
    tmp_path: Path, fake: FakeDeepSeek, layers: str
) -> None:
    """The attach socket lies in DSH_HOME's run dir: layer 1 masks DSH_HOME, and layer 0's seccomp
    refuses AF_UNIX sockets, so a confined command cannot even connect (let alone present a token)."""
    state, project = tmp_path / "state", tmp_path / "project"
    project.mkdir()
    configured(state, "workspace-write")
    fake.script(*run_then_done("echo first"))
    client = TerminalClient()
    env = {"DSH_SANDBOX_LAYERS": layers} if layers != "auto" else {}
    try:
        async with acp_daemon(state, fake, client=client, terminal=True, env=env) as d:
            sid = await d.new_session(cwd=project)
            assert (
                await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
            ).stop_reason == "end_turn"
            path, _token, _env = wrapper_of(client)
            probe = (
                f'{sys.executable} -c "import socket; s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); '
                f"s.connect('{path}'); print('CONNECTED')\""
            )
            fake.script(*run_then_done(probe))
            assert (
                await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
            ).stop_reason == "end_turn"
            tool = tool_result(fake)
            assert "CONNECTED" not in tool and ("PermissionError" in tool or "FileNotFoundError" in tool), (
                tool
            )
            assert len(client.created) == 2  # the probe ran attached too, confined
    finally:
        await client.close()


@confined
async def test_a_terminal_whose_wrapper_never_arrives_leaves_the_command_to_the_daemon(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """A client that drops `env` (so the wrapper has no token, and is refused): nothing ran there, so
    the daemon runs the command itself, confined, and the call shows its output as text again."""

    class DropsEnv(TerminalClient):
        async def create_terminal(
            self, session_id: str, command: str, args: Any = None, env: Any = None, **kw: Any
        ) -> Any:
            return await super().create_terminal(session_id, command, args, None, **kw)

    state, project = tmp_path / "state", tmp_path / "project"
    project.mkdir()
    configured(state, "workspace-write")
    fake.script(*run_then_done("echo ran in the daemon > made.txt; cat made.txt"))
    client = DropsEnv()
    try:
        async with acp_daemon(state, fake, client=client, terminal=True) as d:
            sid = await d.new_session(cwd=project)
            assert (
                await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
            ).stop_reason == "end_turn"
            assert len(client.created) == 1 and client.terminals["term-1"].process.returncode == 126
            assert b"refused" in client.terminals["term-1"].output
            assert (project / "made.txt").read_text() == "ran in the daemon\n"
            assert "ran in the daemon\n[exit code 0]" in tool_result(fake)
            final = d.client.call_updates(sid)[-1]
            assert final["status"] == "completed"
            assert all(c["type"] != "terminal" for c in final["content"])
    finally:
        await client.close()


@confined
async def test_a_cancel_kills_the_confined_command_shown_in_the_terminal(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state, project = tmp_path / "state", tmp_path / "project"
    project.mkdir()
    configured(state, "workspace-write")
    marker = f"37{os.getpid() % 1000:03d}.5"
    fake.script(*run_then_done(f"echo started; sleep {marker}1 & sleep {marker}2"))
    client = TerminalClient()
    try:
        async with acp_daemon(state, fake, client=client, terminal=True) as d:
            sid = await d.new_session(cwd=project)
            prompt = asyncio.ensure_future(d.conn.prompt(session_id=sid, prompt=[text_block("run")]))
            await d.wait_for(
                lambda: bool(client.terminals) and b"started" in client.terminals["term-1"].output
            )
            await d.wait_for(lambda: tree_alive(f"sleep {marker}1"))
            await d.conn.cancel(session_id=sid)
            assert (await settle(prompt)).stop_reason == "cancelled"
            await d.wait_for(lambda: not tree_alive(f"sleep {marker}"))
            wrapper = client.terminals["term-1"].process
            await d.wait_for(lambda: wrapper.returncode is not None)
            # The wrapper was told the command's end (killed by SIGTERM), or killed with its terminal.
            assert wrapper.returncode in (128 + signal.SIGTERM, 128 + signal.SIGKILL, -signal.SIGKILL)
            final = d.client.call_updates(sid)[-1]
            assert final["status"] == "failed" and final["content"][0]["type"] == "terminal"
            assert "cancelled" in final["content"][1]["content"]["text"]
    finally:
        await client.close()


@confined
async def test_no_attach_socket_leaves_the_command_to_the_daemon(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """DSH_HOME's run dir cannot be made (a file is in its place): the terminal is not used, and the
    command runs in the daemon, confined, as without client terminals."""
    state, project = tmp_path / "state", tmp_path / "project"
    project.mkdir()
    configured(state, "workspace-write")
    (state / "run").write_text("not a directory")
    fake.script(*run_then_done("echo here > made.txt; cat made.txt"))
    client = TerminalClient()
    try:
        async with acp_daemon(state, fake, client=client, terminal=True) as d:
            sid = await d.new_session(cwd=project)
            assert (
                await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
            ).stop_reason == "end_turn"
            assert client.created == []
            assert "here\n[exit code 0]" in tool_result(fake)
    finally:
        await client.close()


@confined
async def test_a_sandbox_notice_reaches_the_client_as_a_line_and_is_replayed(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 39.8: a `.git` a command made at the root while commands could write there is protected
    from then on, said in a durable `session/notice {kind: "sandbox"}`: an agent message line."""
    state, project = tmp_path / "state", tmp_path / "project"
    project.mkdir()
    configured(state, "workspace-write")
    fake.script(
        Reply.stream(tool_call_stream([("g1", "run_command", {"command": "mkdir .git"})])),
        Reply.stream(tool_call_stream([("g2", "run_command", {"command": "true"})])),
        Reply.stream(text_stream(["Done."])),
    )
    async with acp_daemon(state, fake) as d:
        sid = await d.new_session(cwd=project)
        stop = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("make a repository")]))
        assert stop.stop_reason == "end_turn"
        said = d.client.text(sid)
        line = f"_{project.resolve()}/.git"
        assert line in said and "It is protected from now on" in said, said
    fake.script()
    async with acp_daemon(state, fake) as d:
        await settle(d.conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[]))
        assert d.client.text(sid).count(line) == 1


@confined
async def test_an_mcp_server_following_the_session_runs_in_the_sessions_own_chosen_mode(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """`mcpServers.NAME.sandbox: true` follows the session: the mode the person chose for this session
    in the client (durable, here read-only), not the configured workspace-write."""
    from tests.mcp.test_sandboxed import box

    state, project = tmp_path / "state", tmp_path / "project"
    project.mkdir()
    state.mkdir()
    config = {
        "tools": {"sandbox": "workspace-write", "permissions": {"mcp__box": "allow"}},
        "mcpServers": {"box": box(True)},
    }
    (state / "config.json").write_text(json.dumps(config))
    async with acp_daemon(state, fake) as d:
        sid = (await d.conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await settle(d.conn.set_config_option(config_id="sandbox", session_id=sid, value="read-only"))
    target = {"path": str(project / "inside.txt"), "text": "x"}
    async with acp_daemon(state, fake) as d:
        await settle(d.conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[]))
        fake.script(
            Reply.stream(tool_call_stream([("call_w", "mcp__box__write", target)])),
            Reply.stream(text_stream(["done"])),
        )
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("go")]))
        ).stop_reason == "end_turn"
        assert tool_result(fake).startswith("refused"), tool_result(fake)
        assert not (project / "inside.txt").exists()
