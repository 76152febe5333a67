"""Start-up a person does not wait for (issue 20): what each mode has imported when it answers
`initialize`, and that the commands which need no server import none.

Each check runs in a fresh interpreter and reads `sys.modules` at the moment the daemon writes its first
byte to stdout (the `initialize` reply): a stdout that records the modules on its first write is passed
to the mode's own `serve`. No test here measures a time (bench/server_bench.py does).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

# What a session needs and `initialize` must not wait for: the agent, the tools, the provider, MCP,
# the store, and the libraries behind them.
HEAVY_LIBRARIES = ("httpx", "httpcore", "mcp", "anyio", "click", "rich", "pygments", "sqlite3")
HEAVY_PACKAGES = ("agent", "tools", "llm", "mcp", "session")
# Their configuration is parsed (and a bad value refused) in the `initialize` reply, so these modules,
# light on purpose, are the only ones of those packages loaded by then.
CONFIG_MODULES = frozenset(
    {
        "dsh_daemon.agent",
        "dsh_daemon.agent.system_prompt",  # PromptConfig
        "dsh_daemon.agent.instructions",  # its default cap
        "dsh_daemon.agent.turnbudget",  # agent.budget
        "dsh_daemon.tools",
        "dsh_daemon.tools.config",
        "dsh_daemon.tools.limits",
        "dsh_daemon.llm",
        "dsh_daemon.llm.config",
        "dsh_daemon.mcp",
        "dsh_daemon.mcp.config",
    }
)
LSP_LIBRARIES = ("pygls", "lsprotocol", "cattrs", "attr", "attrs")

HARNESS = textwrap.dedent(
    """
    import asyncio, io, json, os, sys, threading
    from pathlib import Path

    mode, state, requests = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    frame = b""
    for request in requests:
        body = json.dumps(request).encode()
        frame += b"Content-Length: %d\\r\\n\\r\\n" % len(body) + body if mode == "lsp" else body + b"\\n"
    if mode == "lsp":
        from dsh_daemon.server.main import serve, Settings
    else:
        from dsh_daemon.acp.main import serve, Settings

    class FirstWrite(io.RawIOBase):
        # The daemon's stdout: remembers what was imported when the first reply was written.
        modules = None
        data = b""

        def writable(self):
            return True

        def write(self, b):
            if self.modules is None:
                self.modules = sorted(k for k, v in sys.modules.items() if v is not None)
            self.data += bytes(b)
            return len(b)

    r, w = os.pipe()
    os.write(w, frame)
    os.close(w)  # then end of input: the daemon shuts down
    out = FirstWrite()
    asyncio.run(serve(Settings(state_dir=Path(state), env={}), os.fdopen(r, "rb"), out))
    for thread in threading.enumerate():
        if thread.name == "dsh-preload":
            thread.join(100)
    after = sorted(k for k, v in sys.modules.items() if v is not None)
    print(json.dumps({"modules": out.modules, "after": after, "output": out.data.decode()}))
    """
)


def serve_briefly(mode: str, state: Path, *requests: dict[str, Any]) -> dict[str, Any]:
    """`mode` served `requests`, then the end of its input: `modules` loaded when it wrote its first
    reply, `after` those loaded once it ended (and its preloading finished), `reply` the first reply."""
    result = subprocess.run(
        [sys.executable, "-c", HARNESS, mode, str(state), json.dumps(requests)],
        capture_output=True, text=True, cwd=ROOT, check=True, timeout=120,
    )  # fmt: skip
    seen: dict[str, Any] = json.loads(result.stdout)
    output: str = seen["output"]
    if mode == "lsp":
        body = output[output.index("\r\n\r\n") + 4 :]
        seen["reply"] = json.JSONDecoder().raw_decode(body)[0]
    else:
        seen["reply"] = json.loads(output.splitlines()[0])
    return seen


def first_reply(mode: str, request: dict[str, Any], state: Path) -> tuple[list[str], dict[str, Any]]:
    """The modules loaded when `mode` wrote its first reply, and that reply."""
    seen = serve_briefly(mode, state, request)
    return seen["modules"], seen["reply"]


def too_early(modules: list[str]) -> list[str]:
    """The modules a session needs that were loaded anyway."""
    heavy = []
    for name in modules:
        top, _, rest = name.partition(".")
        if top in HEAVY_LIBRARIES:
            heavy.append(name)
        elif top == "dsh_daemon" and rest.split(".")[0] in HEAVY_PACKAGES and name not in CONFIG_MODULES:
            heavy.append(name)
        elif name.startswith(
            ("dsh_daemon.host.sessions", "dsh_daemon.host.manager", "dsh_daemon.host.wiring")
        ):
            heavy.append(name)
        elif name.endswith(".frontend") and name.startswith("dsh_daemon."):
            heavy.append(name)
    return heavy


LSP_INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}


def test_lsp_mode_answers_initialize_before_anything_a_session_needs_is_imported(tmp_path: Path) -> None:
    modules, reply = first_reply("lsp", LSP_INITIALIZE, tmp_path)
    assert reply["id"] == 1 and reply["result"]["capabilities"]["experimental"]["dsh"]["sessions"] is True
    assert too_early(modules) == []
    assert "dsh_daemon.model.methods" not in modules  # the declarations wait for the first dsh/* request


def test_lsp_mode_still_refuses_a_bad_option_in_the_initialize_reply(tmp_path: Path) -> None:
    request = {**LSP_INITIALIZE, "params": {"capabilities": {}, "initializationOptions": {"tools": {"permissions": {"grep": "sometimes"}}}}}  # fmt: skip
    modules, reply = first_reply("lsp", request, tmp_path)
    assert reply["error"]["code"] == -32602 and "grep" in reply["error"]["message"], reply
    assert too_early(modules) == []


def test_lsp_mode_loads_the_session_machinery_after_initialized(tmp_path: Path) -> None:
    initialized = {"jsonrpc": "2.0", "method": "initialized", "params": {}}
    seen = serve_briefly("lsp", tmp_path, LSP_INITIALIZE, initialized)
    assert too_early(seen["modules"]) == []
    assert {"dsh_daemon.server.frontend", "dsh_daemon.host.sessions", "dsh_daemon.llm.http1"} <= set(
        seen["after"]
    )
    assert "httpx" not in seen["after"]  # only a proxy needs it (issue 40: about 2.5 MiB)


ACP_INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}


def test_acp_mode_answers_initialize_before_any_lsp_library_or_session_module(tmp_path: Path) -> None:
    seen = serve_briefly("acp", tmp_path, ACP_INITIALIZE)
    assert seen["reply"]["id"] == 1 and seen["reply"]["result"]["agentInfo"]["name"] == "dsh-daemon"
    assert too_early(seen["modules"]) == []
    assert [m for m in seen["modules"] if m.split(".")[0] in LSP_LIBRARIES] == []
    # once the reply is out, the session machinery loads in the background
    assert {"dsh_daemon.acp.frontend", "dsh_daemon.host.sessions", "dsh_daemon.llm.http1"} <= set(
        seen["after"]
    )
    assert "httpx" not in seen["after"]


def test_acp_mode_refuses_a_bad_option_in_the_initialize_reply_and_serves_sessions_after(
    tmp_path: Path,
) -> None:
    bad = {**ACP_INITIALIZE, "params": {"protocolVersion": 1, "_meta": {"dsh": {"permissionTimeoutS": -1}}}}
    modules, reply = first_reply("acp", bad, tmp_path)
    assert reply["error"]["code"] == -32602 and "permissionTimeoutS" in reply["error"]["message"], reply
    assert too_early(modules) == []
    new = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "session/new",
        "params": {"cwd": str(tmp_path), "mcpServers": []},
    }
    seen = serve_briefly("acp", tmp_path / "state", ACP_INITIALIZE, new)
    second = json.loads(seen["output"].splitlines()[1])
    assert second["id"] == 2 and second["result"]["sessionId"], second


def test_the_harness_sees_a_session_import_everything(tmp_path: Path) -> None:
    """The check can fail: after a session is made, the modules it needs are loaded."""
    code = (
        "import sys; from dsh_daemon.server.frontend import LspFrontEnd; "
        "import dsh_daemon.llm.deepseek; print(' '.join(sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.split()
    early = too_early(loaded)
    assert (
        "dsh_daemon.llm.http1" in early
        and "dsh_daemon.agent.loop" in early
        and "dsh_daemon.tools.factory" in early
    )
    assert "httpx" not in loaded  # the provider's own client; httpx only behind a proxy
    code = "import sys; import dsh_daemon.llm.httpx_stream; print(' '.join(sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.split()
    assert "httpx" in loaded and "click" not in loaded and "rich" not in loaded  # without its command line


def _cli_modules(*argv: str, state: Path) -> tuple[list[str], str]:
    code = textwrap.dedent(
        f"""
        import contextlib, io, sys
        from dsh_daemon import cli
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            cli.main({list(argv)!r} + ["--state-dir", {str(state)!r}])
        print(out.getvalue(), file=sys.stderr)
        print(" ".join(sys.modules))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    return result.stdout.split(), result.stderr


def test_version_and_sessions_import_no_server(tmp_path: Path) -> None:
    modules, printed = _cli_modules("--version", state=tmp_path)
    assert "dsh-daemon 0.1.0" in printed
    assert [m for m in modules if m.startswith("dsh_daemon")] == ["dsh_daemon", "dsh_daemon.cli"]
    modules, printed = _cli_modules("sessions", state=tmp_path)
    assert "no sessions yet" in printed
    server = [m for m in modules if m.startswith(("dsh_daemon.server", "dsh_daemon.acp", "dsh_daemon.host"))]
    assert server == [] and not [m for m in modules if m.split(".")[0] in (*LSP_LIBRARIES, "httpx")]


def test_sessions_as_typed_needs_no_argument_parser(tmp_path: Path) -> None:
    """`dsh-daemon sessions` (the store from $DSH_HOME) lists without argparse (issue 20.5)."""
    code = textwrap.dedent(
        """
        import sys
        from dsh_daemon import cli
        code = cli.main(["sessions"])
        sys.stdout.flush()
        print(" ".join(sys.modules), file=sys.stderr)
        sys.exit(code)
        """
    )
    env = {**_clean_env(), "DSH_HOME": str(tmp_path)}
    from dsh_daemon.session.store import SessionStore

    store = SessionStore(tmp_path)
    store.create_session("s-1", title="first", cwd=str(tmp_path))
    store.close()
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, check=True
    )
    assert result.stdout.startswith("s-1  ") and "first" in result.stdout
    modules = result.stderr.split()
    assert "argparse" not in modules and "shutil" not in modules
    # the store and the values it stands on load without `typing` and `threading` (8 + 2 ms here)
    assert "typing" not in modules and "threading" not in modules


def test_wire_error_knows_every_module_it_takes_error_classes_from() -> None:
    """`wire_error` skips the layers' error classes while none of their modules is loaded: that list
    must name every module the function imports them from."""
    import ast

    from dsh_daemon.host import errors

    tree = ast.parse((ROOT / "dsh_daemon" / "host" / "errors.py").read_text())
    function = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "wire_error")
    imported = {n.module for n in ast.walk(function) if isinstance(n, ast.ImportFrom)}
    assert imported - {"dsh_daemon.model.errors"} == set(errors._FAMILY_MODULES)


# `dsh-daemon` as an editor starts it, through the command line, with a spy on the protocol stream:
# what the process looked like when it wrote its first reply, and when it ended.
CLI_HARNESS = textwrap.dedent(
    """
    import gc, json, os, sys
    from dsh_daemon.host import stdio

    protect = stdio.protect_stdout
    seen = {}

    class FirstWrite:
        def __init__(self, stream):
            self.stream = stream

        def write(self, data):
            if not seen:
                seen["collecting"] = gc.isenabled()
                seen["modules"] = sorted(k for k, v in sys.modules.items() if v is not None)
            # per write: whether the collector was on, and whether a session's id left in it
            seen.setdefault("writes", []).append([gc.isenabled(), b"sessionId" in data])
            return self.stream.write(data)

        def flush(self):
            self.stream.flush()

        def close(self):
            self.stream.close()

    stdio.protect_stdout = lambda: FirstWrite(protect())
    from dsh_daemon.cli import main

    code = main(sys.argv[1:])
    seen.update(code=code, collecting_at_exit=gc.isenabled(), frozen=gc.get_freeze_count())
    heap = sys.modules.get("dsh_daemon.host.heap")
    seen["keeping_long_lived"] = heap is not None and heap.keeping_long_lived_state()
    os.write(2, b"\\nSEEN " + json.dumps(seen).encode() + b"\\n")
    """
)


def serve_through_the_command_line(argv: list[str], state: Path, *messages: dict[str, Any]) -> dict[str, Any]:
    """`dsh-daemon argv…` served `messages` over real pipes, then the end of its input."""
    frames = b""
    for message in messages:
        body = json.dumps(message).encode()
        frames += b"Content-Length: %d\r\n\r\n" % len(body) + body
    result = subprocess.run(
        [sys.executable, "-c", CLI_HARNESS, *argv], input=frames, capture_output=True, cwd=ROOT,
        env={**_clean_env(), "DSH_HOME": str(state)}, check=True, timeout=120,
    )  # fmt: skip
    line = next(x for x in result.stderr.decode().splitlines() if x.startswith("SEEN "))
    seen: dict[str, Any] = json.loads(line.removeprefix("SEEN "))
    seen["stdout"] = result.stdout
    return seen


def _clean_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("DSH_", "DEEPSEEK_"))}


LIST = {"jsonrpc": "2.0", "id": 2, "method": "dsh/session/list", "params": {}}
SHUTDOWN = {"jsonrpc": "2.0", "id": 3, "method": "shutdown"}
EXIT = {"jsonrpc": "2.0", "method": "exit"}


def test_the_collector_is_paused_until_the_initialize_reply_and_collects_after(tmp_path: Path) -> None:
    """host/startup_gc.py: no collection pass while the start builds its objects, the collector on
    again (the start's objects frozen) once the first frame is answered."""
    initialized = {"jsonrpc": "2.0", "method": "initialized", "params": {}}
    seen = serve_through_the_command_line(
        ["--stdio"], tmp_path, LSP_INITIALIZE, initialized, LIST, SHUTDOWN, EXIT
    )
    assert b'"sessions": []' in seen["stdout"] and seen["code"] == 0
    assert seen["collecting"] is False
    assert seen["collecting_at_exit"] is True and seen["frozen"] > 10_000
    assert seen["keeping_long_lived"] is True  # host/heap.py: on in the daemon itself


def test_acp_keeps_a_sessions_long_lived_state_out_of_the_collectors_walks(tmp_path: Path) -> None:
    """host/heap.py is process-wide: the daemon's front ends turn it on, ACP's too."""
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    result = subprocess.run(
        [sys.executable, "-c", CLI_HARNESS, "acp"], input=json.dumps(initialize).encode() + b"\n",
        capture_output=True, cwd=ROOT, env={**_clean_env(), "DSH_HOME": str(tmp_path)}, check=True,
        timeout=120,
    )  # fmt: skip
    assert b'"protocolVersion"' in result.stdout
    line = next(x for x in result.stderr.decode().splitlines() if x.startswith("SEEN "))
    assert json.loads(line.removeprefix("SEEN "))["keeping_long_lived"] is True


def test_the_collection_pass_waits_until_the_first_session_is_answered(tmp_path: Path) -> None:
    """An editor sends `initialized` and its first `dsh/session/new` the moment `initialize` is
    answered: the start's collection pass (100-250 ms) must not run in between, where that request
    waited for it. It runs once that reply has left (and the collector is on at the end)."""
    errors = tmp_path / "stderr"
    with errors.open("wb") as stderr_file:  # a file: a pipe nobody reads could fill up
        proc = subprocess.Popen(
            [sys.executable, "-c", CLI_HARNESS, "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=stderr_file, cwd=ROOT, env={**_clean_env(), "DSH_HOME": str(tmp_path)},
        )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        _write(proc, LSP_INITIALIZE)
        assert _read_until(proc, 1)["result"]["capabilities"]
        # As an editor does: only once the reply has come (the pass used to run in this moment).
        new = {"jsonrpc": "2.0", "id": 2, "method": "dsh/session/new", "params": {"cwd": str(tmp_path)}}
        _write(proc, {"jsonrpc": "2.0", "method": "initialized", "params": {}}, new)
        assert _read_until(proc, 2)["result"]["sessionId"]
        _write(proc, SHUTDOWN, EXIT)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    line = next(x for x in errors.read_text().splitlines() if x.startswith("SEEN "))
    seen = json.loads(line.removeprefix("SEEN "))
    assert seen["code"] == 0
    with_session = [enabled for enabled, has_session in seen["writes"] if has_session]
    assert with_session == [False]  # the reply left before the pass
    assert seen["collecting_at_exit"] is True and seen["frozen"] > 10_000


def _write(proc: subprocess.Popen[bytes], *messages: dict[str, Any]) -> None:
    assert proc.stdin is not None
    for message in messages:
        body = json.dumps(message).encode()
        proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    proc.stdin.flush()


def _read_until(proc: subprocess.Popen[bytes], msg_id: int) -> dict[str, Any]:
    """The daemon's frames up to the answer to request `msg_id` (that answer)."""
    assert proc.stdout is not None
    while True:
        length = None
        while True:
            line = proc.stdout.readline()
            assert line, "the daemon ended"
            if line == b"\r\n":
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        assert length is not None
        message: dict[str, Any] = json.loads(proc.stdout.read(length))
        if message.get("id") == msg_id and "method" not in message:
            return message


def test_a_first_frame_that_is_no_initialize_resumes_the_collector_all_the_same(tmp_path: Path) -> None:
    seen = serve_through_the_command_line([], tmp_path, LIST)
    assert b"-32002" in seen["stdout"]  # refused: not initialized
    assert seen["collecting"] is False and seen["collecting_at_exit"] is True


def test_serving_as_editors_start_it_needs_no_argument_parser(tmp_path: Path) -> None:
    """`dsh-daemon` and `dsh-daemon --stdio` (what language clients run) skip argparse."""
    seen = serve_through_the_command_line(["--stdio"], tmp_path, LSP_INITIALIZE)
    assert b'"experimental"' in seen["stdout"]
    # nor the wire's codec (the read loop checks URIs with model/uris.py) nor datetime (the prompt's date)
    unused = {"argparse", "dsh_daemon.model.codec", "datetime"}
    assert unused & set(seen["modules"]) == set()


def test_the_plain_serve_command_lines_mean_what_the_parser_makes_of_them(
    tmp_path: Path, monkeypatch: Any
) -> None:
    from dsh_daemon import cli

    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    monkeypatch.setenv("DSH_LOG_LEVEL", "INFO")
    served: list[tuple[Any, ...]] = []
    monkeypatch.setattr(cli, "_serve", lambda *args: served.append(args) or 0)
    for argv in cli.PLAIN_SERVE:
        served.clear()
        cli.main(argv)
        args = cli.build_parser().parse_args(argv)
        parsed = (cli._state_dir(args.state_dir), cli.provider_flags(args), args.log_level, args.log_file)
        assert served == [parsed], argv


def _cache_file(state: Path) -> Path:
    return state / "cache" / f"generated-code.{sys.implementation.cache_tag}.marshal"


def test_a_start_from_the_generated_code_cache_answers_as_a_cold_one(tmp_path: Path) -> None:
    """server/codecache.py: the first start writes the code attrs and cattrs generated; the next one
    takes it from there (nothing worth writing again) and says byte for byte what the first said."""
    initialized = {"jsonrpc": "2.0", "method": "initialized", "params": {}}
    conversation = (LSP_INITIALIZE, initialized, LIST, SHUTDOWN, EXIT)
    cold = serve_through_the_command_line([], tmp_path, *conversation)
    cache = _cache_file(tmp_path)
    written = cache.read_bytes()
    assert len(written) > 100_000
    warm = serve_through_the_command_line([], tmp_path, *conversation)
    assert warm["stdout"] == cold["stdout"] and b'"experimental"' in warm["stdout"]
    assert cache.read_bytes() == written  # served from the file: not written again


def test_every_cached_code_object_is_what_compile_makes_of_its_key(tmp_path: Path) -> None:
    import marshal

    serve_through_the_command_line([], tmp_path, LSP_INITIALIZE)
    cached = marshal.loads(_cache_file(tmp_path).read_bytes())
    assert len(cached) > 500  # lsprotocol's classes' methods, cattrs' hooks
    for (source, filename, mode, flags), code in cached.items():
        assert compile(source, filename, mode, flags, True) == code, filename


def test_the_cache_compiles_as_the_library_itself_would(tmp_path: Path) -> None:
    """The cached `compile` passes the future flags the library's own call inherits (attrs and cattrs
    are `from __future__ import annotations` modules): the methods are the same code either way."""
    import attr

    from dsh_daemon.server.codecache import GeneratedCode

    def build() -> type:
        @attr.define
        class Point:
            x: int
            y: list[int] = attr.Factory(list)

        return Point

    plain = build()
    cache = GeneratedCode.install(tmp_path)
    try:
        cached = build()
    finally:
        cache.uninstall()
    assert cache.missed > 0

    def shape(method: Any) -> tuple[Any, ...]:
        code = method.__code__
        return code.co_code, code.co_flags, code.co_consts

    for name in ("__init__", "__eq__", "__repr__"):
        assert shape(getattr(cached, name)) == shape(getattr(plain, name)), name


def test_an_unreadable_cache_is_rebuilt_and_changes_no_answer(tmp_path: Path) -> None:
    cache = _cache_file(tmp_path)
    cache.parent.mkdir(parents=True)
    cache.write_bytes(b"\x00not marshal at all")
    seen = serve_through_the_command_line([], tmp_path, LSP_INITIALIZE)
    assert b'"experimental"' in seen["stdout"]
    assert len(cache.read_bytes()) > 100_000


# ---- initialize answered before pygls (issue 40.2: server/early_init.py) --------------------------------


def test_lsp_mode_answers_initialize_before_pygls_is_imported(tmp_path: Path) -> None:
    modules, reply = first_reply("lsp", LSP_INITIALIZE, tmp_path)
    assert reply["result"]["serverInfo"]["name"] == "dsh-daemon"
    assert [name for name in modules if name.partition(".")[0] in LSP_LIBRARIES] == []


def frames_of(data: bytes) -> list[dict[str, Any]]:
    """Every JSON-RPC frame in a stdout capture, in order."""
    out = []
    while data:
        header, _, rest = data.partition(b"\r\n\r\n")
        length = int(header.split(b"\r\n")[0].split(b":")[1])
        out.append(json.loads(rest[:length]))
        data = rest[length:]
    return out


def spawn_lsp(state: Path, prefix: bytes, *messages: dict[str, Any]) -> tuple[bytes, str]:
    """`dsh-daemon --log-level INFO` over real pipes: `prefix` then `messages` framed, then the end of
    its input; its stdout and its log."""
    frames = prefix
    for message in messages:
        body = json.dumps(message).encode()
        frames += b"Content-Length: %d\r\n\r\n" % len(body) + body
    result = subprocess.run(
        [sys.executable, "-m", "dsh_daemon", "--log-level", "INFO"], input=frames, capture_output=True,
        cwd=ROOT, env={**_clean_env(), "DSH_HOME": str(state)}, check=True, timeout=120,
    )  # fmt: skip
    return result.stdout, result.stderr.decode()


EARLY = "answered before the LSP machinery was loaded"
CLIENT_CAPABILITIES = [
    {},
    {"general": {"positionEncodings": ["utf-32", "utf-8"]}},
    {"general": {"positionEncodings": ["utf-99"]}, "notebookDocument": {"synchronization": {}}},
    {"workspace": {"fileOperations": {"didCreate": True}}, "textDocument": {"synchronization": {"willSave": True}}},
    {"textDocument": {"synchronization": {"willSave": False, "willSaveWaitUntil": True}}},
]  # fmt: skip


@pytest.mark.parametrize("capabilities", CLIENT_CAPABILITIES)
def test_the_early_initialize_reply_is_the_one_pygls_computes(tmp_path: Path, capabilities: Any) -> None:
    """The same `initialize`, answered early and (behind a stray blank line, which only the full read
    loop takes) by pygls: the same bytes."""
    request = {
        "jsonrpc": "2.0", "id": 7, "method": "initialize",
        "params": {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": capabilities,
                   "clientInfo": {"name": "test"}, "trace": "off"},
    }  # fmt: skip
    early, early_log = spawn_lsp(tmp_path / "a", b"", request)
    full, full_log = spawn_lsp(tmp_path / "b", b"\r\n", request)
    assert EARLY in early_log and EARLY not in full_log
    assert early == full
    assert "result" in frames_of(early)[0]


def test_an_initialize_the_early_path_cannot_vouch_for_gets_the_full_paths_answer(tmp_path: Path) -> None:
    """A root with a host (refused), bad options (refused): answered by the full path, as before."""
    with_host = {**LSP_INITIALIZE, "params": {"capabilities": {}, "rootUri": "file://ws/p"}}
    bad_option = {**LSP_INITIALIZE, "params": {"capabilities": {}, "initializationOptions": {"thinking": 3}}}
    for request in (with_host, bad_option):
        out, log = spawn_lsp(tmp_path, b"", request)
        assert EARLY not in log
        assert frames_of(out)[0]["error"]["code"] == -32602


def test_capabilities_pygls_cannot_read_are_ignored_and_the_editor_is_told(tmp_path: Path) -> None:
    """The early reply accepted them; pygls then drops the section it cannot structure, the editor
    gets a warning naming it, and the daemon serves on."""
    request = {
        **LSP_INITIALIZE,
        "params": {
            "capabilities": {
                "textDocument": {"hover": {"contentFormat": ["nope"]}, "synchronization": {"willSave": True}},
                "window": {},
            }
        },
    }
    initialized = {"jsonrpc": "2.0", "method": "initialized", "params": {}}
    out, log = spawn_lsp(tmp_path, b"", request, initialized, LIST)
    assert EARLY in log
    frames = frames_of(out)
    assert "result" in frames[0]
    warnings = [f["params"]["message"] for f in frames if f.get("method") == "window/showMessage"]
    assert any("textDocument" in w and "window" not in w for w in warnings), frames
    answers = {f["id"]: f for f in frames if "id" in f}
    assert answers[2]["result"]["sessions"] == []


def test_a_first_session_is_answered_before_pygls_and_wired_after(tmp_path: Path) -> None:
    """`initialized` and a plain first `dsh/session/new` right behind the `initialize` reply: the
    session is answered from the store before pygls loads, then wired (the list shows it, and pygls
    took `initialized`: the list is not refused as uninitialized)."""
    initialized = {"jsonrpc": "2.0", "method": "initialized", "params": {}}
    new = {"jsonrpc": "2.0", "id": 5, "method": "dsh/session/new", "params": {"cwd": str(tmp_path)}}
    request = {**LSP_INITIALIZE, "params": {"capabilities": {}, "rootUri": tmp_path.as_uri()}}
    out, log = spawn_lsp(tmp_path / "state", b"", request, initialized, new, LIST)
    answers = {f["id"]: f for f in frames_of(out) if "id" in f}
    session_id = answers[5]["result"]["sessionId"]
    assert f"session {session_id}: created before the session machinery" in log and log.count(EARLY) == 2
    assert [s["sessionId"] for s in answers[2]["result"]["sessions"]] == [session_id]


def test_a_first_session_outside_the_workspace_gets_the_full_paths_error(tmp_path: Path) -> None:
    initialized = {"jsonrpc": "2.0", "method": "initialized", "params": {}}
    new = {"jsonrpc": "2.0", "id": 5, "method": "dsh/session/new", "params": {"cwd": "/"}}
    request = {**LSP_INITIALIZE, "params": {"capabilities": {}, "rootUri": tmp_path.as_uri()}}
    out, log = spawn_lsp(tmp_path / "state", b"", request, initialized, new)
    answers = {f["id"]: f for f in frames_of(out) if "id" in f}
    assert log.count(EARLY) == 1  # the initialize only
    assert answers[5]["error"]["data"]["code"] == "outside_workspace"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's")
def test_trim_heap_gives_freed_heap_pages_back(tmp_path: Path) -> None:
    """The start's collection pass ends with `trim_heap` (issue 40: 4 MiB of a one-session daemon's
    RSS): freed blocks between live ones stay resident until it runs."""
    code = textwrap.dedent(
        """
        import ctypes, sys
        from dsh_daemon.host.startup_gc import trim_heap
        try:
            ctypes.CDLL(None).malloc_trim
        except AttributeError:
            print("no-glibc"); sys.exit()
        def rss():
            return int(open("/proc/self/statm").read().split()[1]) * 4096
        blocks = [bytes(3000) for _ in range(20000)]  # 60 MB from malloc (larger than pymalloc's blocks)
        keep = blocks[::40]  # live blocks spread over the heap, so it cannot simply shrink from the top
        del blocks
        before = rss()
        trim_heap()
        print(before - rss(), len(keep))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    ).stdout.split()
    if out == ["no-glibc"]:
        pytest.skip("not glibc")
    assert int(out[0]) > 20 * 2**20, out  # most of the 58 MB freed goes back
