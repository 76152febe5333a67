"""grep, through ripgrep and through the Python fallback: same output, order and caps."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from dsh_daemon.tools.factory import ToolKit, build_tool_registry
from dsh_daemon.tools.workspace import Workspace
from tests.tools.conftest import FakeContext, run_tool, text_of

ENGINES = [
    pytest.param(False, id="python"),
    pytest.param(
        True, id="ripgrep", marks=pytest.mark.skipif(shutil.which("rg") is None, reason="rg not on PATH")
    ),
]


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def make_kit(root: Path, engine: bool, **limits: int) -> ToolKit:
    return build_tool_registry(Workspace([root]), config={"ripgrep": engine, "limits": limits})


def make_tree(root: Path) -> None:
    files = {
        "a.py": "import os\ndef Foo():\n    return 'foo'\n",
        "sub/b.py": "x = 1\nfoo = x  # foo\n",
        "sub/c.txt": "nothing\r\nfoo with crlf\r\n",
        "ünï/ß.txt": "grüße foo 🌍\n",
        "node_modules/m.js": "foo\n",
        ".git/HEAD": "foo\n",
        ".hidden/h.txt": "foo hidden\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
    (root / "bin.dat").write_bytes(b"foo\0\x01\x02")


async def test_matches_sorted_by_path(root: Path, engine: bool) -> None:
    make_tree(root)
    text = text_of(await run_tool(make_kit(root, engine), "grep", {"pattern": "foo"}))
    assert text.splitlines() == [
        ".hidden/h.txt:1:foo hidden",
        "a.py:3:    return 'foo'",
        "sub/b.py:2:foo = x  # foo",
        "sub/c.txt:2:foo with crlf",
        "ünï/ß.txt:1:grüße foo 🌍",
    ]


async def test_options(root: Path, engine: bool) -> None:
    make_tree(root)
    kit = make_kit(root, engine)
    insensitive = await run_tool(kit, "grep", {"pattern": "^def foo", "case_insensitive": True})
    assert text_of(insensitive) == "a.py:2:def Foo():\n"
    globbed = await run_tool(kit, "grep", {"pattern": "foo", "glob": "*.py", "path": "sub"})
    assert text_of(globbed) == "sub/b.py:2:foo = x  # foo\n"
    one_file = await run_tool(kit, "grep", {"pattern": "x", "path": "sub/b.py"})
    assert text_of(one_file) == "sub/b.py:1:x = 1\nsub/b.py:2:foo = x  # foo\n"
    assert text_of(await run_tool(kit, "grep", {"pattern": "zzz"})) == "No matches.\n".rstrip("\n")


async def test_result_cap_and_long_lines(root: Path, engine: bool) -> None:
    (root / "many.txt").write_text("".join(f"hit {i} {'y' * 500}\n" for i in range(50)))
    kit = make_kit(root, engine, grep_max_matches=5, grep_line_chars=20)
    lines = text_of(await run_tool(kit, "grep", {"pattern": "hit"})).splitlines()
    assert lines[:2] == [f"many.txt:{i + 1}:hit {i} {'y' * 14}… [cut]" for i in range(2)]
    assert len(lines) == 6 and lines[-1].startswith("[results capped at 5 matches")


async def test_errors(root: Path, engine: bool) -> None:
    kit = make_kit(root, engine)
    assert (await run_tool(kit, "grep", {"pattern": "("})).error_code == "INVALID_ARGUMENTS"
    assert (await run_tool(kit, "grep", {"pattern": "x", "path": "missing"})).error_code == "NOT_FOUND"
    assert (await run_tool(kit, "grep", {})).error_code == "INVALID_ARGUMENTS"


async def test_a_cancelled_search_stops(root: Path, engine: bool) -> None:
    make_tree(root)
    ctx = FakeContext()
    ctx.signal.abort("user")
    from dsh_daemon.agent.signal import AbortedError

    with pytest.raises(AbortedError):
        await run_tool(make_kit(root, engine), "grep", {"pattern": "foo"}, ctx)


async def test_a_search_stops_at_its_time_bound_keeping_what_it_found(root: Path, engine: bool) -> None:
    """Issue 32 item 8: a search over a huge file or tree ends at `grep_timeout_s` with a TIMEOUT
    that keeps the matches found by then and says what was searched. Sparse files: no disk used."""
    (root / "a.txt").write_text("needle one\n")
    if engine:
        # rg reads a file named alone to its end, NULs and all: 64 GiB take minutes.
        huge = root / "huge.log"
        huge.write_bytes(b"needle two\n")
        os.truncate(huge, 64 << 30)
        args = {"pattern": "needle", "path": "huge.log"}
    else:
        # the Python search reads each file up to grep_file_bytes: 1,000 of 32 MiB take many seconds
        (root / "big").mkdir()
        for i in range(1000):
            (root / "big" / f"{i:04}.bin").touch()
            os.truncate(root / "big" / f"{i:04}.bin", 32 << 20)
        args = {"pattern": "needle"}
    kit = make_kit(root, engine, grep_timeout_s=1, grep_file_bytes=32 << 20)
    outcome = await asyncio.wait_for(run_tool(kit, "grep", args), 120)  # only a failure waits this long
    assert outcome.is_error and outcome.error_code == "TIMEOUT", text_of(outcome)
    *found, note = text_of(outcome).splitlines()
    where = "huge.log" if engine else "."
    assert note.startswith(f"[grep stopped after 1 s (grep_timeout_s) searching {where} for 'needle'"), note
    if engine:
        assert set(found) <= {"huge.log:1:needle two"}  # rg may not have flushed it yet
    else:
        assert found == ["a.txt:1:needle one"]  # the file searched before the bound is kept
        assert "files searched; the matches above (1) were found by then" in note
