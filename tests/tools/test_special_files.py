"""Every built-in tool over special files inside the workspace (issue 18 item 7): a FIFO, a device
file and a symlink to /dev/zero. Nothing may block (a FIFO opened for reading waits for a writer
forever), nothing may read a device, and what a tool refuses it refuses like read_file does."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.tools.factory import ToolKit, build_tool_registry
from dsh_daemon.tools.workspace import Workspace
from tests.tools.conftest import run_tool, text_of

SPECIAL = ("pipe", "null", "zero")
REFUSED = {"NOT_A_FILE", "OUTSIDE_WORKSPACE"}  # the symlink leads out of the workspace, to /dev
NOT_OPENING_FILES = {
    "run_command",  # runs a shell; what the shell opens is the command's business
    "update_plan",  # records a plan; opens no file
    "propose_plan",  # asks the person to approve a plan; opens no file
    "process_read",  # background processes: they open no file the model names
    "process_write",
    "process_stop",
}


def special_files(root: Path) -> list[str]:
    os.mkfifo(root / "pipe")
    names = ["pipe", "zero"]
    (root / "zero").symlink_to("/dev/zero")
    try:
        os.mknod(root / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        names.append("null")
    except PermissionError:
        pass  # not root: the FIFO and the symlink still cover non-regular files
    (root / "sub").mkdir()
    os.mkfifo(root / "sub" / "pipe")
    (root / "sub" / "real.txt").write_text("needle here\n")
    (root / "real.txt").write_text("needle too\n")
    return names


def calls(name: str) -> list[tuple[str, Mapping[str, Any]]]:
    """(tool, arguments) that point every tool at the special file `name`."""
    return [
        ("read_file", {"path": name}),
        ("grep", {"pattern": "needle", "path": name}),
        ("edit_file", {"path": name, "old_string": "a", "new_string": "b"}),
        ("write_file", {"path": name, "content": "overwritten\n"}),
        ("list_dir", {"path": name}),
        ("find_files", {"pattern": "*", "path": name}),
    ]


@pytest.mark.parametrize("ripgrep", [True, False], ids=["rg", "python-grep"])
async def test_every_tool_refuses_special_files_without_blocking(
    root: Path, workspace: Workspace, ripgrep: bool
) -> None:
    kit: ToolKit = build_tool_registry(workspace, config={"ripgrep": ripgrep})
    names = special_files(root)
    covered = {tool for tool, _ in calls("x")}
    assert covered == set(kit.registry.tools) - NOT_OPENING_FILES  # a new tool must be added here
    for name in names:
        for tool, args in calls(name):
            # a FIFO opened for reading would block until a writer came: a hang fails here
            outcome = await asyncio.wait_for(run_tool(kit, tool, args), 10)
            assert outcome.is_error, (tool, name, text_of(outcome))
            assert outcome.error_code in REFUSED | {"NOT_A_DIRECTORY"}, (tool, name, outcome.error_code)
            if tool in ("read_file", "grep", "edit_file", "write_file"):
                assert outcome.error_code in REFUSED, (tool, name, outcome.error_code)
    # nothing was written through: the FIFO and the device are still what they were
    assert stat.S_ISFIFO((root / "pipe").lstat().st_mode)
    assert (root / "zero").is_symlink()
    # a whole-directory search skips the special files and still finds the regular ones
    found = await asyncio.wait_for(run_tool(kit, "grep", {"pattern": "needle"}), 10)
    assert not found.is_error, text_of(found)
    assert text_of(found).splitlines() == ["real.txt:1:needle too", "sub/real.txt:1:needle here"]
    listing = await asyncio.wait_for(run_tool(kit, "find_files", {"pattern": "**/*"}), 10)
    assert "real.txt" in text_of(listing)
    entries = await asyncio.wait_for(run_tool(kit, "list_dir", {"path": "."}), 10)
    assert "pipe" in text_of(entries)  # listed by name, never opened
