"""edit_file / write_file, the computed edit, and the disk applier's safety checks."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from dsh_daemon.tools.documents import StaticDocuments
from dsh_daemon.tools.edits import ComputedEdit, DiskEditApplier, compute_edit
from dsh_daemon.tools.errors import EditConflictError
from dsh_daemon.tools.factory import ToolKit, build_tool_registry
from dsh_daemon.tools.workspace import Workspace
from tests.tools.conftest import run_tool, text_of


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def test_edit_replaces_a_unique_string(kit: ToolKit, root: Path) -> None:
    before = "def f():\n    return 1\n"
    (root / "m.py").write_text(before)
    outcome = await run_tool(
        kit, "edit_file", {"path": "m.py", "old_string": "return 1", "new_string": "return 2"}
    )
    assert not outcome.is_error, text_of(outcome)
    after = "def f():\n    return 2\n"
    assert (root / "m.py").read_text() == after
    assert text_of(outcome) == "Edited m.py: replaced 1 occurrence (+1 -1 lines)"
    meta = outcome.meta
    assert meta is not None
    assert meta["path"] == str(root / "m.py")
    assert meta["beforeHash"] == sha(before.encode()) and meta["afterHash"] == sha(after.encode())
    assert meta["created"] is False
    assert meta["diff"] == (
        "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2\n"
    )


async def test_edit_not_found_and_not_unique(kit: ToolKit, root: Path) -> None:
    (root / "m.py").write_text("x = 1\nx = 1\n")
    missing = await run_tool(kit, "edit_file", {"path": "m.py", "old_string": "y = 1", "new_string": "y = 2"})
    assert missing.is_error and missing.error_code == "NOT_FOUND_IN_FILE"
    assert "not found in m.py" in text_of(missing)
    twice = await run_tool(kit, "edit_file", {"path": "m.py", "old_string": "x = 1", "new_string": "x = 2"})
    assert twice.is_error and twice.error_code == "NOT_UNIQUE"
    assert "occurs 2 times" in text_of(twice) and "replace_all" in text_of(twice)
    assert (root / "m.py").read_text() == "x = 1\nx = 1\n"  # nothing changed by the failures
    every = await run_tool(
        kit, "edit_file", {"path": "m.py", "old_string": "x = 1", "new_string": "x = 2", "replace_all": True}
    )
    assert text_of(every).startswith("Edited m.py: replaced 2 occurrences")
    assert (root / "m.py").read_text() == "x = 2\nx = 2\n"


async def test_edit_argument_errors(kit: ToolKit, root: Path) -> None:
    (root / "m.py").write_text("a\n")
    cases = [
        ({"path": "m.py", "old_string": "", "new_string": "b"}, "INVALID_ARGUMENTS"),
        ({"path": "m.py", "old_string": "a", "new_string": "a"}, "INVALID_ARGUMENTS"),
        ({"path": "m.py", "old_string": "a"}, "INVALID_ARGUMENTS"),
        ({"path": "nope.py", "old_string": "a", "new_string": "b"}, "NOT_FOUND"),
        ({"path": "m.py", "old_string": "a", "new_string": "b", "replace_all": "yes"}, "INVALID_ARGUMENTS"),
    ]
    for args, code in cases:
        outcome = await run_tool(kit, "edit_file", args)
        assert outcome.error_code == code, (args, text_of(outcome))


async def test_edit_keeps_unicode_and_crlf(kit: ToolKit, root: Path) -> None:
    (root / "w.txt").write_bytes("\ufeffgrüße\r\nwörld 🌍\r\nend\r\n".encode())
    # The model writes \n; the file keeps its CRLF line endings (and its BOM).
    outcome = await run_tool(
        kit, "edit_file", {"path": "w.txt", "old_string": "grüße\nwörld", "new_string": "hallo\nwelt\nneu"}
    )
    assert not outcome.is_error, text_of(outcome)
    assert (root / "w.txt").read_bytes() == "\ufeffhallo\r\nwelt\r\nneu 🌍\r\nend\r\n".encode()


async def test_edit_refuses_binary_and_non_utf8(kit: ToolKit, root: Path) -> None:
    (root / "b.bin").write_bytes(b"abc\0def")
    (root / "l.txt").write_bytes("café".encode("latin-1"))
    binary = await run_tool(kit, "edit_file", {"path": "b.bin", "old_string": "abc", "new_string": "x"})
    assert binary.error_code == "BINARY"
    latin = await run_tool(kit, "edit_file", {"path": "l.txt", "old_string": "caf", "new_string": "x"})
    assert latin.error_code == "NOT_UTF8"
    assert (root / "b.bin").read_bytes() == b"abc\0def"


async def test_edit_keeps_the_file_mode_and_a_symlink_inside(kit: ToolKit, root: Path) -> None:
    script = root / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o750)
    os.symlink(script, root / "alias.sh")
    await run_tool(kit, "edit_file", {"path": "alias.sh", "old_string": "old", "new_string": "new"})
    assert script.read_text() == "echo new\n"
    assert (root / "alias.sh").is_symlink()
    assert script.stat().st_mode & 0o777 == 0o750
    assert [name for name in os.listdir(root) if name.endswith(".dsh-tmp")] == []


async def test_write_creates_and_overwrites(kit: ToolKit, root: Path) -> None:
    created = await run_tool(kit, "write_file", {"path": "new/dir/f.txt", "content": "héllo\n"})
    assert not created.is_error, text_of(created)
    assert (root / "new/dir/f.txt").read_text() == "héllo\n"
    assert text_of(created) == "Created new/dir/f.txt (+1 -0 lines)"
    assert created.meta is not None and created.meta["created"] is True and created.meta["beforeHash"] is None
    assert created.meta["diff"].startswith("--- /dev/null\n+++ b/new/dir/f.txt\n")
    over = await run_tool(kit, "write_file", {"path": "new/dir/f.txt", "content": "bye"})
    assert (root / "new/dir/f.txt").read_text() == "bye"
    assert over.meta is not None and over.meta["created"] is False
    assert over.meta["diff"].endswith("+bye\n\\ No newline at end of file\n")
    same = await run_tool(kit, "write_file", {"path": "new/dir/f.txt", "content": "bye"})
    assert "nothing written" in text_of(same)
    assert (await run_tool(kit, "write_file", {"path": "new", "content": "x"})).error_code == "IS_DIRECTORY"


async def test_write_keeps_crlf_of_an_existing_file(kit: ToolKit, root: Path) -> None:
    (root / "c.txt").write_bytes(b"a\r\nb\r\n")
    await run_tool(kit, "write_file", {"path": "c.txt", "content": "x\ny\n"})
    assert (root / "c.txt").read_bytes() == b"x\r\ny\r\n"


async def test_disk_applier_detects_a_concurrent_change(workspace: Workspace, root: Path) -> None:
    path = root / "f.txt"
    path.write_text("one\n")
    edit = compute_edit(path, "one\n", "two\n", "f.txt")
    path.write_text("someone else\n")  # changed between computing and applying
    with pytest.raises(EditConflictError):
        await DiskEditApplier(workspace).apply(edit)
    assert path.read_text() == "someone else\n"
    path.unlink()
    with pytest.raises(EditConflictError, match="deleted"):
        await DiskEditApplier(workspace).apply(edit)


async def test_disk_applier_create_does_not_clobber(workspace: Workspace, root: Path) -> None:
    path = root / "n.txt"
    edit = compute_edit(path, None, "mine\n", "n.txt")
    path.write_text("theirs\n")  # appeared after the edit was computed
    with pytest.raises(EditConflictError):
        await DiskEditApplier(workspace).apply(edit)
    assert path.read_text() == "theirs\n"


async def test_disk_applier_refuses_a_path_swapped_for_an_outside_symlink(
    workspace: Workspace, root: Path, outside: Path
) -> None:
    path = root / "f.txt"
    path.write_text("top secret\n")
    edit = compute_edit(path, "top secret\n", "pwned\n", "f.txt")
    path.unlink()
    os.symlink(outside / "secret.txt", path)
    with pytest.raises(Exception, match="outside the workspace"):
        await DiskEditApplier(workspace).apply(edit)
    assert (outside / "secret.txt").read_text() == "top secret\n"


class RecordingApplier:
    """What the server's `workspace/applyEdit` applier looks like from the tools' side."""

    def __init__(self) -> None:
        self.edits: list[ComputedEdit] = []

    async def apply(self, edit: ComputedEdit, signal: object = None) -> None:
        self.edits.append(edit)


async def test_edits_start_from_unsaved_editor_text_and_go_to_the_applier(root: Path) -> None:
    (root / "m.py").write_text("disk version\n")
    docs = StaticDocuments({root / "m.py": "editor version\n"})
    applier = RecordingApplier()
    kit = build_tool_registry(Workspace([root]), documents=docs, applier=applier)
    outcome = await run_tool(kit, "edit_file", {"path": "m.py", "old_string": "editor", "new_string": "new"})
    assert not outcome.is_error, text_of(outcome)
    [edit] = applier.edits
    assert (edit.before_text, edit.after_text, edit.created) == ("editor version\n", "new version\n", False)
    assert (root / "m.py").read_text() == "disk version\n"  # the applier decides where it goes
    # With the disk applier the unsaved buffer must not be clobbered: the before-hash check refuses.
    disk_kit = build_tool_registry(Workspace([root]), documents=docs)
    refused = await run_tool(
        disk_kit, "edit_file", {"path": "m.py", "old_string": "editor", "new_string": "x"}
    )
    assert refused.error_code == "EDIT_CONFLICT"
    assert (root / "m.py").read_text() == "disk version\n"


def test_edit_tools_are_not_parallel_safe(kit: ToolKit) -> None:
    flags = {name: tool.parallel_safe for name, tool in kit.registry.tools.items()}
    assert flags == {
        "read_file": True,
        "list_dir": True,
        "find_files": True,
        "grep": True,
        "edit_file": False,
        "write_file": False,
        "run_command": False,
        "update_plan": False,  # plans are recorded in call order
        "propose_plan": False,  # asks the person, then changes the mode and queues the plan
        "process_read": True,  # reads a process's output
        "process_write": False,
        "process_stop": False,
    }
