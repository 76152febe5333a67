"""Issue 20.2 for the LSP front end: a first `dsh/session/new` (sent right after `initialized`) is
answered from the store alone, before the agent, the tools and the provider are loaded; they are
wired after the reply. Nothing a client sees may differ: the session is the one a later
`dsh/session/new` makes, a send that comes the moment the reply arrives runs its turn, and a bad
request is refused with the error it always got.

The first `dsh/session/new` of a connection without a title is always answered that way, whatever
the timing (the front end is built only after it: no other request comes first here), and the
second is answered the way every session was before, so each test takes both paths by their order
alone; the daemon's log says which path each took.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pygls.exceptions import JsonRpcException

from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply

EARLY = "created before the session machinery, wired after its reply"


async def start(state: Path, fake: FakeDeepSeek) -> Daemon:
    """A daemon that logs at INFO to `state/daemon.log` (where the early path says it was taken)."""
    args = ("serve", "--log-level", "INFO", "--log-file", str(state / "daemon.log"))
    return await start_daemon(state, fake, args=args)


def log_of(daemon: Daemon) -> str:
    return (daemon.state / "daemon.log").read_text()


def without(value: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in value.items() if k not in keys}


async def test_the_first_session_is_the_one_a_later_request_makes(tmp_path: Path, fake: FakeDeepSeek) -> None:
    d = await start(tmp_path / "state", fake)
    try:
        work = str(d.state / "work")
        first = await d.request("dsh/session/new", {"cwd": work})
        second = await d.request("dsh/session/new", {"cwd": work})
        assert first.keys() == second.keys() == {"sessionId"}
        early, later = first["sessionId"], second["sessionId"]
        assert early != later
        log = log_of(d)
        assert f"session {early}: {EARLY}" in log  # the path this test is about was taken
        assert f"session {later}: {EARLY}" not in log
        # Field by field, the two sessions are the same to a client: attached, listed, their events.
        attached = [await d.request("dsh/session/attach", {"sessionId": s}) for s in (early, later)]
        assert attached[0]["sessionId"] == early
        assert without(attached[0], "sessionId") == without(attached[1], "sessionId")
        assert attached[0]["status"] == "idle" and attached[0]["mode"] == "ask"
        assert "readOnly" not in attached[0]  # driven here
        listed = {s["sessionId"]: s for s in (await d.request("dsh/session/list", {}))["sessions"]}
        assert listed.keys() == {early, later}
        times = ("sessionId", "createdAt", "updatedAt")
        assert without(listed[early], *times) == without(listed[later], *times)
        assert listed[early]["cwd"] == work
        events = [[(e["type"], e.get("seq"), e["data"]) for e in d.of(s)] for s in (early, later)]
        assert events[0] == events[1]
        # Driven here, as a session of this process: it takes a mode, a name, and goes again.
        assert await d.request("dsh/session/setMode", {"sessionId": early, "mode": "plan"}) == {}
        assert await d.request("dsh/session/rename", {"sessionId": early, "title": "early"}) == {}
        await d.request("dsh/session/delete", {"sessionId": early})
        left = (await d.request("dsh/session/list", {}))["sessions"]
        assert [s["sessionId"] for s in left] == [later]
    finally:
        await stop_daemon(d)


async def test_a_send_that_comes_with_the_reply_runs_its_turn(tmp_path: Path, fake: FakeDeepSeek) -> None:
    fake.script(text_reply("hello there"))
    d = await start(tmp_path / "state", fake)
    try:
        session_id = (await d.request("dsh/session/new", {}))["sessionId"]
        # Sent the moment the reply arrives: the session's agent may not be built yet.
        sent = await d.request(
            "dsh/send",
            {
                "sessionId": session_id,
                "message": {"id": "m1", "content": "hi"},
                "target": "next-turn",
                "wakeup": True,
            },
        )
        assert sent["messageId"] == "m1"
        assert await d.wait_idle_turn(session_id) == [{"kind": "completed"}]
        text = "".join(e["data"]["delta"]["text"] for e in d.of(session_id, "assistant/delta"))
        assert text == "hello there"
        assert len(fake.requests) == 1
        assert fake.requests[0].json["messages"][-1] == {"role": "user", "content": "hi"}
        assert f"session {session_id}: {EARLY}" in log_of(d)
        # The turn is the session's first durable history: one `turn/start`, one `turn/end`.
        assert [e["type"] for e in d.of(session_id, "turn/start", "turn/end")] == ["turn/start", "turn/end"]
    finally:
        await stop_daemon(d)


BAD_NEW = (
    {"cwd": 3},  # not of its declared type: decoded as every later request is
    {"mcpServers": []},
    {"title": "x" * 300},
    {"cwd": "/"},  # plain params, checked on the early path: outside the workspace
    {"cwd": "a\u0000b"},
    {"mcpServers": {"files": {"command": 3}}},
)


async def error_of(d: Daemon, params: dict[str, Any]) -> tuple[int, str, Any]:
    try:
        await d.request("dsh/session/new", params)
    except JsonRpcException as exc:
        return exc.code, exc.message, exc.data
    raise AssertionError(f"dsh/session/new {params} was not refused")


async def test_a_bad_first_session_new_is_refused_as_before(tmp_path: Path, fake: FakeDeepSeek) -> None:
    d = await start(tmp_path / "state", fake)
    try:
        # Sent before anything built the front end: each would have been answered early if valid.
        first = [await error_of(d, params) for params in BAD_NEW]
        assert [(code, data["code"]) for code, _, data in first] == [
            (-32602, "invalid_params"),
            (-32602, "invalid_params"),
            (-32602, "invalid_params"),
            (-32602, "outside_workspace"),
            (-32602, "invalid_params"),
            (-32602, "invalid_params"),
        ]
        assert "mcpServers.files.command" in first[5][1]
        # Nothing was created (this request builds the front end: what follows takes the later path).
        assert (await d.request("dsh/session/list", {}))["sessions"] == []
        later = [await error_of(d, params) for params in BAD_NEW]
        assert first == later
        assert EARLY not in log_of(d)
        assert (await d.request("dsh/session/list", {}))["sessions"] == []
    finally:
        await stop_daemon(d)


PARAMS = (
    None,
    {},
    {"cwd": None},
    {"cwd": ""},
    {"cwd": "/p"},
    {"cwd": "rel/dir", "mcpServers": {}},
    {"mcpServers": None},
    {"mcpServers": {"files": {"command": "x"}}},
    {"mcpServers": {"files": {"command": 3}}},  # the type is an object: the server's own check refuses
    {"other": 1},  # left to the decoder: a member declared later is never dropped by the early path
    {"title": None},
    {"title": ""},
    {"title": "t"},
    {"cwd": 3},
    {"cwd": ["/p"]},
    {"mcpServers": []},
    {"mcpServers": "x"},
    [],
    "x",
)


def test_params_read_early_are_the_ones_the_declarations_decode() -> None:
    """The early path reads `cwd` and `mcpServers` without the declarations (their import is most of
    the preload): where it takes params, the declared decoder gives the same values; whatever it does
    not take (a title, a value of another type) is left to that decoder and its errors."""
    from dsh_daemon.host.errors import WireError
    from dsh_daemon.server import params

    taken = 0
    for raw in PARAMS:
        plain = params.plain_session_new(raw)
        try:
            decoded = params.decode("dsh/session/new", raw)
        except WireError:
            assert plain is None, raw
            continue
        if plain is not None:
            taken += 1
            assert plain == (decoded.cwd, decoded.mcp_servers), raw
            assert decoded.title is None, raw
        else:  # a title or another member: answered as every later request
            assert decoded.title is not None or "other" in raw, raw
    assert taken == 10
