"""Commands in the sandbox over the real wire (issue 41): a scripted model runs `run_command`s in a
real daemon; confined commands are not asked, hit the walls with a typed denial, widen only with the
person's answer (a durable `sandbox/widened`), and are refused when no confinement can be had."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.sandbox.level import probe_level
from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream
from tests.server.test_configuration import change_settings
from tests.server.test_tools_e2e import run_turn, tool_results

confined_here = pytest.mark.skipif(
    not probe_level().confined, reason=f"no confinement on this machine: {probe_level().describe()}"
)
SECRET = "sk-test-secret-key-0000"  # the harness's DEEPSEEK_API_KEY


def commands(*calls: str | tuple[str, Mapping[str, Any]]) -> list[Reply]:
    """One model reply per command (each a run_command call), then a closing text."""
    replies = []
    for index, call in enumerate(calls):
        command, extra = (call, {}) if isinstance(call, str) else call
        args = {"command": command, **extra}
        replies.append(Reply.stream(tool_call_stream([(f"call_{index}", "run_command", args)])))
    return [*replies, text_reply("done")]


def text(value: Any) -> str:
    """Every `text` inside a tool result's message, joined."""
    if isinstance(value, Mapping):
        own = value.get("text")
        return (own if isinstance(own, str) else "") + "".join(
            text(v) for k, v in value.items() if k != "text"
        )
    if isinstance(value, list | tuple):
        return "".join(text(v) for v in value)
    return ""


def texts(results: Sequence[dict[str, Any]]) -> list[str]:
    return [text(r["message"]) for r in results]


def code(result: Mapping[str, Any]) -> str | None:
    error = result.get("error")
    return None if error is None else str(error["code"])


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def make_project(work: Path) -> None:
    """A small Python project under git, with a passing test suite."""
    (work / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (work / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (work / "Makefile").write_text("build:\n\tmkdir -p build && cp calc.py build/\n")
    git(work, "init", "-q", "-b", "main")
    git(work, "config", "user.name", "Agent")
    git(work, "config", "user.email", "agent@example.com")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "start")


async def session(tmp_path: Path, fake: FakeDeepSeek, **options: Any) -> tuple[Daemon, str, Path]:
    work = tmp_path / "work"
    work.mkdir()
    make_project(work)
    init = {"thinking": False, **options}
    d = await start_daemon(tmp_path / "state", fake, root=work, init_options=init)
    return d, await d.new_session(cwd=str(work)), work


@confined_here
async def test_a_twenty_command_task_asks_nothing_in_workspace_write(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    py = sys.executable
    task = [
        f"{py} -m pytest -q -p no:cacheprovider test_calc.py",
        "make build",
        "ls build",
        "echo 'def sub(a, b):\n    return a - b' >> calc.py",
        f"{py} -c 'import calc; print(calc.sub(5, 2))'",
        f"{py} -m pytest -q test_calc.py",  # the cache too (.pytest_cache in the workspace)
        'echo scratch > "$TMPDIR/notes.txt" && cat "$TMPDIR/notes.txt"',
        "mktemp",
        'mkdir -p "$TMPDIR/scratch" && echo x > "$TMPDIR/scratch/f" && ls "$TMPDIR/scratch"',
        "git status --short",
        "git add -A",
        "git commit -q -m 'add sub' && git log --oneline | head -1",
        "git worktree add -q wt -b feature",
        "echo feature > wt/feature.txt && git -C wt add feature.txt && git -C wt commit -q -m feature",
        "git log --oneline feature | head -1",
        f"{py} -m compileall -q calc.py",
        "mkdir -p src/pkg && touch src/pkg/__init__.py && find src",
        "rm -rf build && test ! -e build && echo removed",
        "env",
        "git worktree remove wt && git branch -D feature",
    ]
    assert len(task) == 20
    fake.script(*commands(*task))
    d, sid, work = await session(tmp_path, fake)
    try:
        await run_turn(d, sid)
        results = tool_results(d, sid)
        assert len(results) == 20
        assert d.permission_requests == []  # confined: nobody was asked
        failed = [(c, t) for c, r, t in zip(task, results, texts(results), strict=True) if code(r)]
        assert failed == []
        outputs = texts(results)
        assert "1 passed" in outputs[0] and "[exit code 0]" in outputs[0]
        assert "3" in outputs[4]
        assert "add sub" in git(work, "log", "--oneline", "-3")
        assert "feature" in outputs[14]  # committed in the worktree (its branch deleted since)
        assert "removed" in outputs[17] and not (work / "wt").exists()
        # The environment has none of the daemon's secrets.
        env_text = outputs[18]
        assert SECRET not in env_text and "DEEPSEEK_API_KEY" not in env_text
        names = {line.split("=", 1)[0] for line in env_text.splitlines() if "=" in line}
        assert not names & {"DEEPSEEK_API_KEY", "DSH_HOME"}, names
        assert "TMPDIR=" in env_text
        # Every client learns where commands run: live, and in the attach reply.
        status = (await d.wait_event(sid, "sandbox/status"))["data"]
        assert status["mode"] == "workspace-write" and status["confined"] is True
        assert status["level"].startswith("Landlock")
        attached = await d.request("dsh/session/attach", {"sessionId": sid})
        assert attached["sandbox"]["mode"] == "workspace-write"
    finally:
        await stop_daemon(d)


@confined_here
async def test_a_write_outside_fails_with_the_denial_then_a_session_widening_lets_it(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    widen = {"reason": "the build writes its artefacts there", "writable": [str(outside)]}
    fake.script(
        *commands(
            f"echo one > {outside}/a.txt",
            (f"echo two > {outside}/b.txt", {"escalate": widen}),
            f"echo three > {outside}/c.txt",  # the session's widening holds without asking again
        )
    )
    d, sid, _work = await session(tmp_path, fake)
    d.on_permission = lambda p: {"outcome": "allow-always"}
    try:
        await run_turn(d, sid)
        denied, widened, after = tool_results(d, sid)
        assert code(denied) == "SANDBOX_DENIED"
        assert "Only the person can widen" in text(denied) and str(outside) in text(denied)
        assert not (outside / "a.txt").exists()
        (asked,) = d.permission_requests
        assert asked["preview"]["escalation"] == {
            "reason": "the build writes its artefacts there",
            "writable": [str(outside.resolve())],
            "network": [],
            "unconfined": False,
        }
        assert asked["preview"]["sandbox"] == "workspace-write"
        assert "Widen the sandbox" in asked["title"]
        assert code(widened) is None and (outside / "b.txt").read_text() == "two\n"
        assert code(after) is None and (outside / "c.txt").read_text() == "three\n"
        (event,) = d.of(sid, "sandbox/widened")
        assert isinstance(event["seq"], int)  # durable
        assert event["data"]["scope"] == "session" and event["data"]["writable"] == [str(outside.resolve())]
        assert event["data"]["reason"] == widen["reason"]
    finally:
        await stop_daemon(d)


@confined_here
async def test_a_refused_widening_runs_nothing_and_says_so(tmp_path: Path, fake: FakeDeepSeek) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    widen = {"reason": "needs it", "writable": [str(outside)], "network": ["pypi.org"]}
    fake.script(*commands((f"echo x > {outside}/x.txt", {"escalate": widen})))
    d, sid, _work = await session(tmp_path, fake)
    d.on_permission = lambda p: {"outcome": "reject"}
    try:
        await run_turn(d, sid)
        (result,) = tool_results(d, sid)
        assert code(result) == "REJECTED"
        assert not (outside / "x.txt").exists()
        assert d.of(sid, "sandbox/widened") == []
        assert d.permission_requests[0]["preview"]["escalation"]["network"] == ["pypi.org"]
    finally:
        await stop_daemon(d)


async def test_full_access_asks_as_before_and_an_explicit_ask_still_asks(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    fake.script(*commands("echo hi; env"))
    d, sid, _work = await session(tmp_path, fake, tools={"sandbox": "full-access"})
    try:
        await run_turn(d, sid)
        (asked,) = d.permission_requests
        assert asked["title"] == "Run: echo hi; env" and asked["preview"]["sandbox"] == "full-access"
        output = text(tool_results(d, sid)[0])
        assert "hi" in output
        # Unconfined too, the command's environment has none of the daemon's secrets.
        names = {line.split("=", 1)[0] for line in output.splitlines() if "=" in line}
        assert "PATH" in names and not names & {"DEEPSEEK_API_KEY", "DSH_HOME"}, names
        assert SECRET not in output
    finally:
        await stop_daemon(d)
    if not probe_level().confined:
        return
    fake.script(*commands("echo again"))
    d = await start_daemon(
        tmp_path / "state",
        fake,
        root=tmp_path / "work",
        init_options={"thinking": False, "tools": {"permissions": {"run_command": "ask"}}},
    )
    try:
        sid = await d.new_session(cwd=str(tmp_path / "work"))
        await run_turn(d, sid)
        (asked,) = d.permission_requests
        assert asked["preview"]["sandbox"] == "workspace-write"
    finally:
        await stop_daemon(d)


@confined_here
async def test_plan_mode_runs_commands_read_only(tmp_path: Path, fake: FakeDeepSeek) -> None:
    fake.script(*commands("cat calc.py", "echo changed > calc.py"))
    d, sid, work = await session(tmp_path, fake)
    try:
        await d.request("dsh/session/setMode", {"sessionId": sid, "mode": "plan"})
        await run_turn(d, sid)
        read, write = tool_results(d, sid)
        assert code(read) is None and "def add" in text(read)
        assert code(write) == "SANDBOX_DENIED" and "read-only" in text(write)
        assert (work / "calc.py").read_text().startswith("def add")
        assert d.permission_requests == []
        await d.wait_for(lambda: any(e["data"]["mode"] == "read-only" for e in d.of(sid, "sandbox/status")))
    finally:
        await stop_daemon(d)


async def test_no_confinement_refuses_commands_and_says_why(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """The test-only knob switches every layer off: workspace-write refuses, never runs unconfined."""
    fake.script(*commands("echo ran > proof.txt"))
    work = tmp_path / "work"
    work.mkdir()
    d = await start_daemon(tmp_path / "state", fake, root=work, env={"DSH_SANDBOX_LAYERS": "none"})
    try:
        sid = await d.new_session(cwd=str(work))
        await run_turn(d, sid)
        (result,) = tool_results(d, sid)
        assert code(result) == "SANDBOX_UNAVAILABLE" and "full-access" in text(result)
        assert not (work / "proof.txt").exists()
        assert d.permission_requests == []
        status = (await d.wait_event(sid, "sandbox/status"))["data"]
        assert status["available"] is False and status["confined"] is False
        assert "DSH_SANDBOX_LAYERS=none" in status["level"]
    finally:
        await stop_daemon(d)


@confined_here
async def test_the_mode_changes_live_with_the_settings(tmp_path: Path, fake: FakeDeepSeek) -> None:
    fake.script(*commands("echo one > one.txt"))
    d, sid, work = await session(tmp_path, fake)
    try:
        change_settings(d, {"tools": {"sandbox": "read-only"}})
        await d.wait_for(lambda: any(e["data"]["mode"] == "read-only" for e in d.of(sid, "sandbox/status")))
        await run_turn(d, sid)
        (result,) = tool_results(d, sid)
        assert code(result) == "SANDBOX_DENIED" and not (work / "one.txt").exists()
    finally:
        await stop_daemon(d)


def test_probe_environment_is_clean() -> None:
    assert "DSH_SANDBOX_LAYERS" not in os.environ  # the knob is set per daemon, never for the test run


@confined_here
async def test_a_domain_the_proxy_refuses_is_named_in_the_denial(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """The proxy's refusal feeds the note: the domain, and that only the person can widen it. Offline:
    the proxy refuses before any lookup or connection."""
    fetch = f"{sys.executable} -c \"import urllib.request; urllib.request.urlopen('http://blocked.example.org/x')\""
    fake.script(*commands(fetch))
    d, sid, _work = await session(tmp_path, fake, tools={"sandbox": {"network": {"allow": ["pypi.org"]}}})
    try:
        await run_turn(d, sid)
        (result,) = tool_results(d, sid)
        assert code(result) == "SANDBOX_DENIED", text(result)
        assert "domains refused by the proxy: blocked.example.org" in text(result)
        assert d.permission_requests == []
        status = d.of(sid, "sandbox/status")[-1]["data"]
        assert status["network"] == ["pypi.org"]
    finally:
        await stop_daemon(d)
