"""list_dir, find_files and the glob matcher."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_daemon.tools.factory import ToolKit, build_tool_registry
from dsh_daemon.tools.walk import compile_glob
from dsh_daemon.tools.workspace import Workspace
from tests.tools.conftest import run_tool, text_of


def make_tree(root: Path) -> None:
    for rel in (
        "a.py",
        "b.txt",
        "src/main.py",
        "src/ui/app.tsx",
        "src/ui/app.ts",
        "tests/test_x.py",
        "ünï/cødé.py",
        "node_modules/dep/index.js",
        ".git/config",
        ".github/ci.yml",
    ):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{rel}\n")


async def test_list_dir(kit: ToolKit, root: Path) -> None:
    make_tree(root)
    text = text_of(await run_tool(kit, "list_dir", {"path": "."}))
    expected = [".git/", ".github/", "a.py", "b.txt", "node_modules/", "src/", "tests/", "ünï/"]
    assert text.splitlines() == ["./ (8 entries)", *expected]
    assert text_of(await run_tool(kit, "list_dir", {"path": "src/ui"})).splitlines()[1:] == [
        "app.ts",
        "app.tsx",
    ]


async def test_list_dir_errors_and_cap(root: Path) -> None:
    kit = build_tool_registry(Workspace([root]), config={"limits": {"list_max_entries": 3}})
    for i in range(5):
        (root / f"f{i}").write_text("")
    text = text_of(await run_tool(kit, "list_dir", {}))
    assert text.splitlines()[1:] == ["f0", "f1", "f2", "[listing capped at 3 of 5 entries]"]
    assert (await run_tool(kit, "list_dir", {"path": "f0"})).error_code == "NOT_A_DIRECTORY"
    assert (await run_tool(kit, "list_dir", {"path": "zzz"})).error_code == "NOT_FOUND"
    (root / "empty").mkdir()
    assert "(empty directory)" in text_of(await run_tool(kit, "list_dir", {"path": "empty"}))


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("*.py", ["a.py", "src/main.py", "tests/test_x.py", "ünï/cødé.py"]),
        ("src/**/*.{ts,tsx}", ["src/ui/app.ts", "src/ui/app.tsx"]),
        ("src/*.py", ["src/main.py"]),
        ("**/test_?.py", ["tests/test_x.py"]),
        ("[ab].*", ["a.py", "b.txt"]),
        ("*.js", []),  # node_modules is skipped
        ("**/ci.yml", [".github/ci.yml"]),  # hidden directories are searched, .git is not
        ("config", []),
    ],
)
async def test_find_files(kit: ToolKit, root: Path, pattern: str, expected: list[str]) -> None:
    make_tree(root)
    text = text_of(await run_tool(kit, "find_files", {"pattern": pattern}))
    assert text.splitlines() == (expected or ["No files found."])


async def test_find_files_below_a_path_and_cap(root: Path) -> None:
    make_tree(root)
    kit = build_tool_registry(Workspace([root]), config={"limits": {"find_max_results": 2}})
    text = text_of(await run_tool(kit, "find_files", {"pattern": "*", "path": "src"}))
    assert text.splitlines() == [
        "src/main.py",
        "src/ui/app.ts",
        "[results capped at 2; narrow the pattern or the path]",
    ]
    assert (
        await run_tool(kit, "find_files", {"pattern": "*", "path": "a.py"})
    ).error_code == "NOT_A_DIRECTORY"


async def test_paths_are_shown_relative_to_the_cwd(root: Path) -> None:
    make_tree(root)
    kit = build_tool_registry(Workspace([root], cwd=root / "src"))
    assert text_of(await run_tool(kit, "find_files", {"pattern": "*.tsx"})) == "ui/app.tsx\n"
    text = text_of(await run_tool(kit, "find_files", {"pattern": "*.py", "path": ".."}))
    assert "main.py" in text.splitlines() and f"{root}/a.py" in text.splitlines()


def test_glob_translation() -> None:
    assert compile_glob("*.py").match("deep/er/x.py")
    assert not compile_glob("src/*.py").match("src/a/x.py")
    assert compile_glob("src/**").match("src/a/b/c")
    assert compile_glob("**/*.md").match("README.md")
    assert compile_glob("[!a]*.txt").match("b.txt") and not compile_glob("[!a]*.txt").match("a.txt")
    assert compile_glob("a+b(c).txt").match("a+b(c).txt")  # regex metacharacters are literal
    assert compile_glob("{a,b{c,d}}.x").match("bd.x") and not compile_glob("{a,b{c,d}}.x").match("b.x")
    assert compile_glob("[a-c]?.py").match("bz.py") and not compile_glob("[a-c]?.py").match("dz.py")


def test_a_pathological_glob_does_not_backtrack() -> None:
    # Against a regex translation this took minutes with the GIL held (the daemon froze).
    assert not compile_glob("*a*a*a*a*a*a*a*a*a*a*b").match("a" * 5000)
    assert compile_glob("*a*a*a*a*a*a*a*a*a*a*b").match("a" * 5000 + "b")
