"""The packages of dsh_daemon form one-way layers, and docs/design.md §12's table says which: no
import cycle between packages (type-only and function-level imports included), each package imports
exactly the packages of ours its row names (so the table can be neither stale nor loose) and no
outside library its row does not name. The front ends are thin: `server/` and `acp/` import only
`host/` and `model/` of ours, and only their own wire's libraries."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dsh_daemon"
DESIGN = ROOT / "docs" / "design.md"
TOP = "<top>"  # the top-level modules (the command line), `dsh_daemon/*.py` in the table


def _package_of(module: str) -> str:
    """The package a module belongs to; `<root>` is `dsh_daemon/__init__.py` (only `__version__`),
    `<top>` the top-level modules (the command line)."""
    parts = module.split(".")
    if len(parts) < 2:
        return "<root>"
    candidate = PACKAGE / parts[1]
    return parts[1] if candidate.is_dir() else TOP


def _is_attribute(name: str) -> bool:
    """`from dsh_daemon.x import y` lists `dsh_daemon.x.y` too, which may be a name, not a module."""
    path = PACKAGE.parent.joinpath(*name.split("."))
    return not (path.is_dir() or path.with_suffix(".py").exists()) and name.count(".") >= 1


def _imports() -> dict[str, set[str]]:
    """Package -> every module name it imports (every import statement, wherever it sits)."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(ROOT).with_suffix("")
        module = ".".join(relative.parts).removesuffix(".__init__")
        source = _package_of(module)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found[source].update([node.module] + [f"{node.module}.{a.name}" for a in node.names])
            elif isinstance(node, ast.Import):
                found[source].update(a.name for a in node.names)
    return found


def package_edges() -> dict[str, set[str]]:
    """Package -> packages of ours it imports."""
    edges: dict[str, set[str]] = defaultdict(set)
    for source, names in _imports().items():
        for name in names:
            if name.startswith("dsh_daemon.") and not _is_attribute(name):
                target = _package_of(name)
                if target not in (source, "<root>"):
                    edges[source].add(target)
    return edges


def library_imports() -> dict[str, set[str]]:
    """Package -> outside libraries it imports (neither ours nor the standard library's)."""
    libraries: dict[str, set[str]] = defaultdict(set)
    for source, names in _imports().items():
        for name in names:
            top = name.split(".")[0]
            if top not in ("dsh_daemon", "__future__") and top not in sys.stdlib_module_names:
                libraries[source].add(top)
    return libraries


def design_table() -> dict[str, tuple[set[str], set[str]]]:
    """docs/design.md §12: package -> (the packages of ours it imports, the libraries it may use)."""
    text = DESIGN.read_text()
    section = text[text.index("## 12. Layers") :]
    section = section[: section.index("\n## ", 1)] if "\n## " in section[1:] else section
    table: dict[str, tuple[set[str], set[str]]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`([^`]+)`", cells[0])
        ours = set(re.findall(r"`([^`]+)`", cells[2]))
        libraries = set(re.findall(r"`([^`]+)`", cells[3]))
        for name in names:
            table[TOP if name == "dsh_daemon/*.py" else name] = (ours, libraries)
    return table


def test_the_design_table_names_every_package() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert set(design_table()) == packages | {TOP}


def test_each_package_imports_exactly_what_its_row_in_the_design_table_says() -> None:
    table = design_table()
    edges = package_edges()
    wrong = {
        package: {"imports": sorted(edges.get(package, set())), "design.md says": sorted(ours)}
        for package, (ours, _) in table.items()
        if edges.get(package, set()) != ours
    }
    assert not wrong, f"docs/design.md §12 and the imports disagree: {wrong}"


def test_each_package_uses_only_the_libraries_its_row_names() -> None:
    table = design_table()
    unexpected = {
        f"{package} -> {library}"
        for package, libraries in library_imports().items()
        for library in libraries
        if library not in table[package][1]
    }
    assert not unexpected, f"libraries docs/design.md §12 does not name: {sorted(unexpected)}"


def test_the_front_ends_stand_on_the_host_alone() -> None:
    """server/ and acp/ import only host/ and model/ of ours (the host owns every session's life);
    server/ only the LSP libraries, acp/ none (its JSON-RPC is its own)."""
    edges, libraries = package_edges(), library_imports()
    assert edges["server"] <= {"host", "model"} and edges["acp"] <= {"host", "model"}
    assert libraries["server"] <= {"pygls", "lsprotocol", "cattrs"} and not libraries.get("acp")


def test_there_is_no_cycle_between_packages() -> None:
    edges = package_edges()
    seen: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(node: str, path: list[str]) -> None:
        if seen.get(node) == 2:
            return
        assert seen.get(node) != 1, f"import cycle between packages: {' -> '.join([*path, node])}"
        seen[node] = 1
        for target in sorted(edges.get(node, ())):
            visit(target, [*path, node])
        seen[node] = 2

    for node in sorted(edges):
        visit(node, [])


def test_importing_the_model_imports_nothing_else_of_ours() -> None:
    code = (
        "import sys, dsh_daemon.model, dsh_daemon.model.events, dsh_daemon.model.messages, "
        "dsh_daemon.model.provider, dsh_daemon.model.inbox, dsh_daemon.model.jsonvalue\n"
        "print('\\n'.join(m for m in sys.modules if m.startswith('dsh_daemon')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    others = [m for m in loaded.stdout.split() if m != "dsh_daemon" and not m.startswith("dsh_daemon.model")]
    assert others == []
