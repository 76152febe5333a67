"""`dsh-daemon exec`'s arguments and exit statuses: light (argparse only), so that building the
command line parser imports nothing of the client (`chat/headless.py` runs it)."""

from __future__ import annotations

import argparse
from typing import Any

EXEC_DESCRIPTION = """\
Run one prompt to its end in a new session (or --resume / --continue one), with no person to ask:
the final answer goes to stdout; with --json, every event of the session as one JSON line (the
`dsh/event` params, each valid against `dsh-daemon schema`), then one line
{"type": "result", "status", "exitCode", "sessionId", "reason", "answer", "usage", "costUsd",
"turns", "output"?, "outputProblem"?, "permission"?}. Progress goes to stderr when it is a terminal.
A permission question that --allow does not answer ends the run (status 3); SIGINT cancels the turn
in order (status 130); either way the session stays resumable."""

# Exit statuses (README "Headless runs"; `dsh-daemon exec --help`).
COMPLETED = 0
FAILED = 1  # the turn ended in error, was blocked or cut short, or the daemon exited
USAGE = 2  # bad arguments or configuration (argparse's own status for bad arguments)
PERMISSION_NEEDED = 3
BUDGET_EXHAUSTED = 4
OUTPUT_INVALID = 5  # --output-schema: the answer was not valid JSON for the schema, even after a retry
CANCELLED = 130  # SIGINT: the turn was cancelled in order; the session is resumable

EXIT_STATUSES = f"""\
exit status:
  {COMPLETED}    completed: the turn ended normally (the answer is on stdout)
  {FAILED}    failed: the turn ended in error, was blocked or cut short, or the daemon exited
  {USAGE}    usage: bad arguments or configuration, or no session to resume
  {PERMISSION_NEEDED}    permission needed: a tool asked for permission and nothing could answer;
       allow it with --allow TOOL (the session stays resumable)
  {BUDGET_EXHAUSTED}    budget exhausted: --max-cost-usd / --max-turns (or agent.budget) stopped the
       turn before the request that would have passed it
  {OUTPUT_INVALID}    output invalid: --output-schema was not met, even after one retry
  {CANCELLED}  cancelled by SIGINT (Ctrl-C): the turn was cancelled; the session stays resumable

permissions:
  tools that only read or record (read_file, list_dir, find_files, grep, update_plan, process_read,
  process_stop) run unasked; a command, and input to a background process, runs unasked when it runs
  confined (--sandbox read-only or workspace-write, the default) and asks under full-access;
  edit_file, write_file and MCP tools ask: allow them with --allow TOOL (or for every run with
  tools.permissions in config.json).

environment:
  DEEPSEEK_API_KEY   the provider's key (never logged, never in a command's environment)
  DEEPSEEK_BASE_URL  the endpoint, as --base-url (alias DSH_BASE_URL); DSH_MODEL: as --model
  DSH_HOME           where sessions and config.json live, as --state-dir

examples:
  dsh-daemon exec "why does test_parse fail?"
  dsh-daemon exec --sandbox read-only - < review-prompt.md
  dsh-daemon exec --json --allow edit_file --allow write_file --max-cost-usd 0.50 \\
      "fix the failing test" > events.jsonl
  dsh-daemon exec --output-schema answer.schema.json "list the TODOs as JSON"
  dsh-daemon exec --continue "now add a test for it"
  dsh-daemon --base-url http://127.0.0.1:8080/v1 --model qwen exec --no-thinking "hello"
"""

STATUS_NAMES = {
    COMPLETED: "completed",
    FAILED: "failed",
    USAGE: "usage",
    PERMISSION_NEEDED: "permission-needed",
    BUDGET_EXHAUSTED: "budget-exhausted",
    OUTPUT_INVALID: "output-invalid",
    CANCELLED: "cancelled",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("prompt", nargs="?", help="the prompt; `-` or none: read it from stdin")
    parser.add_argument(
        "--json",
        action="store_true",
        help="stdout: the session's events as JSON lines (as `dsh-daemon schema` declares them), then"
        ' one {"type": "result", ...} line',
    )
    parser.add_argument(
        "--output-schema",
        metavar="FILE",
        help="a JSON Schema the final answer must meet: the model is told so, and asked once more if"
        " its answer does not; stdout then holds the JSON alone",
    )
    parser.add_argument(
        "--sandbox",
        metavar="MODE",
        help="how this run's commands are confined (tools.sandbox): read-only, workspace-write or"
        " full-access; default: the configured one (passed as initializationOptions)",
    )
    parser.add_argument(
        "--allow",
        action="append",
        metavar="TOOL",
        help="allow this tool's calls without asking (repeatable); any other question ends the run"
        f" with status {PERMISSION_NEEDED}",
    )
    parser.add_argument(
        "--max-turns",
        type=_positive_int,
        metavar="N",
        help="at most N model requests per turn (agent.budget.steps)",
    )
    parser.add_argument(
        "--max-cost-usd",
        type=_positive_float,
        metavar="X",
        help="at most X USD per turn, by the configured prices (agent.budget.costUsd)",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--resume", metavar="SESSION", help="continue this session: an id, its first characters or a title"
    )
    which.add_argument(
        "-c", "--continue", dest="continue_session", action="store_true",
        help="continue the latest session of the working directory",
    )  # fmt: skip
    parser.add_argument("--cwd", metavar="DIR", help="the working directory (default: the current one)")


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("must be a positive number")
    return value


def init_options(args: argparse.Namespace) -> dict[str, Any]:
    """The `initializationOptions` this run gives the daemon: only what was asked for."""
    options: dict[str, Any] = {}
    if args.sandbox:
        options["tools"] = {"sandbox": args.sandbox}
    budget: dict[str, Any] = {}
    if args.max_cost_usd is not None:
        budget["costUsd"] = args.max_cost_usd
    if args.max_turns is not None:
        budget["steps"] = args.max_turns
    if budget:
        options["agent"] = {"budget": budget}
    return options
