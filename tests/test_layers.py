"""The packages of dsh_daemon form one-way layers (docs/design.md §12): no import cycle between
packages, type-only and function-level imports included, and `dsh_daemon.model` is a leaf."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dsh_daemon"

# Who may import whom: each package only from the ones listed (directly); anything else is a new
# edge to think about, written here on purpose.
ALLOWED: dict[str, set[str]] = {
    "model": set(),
    "session": {"model"},
    "agent": {"model", "session"},
    "llm": {"model"},
    "tools": {"model", "agent"},
    "host": {"model", "session", "agent", "llm", "tools", "mcp"},
    "mcp": {"model", "agent", "tools"},
    "server": {"model", "session", "agent", "llm", "tools", "host", "mcp"},
    "acp": {"model", "session", "agent", "llm", "tools", "host", "mcp"},
    "chat": {"model"},
    "<top>": {"model", "session", "agent", "llm", "tools", "host", "mcp", "server", "acp", "chat"},
}


def _package_of(module: str) -> str:
    """The package a module belongs to; `<root>` is `dsh_daemon/__init__.py` (only `__version__`),
    `<top>` the top-level modules (the command line)."""
    parts = module.split(".")
    if len(parts) < 2:
        return "<root>"
    candidate = PACKAGE / parts[1]
    return parts[1] if candidate.is_dir() else "<top>"


def _is_attribute(name: str) -> bool:
    """`from dsh_daemon.x import y` lists `dsh_daemon.x.y` too, which may be a name, not a module."""
    path = PACKAGE.parent.joinpath(*name.split("."))
    return not (path.is_dir() or path.with_suffix(".py").exists()) and name.count(".") >= 1


def package_edges() -> dict[str, set[str]]:
    """Package -> packages it imports (every import statement, wherever it sits in the module)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(ROOT).with_suffix("")
        module = ".".join(relative.parts).removesuffix(".__init__")
        source = _package_of(module)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.startswith("dsh_daemon.") and not _is_attribute(name):
                    target = _package_of(name)
                    if target not in (source, "<root>"):
                        edges[source].add(target)
    return edges


def test_each_package_imports_only_the_layers_below_it() -> None:
    edges = package_edges()
    unexpected = {
        f"{source} -> {target}"
        for source, targets in edges.items()
        for target in targets
        if target not in ALLOWED.get(source, set())
    }
    assert not unexpected, f"imports against the layering: {sorted(unexpected)}"


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
