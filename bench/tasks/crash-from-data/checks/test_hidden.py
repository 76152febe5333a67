"""Hidden checks: the given file and another one, stdout totals and stderr notes."""

import subprocess
import sys
from pathlib import Path


def summarize(path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "summarize.py", path], capture_output=True, text=True)


def test_the_reported_file() -> None:
    done = summarize("data/sales.csv")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "east: 19.99\nnorth: 120.50\nsouth: 85.25\n"
    assert "skipped amount on line 4" in done.stderr and "skipped amount on line 7" in done.stderr


def test_another_file(tmp_path: Path) -> None:
    other = tmp_path / "other.csv"
    other.write_text(
        "date,region,amount\n2026-02-01,west,\n2026-02-01,west,1.10\n2026-02-02,west,  \n2026-02-03,north,2\n"
    )
    done = summarize(str(other))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "north: 2.00\nwest: 1.10\n"
    assert "line 2" in done.stderr and "line 4" in done.stderr and "line 3" not in done.stderr
