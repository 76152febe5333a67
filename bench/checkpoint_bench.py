"""Checkpoint cost per edit. Each figure is printed beside a baseline measured in the same run.

    .venv/bin/python -m bench.checkpoint_bench [--size BYTES] [--edits N]

An `edit_file` call on a 1 MB text file (one line changed per edit), run through the real tool with
the disk applier, twice: without checkpoints (the baseline) and with the session's checkpoints
(`host/checkpoints.py` over the SQLite session store). Printed: the median time per edit of each,
the ratio, and the bytes the store kept per edit (each edit's before content is new, so about the
file's size; a content already kept costs no bytes, shown by an edit back to an earlier content).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from dsh_daemon.agent.signal import AbortSignal
from dsh_daemon.agent.tools import ToolCall
from dsh_daemon.host.checkpoints import SessionCheckpoints
from dsh_daemon.session.checkpoints import CheckpointStore
from dsh_daemon.session.store import SessionStore
from dsh_daemon.tools.documents import NoDocuments
from dsh_daemon.tools.editing import EditFileTool
from dsh_daemon.tools.edits import DiskEditApplier
from dsh_daemon.tools.limits import ToolLimits
from dsh_daemon.tools.tracking import ReadTracker
from dsh_daemon.tools.workspace import Workspace


class Context:
    """What a tool body may reach (agent/tools.py ToolContext), with nothing asked."""

    def __init__(self, call: ToolCall) -> None:
        self.call = call
        self.signal = AbortSignal()
        self.approved_preview: Any = None

    def emit_output(self, text: str) -> None: ...

    def defer_context(self, message: Any) -> None: ...

    def conclude_turn(self) -> None: ...


WORDS = (
    "def return self value if else for in range import from class None True False with as try except "
    "raise yield await async lambda items result config path name data index count total error"
).split()


def make_file(path: Path, size: int) -> int:
    """About `size` bytes of lines that compress like source code (a seeded mix of words and numbers),
    each starting with a unique `line NNNNNNNN ` the edits change."""
    rng = random.Random(25)
    lines = size // 64
    body = []
    for i in range(lines):
        words = " ".join(
            rng.choice(WORDS) if rng.random() < 0.8 else str(rng.randrange(10**6)) for _ in range(7)
        )
        body.append(f"line {i:08d} {words}"[:63].ljust(63) + "\n")
    path.write_text("".join(body))
    return lines


async def run_edits(root: Path, size: int, edits: int, checkpoints: bool) -> tuple[list[float], list[int]]:
    work = root / ("with" if checkpoints else "without")
    work.mkdir()
    target = work / "big.txt"
    lines = make_file(target, size)
    workspace = Workspace([work])
    limits = ToolLimits()
    recorder = None
    store = None
    if checkpoints:
        store = SessionStore(root / "state")
        store.create_session("bench", title=None, cwd=str(work))
        recorder = SessionCheckpoints(CheckpointStore(store, 1 << 40), "bench", workspace)
    tool = EditFileTool(
        workspace, NoDocuments(), DiskEditApplier(workspace), ReadTracker(NoDocuments()), limits, recorder
    )
    times: list[float] = []
    stored: list[int] = []
    before = 0
    old_prev = new_prev = ""
    for i in range(edits):
        line = (i * 7919) % lines
        old, new = f"line {line:08d} ", f"LINE {line:08d} "
        if i == edits - 2:  # put back the edit before: a before content not kept yet
            old, new = new_prev, old_prev
        elif i == edits - 1:  # redo it: its before content is kept already, so no byte is stored
            old, new = old_prev, new_prev
        else:
            old_prev, new_prev = old, new
        call = ToolCall(f"c{i}", "edit_file", "", None, 1, i)
        args = {"path": str(target), "old_string": old, "new_string": new}
        start = time.perf_counter()
        outcome = await tool.execute(args, Context(call))
        times.append(time.perf_counter() - start)
        assert not outcome.is_error, outcome
        if store is not None:
            total = CheckpointStore(store, 1 << 40).stored_bytes("bench")
            stored.append(total - before)
            before = total
    if store is not None:
        store.close()
    return times, stored


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--edits", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        base, _ = asyncio.run(run_edits(root, args.size, args.edits, checkpoints=False))
        kept, stored = asyncio.run(run_edits(root, args.size, args.edits, checkpoints=True))
    base_ms = statistics.median(base[1:]) * 1000
    kept_ms = statistics.median(kept[1:]) * 1000
    print(
        f"edit_file on a {args.size / (1 << 20):.1f} MB file, {args.edits} edits (median of all but the first):"
    )
    print(f"  without checkpoints (baseline): {base_ms:8.2f} ms per edit")
    print(
        f"  with checkpoints:               {kept_ms:8.2f} ms per edit  ({kept_ms / base_ms:.2f}x baseline)"
    )
    print(f"  checkpoint cost:                {kept_ms - base_ms:8.2f} ms per edit")
    new = stored[:-2]
    print(
        f"  stored per edit: {statistics.median(new) / 1024:.0f} KiB (new before content, file is "
        f"{args.size / 1024:.0f} KiB); an edit whose before content is kept already: {stored[-1]} bytes"
    )


if __name__ == "__main__":
    main()
