"""The system prompt and project instructions end to end (issue 14 items 1-2): exactly what the fake
DeepSeek server received, byte-stable across turns, an instruction file changed mid-session in the next
request and in a durable `request/header`, configuration's `agent` keys, and the log still rebuilding
every request."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from dsh_daemon.agent.derive import rebuild_requests
from dsh_daemon.agent.system_prompt import Environment, PromptConfig, build_system_prompt, os_name, today
from dsh_daemon.session.store import SessionStore
from tests.fakes.deepseek_server import FakeDeepSeek, RecordedRequest, Reply, text_stream
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply
from tests.server.test_robustness import spawn

PREAMBLE = (
    "These are the project's own instructions, from files in the workspace (root first, then the "
    "directories down to the working directory). Follow them; where two disagree, the one nearer the "
    "working directory wins."
)


def _project(tmp_path: Path) -> tuple[Path, Path]:
    work = tmp_path / "work"
    pkg = work / "pkg"
    pkg.mkdir(parents=True)
    (work / "AGENTS.md").write_text("Run `make check` before you finish.\n")
    (pkg / "CLAUDE.md").write_text("In pkg, keep functions short.\n")
    return Path(os.path.realpath(work)), Path(os.path.realpath(pkg))


def _system(request: Any) -> str:
    first = request.json["messages"][0]
    assert first["role"] == "system", request.json["messages"]
    return first["content"]


def _durable(daemon: Daemon, sid: str, type_: str) -> list[dict[str, Any]]:
    return [e for e in daemon.of(sid, type_) if "seq" in e]


async def _turn(daemon: Daemon, sid: str, text: str, turns: int) -> None:
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": text}})
    await daemon.wait_idle_turn(sid, turns)


async def test_exact_system_prompt_and_instructions_byte_stable_across_turns(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work, pkg = _project(tmp_path)
    fake.script(text_reply("one"), text_reply("two"))
    day_before = today()
    d = await start_daemon(tmp_path / "state", fake, root=work)
    try:
        sid = await d.new_session(cwd=str(pkg))
        await _turn(d, sid, "first", 1)
        await _turn(d, sid, "second", 2)
        first, second = fake.requests
        instructions = (
            f"# Project instructions\n\n{PREAMBLE}\n\n"
            f"## {work}/AGENTS.md\n\nRun `make check` before you finish.\n\n"
            f"## {pkg}/CLAUDE.md\n\nIn pkg, keep functions short."
        )
        tools = [t["function"]["name"] for t in first.json["tools"]]
        expected = {
            build_system_prompt(
                Environment(
                    cwd=str(pkg),
                    roots=(str(work),),
                    os=os_name(),
                    shell=shutil.which("bash") or "/bin/sh",
                    date=day,
                    model="deepseek-v4-flash",
                ),
                tools,
                instructions=instructions,
            )
            for day in (day_before, today())
        }
        system = _system(first)
        assert system in expected
        assert system.endswith(instructions)
        assert f"- Working directory: {pkg}\n- Workspace roots: {work}\n" in system
        headings = ["You are dsh", "# Environment", "# Using the tools", "# Messages from the editor"]
        positions = [system.index(h) for h in [*headings, "# Project instructions"]]
        assert positions == sorted(positions) and positions[0] == 0
        # Byte-stable: the second turn's request starts with the first one's messages, system included
        # (DeepSeek's prefix cache), and the header was logged once.
        assert _system(second) == system
        assert second.json["messages"][: len(first.json["messages"])] == first.json["messages"]
        headers = _durable(d, sid, "request/header")
        assert [h["data"]["reason"] for h in headers] == ["initial"]
        assert headers[0]["data"]["header"]["system"] == system
    finally:
        await stop_daemon(d)


async def test_instruction_file_changed_mid_session(tmp_path: Path, fake: FakeDeepSeek) -> None:
    work, pkg = _project(tmp_path)
    fake.script(text_reply("one"), text_reply("two"), text_reply("three"))
    state = tmp_path / "state"
    d = await start_daemon(state, fake, root=work)
    try:
        sid = await d.new_session(cwd=str(pkg))
        await _turn(d, sid, "first", 1)
        (pkg / "CLAUDE.md").write_text("In pkg, functions may be long; prefer clarity.\n")
        await _turn(d, sid, "second", 2)
        (work / "AGENTS.md").unlink()
        await _turn(d, sid, "third", 3)
    finally:
        await stop_daemon(d)
    systems = [_system(r) for r in fake.requests]
    assert "In pkg, keep functions short." in systems[0]
    assert "In pkg, keep functions short." not in systems[1]
    assert f"## {pkg}/CLAUDE.md\n\nIn pkg, functions may be long; prefer clarity." in systems[1]
    assert (
        "make check" in systems[1]
        and "make check" not in systems[2]
        and "functions may be long" in systems[2]
    )
    headers = _durable(d, sid, "request/header")
    assert [h["data"]["reason"] for h in headers] == ["initial", "change", "change"]
    assert [h["data"]["header"]["system"] for h in headers] == systems
    # Rebuilt from the store alone, every request carries the system prompt that was sent.
    store = SessionStore(state)
    try:
        rebuilt = rebuild_requests(store.load_events(sid))
    finally:
        store.close()
    assert [r.system for r in rebuilt] == systems


async def test_agent_config_replaces_and_appends(tmp_path: Path, fake: FakeDeepSeek) -> None:
    work, pkg = _project(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    (state / "config.json").write_text(json.dumps({"agent": {"appendSystemPrompt": "Answer in French."}}))
    fake.script(text_reply("oui"))
    options = {
        "thinking": False,
        "agent": {"systemPrompt": "You are a test double.", "projectInstructions": False},
    }
    d = await start_daemon(state, fake, root=work, init_options=options)
    try:
        sid = await d.new_session(cwd=str(pkg))
        await _turn(d, sid, "hello", 1)
    finally:
        await stop_daemon(d)
    assert _system(fake.requests[0]) == "You are a test double.\n\nAnswer in French."
    assert PromptConfig().project_instructions  # the default reads AGENTS.md & co.


async def test_unknown_agent_setting_is_refused_at_initialize(tmp_path: Path, fake: FakeDeepSeek) -> None:
    pipe = await spawn(tmp_path / "state", fake)
    try:
        options = {"thinking": False, "agent": {"sytemPrompt": "typo"}}
        answer = await pipe.call(
            1, "initialize", {"processId": None, "capabilities": {}, "initializationOptions": options}
        )
        assert answer["error"]["code"] == -32602
        assert "agent: unknown setting 'sytemPrompt'" in answer["error"]["message"]
    finally:
        pipe.proc.kill()
        await pipe.proc.wait()


def _shared_prefix(a: bytes, b: bytes) -> int:
    size = min(len(a), len(b))
    return next((i for i in range(size) if a[i] != b[i]), size)


class PrefixCachingFake(FakeDeepSeek):
    """Answers like DeepSeek's context cache: the usage it reports counts as cache hits the longest
    byte prefix this request shares with an earlier one (4 bytes a token, in 64-token units)."""

    def _next_reply(self, request: RecordedRequest) -> Reply:
        earlier = [r.body for r in self.requests if r is not request]
        shared = max((_shared_prefix(request.body, body) for body in earlier), default=0)
        prompt = len(request.body) // 4
        hit = min(shared // 4 // 64 * 64, prompt)
        usage = json.dumps(
            {
                "prompt_tokens": prompt,
                "completion_tokens": 1,
                "total_tokens": prompt + 1,
                "prompt_cache_hit_tokens": hit,
                "prompt_cache_miss_tokens": prompt - hit,
            }
        )
        return Reply.stream(text_stream(["ok"], usage=usage))


async def test_second_turn_hits_the_prefix_cache(tmp_path: Path) -> None:
    work, pkg = _project(tmp_path)
    with PrefixCachingFake() as fake:
        d = await start_daemon(tmp_path / "state", fake, root=work)
        try:
            sid = await d.new_session(cwd=str(pkg))
            await _turn(d, sid, "first", 1)
            await _turn(d, sid, "second", 2)
        finally:
            await stop_daemon(d)
    first, second = (u["data"]["usage"] for u in _durable(d, sid, "turn/usage"))
    assert first.get("cacheReadTokens", 0) == 0
    # Everything up to the first prompt (the whole system prompt included) is served from the cache.
    system_tokens = len(json.dumps(_system(fake.requests[0]))) // 4
    assert second["cacheReadTokens"] >= system_tokens // 64 * 64 > 0
