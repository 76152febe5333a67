"""What the session machinery leaves unloaded until a session uses it (issue 40: a one-session LSP
daemon's RSS). Each check runs in a fresh interpreter that imports what the daemon preloads."""

from __future__ import annotations

import json
import subprocess
import sys

# What `host/preload.py` loads for the LSP front end: everything a session is driven with.
PRELOADED = (
    "dsh_daemon.server.frontend",
    "dsh_daemon.model.methods",
    "dsh_daemon.host.sessions",
    "dsh_daemon.llm.deepseek",
)


def _loaded_after_preload(names: tuple[str, ...]) -> list[str]:
    code = f"import importlib, sys\nfor n in {PRELOADED!r}: importlib.import_module(n)\nimport json; print(json.dumps([n for n in {names!r} if n in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded: list[str] = json.loads(out)
    return loaded


def test_difflib_waits_for_a_diff() -> None:
    """Loaded by the first edit's diff, turn diff or draft merge, not by a session that edits nothing."""
    assert _loaded_after_preload(("difflib",)) == []
