import pytest

from app.jobs import Job, job_from_line, summary
from app.utils import parse_duration


def test_parse_duration() -> None:
    assert parse_duration("1h30m") == 5400.0
    assert parse_duration("250ms") == 0.25
    with pytest.raises(ValueError):
        parse_duration("soon")


def test_jobs() -> None:
    assert job_from_line("backup every 1d") == Job("backup", 86400.0)
    assert summary([Job("a", 1.0)]) == "1 job"
