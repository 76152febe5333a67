"""initializationOptions are parsed once, at initialize, into typed values; session creation is all or
nothing (issue 8, item 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pygls.lsp.server import LanguageServer

from dsh_daemon.host import errors
from dsh_daemon.host.options import parse_options
from dsh_daemon.server.frontend import LspFrontEnd
from dsh_daemon.tools.config import ToolConfig
from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.test_hostile_input import finish
from tests.server.test_robustness import spawn

BAD_OPTIONS: list[tuple[dict[str, Any], str]] = [
    ({"tools": {"permissions": {"read_file": "bogus"}}}, "tools.permissions.'read_file'"),
    ({"permissionTimeoutS": "ten"}, "permissionTimeoutS"),
    ({"permissionTimeoutS": -1}, "permissionTimeoutS"),
    ({"tools": 5}, "tools must be an object"),
    ({"tools": {"permissions": ["read_file"]}}, "tools.permissions must be an object"),
    ({"tools": {"limits": {"read_max_chars": "many"}}}, "read_max_chars"),
    ({"tools": {"limits": 3}}, "tools.limits must be an object"),
    ({"tools": {"shell": 3}}, "tools.shell"),
    ({"tools": {"ripgrep": 1}}, "tools.ripgrep"),
    ({"tools": {"colour": "red"}}, "unknown tools settings"),
    ({"model": 7}, "model"),
]


async def test_bad_initialization_options_are_refused_in_the_initialize_reply(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    pipe = await spawn(tmp_path / "state", fake, keep_stderr=True)
    for index, (options, named) in enumerate(BAD_OPTIONS):
        reply = await pipe.call(index, "initialize", {"capabilities": {}, "initializationOptions": options})
        assert reply["error"]["code"] == -32602, (options, reply)
        assert named in reply["error"]["message"], (named, reply["error"]["message"])
        # still not initialized: nothing half-configured can be used
        early = await pipe.call(f"early-{index}", "dsh/session/new", {})
        assert early["error"]["code"] == -32002
    good = await pipe.call(
        "good", "initialize", {"capabilities": {}, "initializationOptions": {"permissionTimeoutS": 5}}
    )
    assert "result" in good
    pipe.frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    assert "sessionId" in (await pipe.call("new", "dsh/session/new", {}))["result"]
    assert b"Traceback" not in await finish(pipe)


def test_options_are_parsed_into_frozen_typed_values(tmp_path: Path) -> None:
    parsed = parse_options(
        tmp_path,
        {},
        {},
        what="initializationOptions",
        raw={"permissionTimeoutS": 7, "model": "m", "tools": {"permissions": {"run_command": "deny"}, "ripgrep": False,
                                                            "limits": {"read_max_chars": 100}}},
    )  # fmt: skip
    assert parsed.permission_timeout_s == 7.0 and parsed.provider.model == "m"
    assert (
        parsed.tools.permissions["run_command"] == "deny" and parsed.tools.permissions["read_file"] == "allow"
    )
    assert parsed.tools.limits.read_max_chars == 100 and parsed.tools.ripgrep is False
    with pytest.raises(AttributeError):
        parsed.permission_timeout_s = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        parsed.tools.permissions["read_file"] = "deny"  # type: ignore[index]
    assert parse_options(tmp_path, {}, {}, None, what="initializationOptions").tools == ToolConfig()


async def test_session_creation_is_all_or_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    work = tmp_path / "work"
    work.mkdir()
    options = parse_options(state, {}, {}, {"thinking": False}, what="initializationOptions")
    front_end = LspFrontEnd(LanguageServer("t", "0"), state, options, [str(work)], None)
    host = front_end.host
    try:

        def broken(*args: Any) -> Any:
            raise RuntimeError("the agent could not be built")

        host.manager._build = broken  # type: ignore[method-assign]
        with pytest.raises(RuntimeError):
            host.create(str(work), title="t")
        assert host.manager.list_sessions() == [] and host.sessions == {}
        assert host.manager.store._db.execute("SELECT COUNT(*) FROM leases").fetchone() == (0,)
        del host.manager._build  # the real one again
        sid = host.create(str(work), title="t").session_id
        assert [info.session_id for info in host.manager.list_sessions()] == [sid]
    finally:
        await front_end.close()


def test_echoed_values_are_cut() -> None:
    error = errors.unknown_session("x" * 100_000)
    assert len(error.message) < 300 and len(error.data["sessionId"]) < 300
