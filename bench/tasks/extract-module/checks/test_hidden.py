"""Hidden checks: the function lives in app/durations.py, app.utils no longer has it, callers moved."""

import subprocess
import sys
from pathlib import Path

import app.utils
import pytest
from app.durations import parse_duration
from app.jobs import Job, job_from_line


def test_moved() -> None:
    assert not hasattr(app.utils, "parse_duration") and not hasattr(app.utils, "_UNITS")
    assert app.utils.plural(2, "job") == "2 jobs" and app.utils.shorten("abcdef", 4) == "abc…"
    stale = [
        str(p)
        for p in Path(".").rglob("*.py")
        if ".bench_checks" not in p.parts and "from app.utils import parse_duration" in p.read_text()
    ]
    assert stale == []


def test_behaviour() -> None:
    assert parse_duration("2d 3h") == 2 * 86400 + 3 * 3600
    assert parse_duration("1.5s") == 1.5
    with pytest.raises(ValueError):
        parse_duration("3 parsecs")
    assert job_from_line("sync every 15m") == Job("sync", 900.0)


def test_the_suite_passes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-2000:]
