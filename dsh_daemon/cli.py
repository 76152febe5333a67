"""`dsh-daemon`: serve stdio (the default), or `acp`, `chat`, `exec`, `sessions`, `export`, `schema`,
`config`, `sandbox`."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dsh_daemon import __version__

# Nothing more at the top: `dsh-daemon --version` must answer before argparse (and `typing`) are even
# imported, and every command imports only what it runs (issue 20.5).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import Any


def _state_dir(value: str | None) -> Path:
    from dsh_daemon.session.paths import default_state_dir

    return Path(value) if value else default_state_dir()


def _add_daemon_options(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """The options every command shares. They are accepted before and after the command
    (`dsh-daemon --model X acp` and `dsh-daemon acp --model X`, as Zed's `"args"` pass them): the
    subcommand's copies default to SUPPRESS, so a value given after the command wins and one given
    before it is not reset."""
    import argparse

    def default(value: Any) -> Any:
        return value if defaults else argparse.SUPPRESS

    parser.add_argument(
        "--state-dir",
        default=default(None),
        help="where sessions live (default: $DSH_HOME or the user data dir)",
    )
    parser.add_argument("--model", default=default(None), help="model id (default deepseek-v4-flash)")
    parser.add_argument(
        "--base-url",
        default=default(None),
        help="OpenAI-compatible endpoint (default https://api.deepseek.com)",
    )
    parser.add_argument(
        "--no-thinking", action="store_true", default=default(False), help="disable thinking mode"
    )
    parser.add_argument(
        "--log-level",
        default=default(os.environ.get("DSH_LOG_LEVEL", "WARNING")),
        metavar="LEVEL",
        help="DEBUG, INFO, WARNING or ERROR (default $DSH_LOG_LEVEL or WARNING)",
    )
    parser.add_argument(
        "--log-file", default=default(None), metavar="FILE", help="log to this file instead of stderr"
    )


def build_parser(*, exec_arguments: bool = True) -> argparse.ArgumentParser:
    """The whole command line. `exec_arguments=False` leaves `exec`'s own options out (its help line
    stays): `main` builds them only when `exec` was typed, so no other command imports them."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="dsh-daemon", description="Agent daemon for code editors (LSP-framed JSON-RPC on stdio)."
    )
    parser.add_argument("--version", action="version", version=f"dsh-daemon {__version__}")
    _add_daemon_options(parser, defaults=True)
    # Language clients (vscode-languageclient with TransportKind.stdio) append `--stdio`: stdio is the
    # only transport, so the flag is accepted and changes nothing.
    stdio_help = "serve on stdio (the only transport; accepted for language clients)"
    parser.add_argument("--stdio", action="store_true", help=stdio_help)
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="serve the protocol on stdio (the default)")
    _add_daemon_options(serve, defaults=False)
    serve.add_argument("--stdio", action="store_true", default=argparse.SUPPRESS, help=stdio_help)
    chat = sub.add_parser("chat", help="a terminal client: spawns the daemon like an editor would")
    _add_daemon_options(chat, defaults=False)
    chat.add_argument("prompt", nargs="*", help="first prompt (optional)")
    which = chat.add_mutually_exclusive_group()
    which.add_argument(
        "--resume",
        nargs="?",
        const="",
        metavar="SESSION",
        help="continue a session: an id, its first characters or a title (without: the latest here)",
    )
    which.add_argument(
        "-c", "--continue", dest="continue_session", action="store_true",
        help="continue the latest session of this directory",
    )  # fmt: skip
    chat.add_argument(
        "--worktree",
        nargs="?",
        const="",
        metavar="BRANCH",
        help="start the new session in a git worktree of its own (branch: BRANCH, else dsh/...);"
        " /worktree shows, applies, keeps or discards it",
    )
    chat.add_argument("--yes", action="store_true", help="allow every tool call without asking")
    chat.add_argument(
        "--allow", action="append", metavar="TOOL", help="allow this tool's calls without asking (repeatable)"
    )
    chat.add_argument(
        "--json",
        action="store_true",
        help="print the session's events as JSON lines on stdout (no terminal UI)",
    )
    exec_help = "run one prompt to its end, headless (CI, scripts): the answer on stdout"
    if exec_arguments:
        from dsh_daemon.chat.exec_args import EXEC_DESCRIPTION, EXIT_STATUSES
        from dsh_daemon.chat.exec_args import add_arguments as add_exec_arguments

        exec_ = sub.add_parser(
            "exec",
            help=exec_help,
            description=EXEC_DESCRIPTION,
            epilog=EXIT_STATUSES,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _add_daemon_options(exec_, defaults=False)
        add_exec_arguments(exec_)
    else:
        sub.add_parser("exec", help=exec_help)
    acp = sub.add_parser(
        "acp", help="serve the Agent Client Protocol (NDJSON on stdio) for Zed, CodeCompanion…"
    )
    _add_daemon_options(acp, defaults=False)
    sessions = sub.add_parser("sessions", help="list sessions")
    _add_daemon_options(sessions, defaults=False)
    export = sub.add_parser("export", help="write a session's transcript as JSONL")
    _add_daemon_options(export, defaults=False)
    export.add_argument("session")
    sub.add_parser("schema", help="print the JSON Schema of the dsh wire: methods, results, events")
    config = sub.add_parser(
        "config",
        help="print the effective configuration and where each value came from (secrets masked)",
    )
    _add_daemon_options(config, defaults=False)
    config.add_argument("--json", action="store_true", help="as one JSON object")
    sandbox = sub.add_parser("sandbox", help="what confinement this machine allows; run a command confined")
    _add_daemon_options(sandbox, defaults=False)
    sandbox_sub = sandbox.add_subparsers(dest="sandbox_command", required=True)
    check = sandbox_sub.add_parser("check", help="print the sandbox level this machine gives and why")
    check.add_argument("--json", action="store_true", help="as one JSON object")
    run = sandbox_sub.add_parser("run", help="run a command as the agent would: sandbox run -- CMD")
    modes = ("read-only", "workspace-write", "full-access")
    run.add_argument("--mode", choices=modes, default="workspace-write")
    run.add_argument("--layers", choices=("auto", "landlock-only"), default="auto")
    run.add_argument("argv", nargs="*", metavar="CMD")
    return parser


def provider_flags(args: argparse.Namespace) -> dict[str, Any]:
    flags: dict[str, Any] = {}
    if args.model:
        flags["model"] = args.model
    if args.base_url:
        flags["baseUrl"] = args.base_url
    if args.no_thinking:
        flags["thinking"] = False
    return flags


# How editors start the daemon (VS Code's language client appends `--stdio`): served without argparse,
# whose import and parser (with the `shutil` its help formatter imports) cost more than anything else
# of ours before the `initialize` reply.
PLAIN_SERVE: tuple[list[str], ...] = (["--stdio"], [], ["serve"], ["serve", "--stdio"])


def main(argv: Sequence[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else list(argv)
    if given == ["--version"]:
        print(f"dsh-daemon {__version__}")  # what argparse's version action prints, without argparse
        return 0
    if given in PLAIN_SERVE:  # the parser's defaults, as `build_parser` sets them
        return _serve(_state_dir(None), {}, os.environ.get("DSH_LOG_LEVEL", "WARNING"), None)
    if given == ["sessions"]:  # as typed most often: no parser either (< 100 ms in all, issue 20.5)
        from dsh_daemon.cli_tools import list_sessions

        return _printing(lambda: list_sessions(_state_dir(None)))
    args = build_parser(exec_arguments="exec" in given).parse_args(argv)
    command = args.command or "serve"
    if command in PRINTING:
        return _printing(lambda: _print_command(command, args))
    state_dir = _state_dir(args.state_dir)
    if command == "sandbox":
        from dsh_daemon.cli_sandbox import sandbox_check, sandbox_run

        if args.sandbox_command == "check":
            return sandbox_check(as_json=args.json)
        return sandbox_run(args.argv, mode=args.mode, layers=args.layers, state_dir=state_dir)
    if command == "serve":
        return _serve(state_dir, provider_flags(args), args.log_level, args.log_file)
    if command == "acp":
        from dsh_daemon.acp.main import Settings as AcpSettings
        from dsh_daemon.acp.main import configure_logging as acp_logging
        from dsh_daemon.acp.main import run as run_acp
        from dsh_daemon.host.heap import keep_long_lived_state

        acp_logging(args.log_level, args.log_file)
        keep_long_lived_state()  # as `serve` does: host/heap.py
        return run_acp(AcpSettings(state_dir=state_dir, flags=provider_flags(args)))
    if command == "exec":
        from dsh_daemon.chat.headless import run_exec

        return run_exec(args, state_dir)
    from dsh_daemon.chat import run_chat

    return run_chat(args, state_dir)


def _serve(state_dir: Path, flags: dict[str, Any], log_level: str, log_file: str | None) -> int:
    from dsh_daemon.host.heap import keep_long_lived_state
    from dsh_daemon.host.startup_gc import pause_collection

    pause_collection()  # until the first frame is answered: see host/startup_gc.py
    keep_long_lived_state()  # a long session's state out of the collector's walks: host/heap.py
    from dsh_daemon.server.main import configure_logging, run
    from dsh_daemon.server.settings import Settings

    configure_logging(log_level, log_file)
    return run(Settings(state_dir=state_dir, flags=flags))


# The commands that print a result and end: their output is often piped into `head`, `less` or `grep`.
PRINTING = frozenset({"schema", "config", "sessions", "export"})
EXIT_BROKEN_PIPE = 141  # what a shell reports for a program a SIGPIPE ended (128 + 13)


def _print_command(command: str, args: argparse.Namespace) -> int:
    if command == "schema":  # from the declarations alone: nothing of the server is imported
        import json

        from dsh_daemon.model.schema import wire_schema

        print(json.dumps(wire_schema(), indent=2, ensure_ascii=False))
        return 0
    state_dir = _state_dir(args.state_dir)
    if command == "config":
        from dsh_daemon.cli_tools import show_config

        return show_config(state_dir, provider_flags(args), as_json=args.json)
    if command == "sessions":
        from dsh_daemon.cli_tools import list_sessions

        return list_sessions(state_dir)
    from dsh_daemon.cli_tools import export_session

    return export_session(state_dir, args.session)


def _printing(run: Callable[[], int]) -> int:
    """Run a printing command; a reader that stops reading (`dsh-daemon schema | head -1`) ends it
    quietly, like any Unix tool, instead of with a BrokenPipeError traceback."""
    try:
        code = run()
        sys.stdout.flush()  # inside the try: the last buffered lines may be what meets the closed pipe
        return code
    except BrokenPipeError:
        # Python would flush stdout again at exit and report that failure too: point it at
        # /dev/null first (the reader is gone; nothing more can reach it).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE
