"""Neovim plugin benchmark: keystroke -> screen while a 5,000-delta burst streams into a chat that
already shows 2,000 turns (issue 37.3).

    .venv/bin/python -m bench.neovim_keystroke_bench [--turns 2000] [--deltas 5000] [--bursts 3]

A real Neovim (the venv's) with the plugin, set up as tests/neovim does, talks to the real daemon,
which streams from the fake provider on 127.0.0.1. A UI is attached through pynvim (160x40, the
linegrid protocol a terminal UI speaks). The transcript is first given 2,000 rendered turns (each a
prompt, a reply with a code block, a footer: about 24,000 lines for tree-sitter and the syntax to
handle), then the person types into the chat input, one key every 30 ms: a key's latency is from
`nvim_input` until the UI is sent the redraw that draws it on the input's row.

Scenarios, in one run, each on its own Neovim and daemon:
1. idle: nothing streaming (the baseline: Neovim, the UI protocol, this machine);
2. burst: each of `--bursts` (5) replies is 5,000 deltas at once; keys typed while they stream and for
   `--tail-ms` (1 s) after each ends (when the finished reply gets highlighted), with the plugin's
   default delta_coalesce_ms = 16 (the daemon merges deltas for about a frame);
3. burst, coalescing off: the same with delta_coalesce_ms = 0 (deltas merged only while Neovim
   falls behind), for comparison.
Goal (issue 37.3): burst p95 <= 50 ms. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import string
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.neovim.harness import Editor, Paths, find_nvim

GOAL_MS = 50.0
KEY_GAP_S = 0.03

FAKE_TURNS = """
local n = ...
local turns = {}
for i = n, 1, -1 do -- newest first, as dsh/session/transcript sends them
  local text = ('Answer %d: the change goes in two places.\\n\\n```python\\ndef step_%d(x):\\n'
    .. '    return x + %d\\n```\\n\\nThen run the tests; **both** should pass and `lint` stays quiet.'):format(i, i, i)
  turns[#turns + 1] = {
    turn = i, startSeq = i * 10, startedAt = 0,
    items = {
      { type = 'message', seq = i * 10 + 1, step = 1, id = 'q' .. i, source = { kind = 'user' }, text = 'question ' .. i },
      { type = 'assistant', seq = i * 10 + 2, step = 1, text = text, finishReason = 'stop' },
    },
    ['end'] = { kind = 'completed' }, usage = { inputTokens = 1200, outputTokens = 80 },
  }
end
local c = T.chat()
c:render_page({ turns = turns })
return vim.api.nvim_buf_line_count(c.buf)
"""

INPUT_ROW = """
local c = T.chat()
for _, w in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
  if vim.api.nvim_win_get_buf(w) == c.input then
    vim.api.nvim_set_current_win(w)
    -- the input's first text row (below its window bar); the grid's rows count from 0
    return vim.fn.screenpos(w, 1, 1).row - 1
  end
end
"""

# A notification every 500 ms, so that waiting for a redraw that never comes ends (it draws nothing).
TICK = "vim.fn.timer_start(500, function() vim.rpcnotify(0, 'tick') end, { ['repeat'] = -1 })"


def burst_reply(deltas: int) -> Reply:
    pieces = [f"w{i}" + ("\n" if i % 12 == 11 else " ") for i in range(deltas)]
    return Reply.stream(text_stream(pieces))


def drawn_on_row(message: Any, row: int, key: str) -> bool:
    """Whether a redraw notification draws `key` on grid row `row`."""
    if not message or message[0] != "notification" or message[1] != "redraw":
        return False
    for event in message[2]:
        if not event or event[0] != "grid_line":
            continue
        for line in event[1:]:
            if line[1] == row and any(cell[0] == key for cell in line[3]):
                return True
    return False


def key_latency_ms(editor: Editor, row: int, key: str) -> float:
    session = editor.nv._session  # type: ignore[attr-defined]
    session._pending_messages.clear()
    start = time.perf_counter()
    editor.nv.input(key)
    while True:
        message = session.next_message()
        if drawn_on_row(message, row, key):
            return (time.perf_counter() - start) * 1000
        if time.perf_counter() - start > 10:
            return float("inf")


def type_keys(editor: Editor, row: int, count: int, until_idle: bool, tail_s: float = 0.0) -> list[float]:
    """Type up to `count` keys into the input (in insert mode); with `until_idle`, stop `tail_s`
    after the chat's turn has ended (what a reply's end costs counts too: the transcript's
    highlighting of the finished reply). The input is emptied afterwards."""
    out: list[float] = []
    idle_at: float | None = None
    for index in range(count):
        if editor.nv.api.get_mode()["mode"] != "i":  # (a send may end insert mode: start it again)
            editor.nv.input("<C-\\><C-n>A")
            time.sleep(0.1)
        key = string.ascii_lowercase[index % 26]
        out.append(key_latency_ms(editor, row, key))
        time.sleep(KEY_GAP_S)
        if until_idle and idle_at is None and editor.lua("return T.chat().state.status") == "idle":
            idle_at = time.monotonic()
        if idle_at is not None and time.monotonic() - idle_at >= tail_s:
            break
    editor.lua("vim.api.nvim_buf_set_lines(T.chat().input, 0, -1, false, {''})")
    return out


def scenario(
    name: str,
    turns: int,
    deltas: int,
    bursts: int,
    coalesce_ms: int,
    treesitter: bool = True,
    tail_s: float = 1.0,
) -> tuple[list[float], int, int]:
    """Keystroke latencies (ms), the transcript's line count, and the assistant/delta
    notifications the chat handled."""
    nvim, why = find_nvim()
    if nvim is None:
        raise SystemExit(f"needs Neovim: {why} (bash scripts/setup-neovim.sh)")
    with FakeDeepSeek() as fake, tempfile.TemporaryDirectory() as tmp:
        paths = Paths.make(Path(tmp))
        extra = (
            f"require('dsh.config').options.delta_coalesce_ms = {coalesce_ms}\n"
            f"require('dsh.config').options.treesitter = {'true' if treesitter else 'false'}"
        )
        editor = Editor(nvim, paths, fake.base_url, extra=extra)
        try:
            editor.nv.ui_attach(160, 40, rgb=True, ext_linegrid=True)
            editor.cmd("DshNew")
            editor.wait(lambda: editor.lua("return vim.b.dsh_kind") == "input", what="the chat")
            lines = int(editor.lua(FAKE_TURNS, turns))
            # The session exists (and the daemon runs) before anything is measured.
            fake.script(Reply.stream(text_stream(["ready"])))
            editor.lua("require('dsh').send(T.chat(), 'followup', 'start')")
            editor.wait(
                lambda: editor.lua("return T.chat().state.status") == "idle" and "ready" in editor.lines()
            )
            editor.lua(
                "_G.deltas = 0; local c = T.chat(); local on_event = c.on_event;"
                " c.on_event = function(self, ev) if ev.type == 'assistant/delta' then _G.deltas = _G.deltas + 1 end"
                " return on_event(self, ev) end"
            )
            row = int(editor.lua(INPUT_ROW))
            editor.lua(TICK)
            editor.nv.input("A")  # insert mode in the input
            time.sleep(0.3)
            latencies: list[float] = []
            if name == "idle":
                latencies = type_keys(editor, row, 40, until_idle=False)
            else:
                for index in range(bursts):
                    fake.script(burst_reply(deltas))
                    editor.lua("require('dsh').send(T.chat(), 'followup', ...)", f"burst {index}")
                    editor.wait(lambda: editor.lua("return T.chat().state.status") == "running", timeout=20)
                    latencies += type_keys(editor, row, 200, until_idle=True, tail_s=tail_s)
                    editor.wait(lambda: editor.lua("return T.chat().state.status") == "idle", timeout=60)
            return latencies, lines, int(editor.lua("return _G.deltas or 0"))
        finally:
            editor.quit(timeout=20)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--deltas", type=int, default=5000)
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--no-treesitter", action="store_true", help="setup{ treesitter = false }")
    parser.add_argument(
        "--tail-ms", type=int, default=1000, help="keep typing this long after each reply ends"
    )
    parser.add_argument("--only", choices=("idle", "burst", "burst-raw"), action="append")
    args = parser.parse_args()
    runs = (
        ("idle", f"idle (baseline), {args.turns} turns shown", 16),
        ("burst", f"{args.deltas} deltas at once x{args.bursts}, delta_coalesce_ms 16", 16),
        ("burst-raw", f"{args.deltas} deltas at once x{args.bursts}, delta_coalesce_ms 0", 0),
    )
    results = {}
    runs = tuple(r for r in runs if not args.only or r[0] in args.only or r[0] == "idle")
    for name, _, coalesce in runs:
        results[name] = scenario(
            name, args.turns, args.deltas, args.bursts, coalesce, not args.no_treesitter, args.tail_ms / 1000
        )
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    print("keystroke -> screen (ms): keys, p50, p95, max; delta notifications the chat handled")
    base = p95(results["idle"][0])
    for name, what, _ in runs:
        lat, lines, deltas = results[name]
        lost = sum(1 for v in lat if v == float("inf"))
        lat = [v for v in lat if v != float("inf")] or [float("inf")]
        ratio = f"  p95 x{p95(lat) / base:.1f} of idle" if name != "idle" and base > 0 else ""
        goal = f"  (goal p95 <= {GOAL_MS:g})" if name != "idle" else ""
        print(
            f"  {what:52s} n={len(lat):3d}  p50 {statistics.median(lat):6.1f}  p95 {p95(lat):6.1f}"
            f"  max {max(lat):7.1f}  notifications {deltas:5d}  ({lines} lines){ratio}{goal}"
            + (f"  ({lost} keys never drawn within 10 s)" if lost else "")
        )


if __name__ == "__main__":
    main()
