"""read_file: ranges, caps, binary, unicode, CRLF, the editor's unsaved text."""

from __future__ import annotations

from pathlib import Path

from dsh_daemon.tools.documents import StaticDocuments
from dsh_daemon.tools.factory import ToolKit, build_tool_registry
from dsh_daemon.tools.workspace import Workspace
from tests.tools.conftest import run_tool, text_of


async def test_unicode_and_crlf_are_kept(kit: ToolKit, root: Path) -> None:
    (root / "u.txt").write_bytes("héllo wörld\r\n日本語 🌍\r\nlast".encode())
    outcome = await run_tool(kit, "read_file", {"path": "u.txt"})
    assert not outcome.is_error
    assert text_of(outcome) == "     1\théllo wörld\r\n     2\t日本語 🌍\r\n     3\tlast\n"


async def test_lone_cr_counts_as_a_line_end_like_editors(kit: ToolKit, root: Path) -> None:
    (root / "mac.txt").write_bytes(b"a\rb\nc")
    assert (
        text_of(await run_tool(kit, "read_file", {"path": "mac.txt"})) == "     1\ta\r     2\tb\n     3\tc\n"
    )


async def test_line_ranges(kit: ToolKit, root: Path) -> None:
    (root / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    text = text_of(await run_tool(kit, "read_file", {"path": "n.txt", "offset": 4, "limit": 3}))
    assert text.splitlines()[:3] == ["     4\tline 4", "     5\tline 5", "     6\tline 6"]
    assert "[showing lines 4-6 of 10; continue with offset=7]" in text
    tail = text_of(await run_tool(kit, "read_file", {"path": "n.txt", "offset": 9}))
    assert tail == "     9\tline 9\n    10\tline 10\n"


async def test_offset_past_the_end(kit: ToolKit, root: Path) -> None:
    (root / "n.txt").write_text("one\ntwo\n")
    outcome = await run_tool(kit, "read_file", {"path": "n.txt", "offset": 5})
    assert outcome.is_error and outcome.error_code == "BAD_RANGE"
    assert "2 lines" in text_of(outcome)


async def test_empty_file(kit: ToolKit, root: Path) -> None:
    (root / "e.txt").write_text("")
    assert text_of(await run_tool(kit, "read_file", {"path": "e.txt"})) == "(empty file)\n"


async def test_binary_is_refused(kit: ToolKit, root: Path) -> None:
    (root / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)))
    outcome = await run_tool(kit, "read_file", {"path": "img.png"})
    assert outcome.is_error and outcome.error_code == "BINARY"
    assert "binary" in text_of(outcome)


async def test_missing_and_directory(kit: ToolKit, root: Path) -> None:
    (root / "d").mkdir()
    missing = await run_tool(kit, "read_file", {"path": "nope.txt"})
    assert missing.error_code == "NOT_FOUND"
    directory = await run_tool(kit, "read_file", {"path": "d"})
    assert directory.error_code == "IS_DIRECTORY"
    bad = await run_tool(kit, "read_file", {"path": "d", "limit": 0})
    assert bad.error_code == "INVALID_ARGUMENTS"
    assert (await run_tool(kit, "read_file", {})).error_code == "INVALID_ARGUMENTS"


async def test_invalid_utf8_is_shown_with_replacement(kit: ToolKit, root: Path) -> None:
    (root / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    text = text_of(await run_tool(kit, "read_file", {"path": "latin1.txt"}))
    assert "caf\ufffd" in text and "not valid UTF-8" in text


async def test_output_is_capped_by_characters(root: Path) -> None:
    kit = build_tool_registry(Workspace([root]), config={"limits": {"read_max_chars": 1000}})
    (root / "big.txt").write_text("".join(f"{i:08d} {'x' * 40}\n" for i in range(5000)))
    text = text_of(await run_tool(kit, "read_file", {"path": "big.txt"}))
    assert len(text) < 1200
    assert "output capped at 1000 characters" in text
    last = int(text.split("continue with offset=")[1].rstrip("]\n"))
    # Continuing from where it stopped shows the next line, so nothing is skipped.
    following = text_of(await run_tool(kit, "read_file", {"path": "big.txt", "offset": last, "limit": 1}))
    assert following.startswith(f"{last:>6}\t{last - 1:08d}")


async def test_a_huge_single_line_is_cut(kit: ToolKit, root: Path) -> None:
    (root / "min.js").write_text("x" * 3_000_000 + "\nsecond\n")
    text = text_of(await run_tool(kit, "read_file", {"path": "min.js"}))
    assert len(text) < 5000
    assert "[line cut: 2998000 more chars]" in text
    assert "     2\tsecond\n" in text


async def test_huge_file_is_streamed_not_loaded(root: Path) -> None:
    # Over `whole_file_bytes` the file is decoded only up to the requested range.
    kit = build_tool_registry(Workspace([root]), config={"limits": {"whole_file_bytes": 10_000}})
    (root / "huge.log").write_text("".join(f"row {i}\n" for i in range(200_000)))
    text = text_of(await run_tool(kit, "read_file", {"path": "huge.log", "offset": 100, "limit": 2}))
    assert text.startswith("   100\trow 99\n   101\trow 100\n")
    assert "continue with offset=102" in text and "large file" in text


async def test_the_editors_unsaved_text_wins(root: Path) -> None:
    (root / "m.py").write_text("on disk\n")
    docs = StaticDocuments({root / "m.py": "unsaved\r\nedit\n"})
    kit = build_tool_registry(Workspace([root]), documents=docs)
    text = text_of(await run_tool(kit, "read_file", {"path": "m.py"}))
    assert text.startswith("     1\tunsaved\r\n     2\tedit\n")
    assert "unsaved text from the editor" in text


async def test_a_fifo_is_refused_instead_of_blocking(kit: ToolKit, root: Path) -> None:
    import asyncio
    import os

    os.mkfifo(root / "pipe")
    for name, args in (
        ("read_file", {"path": "pipe"}),
        ("edit_file", {"path": "pipe", "old_string": "a", "new_string": "b"}),
    ):
        outcome = await asyncio.wait_for(run_tool(kit, name, args), 10)  # a hang would block forever
        assert outcome.is_error and outcome.error_code == "NOT_A_FILE", (name, text_of(outcome))
