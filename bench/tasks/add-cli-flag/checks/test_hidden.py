"""Hidden checks: --words counts words, lines stay the default, and the test the agent added covers the
flag: it passes now and fails against the original wordcount.py."""

import shutil
import subprocess
import sys
from pathlib import Path

ORIGINAL = Path(__file__).with_name("original_wordcount.py")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "wordcount.py", *args], capture_output=True, text=True)


def test_words_and_lines(tmp_path: Path) -> None:
    sample = tmp_path / "s.txt"
    sample.write_text("alpha  beta\tgamma\n\n  delta\nepsilon zeta eta\n")
    assert run(str(sample)).stdout == "4\n"
    assert run("--words", str(sample)).stdout == "7\n"
    assert run(str(sample), "--words").stdout == "7\n"
    empty = tmp_path / "e.txt"
    empty.write_text("")
    assert run("--words", str(empty)).stdout == "0\n"


def test_help_mentions_the_flag() -> None:
    assert "--words" in run("--help").stdout


def suite(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=cwd,
        capture_output=True,
        text=True,
    )


def test_a_test_covers_the_flag(tmp_path: Path) -> None:
    assert "--words" in Path("tests/test_wordcount.py").read_text()
    now = suite(Path("."))
    assert now.returncode == 0, now.stdout[-2000:]
    before = tmp_path / "before"
    shutil.copytree("tests", before / "tests")
    shutil.copy(ORIGINAL, before / "wordcount.py")
    assert suite(before).returncode != 0, (
        "the tests pass against the original wordcount.py: no test covers --words"
    )
