from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.harness import Daemon, start_daemon, stop_daemon


@pytest.fixture
def fake() -> Iterator[FakeDeepSeek]:
    with FakeDeepSeek() as server:
        yield server


@pytest.fixture
async def daemon(tmp_path: Path, fake: FakeDeepSeek) -> AsyncIterator[Daemon]:
    d = await start_daemon(tmp_path / "state", fake)
    try:
        yield d
    finally:
        await stop_daemon(d)
