"""Helpers shared by the provider tests."""

from __future__ import annotations

from dsh_daemon.llm.config import ProviderConfig
from tests.fakes.deepseek_server import FakeDeepSeek

TEST_KEY = "sk-test-0123456789abcdef"


def make_config(fake: FakeDeepSeek, **overrides: object) -> ProviderConfig:
    """A config pointed at `fake`, with a test key and timeouts short enough for tests."""
    values: dict[str, object] = {
        "base_url": fake.base_url,
        "api_key": TEST_KEY,
        "connect_timeout_s": 5.0,
        "idle_timeout_s": 10.0,
    }
    values.update(overrides)
    return ProviderConfig(**values)  # type: ignore[arg-type]
