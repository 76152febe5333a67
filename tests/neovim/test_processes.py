"""Background processes in Neovim (issue 33.2) over the real daemon: a process the scripted model
starts with `run_command {background: true}` is a line in the transcript, listed by :DshProcesses
(its output a key away) and stopped from there (the daemon records `stoppedBy: "person"` and the
process is gone); :DshStop offers to stop those still running (`dsh/cancel {stopProcesses}`)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.neovim.harness import Editor, Paths
from tests.server.harness import text_reply, tool_call_stream

# Prints once, then waits until it is stopped; its own pid in the output lets the test find it.
TICKER = f"{sys.executable} -u -c \"import os, time; print('ready', os.getpid()); time.sleep(600)\""


def allow_commands(paths: Paths) -> None:
    """Commands run without asking (the harness's full-access asks for each): the permission prompt
    has its own tests."""
    (paths.state / "config.json").write_text(
        json.dumps({"tools": {"sandbox": "full-access", "permissions": {"run_command": "allow"}}})
    )


def start(call_id: str, name: str) -> Reply:
    args = {"command": TICKER, "background": True, "name": name}
    return Reply.stream(tool_call_stream([(call_id, "run_command", args)]))


def process_floats(editor: Editor) -> list[dict[str, Any]]:
    return [f for f in editor.floats() if f["kind"] == "processes"]


def listed(editor: Editor) -> list[dict[str, Any]]:
    return editor.lua("return T.request('dsh/process/list', {sessionId = T.chat().id})")["processes"]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :][:1] not in ("Z", "X")


def wait_gone(pid: int, within: float = 15.0) -> None:
    deadline = time.monotonic() + within
    while alive(pid):
        assert time.monotonic() < deadline, f"process {pid} still runs"
        time.sleep(0.05)


def test_a_background_process_is_listed_its_output_shown_and_stopped_by_the_person(
    editor: Editor, paths: Paths, fake: FakeDeepSeek
) -> None:
    allow_commands(paths)
    fake.script(start("call_b1", "ticker"), text_reply("The ticker runs."))
    editor.cmd("Dsh start a ticker")
    editor.wait_footers(1)
    # full-access: the daemon says it runs unconfined, and so does the line.
    assert any(
        line.startswith("▶ p1 started in the background (unconfined): ticker · $ ") for line in editor.lines()
    ), editor.lines()
    (proc,) = listed(editor)
    assert proc["running"] and proc["name"] == "ticker" and alive(proc["pid"])

    editor.cmd("DshProcesses")
    pf = editor.wait(
        lambda: next((f for f in process_floats(editor) if f["lines"][0].startswith("p1")), None),
        what="the list",
    )
    assert pf["current"] and "background processes" in pf["title"] and "x stop" in pf["footer"]
    assert pf["lines"][0].startswith("p1   running  ticker · $ ")
    # <CR>: its output (dsh/process/output) in a buffer of its own.
    editor.keys("<CR>")
    out = editor.wait(
        lambda: (
            editor.lua("return vim.b.dsh_kind") == "process-output"
            and editor.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
        ),
        what="the output buffer",
    )
    assert out[-1] == "[p1 running]" and any(line.startswith("ready ") for line in out)
    editor.keys("q")

    # x in the list stops it: the daemon says the person did, and it is gone.
    editor.cmd("DshProcesses")
    editor.wait(lambda: any(f["lines"][0].startswith("p1   running") for f in process_floats(editor)))
    editor.keys("x")
    pf = editor.wait(
        lambda: next((f for f in process_floats(editor) if "ended" in f["lines"][0]), None),
        what="the list to show it ended",
    )
    assert pf["lines"][0].startswith("p1   ended: stopped by you (signal 15) · ticker · $ ")
    wait_gone(proc["pid"])
    (after,) = listed(editor)
    assert after["stoppedBy"] == "person" and not after["running"]
    lines = editor.wait_text("■ p1 stopped by you (signal 15): ticker")
    assert sum(line.startswith("■ p1") for line in lines) == 1


def test_stop_offers_to_stop_the_processes_still_running(
    editor: Editor, paths: Paths, fake: FakeDeepSeek
) -> None:
    allow_commands(paths)
    fake.script(start("call_c1", "first"), start("call_c2", "second"), text_reply("Both run."))
    editor.cmd("Dsh start two")
    editor.wait_footers(1)
    pids = [p["pid"] for p in listed(editor)]
    assert len(pids) == 2 and all(alive(p) for p in pids)
    # vim.ui.select answers what _G.pick says and records what it was asked.
    editor.lua(
        "_G.asked = {} _G.pick = 1 vim.ui.select = function(items, opts, cb)"
        " table.insert(_G.asked, {prompt = opts.prompt, items = items}) cb(items[_G.pick]) end"
    )
    editor.cmd("DshStop")  # keep them: nothing stops
    asked = editor.wait(lambda: editor.lua("return _G.asked"), what="the offer")
    assert asked[0]["prompt"] == "dsh: 2 background processes still run: p1 first, p2 second"
    assert asked[0]["items"] == ["Keep them running (:DshProcesses lists them)", "Stop them too"]
    assert all(alive(p) for p in pids)
    assert all(p["running"] for p in listed(editor))

    editor.lua("_G.asked = {} _G.pick = 2")
    editor.cmd("DshStop")
    for pid in pids:
        wait_gone(pid)
    # The daemon records the end after it has reaped the process: the pid can be gone first.
    editor.wait_text("■ p2 stopped with the cancel")
    assert [p.get("stoppedBy") for p in listed(editor)] == ["cancel", "cancel"]
    assert "■ p1 stopped with the cancel" in editor.text()
    # Nothing runs any more: a stop asks nothing.
    editor.lua("_G.asked = {}")
    editor.cmd("DshStop")
    time.sleep(0.5)
    assert editor.lua("return _G.asked") == []
