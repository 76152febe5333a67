"""Coding tools (read, list, find, grep, edit, write, run) confined to a session's workspace, with a
permission policy the editor answers. Wire a session with `factory.build_tool_registry`.

Importing this package (or `config`) loads no tool: the front ends parse `tools` options while
answering `initialize`, before anything a session needs is imported (tests/test_startup.py)."""
