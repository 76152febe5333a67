"""Custom slash commands and skills over the LSP wire (protocol.md "Custom commands and skills"): a
real daemon, files written into a temp project and `$DSH_HOME`, and the fake provider showing what
the model received. The log keeps the expansion (a later request rebuilds it whatever the file says
by then); `allowed-tools` only narrows; a project's command cannot pick the model; files outside
their place, FIFOs and oversized ones are left out and named."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import start_daemon, stop_daemon, text_reply, tool_call_stream


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def offered(body: dict[str, Any]) -> list[str]:
    return sorted(t["function"]["name"] for t in body.get("tools") or [])


def users(body: dict[str, Any]) -> list[Any]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


async def refused(d: Any, method: str, params: Any) -> str:
    try:
        await d.request(method, params)
    except Exception as exc:  # the client raises the JSON-RPC error
        return str(exc)
    raise AssertionError("the request was not refused")


async def test_listed_expanded_logged_and_rebuilt(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    review = write(
        work / ".dsh" / "commands" / "review.md",
        "---\ndescription: Review code\nargument-hint: PATH\nmodel: deepseek-v4-pro\n"
        "allowed-tools:\n  - read_file\n  - run_command\n---\nReview $ARGUMENTS carefully.\n",
    )
    write(state / "commands" / "fast.md", "---\nmodel: deepseek-v4-pro\n---\nAnswer fast.")
    write(work / ".dsh" / "commands" / "review.txt", "not a command: not .md")
    write(state / "commands" / "huge.md", "x" * (64 * 1024 + 1))
    outside = write(
        tmp_path / "elsewhere" / "skills" / "stolen" / "SKILL.md",
        "---\ndescription: not the project's\n---\n",
    )
    os.symlink(outside.parent.parent, work / ".dsh" / "skills")  # a folder that resolves elsewhere
    os.mkfifo(state / "commands" / "fifo.md")
    init = {"thinking": False, "tools": {"permissions": {"run_command": "deny"}}}
    d = await start_daemon(state, fake, root=work, init_options=init, apply_edit=False)
    try:
        listed = await d.request("dsh/commands/list", {"cwd": str(work)})
        assert listed["commands"] == [
            {"name": "fast", "description": "user command", "source": "user", "model": "deepseek-v4-pro"},
            {
                "name": "review",
                "description": "Review code",
                "source": "project",
                "argumentHint": "PATH",
                "allowedTools": ["read_file", "run_command"],
            },
        ]
        problems = "\n".join(listed["problems"])
        assert "huge.md: left out: over 65536 bytes" in problems
        assert "fifo.md: left out" in problems and "not a regular file" in problems
        assert listed["skills"] == []
        assert "stolen/SKILL.md: left out: its folder is outside" in problems
        for bad in ({}, {"cwd": str(work), "sessionId": "x"}):
            assert "either sessionId or cwd" in await refused(d, "dsh/commands/list", bad)

        sid = await d.new_session(cwd=str(work))
        assert (await d.request("dsh/commands/list", {"sessionId": sid}))["commands"] == listed["commands"]
        fake.script(
            Reply.stream(tool_call_stream([("c1", "write_file", {"path": "x.txt", "content": "x"})])),
            text_reply("reviewed"),
            text_reply("again"),
            text_reply("fast"),
        )
        sent = await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "/review app.py"}})
        await d.wait_idle_turn(sid, 1)
        first = fake.requests[0].json
        assert users(first)[-1] == "Review app.py carefully."
        # Narrowed to what the command allows *and* the person's settings offer: never wider.
        assert offered(first) == ["read_file"]
        assert first["model"] == "deepseek-v4-flash"  # a project's command cannot choose the model
        refusal = json.dumps(fake.requests[1].json["messages"][-1])
        assert "allows only: read_file, run_command" in refusal
        assert not (work / "x.txt").exists()

        # The log holds what was typed and what the model read.
        (entered,) = [e["data"] for e in d.of(sid, "user/message") if e["data"]["source"].get("command")]
        assert entered["id"] == sent["messageId"]
        assert entered["content"] == [{"type": "text", "text": "Review app.py carefully."}]
        command = entered["source"]["command"]
        assert (command["name"], command["arguments"], command["origin"]) == ("review", "app.py", "project")
        assert command["path"] == str(review.resolve())

        # The file changes; the next turn's request still carries the expansion as it was sent.
        review.write_text("Something else entirely.")
        await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "and then?"}})
        await d.wait_idle_turn(sid, 2)
        later = fake.requests[2].json
        assert "Review app.py carefully." in users(later) and users(later)[-1] == "and then?"
        assert "write_file" in offered(later)  # the narrowing was that turn's only

        # The person's own command may choose the model, for its turn.
        await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "/fast"}})
        await d.wait_idle_turn(sid, 3)
        assert fake.requests[3].json["model"] == "deepseek-v4-pro"
        assert users(fake.requests[3].json)[-1] == "Answer fast."
    finally:
        await stop_daemon(d)


async def test_a_parked_command_and_its_rewording_are_expanded(tmp_path: Path, fake: FakeDeepSeek) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    write(work / ".dsh" / "commands" / "one.md", "First: $ARGUMENTS")
    write(work / ".dsh" / "commands" / "two.md", "Second: $ARGUMENTS")
    d = await start_daemon(state, fake, root=work, init_options={"thinking": False}, apply_edit=False)
    try:
        sid = await d.new_session(cwd=str(work))
        params = {"sessionId": sid, "message": {"content": "/one a"}, "target": "next-turn", "wakeup": False}
        sent = await d.request("dsh/send", params)
        inbox = await d.request("dsh/inbox/list", {"sessionId": sid})
        (item,) = inbox["nextTurn"]
        assert item["content"] == [{"type": "text", "text": "First: a"}] and item["id"] == sent["messageId"]
        reworded = {"sessionId": sid, "messageId": sent["messageId"], "message": {"content": "/two b"}}
        await d.request("dsh/inbox/replace", reworded)
        fake.script(text_reply("done"))
        await d.request("dsh/wake", {"sessionId": sid})
        await d.wait_idle_turn(sid, 1)
        assert users(fake.requests[0].json)[-1] == "Second: b"
    finally:
        await stop_daemon(d)
