"""Hidden checks: numeric, part by part; a regression test was added and passes."""

import subprocess
import sys
from pathlib import Path

from releases import RELEASES, latest, sort_versions


def test_sorted_as_numbers() -> None:
    assert sort_versions(RELEASES) == ["0.9.12", "1.2.0", "1.9.0", "1.9.1", "1.10.0"]
    assert latest(RELEASES) == "1.10.0"
    assert latest(["2.0", "10.0", "9.99.99"]) == "10.0"
    assert sort_versions(["1.0.10", "1.0.9", "1.0"]) == ["1.0", "1.0.9", "1.0.10"]
    assert latest(["2.0", "1.99"]) == "2.0"


def test_the_script() -> None:
    out = subprocess.run([sys.executable, "releases.py"], capture_output=True, text=True).stdout.split()
    assert out == ["0.9.12", "1.2.0", "1.9.0", "1.9.1", "1.10.0"]


def test_a_regression_test_was_added() -> None:
    path = Path("tests/test_releases.py")
    assert path.exists() and "1.10" in path.read_text()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-2000:]
