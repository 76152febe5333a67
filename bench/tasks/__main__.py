"""`python -m bench.tasks --base-url URL --model M [--tasks a,b] [--jsonl out.jsonl]`: every task (or
those named) through `dsh-daemon exec --json` against the endpoint, one after the other; prints a
line per task as it ends, then the table (pass rate, steps, tool calls, tokens, cost, wall time per task
and in total); `--jsonl` writes one record per task and a total. Exit status 0 whatever the pass rate
(it is a measurement), 2 for bad arguments. README "Measuring the agent"."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.tasks.report import table, totals
from bench.tasks.runner import Endpoint, TaskResult, run_task
from bench.tasks.suite import TaskError, load_tasks


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.tasks", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument(
        "--base-url",
        help="OpenAI-compatible endpoint (default: the daemon's, DeepSeek); the key: DEEPSEEK_API_KEY",
    )
    parser.add_argument("--model", help="model id (default: the daemon's, deepseek-v4-flash)")
    parser.add_argument(
        "--no-thinking", action="store_true", help="disable thinking mode (endpoints without it)"
    )
    parser.add_argument("--tasks", help="comma-separated task names (default: all)")
    parser.add_argument("--list", action="store_true", help="list the tasks and exit")
    parser.add_argument(
        "--jsonl", type=Path, metavar="FILE", help="write one JSON record per task, then the totals"
    )
    parser.add_argument(
        "--max-cost-usd", type=float, metavar="X", help="cap each task's turn at X USD (exec --max-cost-usd)"
    )
    parser.add_argument(
        "--timeout-s",
        type=float,
        metavar="S",
        help="cancel a task's run after S seconds (default: the task's, 600)",
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="the daemon's config.json for every run (e.g. provider prices, maxTokens); default: none",
    )
    parser.add_argument(
        "--unconfined-checks",
        action="store_true",
        help="run the hidden checks outside dsh's sandbox (machines without one; they run the agent's code)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="keep each task's repository, daemon state and exec output under DIR/<task>/",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        tasks = load_tasks([n.strip() for n in args.tasks.split(",") if n.strip()] if args.tasks else None)
    except TaskError as exc:
        print(f"bench.tasks: {exc}", file=sys.stderr)
        return 2
    if args.list:
        for task in tasks:
            print(f"{task.name:<22} {task.summary}")
        return 0
    try:
        config = json.loads(args.config.read_text()) if args.config else None
    except (OSError, ValueError) as exc:
        print(f"bench.tasks: --config {args.config}: {exc}", file=sys.stderr)
        return 2
    endpoint = Endpoint(
        args.base_url, args.model, thinking=not args.no_thinking, max_cost_usd=args.max_cost_usd
    )
    results: list[TaskResult] = []
    out = args.jsonl.open("w") if args.jsonl else None
    try:
        for task in tasks:
            result = run_task(
                task,
                endpoint,
                keep=args.keep,
                timeout_s=args.timeout_s,
                config=config,
                confined_checks=not args.unconfined_checks,
            )
            results.append(result)
            print(
                f"{task.name}: {'PASS' if result.passed else 'fail'} ({result.status}, {result.steps} steps,"
                f" {result.wall_s:.1f} s){' ' + result.error if result.error else ''}",
                file=sys.stderr,
                flush=True,
            )
            if out is not None:
                out.write(
                    json.dumps({**result.record(), "baseUrl": args.base_url, "model": args.model}) + "\n"
                )
                out.flush()
        if out is not None:
            out.write(json.dumps({**totals(results), "baseUrl": args.base_url, "model": args.model}) + "\n")
    finally:
        if out is not None:
            out.close()
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
