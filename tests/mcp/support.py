"""Shared by the MCP tests: the fixture server's command line, and process checks."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).with_name("fixture_server.py")


def fixture_server(**env: str) -> dict[str, Any]:
    """The object-shape config of the FastMCP fixture server, run over stdio."""
    return {"command": sys.executable, "args": [str(FIXTURE)], "env": env}


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return not os.path.isdir("/proc")
    return raw[raw.rindex(b")") + 2 :].split()[0] not in (b"Z", b"X")


def read_pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()]
