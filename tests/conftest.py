"""The suites that drive whole outside programs are marked `slow`, so `pytest -m "not slow"` is a
fast inner loop (the agent core, the provider, the tools, the LSP and ACP servers, the wire's
declarations); the README's test command and `.ci/run` still run everything.

Slow: the VS Code client in code-server and Chromium (`tests/vscode`), MCP servers as processes
(`tests/mcp/test_lsp.py`, `test_acp.py`), the Neovim plugin in a headless Neovim (`tests/neovim`), the terminal chat in a pty or
tmux (`tests/chat/test_pty.py`, `test_tui*.py`), and the tests marked one by one
(a real local model, recording the event fixtures afresh)."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SLOW_DIRECTORIES = ("vscode", "neovim")
# MCP servers as processes (their configuration's unit tests stay), the chat in a pty and in tmux
SLOW_FILES = ("mcp/test_lsp.py", "mcp/test_acp.py", "chat/test_pty.py", "chat/test_tui")
FIRST = "tests/vscode/test_vscode.py::test_end_to_end_in_code_server"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        try:
            where = Path(str(item.path)).resolve().relative_to(TESTS).as_posix()
        except ValueError:
            continue
        if where.split("/", 1)[0] in SLOW_DIRECTORIES or where.startswith(SLOW_FILES):
            item.add_marker(pytest.mark.slow)
    # The longest single test first: the VS Code suite (check, unit tests, every code-server e2e) runs
    # 10-12 minutes on one worker; collected last, it ran alone at the end of the whole run while the
    # other worker had finished. A stable sort keeps every other test in its order (and each worker's
    # collection identical, as xdist requires).
    items.sort(key=lambda item: 0 if item.nodeid.startswith(FIRST) else 1)
