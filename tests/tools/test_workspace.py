"""Confinement: every escape is refused with a typed error, by every tool that takes a path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_daemon.tools.errors import OutsideWorkspaceError
from dsh_daemon.tools.factory import ToolKit
from dsh_daemon.tools.workspace import Workspace
from tests.tools.conftest import run_tool, text_of

PATH_CALLS = [
    ("read_file", {}),
    ("list_dir", {}),
    ("find_files", {"pattern": "*"}),
    ("grep", {"pattern": "secret"}),
    ("edit_file", {"old_string": "top", "new_string": "bottom"}),
    ("write_file", {"content": "pwned\n"}),
]


def escapes(root: Path, outside: Path) -> dict[str, str]:
    """Name -> a path argument that leads outside the workspace."""
    os.symlink(outside, root / "link-dir")
    os.symlink(outside / "secret.txt", root / "link-file")
    os.symlink(outside / "nonexistent.txt", root / "dangling")  # a write would create it outside
    return {
        "dotdot": "../outside/secret.txt",
        "absolute": str(outside / "secret.txt"),
        "symlinked dir": "link-dir/secret.txt",
        "symlinked file": "link-file",
        "dangling symlink": "dangling",
        "nested dotdot": "sub/../../outside/secret.txt",
    }


def test_resolve_refuses_each_escape(workspace: Workspace, root: Path, outside: Path) -> None:
    (root / "sub").mkdir()
    for name, path in escapes(root, outside).items():
        with pytest.raises(OutsideWorkspaceError):
            workspace.resolve(path)
        assert name  # keeps the failing case visible in a traceback


def test_resolve_accepts_inside_paths(workspace: Workspace, root: Path) -> None:
    (root / "a").mkdir()
    os.symlink(root / "a", root / "inner-link")
    assert workspace.resolve("a/../a/x.txt") == root / "a" / "x.txt"
    assert workspace.resolve(str(root / "a")) == root / "a"
    assert workspace.resolve("inner-link/y") == root / "a" / "y"  # a symlink inside is fine
    assert workspace.resolve(".") == root


def test_relative_paths_follow_the_session_cwd(root: Path) -> None:
    (root / "pkg").mkdir()
    ws = Workspace([root], cwd=root / "pkg")
    assert ws.resolve("mod.py") == root / "pkg" / "mod.py"
    assert ws.resolve("../top.py") == root / "top.py"
    with pytest.raises(OutsideWorkspaceError):
        ws.resolve("../../x")


def test_several_roots(tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    ws = Workspace([first, second])
    assert ws.resolve(str(second / "f")) == second / "f"
    with pytest.raises(OutsideWorkspaceError):
        ws.resolve(str(tmp_path / "three"))


def test_cwd_outside_the_roots_is_refused(root: Path, outside: Path) -> None:
    with pytest.raises(ValueError, match="outside"):
        Workspace([root], cwd=outside)


@pytest.mark.parametrize(("tool", "extra"), PATH_CALLS, ids=[c[0] for c in PATH_CALLS])
async def test_every_tool_refuses_every_escape(
    kit: ToolKit, root: Path, outside: Path, tool: str, extra: dict[str, str]
) -> None:
    (root / "sub").mkdir()
    for name, path in escapes(root, outside).items():
        outcome = await run_tool(kit, tool, {"path": path, **extra})
        assert outcome.is_error, (name, text_of(outcome))
        assert outcome.error_code == "OUTSIDE_WORKSPACE", (name, text_of(outcome))
        assert "outside the workspace" in text_of(outcome)
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert not (outside / "nonexistent.txt").exists()


async def test_symlink_created_mid_session_is_refused(kit: ToolKit, root: Path, outside: Path) -> None:
    (root / "notes.txt").write_text("mine\n")
    first = await run_tool(kit, "read_file", {"path": "notes.txt"})
    assert not first.is_error
    # Someone swaps the file for a symlink pointing out of the workspace after the session started.
    (root / "notes.txt").unlink()
    os.symlink(outside / "secret.txt", root / "notes.txt")
    for tool, extra in PATH_CALLS:
        if tool in ("list_dir", "find_files"):
            continue
        outcome = await run_tool(kit, tool, {"path": "notes.txt", **extra})
        assert outcome.error_code == "OUTSIDE_WORKSPACE", (tool, text_of(outcome))
    # ... and a directory symlink made mid-session.
    os.symlink(outside, root / "later")
    for tool in ("list_dir", "find_files", "grep"):
        args = {"path": "later", "pattern": "*" if tool == "find_files" else "secret"}
        outcome = await run_tool(kit, tool, args)
        assert outcome.error_code == "OUTSIDE_WORKSPACE", (tool, text_of(outcome))
    assert (outside / "secret.txt").read_text() == "top secret\n"


async def test_walks_do_not_follow_symlinks_out(kit: ToolKit, root: Path, outside: Path) -> None:
    os.symlink(outside, root / "link-dir")
    (root / "here.txt").write_text("secret here too\n")
    found = text_of(await run_tool(kit, "find_files", {"pattern": "*.txt"}))
    assert found == "here.txt\n"
    grep = text_of(await run_tool(kit, "grep", {"pattern": "secret"}))
    assert grep == "here.txt:1:secret here too\n"
    listing = text_of(await run_tool(kit, "list_dir", {}))
    assert f"link-dir -> {outside}" in listing  # listed as a link, never entered


def test_bad_path_arguments(workspace: Workspace) -> None:
    from dsh_daemon.tools.errors import InvalidArgumentsError

    for bad in ("", "  ", "a\0b"):
        with pytest.raises(InvalidArgumentsError):
            workspace.resolve(bad)
