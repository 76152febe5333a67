"""Neovim plugin benchmark: how long a keystroke waits while the chat renders a stream.

    .venv/bin/python -m bench.neovim_bench [--plugin DIR] [--runs N] [--no-ui] [--startup]

A real Neovim (the venv's, from scripts/setup-neovim.sh) runs headless with the plugin and a UI
attached through pynvim (so it redraws as a terminal Neovim does: 120x40 cells, wrap on). The chat
is fed `dsh/event`s the way Neovim's LSP client delivers a daemon's notifications (bench/
neovim_probe.lua); a 1 ms libuv timer probes input latency: its longest gap is the longest a
keystroke would wait. Scenarios (goal from issue 22 item 9):

Three figures per scenario: the probe's longest gap in wall-clock time (includes whatever else the
machine runs), the longest stretch of Neovim's own CPU time between two ticks (the wait on an idle
machine), and how many screen cells the UI was sent to redraw (a terminal UI process draws each; it is
also what reads the keyboard).

1. idle: nothing fed (the baseline: the loop's own jitter in this run);
2. burst: 5,000 deltas arriving at once (goal <= 50 ms);
3. line: 5,000 deltas that form one 50 KB line, at once (goal <= 50 ms);
4. paced: 1,500 deltas 2 ms apart, a fast model (goal <= 10 ms);
5. line-paced: 2,500 deltas 2 ms apart that form one 50 KB line (goal <= 10 ms: model speed).

`--plugin DIR` measures another copy of the plugin (e.g. `git archive main editors/neovim | tar -x
-C /tmp/before`, then `--plugin /tmp/before/editors/neovim`) for a before/after comparison.
`--startup` also prints what sourcing plugin/dsh.lua costs at startup (from `--startuptime`).
Figures are printed, never asserted: tests do not time things.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = Path(__file__).with_name("neovim_probe.lua")
SCENARIOS = (
    ("idle", 0, None),
    ("burst", 5000, 50.0),
    ("line", 5000, 50.0),
    ("paced", 1500, 10.0),
    ("line-paced", 2500, 10.0),
)


def nvim_path() -> str:
    local = Path(sys.executable).parent / "nvim"
    return str(local) if local.exists() else "nvim"


def drain(nv: object) -> int:
    """Take the redraw notifications pynvim queued; the number of screen cells they redraw."""
    pending = nv._session._pending_messages  # type: ignore[attr-defined]
    cells = 0
    while pending:
        msg = pending.popleft()
        if msg[1] != "redraw":
            continue
        for event in msg[2]:
            if event and event[0] == "grid_line":
                for line in event[1:]:
                    for cell in line[3]:  # [text, hl_id?, repeat?]
                        cells += int(cell[2]) if len(cell) > 2 else 1
    return cells


def run_once(plugin: Path, ui: bool, setup: dict[str, object]) -> dict[str, tuple[float, float, int]]:
    import pynvim

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = {**os.environ, "HOME": tmp, "XDG_CONFIG_HOME": tmp, "XDG_DATA_HOME": tmp, "XDG_STATE_HOME": tmp}
        init = work / "init.lua"
        init.write_text(
            f"vim.opt.rtp:prepend({str(plugin)!r})\nvim.o.swapfile = false\nvim.cmd.cd({tmp!r})\n"
            f"dofile({str(PROBE)!r})\n",
            encoding="utf-8",
        )
        argv = [nvim_path(), "--embed", "--headless", "-i", "NONE", "-n", "-u", str(init)]
        old_env = os.environ.copy()
        os.environ.update(env)
        try:
            nv = pynvim.attach("child", argv=argv)
        finally:
            os.environ.clear()
            os.environ.update(old_env)
        try:
            if ui:
                nv.ui_attach(120, 40, rgb=True, ext_linegrid=True)
            nv.exec_lua("return B.setup(...)", setup)
            out: dict[str, tuple[float, float, int]] = {}
            for kind, n, _goal in SCENARIOS:
                drain(nv)
                nv.exec_lua("return B.start(...)", kind, n)
                deadline = time.monotonic() + 120
                cells = 0
                while not nv.exec_lua("return B.done"):
                    cells += drain(nv)
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{kind}: did not finish")
                    time.sleep(0.05)
                wall, cpu = nv.exec_lua("return {B.max, B.max_cpu}")
                out[kind] = (float(wall), float(cpu), cells + drain(nv))
            return out
        finally:
            try:
                nv.command("qa!", async_=True)
                nv.close()
            except Exception:
                pass


def startup_ms(plugin: Path) -> float | None:
    """What sourcing plugin/dsh.lua costs (its `--startuptime` line), or None without it."""
    if not (plugin / "plugin" / "dsh.lua").exists():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "startup.log"
        init = Path(tmp) / "init.lua"
        init.write_text(f"vim.opt.rtp:prepend({str(plugin)!r})\n", encoding="utf-8")
        subprocess.run(
            [
                nvim_path(),
                "--headless",
                "-i",
                "NONE",
                "-n",
                "-u",
                str(init),
                "--startuptime",
                str(log),
                "+qa!",
            ],
            check=True,
            timeout=60,
            env={**os.environ, "HOME": tmp, "XDG_CONFIG_HOME": tmp, "XDG_DATA_HOME": tmp},
        )
        for line in log.read_text().splitlines():
            if line.rstrip().endswith("plugin/dsh.lua"):
                fields = re.split(r"\s+", line.strip())
                return float(fields[1])  # self+sourced (ms)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--plugin", type=Path, default=ROOT / "editors" / "neovim")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-ui", action="store_true", help="no UI attached (Neovim then does not redraw)")
    parser.add_argument("--startup", action="store_true")
    parser.add_argument(
        "--setup", default="{}", help="JSON options for setup{} (e.g. '{\"treesitter\": false}')"
    )
    args = parser.parse_args()
    plugin = args.plugin.resolve()
    walls: dict[str, list[float]] = {kind: [] for kind, _, _ in SCENARIOS}
    cpus: dict[str, list[float]] = {kind: [] for kind, _, _ in SCENARIOS}
    cells: dict[str, list[float]] = {kind: [] for kind, _, _ in SCENARIOS}
    for _ in range(args.runs):
        for kind, (wall, cpu, drawn) in run_once(plugin, not args.no_ui, json.loads(args.setup)).items():
            walls[kind].append(wall)
            cpus[kind].append(cpu)
            cells[kind].append(drawn / 1000)
    print(f"plugin: {plugin}  ({'no UI' if args.no_ui else 'UI attached, 120x40'}; {args.runs} runs)")
    print(
        f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (wall figures include other processes' time)"
    )
    tables = (
        ("longest wait a keystroke sees, wall clock (ms): median of runs [all runs]", walls, True),
        (
            "longest stretch of Neovim's own CPU time between two probe ticks (ms): the wait on an idle machine",
            cpus,
            True,
        ),
        ("screen cells the UI was sent to redraw (thousands; a terminal UI draws each)", cells, False),
    )
    for title, results, goals in tables:
        print(title)
        report(results, goals)
    if args.startup:
        ms = startup_ms(plugin)
        print(f"startup: sourcing plugin/dsh.lua {'n/a' if ms is None else f'{ms:.3f} ms'}")


def report(results: dict[str, list[float]], goals: bool) -> None:
    base = statistics.median(results["idle"])
    for kind, n, goal in SCENARIOS:
        values = results[kind]
        med = statistics.median(values)
        what = {
            "idle": "idle (baseline)",
            "burst": f"{n} deltas at once",
            "line": f"{n} deltas, one 50 KB line",
            "paced": f"{n} deltas 2 ms apart",
            "line-paced": f"{n} deltas 2 ms apart, one 50 KB line",
        }[kind]
        runs = ", ".join(f"{v:.1f}" for v in values)
        ratio = f"  x{med / base:.1f} of idle" if kind != "idle" and base > 0 else ""
        target = f"  (goal <= {goal:g})" if goal and goals else ""
        print(f"  {what:44s} {med:8.1f}  [{runs}]{ratio}{target}")


if __name__ == "__main__":
    main()
