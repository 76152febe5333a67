"""A command the person ran in an editor's terminal, attached to a prompt (`terminal` context,
protocol.md §6), through the real daemon process and the fake provider: what the model is sent, and the
shapes refused before anything is queued."""

from __future__ import annotations

from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException

from dsh_daemon.host.editor_context import MAX_TERMINAL_OUTPUT_CHARS
from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.harness import start_daemon, stop_daemon, text_reply

RUN = {
    "name": "bash",
    "command": "echo term36-marker; false",
    "cwd": "/home/ann/project",
    "exitCode": 1,
    "output": "term36-marker\n",
}
REF = {"uri": "terminal:/1/bash", "kind": "terminal", "terminal": RUN}


def user_texts(fake: FakeDeepSeek) -> list[str]:
    return [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "user"]


async def test_a_terminal_command_travels_with_a_prompt_to_the_provider(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    d = await start_daemon(tmp_path / "state", fake, root=work)
    assert "terminal" in d.initialized.capabilities.experimental["dsh"]["editorContext"]
    fake.script(text_reply("false exits 1"))
    sid = await d.new_session(cwd=str(work))
    sent = await d.request(
        "dsh/followup", {"sessionId": sid, "message": {"content": "why did it fail?"}, "context": [REF]}
    )
    assert len(sent["contextIds"]) == 1
    await d.wait_idle_turn(sid, 1)
    (entered, prompt) = [e["data"] for e in d.of(sid, "user/message")]
    assert entered["id"] == sent["contextIds"][0]
    assert entered["source"] == {"kind": "editor", "uri": "terminal:/1/bash", "contextKind": "terminal"}
    text = (
        'A command in the terminal "bash" (in /home/ann/project), exit code 1:\n'
        "```console\n$ echo term36-marker; false\nterm36-marker\n```"
    )
    assert entered["content"][0]["text"] == text
    assert prompt["content"][0]["text"] == "why did it fail?"
    users = user_texts(fake)
    assert users.index(text) == users.index("why did it fail?") - 1  # entered just before the prompt
    await stop_daemon(d)


async def test_a_long_output_keeps_its_tail_and_a_running_command_says_it_has_no_exit_code(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    d = await start_daemon(tmp_path / "state", fake, root=work)
    sid = await d.new_session(cwd=str(work))
    output = "early line\n" + "x" * MAX_TERMINAL_OUTPUT_CHARS + "\nthe failure at the end\n"
    running = {"name": "zsh", "command": "make", "output": output}
    added = await d.request(
        "dsh/context/add",
        {"sessionId": sid, "uri": "terminal:/2/zsh", "kind": "terminal", "terminal": running},
    )
    quiet = {"name": "zsh", "command": "true", "output": "", "exitCode": 0, "truncated": False}
    await d.request(
        "dsh/context/add", {"sessionId": sid, "uri": "terminal:/3/zsh", "kind": "terminal", "terminal": quiet}
    )
    inbox = await d.request("dsh/inbox/list", {"sessionId": sid})
    long, empty = inbox["nextStep"]
    assert long["id"] == added["messageId"]
    body = long["content"][0]["text"]
    assert body.startswith(
        'A command in the terminal "zsh", no exit code (still running, or its shell reported none):\n'
    )
    assert "early line" not in body and "the failure at the end\n```\n" in body
    assert body.endswith(f"[truncated: the last {MAX_TERMINAL_OUTPUT_CHARS} characters of its output]")
    assert empty["content"][0]["text"] == (
        'A command in the terminal "zsh", exit code 0:\n```console\n$ true\n```\n(it printed nothing)'
    )
    await stop_daemon(d)


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"uri": "terminal:/1/bash", "kind": "terminal"}, "context[0].terminal"),  # no record
        ({**REF, "kind": "file"}, "context[0].terminal"),  # a record on another kind
        ({**REF, "terminal": {**RUN, "exitCode": "1"}}, "context[0].terminal.exitCode"),
        ({**REF, "terminal": {"name": "bash", "command": "ls"}}, "context[0].terminal.output"),
        ({**REF, "terminal": "term36-marker"}, "context[0].terminal"),
    ],
)
async def test_a_bad_terminal_item_is_invalid_params_and_queues_nothing(
    tmp_path: Path, fake: FakeDeepSeek, bad: dict[str, object], named: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    d = await start_daemon(tmp_path / "state", fake, root=work)
    sid = await d.new_session(cwd=str(work))
    with pytest.raises(JsonRpcException) as caught:
        await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "look"}, "context": [bad]})
    assert caught.value.data["code"] == "invalid_params"
    assert named in str(caught.value)
    assert d.of(sid, "agent/inbox/inserted") == [] and d.of(sid, "turn/start") == []
    assert (await d.request("dsh/inbox/list", {"sessionId": sid}))["nextTurn"] == []  # still serving
    await stop_daemon(d)
