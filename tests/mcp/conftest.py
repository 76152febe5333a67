from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.deepseek_server import FakeDeepSeek


@pytest.fixture
def fake() -> Iterator[FakeDeepSeek]:
    with FakeDeepSeek() as server:
        yield server
