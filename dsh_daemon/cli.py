"""Command line entry point: `dsh-daemon` (serve stdio) and its subcommands."""

from __future__ import annotations

import argparse
import sys

from dsh_daemon import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dsh-daemon", description=__doc__)
    parser.add_argument("--version", action="version", version=f"dsh-daemon {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    parser.parse_args(argv)
    print("dsh-daemon: the stdio server is not built yet", file=sys.stderr)
    return 2
