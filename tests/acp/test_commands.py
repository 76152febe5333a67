"""Issue 24.10: slash commands over ACP (the official SDK client)."""

from __future__ import annotations

from pathlib import Path

from acp import text_block

from tests.acp.harness import acp_daemon, settle
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream


async def test_slash_commands_are_advertised_and_run(tmp_path: Path, fake: FakeDeepSeek) -> None:
    async with acp_daemon(tmp_path / "state", fake) as d:
        sid = await d.new_session()
        await d.wait_for(lambda: bool(d.client.updates(sid, "available_commands_update")))
        (advertised,) = d.client.updates(sid, "available_commands_update")
        names = [c["name"] for c in advertised["availableCommands"]]
        assert names == [
            "queue",
            "steer",
            "inject",
            "wake",
            "drop",
            "compact",
            "rename",
            "model",
            "undo",
            "rewind",
            "review",
            "ps",
            "kill",
        ]

        async def run(text: str) -> str:
            before = d.client.text(sid)
            response = await settle(d.conn.prompt(session_id=sid, prompt=[text_block(text)]))
            assert response.stop_reason == "end_turn"
            return d.client.text(sid)[len(before) :]

        assert "context" in await run("/inject the build uses make")
        assert "Dropped 1" in await run("/drop")  # the injected context was pending
        assert len(fake.requests) == 0  # no command reached the model
        assert "Renamed" in await run("/rename Build fixes")
        await d.wait_for(
            lambda: any(u.get("title") == "Build fixes" for u in d.client.updates(sid, "session_info_update"))
        )
        said = await run("/model deepseek-v4-pro")
        assert "deepseek-v4-pro" in said
        (changed,) = d.client.updates(sid, "config_option_update")
        assert {o["id"]: o["currentValue"] for o in changed["configOptions"]}["model"] == "deepseek-v4-pro"

        fake.script(Reply.stream(text_stream(["queued reply"])))
        await run("/inject remember: tabs")
        # Idle, /queue is a prompt by another name: its turn streams inside it (issue 39.3).
        said = await run("/queue hello there")
        assert "queued reply" in said and "after the current turn" not in said
        body = fake.requests[-1].json
        assert body["model"] == "deepseek-v4-pro"
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        assert users[-2:] == ["remember: tabs", "hello there"]
        assert "Nothing queued" in await run("/wake")
        # Not a command: an ordinary prompt, sent to the model as typed.
        fake.script(Reply.stream(text_stream(["a path"])))
        await settle(d.conn.prompt(session_id=sid, prompt=[text_block("/usr/bin is where?")]))
        assert [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "user"][-1] == (
            "/usr/bin is where?"
        )


async def test_a_turn_a_command_starts_runs_inside_its_prompt(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """Issue 39.3: clients drop updates that arrive outside a `session/prompt` (CodeCompanion does),
    so idle `/steer` and `/wake` answer when the turn they started has ended, its reply streamed
    before the answer, not at once with the turn running unseen."""
    async with acp_daemon(tmp_path / "state", fake) as d:
        sid = await d.new_session()

        async def run(text: str) -> str:
            before = d.client.text(sid)
            response = await settle(d.conn.prompt(session_id=sid, prompt=[text_block(text)]))
            assert response.stop_reason == "end_turn"
            return d.client.text(sid)[len(before) :]

        fake.script(Reply.stream(text_stream(["steered reply"])))
        said = await run("/steer look at the tests first")
        assert "steered reply" in said
        assert [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "user"][-1] == (
            "look at the tests first"
        )
        # An injected note waits parked (it opens no turn); /wake runs it, inside the /wake prompt.
        assert "context" in await run("/inject the build uses make")
        fake.script(Reply.stream(text_stream(["woken reply"])))
        said = await run("/wake")
        assert "Running the queue" in said and "woken reply" in said
        assert "the build uses make" in [
            m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "user"
        ]
        assert "Nothing queued" in await run("/wake")


async def test_a_command_typed_after_a_cancel_is_read_past_the_resent_prompt(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 39.4: after a cancel CodeCompanion sends the cancelled prompt's text again as block 0
    and the person's new text after it; a command there is the person's command, not text for the
    model."""
    async with acp_daemon(tmp_path / "state", fake) as d:
        sid = await d.new_session()
        fake.script(Reply.stream(text_stream(["first answer"])))
        await settle(d.conn.prompt(session_id=sid, prompt=[text_block("refactor the parser")]))
        requests = len(fake.requests)
        response = await settle(
            d.conn.prompt(
                session_id=sid, prompt=[text_block("refactor the parser"), text_block("/rename Parser work")]
            )
        )
        assert response.stop_reason == "end_turn"
        assert len(fake.requests) == requests  # nothing reached the model
        await d.wait_for(
            lambda: any(u.get("title") == "Parser work" for u in d.client.updates(sid, "session_info_update"))
        )
        # A block the person has not sent before is read as typed: here, text for the model.
        fake.script(Reply.stream(text_stream(["second answer"])))
        await settle(
            d.conn.prompt(
                session_id=sid, prompt=[text_block("new words"), text_block("/rename Not a command")]
            )
        )
        users = [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "user"]
        assert "/rename Not a command" in users[-1]
