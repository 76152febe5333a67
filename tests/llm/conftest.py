"""Fixtures for the provider tests: a started fake DeepSeek server and an adapter pointed at it."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

# `tests.fakes` must import however pytest was started (`pytest` does not put the repo root on sys.path,
# `python -m pytest` does).
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from dsh_daemon.llm.deepseek import DeepSeekProvider  # noqa: E402
from tests.fakes.deepseek_server import FakeDeepSeek  # noqa: E402
from tests.llm.support import make_config  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may touch the real state directory or inherit a real key."""
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "dsh-home"))
    for name in ("DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL", "DSH_BASE_URL", "DSH_MODEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake() -> Iterator[FakeDeepSeek]:
    with FakeDeepSeek() as server:
        yield server


@pytest.fixture
async def adapter(fake: FakeDeepSeek) -> AsyncIterator[DeepSeekProvider]:
    provider = DeepSeekProvider(make_config(fake))
    yield provider
    await provider.aclose()
