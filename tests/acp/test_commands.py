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
        assert "Queued" in await run("/queue hello there")
        await d.wait_for(lambda: "queued reply" in d.client.text(sid))
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
