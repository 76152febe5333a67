"""Hidden checks: mypy --strict is clean and restock behaves."""

import subprocess
import sys

import pytest
from inventory import Item, restock, total_quantity


def test_mypy_strict_is_clean() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir=/dev/null",
            "--no-error-summary",
            "inventory.py",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_restock() -> None:
    assert restock(Item("bolt", 3), " 4 ") == Item("bolt", 7)
    assert restock(Item("nut", 0), "0") == Item("nut", 0)
    assert total_quantity([Item("a", 1), Item("b", 2)]) == 3


@pytest.mark.parametrize("text", ["", "many", "-2", "1.5"])
def test_a_bad_amount_raises(text: str) -> None:
    with pytest.raises(ValueError, match=r"not|invalid|quantity"):
        restock(Item("bolt", 3), text)
