"""Issue 24.9 over ACP: `modes` in session answers, `session/set_mode`, `current_mode_update`."""

from __future__ import annotations

from pathlib import Path

from acp import text_block

from tests.acp.harness import acp_daemon, settle
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream

READ_ONLY = {
    "read_file",
    "list_dir",
    "find_files",
    "grep",
    "run_command",
    "update_plan",
    "propose_plan",
}  # commands run read-only there; update_plan only records; propose_plan ends plan mode


def offered(fake: FakeDeepSeek) -> set[str]:
    return {t["function"]["name"] for t in fake.requests[-1].json.get("tools", [])}


async def test_modes_are_offered_switched_and_kept_with_the_session(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    state = tmp_path / "state"
    async with acp_daemon(state, fake) as d:
        created = await d.conn.new_session(cwd=str(d.work), mcp_servers=[])
        sid = created.session_id
        assert created.modes is not None and created.modes.current_mode_id == "ask"
        assert [m.id for m in created.modes.available_modes] == ["ask", "accept-edits", "plan"]
        await settle(d.conn.set_session_mode(session_id=sid, mode_id="plan"))
        assert d.client.updates(sid, "current_mode_update") == [
            {"sessionUpdate": "current_mode_update", "currentModeId": "plan"}
        ]
        fake.script(Reply.stream(text_stream(["a plan"])))
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("plan it")]))
        ).stop_reason == "end_turn"
        assert offered(fake) == READ_ONLY
    async with acp_daemon(state, fake) as d:
        loaded = await settle(d.conn.load_session(cwd=str(d.work), session_id=sid, mcp_servers=[]))
        assert loaded.modes is not None and loaded.modes.current_mode_id == "plan"
        await settle(d.conn.set_session_mode(session_id=sid, mode_id="accept-edits"))
        fake.script(Reply.stream(text_stream(["go"])))
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("do it")]))
        ).stop_reason == "end_turn"
        assert {"edit_file", "run_command"} <= offered(fake)
        raw = [m for m in d.client.wire if m.get("id") is not None and "error" in m]
        assert raw == []


async def test_config_options_pick_the_model_thinking_and_effort(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """Issue 24.8: the model picker and the thinking settings, per session (a client that takes
    boolean config options gets thinking as a boolean)."""
    async with acp_daemon(tmp_path / "state", fake, booleans=True) as d:
        created = await d.conn.new_session(cwd=str(d.work), mcp_servers=[])
        sid = created.session_id
        options = {o.id: o for o in created.config_options or []}
        assert list(options) == ["mode", "model", "thinking", "reasoning_effort", "sandbox"]
        assert options["thinking"].type == "boolean" and options["thinking"].current_value is False
        model = options["model"]
        assert model.category == "model" and model.current_value == "deepseek-v4-flash"
        assert [o.value for o in model.options][:2] == ["deepseek-v4-flash", "deepseek-v4-pro"]
        changed = await settle(
            d.conn.set_config_option(config_id="model", session_id=sid, value="deepseek-v4-pro")
        )
        current = {o.id: o.current_value for o in changed.config_options}
        assert current["model"] == "deepseek-v4-pro"
        await settle(d.conn.set_config_option(config_id="thinking", session_id=sid, value=True))
        await settle(d.conn.set_config_option(config_id="reasoning_effort", session_id=sid, value="max"))
        fake.script(Reply.stream(text_stream(["pro speaking"])))
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("hi")]))
        ).stop_reason == "end_turn"
        body = fake.requests[-1].json
        assert body["model"] == "deepseek-v4-pro"
        assert body["thinking"] == {"type": "enabled"} and body["reasoning_effort"] == "max"
        # A model not offered is refused by name; the session keeps its choice.
        try:
            await settle(d.conn.set_config_option(config_id="model", session_id=sid, value="gpt-9"))
        except Exception as exc:
            assert "model must be one of" in str(exc)
        else:
            raise AssertionError("an unknown model was accepted")


async def test_a_client_without_boolean_options_gets_thinking_as_an_on_off_select(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 39.2: ACP lets an agent send `type: "boolean"` only to a client that advertises
    `session.configOptions.boolean`; CodeCompanion does not, and showed "Unsupported config option
    type: boolean". Such a client gets an `on`/`off` select that sets the same setting."""
    async with acp_daemon(tmp_path / "state", fake) as d:
        created = await d.conn.new_session(cwd=str(d.work), mcp_servers=[])
        sid = created.session_id
        options = {o.id: o for o in created.config_options or []}
        assert {o.type for o in options.values()} == {"select"}
        thinking = options["thinking"]
        assert thinking.current_value == "off" and [o.value for o in thinking.options] == ["on", "off"]
        changed = await settle(d.conn.set_config_option(config_id="thinking", session_id=sid, value="on"))
        assert {o.id: o.current_value for o in changed.config_options}["thinking"] == "on"
        fake.script(Reply.stream(text_stream(["thinking now"])))
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("hi")]))
        ).stop_reason == "end_turn"
        assert fake.requests[-1].json["thinking"] == {"type": "enabled"}
        sent = [m for m in d.client.wire if m.get("method") == "session/update"]
        assert all(
            o["type"] != "boolean"
            for m in sent
            if m["params"]["update"]["sessionUpdate"] == "config_option_update"
            for o in m["params"]["update"]["configOptions"]
        )


async def test_the_mode_is_a_config_option_kept_in_step_with_set_mode(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 39.1: a client that supports config options may ignore `modes` (CodeCompanion has no
    `session/set_mode`), so the mode is a `mode` select too: setting it is set_mode by another name,
    and either way the client hears both `current_mode_update` and `config_option_update`."""
    async with acp_daemon(tmp_path / "state", fake) as d:
        created = await d.conn.new_session(cwd=str(d.work), mcp_servers=[])
        sid = created.session_id
        mode = next(o for o in created.config_options or [] if o.id == "mode")
        assert mode.category == "mode" and mode.current_value == "ask"
        assert [o.value for o in mode.options] == ["ask", "accept-edits", "plan"]

        changed = await settle(d.conn.set_config_option(config_id="mode", session_id=sid, value="plan"))
        assert {o.id: o.current_value for o in changed.config_options}["mode"] == "plan"
        await d.wait_for(lambda: bool(d.client.updates(sid, "config_option_update")))
        assert d.client.updates(sid, "current_mode_update") == [
            {"sessionUpdate": "current_mode_update", "currentModeId": "plan"}
        ]
        (update,) = d.client.updates(sid, "config_option_update")
        assert {o["id"]: o["currentValue"] for o in update["configOptions"]}["mode"] == "plan"
        fake.script(Reply.stream(text_stream(["a plan"])))
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("plan it")]))
        ).stop_reason == "end_turn"
        assert offered(fake) == READ_ONLY  # the mode took effect

        # set_mode moves the config option too.
        await settle(d.conn.set_session_mode(session_id=sid, mode_id="accept-edits"))
        await d.wait_for(lambda: len(d.client.updates(sid, "config_option_update")) == 2)
        last = d.client.updates(sid, "config_option_update")[-1]
        assert {o["id"]: o["currentValue"] for o in last["configOptions"]}["mode"] == "accept-edits"
        try:
            await settle(d.conn.set_config_option(config_id="mode", session_id=sid, value="yolo"))
        except Exception as exc:
            assert "mode must be one of" in str(exc)
        else:
            raise AssertionError("an unknown mode was accepted")


async def test_the_model_choice_is_the_sessions_own_in_the_next_process(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """Issue 39.5: a session's model settings are durable (`session/settings`): a process that
    loads or takes the session over shows and uses the session's choice, not the configuration's."""
    state = tmp_path / "state"
    async with acp_daemon(state, fake, booleans=True) as d:
        sid = (await d.conn.new_session(cwd=str(d.work), mcp_servers=[])).session_id
        await settle(d.conn.set_config_option(config_id="model", session_id=sid, value="deepseek-v4-pro"))
        await settle(d.conn.set_config_option(config_id="thinking", session_id=sid, value=True))
        await d.wait_for(lambda: len(d.client.updates(sid, "config_option_update")) >= 2)
    async with acp_daemon(state, fake, booleans=True) as d:
        loaded = await settle(d.conn.load_session(cwd=str(d.work), session_id=sid, mcp_servers=[]))
        current = {o.id: o.current_value for o in loaded.config_options or []}
        assert (current["model"], current["thinking"]) == ("deepseek-v4-pro", True)
        fake.script(Reply.stream(text_stream(["still pro"])))
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("hi")]))
        ).stop_reason == "end_turn"
        body = fake.requests[-1].json
        assert body["model"] == "deepseek-v4-pro" and body["thinking"] == {"type": "enabled"}
