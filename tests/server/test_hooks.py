"""The person's hooks over the real wire (issue 35.3): a real daemon runs hook scripts written into a
temp dir, confined like commands, at each event, and a scripted model shows what reached it. Hooks
block (the model reads why), add context (`hook`-sourced messages in the log and in the request),
answer permissions; hooks that hang, flood stdout or fail are reported once and change nothing; a
project's hooks run only once the person trusted them, remembered per folder."""

from __future__ import annotations

import fcntl
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.sandbox.level import probe_level
from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream
from tests.server.test_tools_e2e import run_turn, tool_results

# Hooks run as commands do: confined where this machine can (the default mode), else unconfined.
SANDBOX = "workspace-write" if probe_level().confined else "full-access"

# One hook program; its first argument says how it answers. It reads the whole document on stdin.
HOOK = r"""
import json, os, subprocess, sys, time
doc = json.load(sys.stdin)
how = sys.argv[1]
event, tool = doc["event"], doc.get("tool") or {}
args = tool.get("arguments") or {}
path = args.get("path", "") if isinstance(args, dict) else ""

def say(**answer):
    print(json.dumps(answer))

if how == "context":
    say(additionalContext=f"{event} context ({doc.get('source') or tool.get('name') or 'prompt'})")
elif how == "prompt":
    if "forbidden" in doc["prompt"]:
        sys.stderr.write("prompts may not say forbidden\n")
        sys.exit(2)
    say(additionalContext="remember the style guide")
elif how == "guard":
    if "secret" in path:
        say(decision="block", reason="secrets stay unread")
elif how == "permission":
    say(permission="deny", reason="no new files named deny") if "deny" in path else say(permission="allow")
elif how == "stop":
    if not doc["stopHookActive"]:
        say(decision="block", reason="run the tests first")
elif how == "never-stop":
    say(decision="block", reason=f"keep going (again: {doc['stopHookActive']})")
elif how == "hang":
    # The hook and a child it starts each hold a lock (flock: seen across PID namespaces) while they
    # live; the test takes both locks once the daemon has killed the tree.
    import fcntl
    cwd = doc["session"]["cwd"]
    mine = open(os.path.join(cwd, "hook.lock"), "w")
    fcntl.flock(mine, fcntl.LOCK_EX)
    child_code = (
        "import fcntl, sys, time; f = open(sys.argv[1], 'w'); fcntl.flock(f, fcntl.LOCK_EX); time.sleep(600)"
    )
    subprocess.Popen([sys.executable, "-c", child_code, os.path.join(cwd, "child.lock")])
    while True:
        probe = open(os.path.join(cwd, "child.lock"), "a")
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            break  # the child holds it
        fcntl.flock(probe, fcntl.LOCK_UN)
        probe.close()
        time.sleep(0.01)
    open(os.path.join(cwd, "locked"), "w").close()
    time.sleep(600)
elif how == "flood":
    sys.stdout.write("garbage " * (1024 * 1024 // 8))
    sys.stdout.flush()
elif how == "garbage":
    print("this is not json")
elif how == "fail":
    sys.stderr.write("the hook broke\n")
    sys.exit(1)
elif how == "escape":
    try:
        with open(sys.argv[2], "w") as out:
            out.write("escaped")
        say(additionalContext="wrote outside")
    except OSError as exc:
        say(additionalContext=f"refused: {exc.strerror}")
"""


def hook_program(tmp_path: Path) -> Path:
    program = tmp_path / "hooks" / "hook.py"
    program.parent.mkdir(exist_ok=True)
    program.write_text(HOOK)
    return program


def hook(program: Path, how: str, *extra: str, **entry: Any) -> dict[str, Any]:
    return {"command": [sys.executable, str(program), how, *extra], **entry}


def calls(*batch: tuple[str, str, Mapping[str, Any]]) -> Reply:
    return Reply.stream(tool_call_stream(list(batch)))


def request_texts(fake: FakeDeepSeek, index: int) -> list[tuple[str, str]]:
    """(role, text) of each message of the model request `index`."""
    out = []
    for message in fake.requests[index].json["messages"]:
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        out.append((message["role"], text or ""))
    return out


def hook_messages(d: Daemon, sid: str) -> list[dict[str, Any]]:
    """The durable `user/message`s a hook made: (event, text)."""
    out = []
    for event in d.of(sid, "user/message"):
        source = event["data"]["source"]
        if source["kind"] == "hook":
            assert isinstance(event["seq"], int)  # in the log: a rebuilt history has it
            text = "".join(b.get("text", "") for b in event["data"]["content"])
            out.append({"event": source["event"], "hook": source["hook"], "text": text})
    return out


def result_text(result: Mapping[str, Any]) -> str:
    return "".join(
        inner.get("text", "") for block in result["message"]["content"] for inner in block.get("content", ())
    )


async def start(
    tmp_path: Path, fake: FakeDeepSeek, hooks: Mapping[str, Any], **kwargs: Any
) -> tuple[Daemon, str, Path]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    init = {"thinking": False, "tools": {"sandbox": SANDBOX}, "hooks": dict(hooks)}
    d = await start_daemon(tmp_path / "state", fake, root=work, init_options=init, apply_edit=False, **kwargs)
    return d, await d.new_session(cwd=str(work)), work


async def test_each_event_blocks_adds_context_or_answers(tmp_path: Path, fake: FakeDeepSeek) -> None:
    program = hook_program(tmp_path)
    hooks = {
        "sessionStart": [hook(program, "context", name="start")],
        "userPromptSubmit": [hook(program, "prompt", name="prompt-check")],
        "preToolUse": [hook(program, "guard", matcher="read_file", name="guard")],
        "postToolUse": [hook(program, "context", matcher="read_file|list_dir", name="after")],
        "permissionRequest": [hook(program, "permission", matcher="write_file", name="perm")],
        "stop": [hook(program, "stop", name="tests-first")],
    }
    fake.script(
        calls(
            ("r1", "read_file", {"path": "a.txt"}),
            ("r2", "read_file", {"path": "secret.txt"}),
        ),
        calls(("w1", "write_file", {"path": "allow.txt", "content": "yes\n"})),
        calls(("w2", "write_file", {"path": "deny.txt", "content": "no\n"})),
        text_reply("done"),
        text_reply("the tests pass"),  # the stop hook asked for one more step
        text_reply("that prompt was blocked"),  # turn 2: the blocked prompt
        text_reply("still fine"),  # and its stop hook's one more step
    )
    d, sid, work = await start(tmp_path, fake, hooks)
    (work / "a.txt").write_text("alpha\n")
    (work / "secret.txt").write_text("hunter2\n")
    try:
        await run_turn(d, sid, "hello")
        read, secret, allowed, denied = tool_results(d, sid)
        # preToolUse: a block refuses the call; the model reads the hook's reason.
        assert read.get("error") is None and "alpha" in result_text(read)
        assert secret["error"]["code"] == "DENIED"
        assert "the hook guard blocked this call: secrets stay unread" in result_text(secret)
        assert "hunter2" not in json.dumps(d.events)
        # permissionRequest: answered by the hook, the person never asked.
        assert d.permission_requests == []
        assert allowed.get("error") is None and (work / "allow.txt").read_text() == "yes\n"
        assert denied["error"]["code"] == "DENIED" and not (work / "deny.txt").exists()
        assert "no new files named deny" in result_text(denied)
        made = hook_messages(d, sid)
        events = [m["event"] for m in made]
        # sessionStart and userPromptSubmit: context in the first request, next to the prompt.
        first = request_texts(fake, 0)
        assert any("sessionStart context (startup)" in t for _, t in first)
        assert any("remember the style guide" in t for _, t in first)
        assert ("user", "hello") in first
        # postToolUse: context after the batch's results (one per read_file call that ran).
        assert events.count("postToolUse") == 1
        second = request_texts(fake, 1)
        assert any("postToolUse context (read_file)" in t for _, t in second)
        # stop: the turn went on once with the hook's reason, and then closed.
        (stop,) = [m for m in made if m["event"] == "stop"]
        assert stop["hook"] == "tests-first" and "run the tests first" in stop["text"]
        assert any("run the tests first" in t for _, t in request_texts(fake, 4))
        assert [r["kind"] for r in await d.wait_idle_turn(sid, 1)] == ["completed"]
        assert d.of(sid, "hook/failed") == []

        # userPromptSubmit: exit 2 blocks the prompt; the model reads why, never the prompt.
        await run_turn(d, sid, "say something forbidden")
        last = request_texts(fake, 5)
        assert not any("say something forbidden" in t for _, t in last)
        assert any(
            "blocked by the hook prompt-check" in t and "prompts may not say forbidden" in t for _, t in last
        )
    finally:
        await stop_daemon(d)


async def test_a_stop_hook_that_always_blocks_keeps_the_turn_going_three_times_only(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    program = hook_program(tmp_path)
    fake.script(*(text_reply(f"answer {n}") for n in range(4)))
    d, sid, _work = await start(tmp_path, fake, {"stop": [hook(program, "never-stop", name="never")]})
    try:
        await run_turn(d, sid)
        assert [r["kind"] for r in await d.wait_idle_turn(sid, 1)] == ["completed"]
        assert len(fake.requests) == 4  # the first answer, then three more steps, then it closed
        texts = [m["text"] for m in hook_messages(d, sid)]
        assert texts == [
            "The hook never asks you not to stop yet: keep going (again: False)",
            "The hook never asks you not to stop yet: keep going (again: True)",
            "The hook never asks you not to stop yet: keep going (again: True)",
        ]
    finally:
        await stop_daemon(d)


async def test_a_hook_that_hangs_floods_or_fails_is_reported_once_and_changes_nothing(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    program = hook_program(tmp_path)
    hooks = {
        "preToolUse": [
            hook(program, "hang", name="hang", timeoutS=2),
            hook(program, "flood", name="flood"),
            hook(program, "garbage", name="garbage"),
            hook(program, "fail", name="fail"),
        ],
    }
    fake.script(
        calls(("r1", "read_file", {"path": "a.txt"})),
        calls(("r2", "read_file", {"path": "a.txt"})),
        text_reply("done"),
    )
    d, sid, work = await start(tmp_path, fake, hooks)
    (work / "a.txt").write_text("alpha\n")
    try:
        await run_turn(d, sid)
        assert [r["kind"] for r in await d.wait_idle_turn(sid, 1)] == ["completed"]
        results = tool_results(d, sid)
        assert [r.get("error") for r in results] == [None, None]  # failed hooks said nothing
        failed = {e["data"]["hook"]: e["data"] for e in d.of(sid, "hook/failed")}
        assert len(d.of(sid, "hook/failed")) == 4  # once per hook, though each failed twice
        assert "did not finish within 2 s" in failed["hang"]["reason"]
        assert "more than 64 KiB on stdout" in failed["flood"]["reason"]
        assert "not JSON" in failed["garbage"]["reason"]
        assert "status 1" in failed["fail"]["reason"] and "the hook broke" in failed["fail"]["reason"]
        assert {f["event"] for f in failed.values()} == {"preToolUse"}
        # The hung hook's tree was killed: the hook and the child it started let go of their locks.
        assert (work / "locked").exists()
        await d.wait_for(lambda: _free(work / "hook.lock") and _free(work / "child.lock"), timeout=20)
    finally:
        await stop_daemon(d)


def _free(lock: Path) -> bool:
    with lock.open("a") as file:
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        fcntl.flock(file, fcntl.LOCK_UN)
        return True


async def test_hooks_run_confined_like_commands(tmp_path: Path, fake: FakeDeepSeek) -> None:
    if SANDBOX == "full-access":
        pytest.skip(f"no confinement on this machine: {probe_level().describe()}")
    program = hook_program(tmp_path)
    outside = tmp_path / "outside.txt"
    fake.script(text_reply("ok"))
    d, sid, _work = await start(tmp_path, fake, {"sessionStart": [hook(program, "escape", str(outside))]})
    try:
        await run_turn(d, sid)
        (made,) = hook_messages(d, sid)
        assert made["text"].startswith("refused") and not outside.exists()
    finally:
        await stop_daemon(d)


def write_project(work: Path, hooks: Mapping[str, Any]) -> None:
    (work / ".dsh").mkdir(parents=True, exist_ok=True)
    (work / ".dsh" / "config.json").write_text(json.dumps({"hooks": hooks}))


async def test_a_projects_hooks_run_only_once_trusted_and_the_trust_is_remembered(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    program = hook_program(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    (work / "secret.txt").write_text("hunter2\n")
    guard = {"preToolUse": [hook(program, "guard", name="project-guard")]}
    write_project(work, guard)
    read_secret = calls(("r1", "read_file", {"path": "secret.txt"}))
    fake.script(read_secret, text_reply("read"), read_secret, text_reply("blocked"))
    d, sid, _ = await start(tmp_path, fake, {})
    try:
        untrusted = (await d.wait_event(sid, "hooks/untrusted"))["data"]
        assert untrusted["root"] == str(work.resolve()) and untrusted["events"] == ["preToolUse"]
        assert untrusted["hooks"] == 1 and not untrusted.get("changed")
        attached = await d.request("dsh/session/attach", {"sessionId": sid, "replay": "none"})
        assert attached["hooksUntrusted"] == untrusted  # a client attaching later learns it too
        await run_turn(d, sid)
        (ran,) = tool_results(d, sid)
        assert ran.get("error") is None  # not trusted: the project's hook did not run

        answer = await d.request("dsh/project/trust", {"root": str(work)})
        assert answer == {"root": str(work.resolve()), "hooks": 1, "events": ["preToolUse"]}
        attached = await d.request("dsh/session/attach", {"sessionId": sid, "replay": "none"})
        assert "hooksUntrusted" not in attached
        await run_turn(d, sid)  # the open session runs them from now on
        blocked = tool_results(d, sid)[1]
        assert blocked["error"]["code"] == "DENIED" and "project-guard" in result_text(blocked)
        refused = await _refused(d, {"root": str(tmp_path / "hooks")})
        assert "no hooks to trust" in refused
    finally:
        await stop_daemon(d)

    # A new daemon remembers the trust: the same hooks run without a word.
    fake.script(read_secret, text_reply("blocked"))
    d, sid, _ = await start(tmp_path, fake, {})
    try:
        await run_turn(d, sid)
        (blocked,) = tool_results(d, sid)
        assert blocked["error"]["code"] == "DENIED"
        assert d.of(sid, "hooks/untrusted") == []
    finally:
        await stop_daemon(d)

    # Hooks that changed since wait for the person again.
    write_project(work, {"preToolUse": [hook(program, "guard", name="other-guard")]})
    fake.script(read_secret, text_reply("read"))
    d, sid, _ = await start(tmp_path, fake, {})
    try:
        changed = (await d.wait_event(sid, "hooks/untrusted"))["data"]
        assert changed["changed"] is True
        await run_turn(d, sid)
        (ran,) = tool_results(d, sid)
        assert ran.get("error") is None
    finally:
        await stop_daemon(d)


async def _refused(d: Daemon, params: Mapping[str, Any]) -> str:
    try:
        await d.request("dsh/project/trust", params)
    except Exception as exc:  # the client raises the JSON-RPC error
        return str(exc)
    raise AssertionError("the request was not refused")


async def test_bad_hooks_settings_are_refused_at_initialize(tmp_path: Path, fake: FakeDeepSeek) -> None:
    with pytest.raises(Exception, match=r"hooks\.preToolUse\[0\]\.timeoutS"):
        await start(tmp_path, fake, {"preToolUse": [{"command": "true", "timeoutS": -1}]})
