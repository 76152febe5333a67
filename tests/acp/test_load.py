"""session/load replays a session created over the LSP wire; list, resume and close."""

from __future__ import annotations

from pathlib import Path

from acp import text_block

from tests.acp.harness import acp_daemon, settle
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import start_daemon, stop_daemon


async def test_load_replays_a_session_created_over_the_lsp_wire(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state = tmp_path / "state"
    work = state / "work"
    work.mkdir(parents=True)
    (work / "app.py").write_text("a = 1\nb = 2\n")
    lsp = await start_daemon(state, fake, root=work)
    try:
        sid = await lsp.new_session(cwd=str(work))
        selection = {"start": {"line": 1, "character": 0}, "end": {"line": 2, "character": 0}}
        await lsp.request(
            "dsh/followup",
            {
                "sessionId": sid,
                "message": {"content": "hello from lsp"},
                "context": [{"uri": (work / "app.py").as_uri(), "kind": "selection", "range": selection}],
            },
        )
        await lsp.wait_idle_turn(sid)
    finally:
        await stop_daemon(lsp)

    fake.script(Reply.stream(text_stream(["second answer"])))
    async with acp_daemon(state, fake) as d:
        listed = await d.conn.list_sessions(cwd=str(work))
        assert [s.session_id for s in listed.sessions] == [sid]
        await settle(d.conn.load_session(cwd=str(work), session_id=sid, mcp_servers=[]))
        replayed = d.client.updates(sid)
        kinds = [u["sessionUpdate"] for u in replayed]
        user = [u["content"] for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
        assert user[0]["type"] == "resource"
        assert user[0]["resource"]["uri"] == (work / "app.py").as_uri() + "#L2:2"
        assert "b = 2" in user[0]["resource"]["text"]
        assert user[1] == {"type": "text", "text": "hello from lsp"}
        assert d.client.text(sid) == "Hello there!"  # the default reply, replayed whole
        assert kinds.index("user_message_chunk") < kinds.index("agent_message_chunk")
        assert "session_info_update" in kinds
        before = len(d.client.wire)
        # The loaded session continues: a prompt runs with the whole history.
        response = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("and now?")]))
        assert response.stop_reason == "end_turn"
        assert "second answer" in "".join(
            m["params"]["update"]["content"].get("text", "")
            for m in d.client.wire[before:]
            if m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        )
        contents = [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "user"]
        assert contents[-1] == "and now?" and "hello from lsp" in contents


async def test_resume_does_not_replay_and_close_keeps_the_session(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state = tmp_path / "state"
    async with acp_daemon(state, fake) as d:
        sid = await d.new_session()
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("first")]))
        ).stop_reason == "end_turn"
        await settle(d.conn.close_session(session_id=sid))
    async with acp_daemon(state, fake) as d:
        await settle(d.conn.resume_session(cwd=str(d.work), session_id=sid))
        # Nothing replayed (the slash commands are advertised, as for every session opened)
        assert [u for u in d.client.updates(sid) if u["sessionUpdate"] != "available_commands_update"] == []
        fake.script(Reply.stream(text_stream(["resumed"])))
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("more")]))
        ).stop_reason == "end_turn"
        assert d.client.text(sid) == "resumed"


async def test_text_blocks_of_one_prompt_never_glue_words_in_the_request_or_the_replay(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """CodeCompanion re-sends earlier text as a block of its own after a cancel: the model must not
    read "a long answerstill there?", and neither must a replay show it."""
    state = tmp_path / "state"
    async with acp_daemon(state, fake) as d:
        sid = await d.new_session()
        blocks = [
            text_block("a long answer"),
            text_block("still there?"),
            text_block(" yes "),
            text_block("ok"),
        ]
        await settle(d.conn.prompt(session_id=sid, prompt=blocks))
        (user,) = [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "user"]
        assert user == "a long answer\nstill there? yes ok"
    async with acp_daemon(state, fake) as d:
        await settle(d.conn.load_session(cwd=str(state / "work"), session_id=sid, mcp_servers=[]))
        user_chunks = [
            u["content"] for u in d.client.updates(sid) if u["sessionUpdate"] == "user_message_chunk"
        ]
        assert user_chunks == [{"type": "text", "text": "a long answer\nstill there? yes ok"}]


async def test_sessions_nobody_prompted_do_not_fill_the_list(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """Issue 39.9: a client creates a session per new chat; those never prompted are left out of
    `session/list`, also the ones this connection has open (CodeCompanion's /resume lists from a new
    chat's own empty session, which then filled its picker), so the history shows real work."""
    state = tmp_path / "state"
    async with acp_daemon(state, fake) as d:
        await d.new_session()  # never prompted, open here
        used = await d.new_session()
        fake.script(Reply.stream(text_stream(["done"])))
        await settle(d.conn.prompt(session_id=used, prompt=[text_block("fix the build")]))
        mine = {s.session_id for s in (await settle(d.conn.list_sessions())).sessions}
        assert mine == {used}
    async with acp_daemon(state, fake) as d:
        listed = {s.session_id for s in (await settle(d.conn.list_sessions())).sessions}
        assert listed == {used}


async def test_session_fork_copies_the_finished_turns_into_a_new_session(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 39.8: ACP `session/fork` is `dsh/session/fork` at the last finished turn; the fork has
    the conversation (its next request carries it) and the original goes on unchanged."""
    async with acp_daemon(tmp_path / "state", fake) as d:
        original = await d.new_session()
        fake.script(Reply.stream(text_stream(["the parser is in parse.py"])))
        await settle(d.conn.prompt(session_id=original, prompt=[text_block("where is the parser?")]))
        forked = await settle(d.conn.fork_session(session_id=original, cwd=str(d.work)))
        assert forked.session_id != original
        assert {o.id for o in forked.config_options or []} >= {"mode", "model"}
        fake.script(Reply.stream(text_stream(["try a dict"])))
        await settle(d.conn.prompt(session_id=forked.session_id, prompt=[text_block("and in the fork?")]))
        users = [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "user"]
        assert users == ["where is the parser?", "and in the fork?"]
        listed = {s.session_id: s for s in (await settle(d.conn.list_sessions())).sessions}
        assert (listed[forked.session_id].title or "").endswith("(fork)")
