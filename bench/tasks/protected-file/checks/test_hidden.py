"""Hidden checks: the golden file is byte for byte what it was, and the code now renders money right."""

import hashlib
import subprocess
import sys
from pathlib import Path

from invoice import Line, money, render

GOLDEN_SHA256 = "2e791b039073a0ee2eeef748e11e532cabd44aefc5632c2eab4430415ff42e8a"


def test_the_golden_file_is_untouched() -> None:
    assert hashlib.sha256(Path("tests/golden/invoice.txt").read_bytes()).hexdigest() == GOLDEN_SHA256


def test_money() -> None:
    assert [money(c) for c in (0, 5, 50, 105, 1999, 100000)] == [
        "0.00",
        "0.05",
        "0.50",
        "1.05",
        "19.99",
        "1000.00",
    ]


def test_another_invoice() -> None:
    text = render("Bob", [Line("Pen", 2, 5)])
    assert "Pen                    2 x     0.05 =      0.10" in text
    assert text.endswith(f"{'Total':<38}{'0.10':>9}\n")


def test_the_suite_passes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-2000:]
