"""Hidden checks: the old name is gone from every file, the new one works everywhere."""

import subprocess
import sys
from pathlib import Path

import users.store
from users.api import describe

OLD = "fetch_usr"


def test_no_file_still_says_the_old_name() -> None:
    files = [
        p
        for p in Path(".").rglob("*")
        if p.is_file() and ".git" not in p.parts and p.suffix in {".py", ".md"}
    ]
    still = [str(p) for p in files if OLD in p.read_text() and "bench_checks" not in str(p)]
    assert still == []


def test_the_new_name_works() -> None:
    assert users.store.fetch_user(1) == {"id": 1, "name": "ada"}
    assert not hasattr(users.store, OLD)
    assert describe(1) == "ada (#1)"


def test_the_readme_shows_the_new_name() -> None:
    assert "from users.store import fetch_user" in Path("README.md").read_text()


def test_the_cli_and_the_suite() -> None:
    cli = subprocess.run([sys.executable, "cli.py", "2"], capture_output=True, text=True)
    assert cli.stdout == "grace\n", cli.stderr
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-2000:]
