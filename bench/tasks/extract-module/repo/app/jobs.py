"""Scheduled jobs."""

from dataclasses import dataclass

from app.utils import parse_duration, plural


@dataclass(frozen=True)
class Job:
    name: str
    every_s: float


def job_from_line(line: str) -> Job:
    """`name every 1h30m` -> Job("name", 5400.0)."""
    name, _, every = line.partition(" every ")
    return Job(name.strip(), parse_duration(every.strip()))


def summary(jobs: list[Job]) -> str:
    return plural(len(jobs), "job")
