"""Issue 8 (black-box testing as a hostile client): special files as editor context, client mistakes
answered as client mistakes, framing errors the reader recovers from, no tracebacks for any of it."""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from dsh_daemon.sandbox.level import probe_level
from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream
from tests.server.test_robustness import RawPipe, bad_frames, spawn
from tests.tools.conftest import alive, gone, pid_in


async def started(pipe: RawPipe, root: Path | None = None) -> str:
    """initialize + initialized + one session; its id."""
    init: dict[str, Any] = {"capabilities": {}, "initializationOptions": {"thinking": False}}
    if root is not None:
        init["rootUri"] = root.as_uri()
    assert "result" in await pipe.call("init", "initialize", init)
    pipe.frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    return (await pipe.call("new", "dsh/session/new", {}))["result"]["sessionId"]


async def finish(pipe: RawPipe) -> bytes:
    """shutdown + exit; everything the daemon wrote on stderr."""
    await pipe.call("bye", "shutdown")
    pipe.frame({"jsonrpc": "2.0", "method": "exit"})
    assert pipe.proc.stderr is not None
    stderr = await asyncio.wait_for(pipe.proc.stderr.read(), 30)
    assert await asyncio.wait_for(pipe.proc.wait(), 10) == 0
    return stderr


async def context_error(daemon: Daemon, params: dict[str, Any]) -> tuple[float, JsonRpcException]:
    began = time.monotonic()
    with pytest.raises(JsonRpcException) as error:
        await asyncio.wait_for(daemon.request("dsh/context/add", params), 10)
    return time.monotonic() - began, error.value


# ---- item 3: context/add on special files ------------------------------------------------------------


async def test_context_add_refuses_devices_fifos_and_files_outside_the_workspace(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    os.mkfifo(work / "pipe")
    (work / "zero").symlink_to("/dev/zero")
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the model\n")
    d = await start_daemon(tmp_path / "state", fake, root=work)
    sid = await d.new_session()
    cases = {
        "file:///dev/zero": "outside_workspace",
        "file:///dev/urandom": "outside_workspace",
        "file:///proc/self/fd/0": "outside_workspace",
        secret.as_uri(): "outside_workspace",
        (work / "zero").as_uri(): "outside_workspace",  # a symlink is judged by where it leads
        (work / "pipe").as_uri(): "invalid_params",  # inside, but not a regular file
    }
    for uri, code in cases.items():
        for kind in ("file", "selection"):
            params = {"sessionId": sid, "uri": uri, "kind": kind}
            if kind == "selection":
                params["range"] = {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}
            took, error = await context_error(d, params)
            assert (error.code, error.data["code"]) == (-32602, code), (uri, error.message)
            assert took < 5, (uri, took)
    # a synced document outside the workspace is the editor's text: allowed, and never read from disk
    d.client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            types.TextDocumentItem(
                uri=secret.as_uri(), language_id="text", version=1, text="the editor's copy\n"
            )
        )
    )
    added = await d.request("dsh/context/add", {"sessionId": sid, "uri": secret.as_uri(), "kind": "file"})
    (inserted,) = [e for e in d.events if e["type"] == "agent/inbox/inserted"]
    assert inserted["data"]["message"]["id"] == added["messageId"]
    assert "the editor's copy" in inserted["data"]["message"]["content"][0]["text"]
    await stop_daemon(d)


async def test_context_add_reads_only_regular_files_even_when_the_root_is_slash(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * (20 * 1024 * 1024))
    d = await start_daemon(tmp_path / "state", fake, root=Path("/"))
    sid = await d.new_session(cwd=str(tmp_path))
    for uri in ("file:///dev/zero", "file:///dev/urandom", "file:///proc/self/fd/0", fifo.as_uri()):
        took, error = await context_error(d, {"sessionId": sid, "uri": uri, "kind": "file"})
        assert error.data["code"] == "invalid_params" and took < 5, (uri, error.message, took)
    # a large regular file: capped, never read whole
    await d.request("dsh/context/add", {"sessionId": sid, "uri": big.as_uri(), "kind": "file"})
    (inserted,) = [e for e in d.events if e["type"] == "agent/inbox/inserted"]
    text = inserted["data"]["message"]["content"][0]["text"]
    assert "[truncated: first 200000 characters]" in text and len(text) < 210_000
    await stop_daemon(d)


# ---- item 5: client mistakes are -326xx, never -32603 ----------------------------------------------


async def test_client_mistakes_get_typed_errors_not_internal_ones(tmp_path: Path, fake: FakeDeepSeek) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.py").write_text("x = 1\n")
    pipe = await spawn(tmp_path / "state", fake, keep_stderr=True)
    sid = await started(pipe, work)
    long_cwd = await pipe.call(10, "dsh/session/new", {"cwd": "A" * 100_000})
    assert long_cwd["error"]["code"] == -32602
    assert len(json.dumps(long_cwd)) < 2000  # the 100 KB value is not echoed back
    bad_diagnostics = await pipe.call(
        11,
        "dsh/context/add",
        {"sessionId": sid, "uri": (work / "a.py").as_uri(), "kind": "diagnostics",
         "diagnostics": [{"range": 5, "message": 3}]},
    )  # fmt: skip
    assert bad_diagnostics["error"]["code"] == -32602
    nul = await pipe.call(12, "dsh/context/add", {"sessionId": sid, "uri": "file:///%00", "kind": "file"})
    assert nul["error"]["code"] == -32602
    bad_range = await pipe.call(
        13,
        "dsh/context/add",
        {"sessionId": sid, "uri": (work / "a.py").as_uri(), "kind": "selection", "range": {"start": 1}},
    )
    assert bad_range["error"]["code"] == -32602
    long_id = await pipe.call(14, "dsh/wake", {"sessionId": "x" * 200_000})
    assert long_id["error"]["data"]["code"] == "unknown_session" and len(json.dumps(long_id)) < 2000
    pipe.frame({"jsonrpc": "2.0", "id": 15, "method": "dsh/wake", "params": {"sessionId": sid}, "result": {}})
    assert (await pipe.reply(15))["error"]["code"] == -32600
    # $/cancelRequest is a notification: sent as a request it is answered (-32601), not ignored
    as_request = await pipe.call(16, "$/cancelRequest", {"id": 3})
    assert as_request["error"]["code"] == -32601
    assert "result" in await pipe.call(17, "dsh/session/list", {})
    assert not [m for m in pipe.messages if m.get("error", {}).get("code") == -32603]
    assert b"Traceback" not in await finish(pipe)


# ---- item 5: resynchronising after framing mistakes ------------------------------------------------


def good(msg_id: str) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "dsh/session/list", "params": {}}).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def wrong_length(delta: int, msg_id: str) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "dsh/session/list", "params": {}}).encode()
    return b"Content-Length: %d\r\n\r\n" % (len(body) + delta) + body


FRAMING_MISTAKES = {
    "length+1": wrong_length(1, "m1"),
    "length+10": wrong_length(10, "m2"),
    "length-1": wrong_length(-1, "m3"),
    "length-10": wrong_length(-10, "m4"),
    "cr-only header": b'Content-Length: 40\r\r{"jsonrpc":"2.0","id":"m5","method":"x"}',
    "garbage without a newline": b"\x00garbage{]]not a header",
    "missing content-length": b'Content-Type: x\r\n\r\n{"jsonrpc":"2.0","id":"m6","method":"dsh/wake"}',
    "bare body": b'{"jsonrpc":"2.0","id":"m7","method":"dsh/wake"}',
    "lf-only header and junk": b"Content-Length: zz\n\nzz",
    # issue 18 item 6
    "length 10^20": b'Content-Length: 100000000000000000000\r\n\r\n{"jsonrpc":"2.0","id":"m8","method":"x"}',
    "length over the frame cap": b"Content-Length: %d\r\n\r\n{}" % (64 * 1024 * 1024 + 1),
    "length+1000": wrong_length(1000, "m9"),
    "body not json": b"Content-Length: 60\r\n\r\nthis is no json at all",
    "body not json, short": b"Content-Length: 5\r\n\r\nxyz",
}


@pytest.mark.parametrize("mistake", sorted(FRAMING_MISTAKES))
async def test_the_next_request_after_a_framing_mistake_is_answered(
    tmp_path: Path, fake: FakeDeepSeek, mistake: str
) -> None:
    pipe = await spawn(tmp_path / "state", fake, keep_stderr=True)
    await started(pipe)
    for round_ in range(3):  # and the stream stays in sync after it
        pipe.write(FRAMING_MISTAKES[mistake] + good(f"after-{round_}"))
        answer = await pipe.reply(f"after-{round_}", timeout=10)
        assert "sessions" in answer["result"], answer
    assert b"Traceback" not in await finish(pipe)


async def test_hundreds_of_bad_frames_print_no_traceback_and_service_goes_on(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    rng = random.Random(8)
    work = tmp_path / "work"
    work.mkdir()
    pipe = await spawn(tmp_path / "state", fake, keep_stderr=True)
    sid = await started(pipe, work)
    frames = [body for body, _ in bad_frames(rng, sid, 300)]
    junk_params: list[Any] = [
        {"sessionId": sid, "uri": "file:///%00", "kind": "file"},
        {"sessionId": sid, "uri": "file:///dev/zero", "kind": "file"},
        {"sessionId": sid, "uri": "x", "kind": "diagnostics", "diagnostics": [{"range": 5, "message": 3}]},
        {"sessionId": sid, "uri": "x", "kind": "selection", "range": [1]},
        {"cwd": "\x00"},
        {"cwd": "B" * 5000},
    ]
    for i in range(100):
        method = "dsh/session/new" if "cwd" in junk_params[i % len(junk_params)] else "dsh/context/add"
        frames.append(
            json.dumps(
                {"jsonrpc": "2.0", "id": f"j{i}", "method": method, "params": junk_params[i % 6]}
            ).encode()
        )
        frames.append(
            json.dumps({"jsonrpc": "2.0", "id": f"r{i}", "method": "dsh/wake", "result": 1}).encode()
        )
        frames.append(json.dumps({"jsonrpc": "2.0", "id": f"c{i}", "method": "$/cancelRequest"}).encode())
        frames.append(
            json.dumps({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"x": i}}).encode()
        )
    for i in range(20):  # nested too deep (issue 18 item 1): answered with their own ids
        deep = b"[" * (200 + 997 * i) + b"]" * (200 + 997 * i)
        frames.append(b'{"jsonrpc":"2.0","id":"deep-%d","method":"dsh/wake","params":{"x":%s}}' % (i, deep))
    rng.shuffle(frames)
    for body in frames:
        pipe.frame(body)
    for mistake in FRAMING_MISTAKES.values():
        pipe.write(mistake)
    final = await pipe.call("final", "dsh/session/list", {}, timeout=60)
    assert len(final["result"]["sessions"]) == 1
    for i in range(20):
        assert (await pipe.reply(f"deep-{i}"))["error"]["code"] == -32600
    assert not [m for m in pipe.messages if m.get("error", {}).get("code") == -32603]
    stderr = await finish(pipe)
    assert b"Traceback" not in stderr, stderr.decode(errors="replace")[-3000:]


# ---- item 7: before initialize -----------------------------------------------------------------------


async def test_requests_before_initialize_are_refused_with_32002(tmp_path: Path, fake: FakeDeepSeek) -> None:
    pipe = await spawn(tmp_path / "state", fake, keep_stderr=True)
    early_shutdown = await pipe.call(1, "shutdown")
    assert early_shutdown["error"]["code"] == -32002
    bad_params = await pipe.call(2, "dsh/session/new", {"cwd": 5})
    assert (bad_params["error"]["code"], bad_params["error"]["data"]["code"]) == (-32002, "not_initialized")
    typed_params = await pipe.call(3, "textDocument/hover", {"position": "nowhere"})
    assert typed_params["error"]["code"] == -32002
    assert "result" in await pipe.call(4, "initialize", {"capabilities": {}})
    pipe.frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    assert "sessionId" in (await pipe.call(5, "dsh/session/new", {}))["result"]
    assert b"Traceback" not in await finish(pipe)


# ---- item 7: session cwd, and commands' processes at shutdown ----------------------------------------


async def test_a_session_cwd_outside_the_workspace_folders_is_refused(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "escape").symlink_to(tmp_path)
    d = await start_daemon(tmp_path / "state", fake, root=work)
    for cwd in (str(tmp_path), "..", "/", "escape", str(work / "escape" / "work" / ".." / "state")):
        with pytest.raises(JsonRpcException) as error:
            await d.request("dsh/session/new", {"cwd": cwd})
        assert (error.value.code, error.value.data["code"]) == (-32602, "outside_workspace"), cwd
    assert await d.new_session(cwd=str(work / "sub")) and await d.new_session(cwd="sub")
    assert len((await d.request("dsh/session/list", {}))["sessions"]) == 2
    await stop_daemon(d)
    # an editor that named no workspace folder and no root: any cwd is the session's own choice
    pipe = await spawn(tmp_path / "state2", fake, keep_stderr=True)
    assert "result" in await pipe.call(1, "initialize", {"capabilities": {}})
    created = await pipe.call(2, "dsh/session/new", {"cwd": str(tmp_path)})
    assert "sessionId" in created["result"]
    await finish(pipe)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize("mode", ["full-access", "workspace-write"])
async def test_a_commands_setsid_child_does_not_survive_the_daemon(
    tmp_path: Path, fake: FakeDeepSeek, mode: str
) -> None:
    """Confined too: in layer 0 alone (layer 1's pids would be its namespace's, not ours)."""
    if mode != "full-access" and not probe_level().confined:
        pytest.skip(f"no confinement here: {probe_level().describe()}")
    work = tmp_path / "work"
    work.mkdir()
    options = {"thinking": False, "tools": {"permissions": {"run_command": "allow"}, "sandbox": mode}}
    env = {"DSH_SANDBOX_LAYERS": "landlock-only"}
    d = await start_daemon(tmp_path / "state", fake, root=work, init_options=options, env=env)
    command = "setsid sleep 300 >/dev/null 2>&1 & echo PID=$!; nohup setsid sleep 301 >/dev/null 2>&1 & echo PID2=$!"
    fake.script(
        Reply.stream(tool_call_stream([("c1", "run_command", {"command": command})])),
        text_reply("started"),
    )
    sid = await d.new_session()
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "start a server"}})
    await d.wait_idle_turn(sid)
    (result,) = d.of(sid, "tool/result")
    text = result["data"]["message"]["content"][0]["content"][0]["text"]
    pids = [pid_in(text), int(text.split("PID2=")[1].split()[0])]
    assert all(alive(pid) for pid in pids), text  # it outlives its command …
    await stop_daemon(d)
    for pid in pids:
        assert await gone(pid), pid  # … not the daemon


async def test_ambient_state_never_reads_special_files_nor_breaks_a_step(daemon: Daemon) -> None:
    sid = await daemon.new_session()
    selection = {"start": {"line": 0, "character": 0}, "end": {"line": 3, "character": 0}}
    daemon.notify(
        "dsh/context/didChange", {"sessionId": sid, "activeUri": "file:///dev/zero", "selection": selection}
    )
    began = time.monotonic()
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "one"}})
    assert await daemon.wait_idle_turn(sid) == [{"kind": "completed"}]
    assert time.monotonic() - began < 10
    (snapshot,) = [
        e for e in daemon.of(sid, "user/message") if e["data"]["source"].get("contextKind") == "snapshot"
    ]
    assert "/dev/zero" in snapshot["data"]["content"][0]["text"]
    assert "selected text" not in snapshot["data"]["content"][0]["text"]
    # a state of the wrong shapes is dropped; the next step still enters its prompt
    daemon.notify(
        "dsh/context/didChange", {"sessionId": sid, "activeUri": 5, "visibleRange": 5, "diagnostics": [1]}
    )
    daemon.notify("dsh/context/didChange", {"sessionId": sid, "visibleRange": {"start": 1, "end": 2}})
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "two"}})
    assert await daemon.wait_idle_turn(sid, 2) == [{"kind": "completed"}, {"kind": "completed"}]
    assert daemon.fake.requests[-1].json["messages"][-1]["content"] == "two"


# ---- issue 18 item 1: deeply nested JSON -------------------------------------------------------------


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


async def test_deeply_nested_params_are_refused_with_the_requests_own_id(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    pipe = await spawn(tmp_path / "state", fake, keep_stderr=True)
    sid = await started(pipe)
    for depth in (1_000, 5_000, 100_000):
        pipe.frame(b'{"jsonrpc":"2.0","id":"d%d","method":"dsh/session/list","params":{"x":%s}}'
                   % (depth, nested(depth)))  # fmt: skip
        head = await pipe.reply(f"d{depth}")
        assert head["error"]["code"] == -32600 and "nested" in head["error"]["message"], head
        pipe.frame(
            b'{"jsonrpc":"2.0","method":"dsh/wake","params":{"x":%s},"id":%d}' % (nested(depth), depth)
        )
        assert (await pipe.reply(depth))["error"]["code"] == -32600
        pipe.frame(b'{"jsonrpc":"2.0","method":"dsh/context/didChange","params":{"x":%s}}' % nested(depth))
        pipe.frame(nested(depth))
    # nesting under the limit is an ordinary message: a content block of another type kept verbatim
    block = {"type": "x-deep", "data": json.loads(nested(100))}
    sent = await pipe.call("ok", "dsh/send", {"sessionId": sid, "message": {"content": [block]},
                                              "target": "next-turn", "wakeup": False})  # fmt: skip
    assert "messageId" in sent["result"], sent
    assert "result" in await pipe.call("list", "dsh/session/list", {})
    nulls = [m for m in pipe.messages if m.get("id") is None and "error" in m]
    assert len(nulls) == 3, nulls  # only the three frames that are no message at all
    assert not [m for m in pipe.messages if m.get("error", {}).get("code") == -32603]
    stderr = await finish(pipe)
    assert b"Traceback" not in stderr and b"Fatal Python error" not in stderr, stderr[-3000:]


# ---- issue 18 item 6: lengths that would wedge the connection ---------------------------------------


async def test_a_length_too_large_does_not_stall_the_reply(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """The client sends one request whose Content-Length is 1,000 bytes too large, then waits: the
    request is complete JSON, so it is answered without waiting for bytes that will never come."""
    pipe = await spawn(tmp_path / "state", fake, keep_stderr=True)
    await started(pipe)
    pipe.write(wrong_length(1000, "alone"))
    assert "sessions" in (await pipe.reply("alone", timeout=10))["result"]
    pipe.write(good("next"))  # and the stream is in sync after it
    assert "sessions" in (await pipe.reply("next", timeout=10))["result"]
    pipe.write(b"Content-Length: 100000000000000000000\r\n\r\n")
    pipe.write(good("after-huge"))
    assert "sessions" in (await pipe.reply("after-huge", timeout=10))["result"]
    refused = [m for m in pipe.messages if m.get("id") is None and "error" in m]
    assert [m["error"]["code"] for m in refused] == [-32700], refused
    assert "exceeds" in refused[0]["error"]["message"]
    assert b"Traceback" not in await finish(pipe)


# ---- issue 18 item 10: executeCommand, root URIs with a host ------------------------------------------


async def test_execute_command_is_a_typed_error_without_a_traceback(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    pipe = await spawn(tmp_path / "state", fake, keep_stderr=True)
    await started(pipe)
    answer = await pipe.call("cmd", "workspace/executeCommand", {"command": "x" * 500, "arguments": [1]})
    assert answer["error"]["code"] == -32602 and answer["error"]["data"]["code"] == "invalid_params", answer
    assert len(answer["error"]["message"]) < 400
    stderr = await finish(pipe)
    assert b"Traceback" not in stderr, stderr.decode(errors="replace")[-3000:]


@pytest.mark.parametrize("where", ["rootUri", "workspaceFolders", "localhost"])
async def test_a_root_uri_with_a_host_is_refused_at_initialize(
    tmp_path: Path, fake: FakeDeepSeek, where: str
) -> None:
    pipe = await spawn(tmp_path / "state", fake, keep_stderr=True)
    uri = "file://localhost/tmp/ws" if where == "localhost" else "file://ws/tmp/project"
    init: dict[str, Any] = {"capabilities": {}, "initializationOptions": {"thinking": False}}
    if where == "workspaceFolders":
        init["workspaceFolders"] = [
            {"uri": (tmp_path / "ok").as_uri(), "name": "ok"},
            {"uri": uri, "name": "x"},
        ]
    else:
        init["rootUri"] = uri
    refused = await pipe.call("init", "initialize", init)
    assert refused["error"]["code"] == -32602 and uri in refused["error"]["message"], refused
    # still uninitialized; a corrected initialize is accepted and bounds the tools as asked
    early = await pipe.call("early", "dsh/session/new", {})
    assert early["error"]["code"] == -32002
    (tmp_path / "ok").mkdir()
    fixed = {"capabilities": {}, "rootUri": (tmp_path / "ok").as_uri()}
    assert "result" in await pipe.call("init2", "initialize", fixed)
    pipe.frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    outside = await pipe.call("new", "dsh/session/new", {"cwd": str(tmp_path)})
    assert outside["error"]["data"]["code"] == "outside_workspace", outside
    assert b"Traceback" not in await finish(pipe)


# ---- issue 18 item 2, the LSP side: URIs no parser can split, numbers Python will not decode ---------


async def test_unsplittable_uris_and_huge_numbers_are_client_mistakes(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """`file://[x/a.py` (an unclosed IPv6 host) made `urlsplit` raise inside a handler: -32603 and a
    traceback. A 5,000-digit integer was answered `id: null`. Each is now the client's mistake,
    named, answered with its own id, and the connection goes on."""
    pipe = await spawn(tmp_path / "state", fake, keep_stderr=True)
    sid = await started(pipe)
    bad = "file://[x/a.py"
    added = await pipe.call("add", "dsh/context/add", {"sessionId": sid, "uri": bad, "kind": "file"})
    assert added["error"]["code"] == -32602 and "'uri'" in added["error"]["message"], added
    sent = await pipe.call("send", "dsh/followup", {"sessionId": sid, "message": {"content": "x"},
                                                    "context": [{"uri": bad, "kind": "file"}]})  # fmt: skip
    assert sent["error"]["code"] == -32602 and "context[0].uri" in sent["error"]["message"], sent
    # notifications: dropped, logged, nothing stored that a later send would trip over
    pipe.frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": bad, "languageId": "python", "version": 1, "text": "x"}}})  # fmt: skip
    pipe.frame({"jsonrpc": "2.0", "method": "dsh/context/didChange", "params": {"activeUri": bad}})
    pipe.frame(b'{"jsonrpc":"2.0","id":"big","method":"dsh/session/list","params":{"x":%s}}' % (b"9" * 5000))
    big = await pipe.reply("big")
    assert big["error"]["code"] == -32600 and "4300 digits" in big["error"]["message"], big
    assert "sessions" in (await pipe.call("list", "dsh/session/list", {}))["result"]
    assert not [m for m in pipe.messages if m.get("id") is None and "error" in m]
    assert not [m for m in pipe.messages if m.get("error", {}).get("code") == -32603]
    stderr = await finish(pipe)
    assert b"Traceback" not in stderr, stderr.decode(errors="replace")[-3000:]
