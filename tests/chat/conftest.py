"""Fixtures of the terminal chat tests: a fake DeepSeek, a work directory, and the chat started in it
in a tmux pane (`Screen`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chat.screen import Screen
from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.harness import daemon_env


@pytest.fixture
def fake() -> Iterator[FakeDeepSeek]:
    with FakeDeepSeek() as server:
        yield server


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def chat(tmp_path: Path, fake: FakeDeepSeek, work: Path) -> Iterator[Screen]:
    screen = Screen(tmp_path, daemon_env(tmp_path / "state", fake), ["--no-thinking", "chat"], cwd=work)
    try:
        screen.wait("Enter sends")
        # The note is printed before the input runs; keys typed before that are echoed by the tty in
        # cooked mode and reach the input doubled ("exexplain"). The status bar is drawn once it runs.
        screen.wait("Esc cancels", whole=False)
        yield screen
    finally:
        screen.close()


def unconfined(state: Path) -> None:
    """config.json with `tools.sandbox: full-access`: commands ask, as before the sandbox."""
    state.mkdir(parents=True, exist_ok=True)
    (state / "config.json").write_text('{"tools": {"sandbox": "full-access"}}\n')
