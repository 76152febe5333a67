"""Sandbox benchmark (issue 41): what confinement adds to each command. Every figure is printed beside
an unconfined `true` measured in the same run, interleaved round by round.

    .venv/bin/python -m bench.sandbox_bench [--runs N]

Per command, spawn to exit status of `true`:
- baseline: `asyncio.create_subprocess_exec("true")` (how run_command starts a command today);
- full-access: the fork server with no confinement (the path every mode shares);
- layer 0: Landlock + seccomp + capabilities dropped, applied just before exec;
- layers 0+1: the same inside the session's user, mount, PID and network namespaces.
Goal: layer 0 median <= 3 ms added over the baseline, layers 0+1 <= 15 ms. Commands are `--gap`
apart (20 ms, every kind alike): an agent never starts commands back to back faster than a model
turn, and the fork server uses the gap to fork the next command's processes ahead of it. Also printed: what
starting a session's sandbox (its fork server, rules computed once) costs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from dsh_daemon.sandbox import Sandbox, SandboxPolicy, kernel, landlock, probe_level, seccomp
from dsh_daemon.sandbox.forkserver import Confinement
from dsh_daemon.sandbox.rules import compute_rules

GOALS_MS = {"layer 0": 3.0, "layers 0+1": 15.0}


def _stats(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.9) - 1] * 1000


async def _baseline(devnull: int) -> None:
    process = await asyncio.create_subprocess_exec("true", stdin=devnull, stdout=devnull, stderr=devnull)
    await process.wait()


def _in(sandbox: Sandbox, cwd: Path, devnull: int) -> Callable[[], Awaitable[None]]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}

    async def one() -> None:
        process = await sandbox.spawn(
            ["true"], cwd=cwd, env=env, stdin=devnull, stdout=devnull, stderr=devnull
        )
        if await process.wait() != 0:
            raise SystemExit("`true` failed in the sandbox")
        process.close()

    return one


def confinement_cost(policy: SandboxPolicy, runs: int) -> list[float]:
    """Layer 0's own cost in a forked child, as the fork server applies it: no_new_privs, Landlock
    (the ruleset built once), capabilities dropped, seccomp (the program packed once); the
    scheduling and the fork server's messages are left out (the per-command figures include them)."""
    rules = compute_rules(policy, probe_level(), namespaces=False, proxy_port=1)
    confinement = Confinement(rules)
    costs = []
    for _ in range(runs):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            started = time.perf_counter()
            kernel.no_new_privs()
            landlock.restrict_self(confinement.ruleset_fd)
            if confinement.drop_capabilities:
                kernel.drop_capabilities()
            seccomp.install(confinement.program)
            os.write(write, repr(time.perf_counter() - started).encode())
            os._exit(0)
        os.close(write)
        costs.append(float(os.read(read, 100)))
        os.close(read)
        os.waitpid(pid, 0)
    confinement.close()
    return costs


async def main(runs: int, gap: float) -> None:
    level = probe_level()
    print(f"sandbox level: {level.describe()}")
    base = Path(tempfile.mkdtemp(prefix="dsh-sandbox-bench-"))
    ws, temp = base / "ws", base / "tmp"
    (ws / "src").mkdir(parents=True)
    temp.mkdir()
    devnull = os.open(os.devnull, os.O_RDWR)

    def policy(mode: str, layers: str) -> SandboxPolicy:
        return SandboxPolicy(mode=mode, roots=(ws,), temp_dir=temp, layers=layers, home=base / "home")  # type: ignore[arg-type]

    starts: dict[str, list[float]] = {}
    sandboxes: dict[str, Sandbox] = {}
    kinds = [("full-access", "full-access", "auto"), ("layer 0", "workspace-write", "landlock-only")]
    if level.namespaces:
        kinds.append(("layers 0+1", "workspace-write", "auto"))
    if not level.confined:
        kinds = kinds[:1]
    for name, mode, layers in kinds:
        for _ in range(5):
            started = time.perf_counter()
            sandbox = await Sandbox.start(policy(mode, layers), level)
            starts.setdefault(name, []).append(time.perf_counter() - started)
            if name in sandboxes:
                await sandbox.aclose()
            else:
                sandboxes[name] = sandbox
    runners: dict[str, Callable[[], Awaitable[None]]] = {"baseline": lambda: _baseline(devnull)}
    runners.update({name: _in(sandbox, ws, devnull) for name, sandbox in sandboxes.items()})
    samples: dict[str, list[float]] = {name: [] for name in runners}
    for run in runners.values():  # warm-up
        for _ in range(5):
            await run()
    order = list(runners)
    shuffle = random.Random(41).shuffle
    for _ in range(runs):
        # A shuffled order each round: after a sandboxed command its fork server forks the next
        # spare pair, which would otherwise always slow whichever kind comes next.
        shuffle(order)
        for name in order:
            run = runners[name]
            await asyncio.sleep(gap)
            started = time.perf_counter()
            await run()
            samples[name].append(time.perf_counter() - started)
    for sandbox in sandboxes.values():
        await sandbox.aclose()
    os.close(devnull)

    base_median, base_p90 = _stats(samples["baseline"])
    print(f"\nper command, spawn to exit of `true`, {runs} interleaved rounds, shuffled (ms):")
    print(f"  {'':<12} {'median':>8} {'p90':>8} {'added':>8} {'ratio':>6}  goal")
    print(f"  {'baseline':<12} {base_median:8.2f} {base_p90:8.2f} {'':>8} {'1.00':>6}  (unconfined true)")
    for name in runners:
        if name == "baseline":
            continue
        median, p90 = _stats(samples[name])
        goal = GOALS_MS.get(name)
        verdict = (
            ""
            if goal is None
            else f"<= {goal:.0f} ms added: {'met' if median - base_median <= goal else 'MISSED'}"
        )
        print(
            f"  {name:<12} {median:8.2f} {p90:8.2f} {median - base_median:8.2f} {median / base_median:6.2f}  {verdict}"
        )
    if level.confined:
        median, p90 = _stats(confinement_cost(policy("workspace-write", "landlock-only"), runs))
        print(f"\nlayer 0 applied in the child, alone (ms): median {median:.2f}, p90 {p90:.2f}")
    print("\nstarting a session's sandbox (fork server, rules computed once), median of 5 (ms):")
    for name, times in starts.items():
        print(f"  {name:<12} {statistics.median(times) * 1000:8.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument(
        "--gap",
        type=float,
        default=0.02,
        help="seconds between commands, for every kind alike (default 0.02)",
    )
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.gap))
