from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fakes.deepseek_server import FakeDeepSeek
from tests.neovim.harness import Editor, Paths, require_nvim


@pytest.fixture
def nvim_bin() -> str:
    return require_nvim()


@pytest.fixture
def fake() -> Iterator[FakeDeepSeek]:
    with FakeDeepSeek() as server:
        yield server


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    return Paths.make(tmp_path)


@pytest.fixture
def start_editor(nvim_bin: str, paths: Paths, fake: FakeDeepSeek) -> Iterator[Callable[[], Editor]]:
    """Start a Neovim (call again after quitting one: same HOME, DSH_HOME and project)."""
    editors: list[Editor] = []

    def start() -> Editor:
        editor = Editor(nvim_bin, paths, fake.base_url, name=f"init{len(editors)}.lua")
        editors.append(editor)
        return editor

    yield start
    if os.environ.get("DSH_NVIM_SHOW"):  # print what a person would see at the end of each test
        for editor in editors:
            if not editor.closed:
                snap = editor.snapshot() or {}
                print("\n--- transcript (" + str(snap.get("winbar")) + ")")
                print("\n".join(snap.get("lines", [])))
                for line in snap.get("queue", []):
                    print("[virt] " + line)
                for card in snap.get("cards", []):
                    print(f"[card row {card['row']}] {card['text']}")
    for editor in editors:
        if not editor.closed:
            try:
                editor.quit(timeout=10)
            except Exception:
                editor.close()


@pytest.fixture
def editor(start_editor: Callable[[], Editor]) -> Editor:
    return start_editor()
