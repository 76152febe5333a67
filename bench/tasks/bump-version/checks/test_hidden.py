"""Hidden checks: 1.5.0 everywhere, the new changelog section on top, the old sections untouched."""

import re
import tomllib
from pathlib import Path

import greet


def test_versions() -> None:
    assert tomllib.loads(Path("pyproject.toml").read_text())["project"]["version"] == "1.5.0"
    assert greet.__version__ == "1.5.0"
    assert "pip install greet==1.5.0" in Path("README.md").read_text()


def test_no_old_version_outside_the_changelog() -> None:
    stale = [
        str(p)
        for p in Path(".").rglob("*")
        if p.is_file()
        and ".git" not in p.parts
        and ".bench_checks" not in p.parts
        and p.name != "CHANGELOG.md"
        and "1.4.2" in p.read_text(errors="replace")
    ]
    assert stale == []


def test_changelog() -> None:
    text = Path("CHANGELOG.md").read_text()
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings == ["1.5.0", "1.4.2", "1.4.1"]
    section = text.split("## 1.5.0", 1)[1].split("## 1.4.2", 1)[0]
    assert "- Added: --shout prints the greeting in capitals." in section
    assert text.endswith(
        "## 1.4.2\n\n- Fixed: the greeting no longer ends with two exclamation marks.\n\n## 1.4.1\n\n- Fixed: `--version` printed 1.3.0.\n"
    )
