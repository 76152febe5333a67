"""The VS Code chat panel's benchmark (editors/vscode/bench/panel.perf.ts), run from the repository root.

    .venv/bin/python -m bench.vscode_panel_bench [--turns 2000]

It needs `scripts/setup-vscode.sh` (code-server, Node 24, Chromium). In a real VS Code (code-server +
Chromium, the packaged extension, this checkout's daemon, a fake provider streaming SSE bytes) on a
session of `--turns` turns written by bench/vscode_session.py it prints: streaming frame p95 and the
longest task while a short reply streams; a 200 KB reply's last character after the provider's last
byte and the renderer main thread's busy share over the stream; the DOM nodes after scrolling to the
top. Goals (issue 21): p95 <= 33 ms, no long task > 100 ms, <= 200 ms, <= 25 %, <= 5,000 nodes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXT = ROOT / "editors" / "vscode"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=2000)
    args = parser.parse_args()
    if not (EXT / ".tools" / "cs" / "node_modules" / ".bin" / "code-server").exists():
        sys.exit("code-server is not installed: run scripts/setup-vscode.sh")
    env = dict(os.environ, DSH_BENCH_TURNS=str(args.turns), FORCE_COLOR="0", NO_COLOR="1")
    env.setdefault("DSH_PYTHON", sys.executable)
    sys.exit(subprocess.run(["npm", "run", "bench"], cwd=EXT, env=env).returncode)


if __name__ == "__main__":
    main()
