"""Provider configuration: source priority, validation, and a key that never shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_daemon.llm.config import (
    DEFAULT_BASE_URL,
    DEFAULT_MODEL,
    DEFAULT_PRICES,
    ConfigError,
    ModelPrice,
    ProviderConfig,
    load_provider_config,
)

KEY = "sk-config-secret-987654321"


def write_config(state_dir: Path, provider: dict[str, object]) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "config.json").write_text(json.dumps({"provider": provider, "other": {"ignored": 1}}))


def test_defaults_without_any_source(tmp_path: Path) -> None:
    config = load_provider_config(tmp_path, {})
    assert config.base_url == DEFAULT_BASE_URL == "https://api.deepseek.com"
    assert config.model == DEFAULT_MODEL == "deepseek-v4-flash"
    assert config.thinking is True
    assert config.api_key is None
    assert config.max_tokens == 256000
    assert config.chat_url == "https://api.deepseek.com/chat/completions"
    assert config.price("deepseek-v4-pro") == DEFAULT_PRICES["deepseek-v4-pro"]
    assert config.price("some-local-model") is None


def test_rising_priority_file_env_flags_init(tmp_path: Path) -> None:
    write_config(
        tmp_path, {"baseUrl": "http://file", "model": "file-model", "apiKey": "file-key", "thinking": False}
    )
    env = {"DEEPSEEK_BASE_URL": "http://env", "DSH_MODEL": "env-model"}
    config = load_provider_config(tmp_path, env)
    assert (config.base_url, config.model, config.api_key, config.thinking) == (
        "http://env",
        "env-model",
        "file-key",
        False,
    )
    config = load_provider_config(tmp_path, env, flags={"model": "flag-model", "api_key": "flag-key"})
    assert (config.base_url, config.model, config.api_key) == ("http://env", "flag-model", "flag-key")
    config = load_provider_config(
        tmp_path,
        env,
        flags={"model": "flag-model"},
        init_options={"provider": {"model": "init-model"}, "x": 1},
    )
    assert config.model == "init-model"


def test_env_key_overrides_file_key_and_alias(tmp_path: Path) -> None:
    write_config(tmp_path, {"apiKey": "file-key"})
    config = load_provider_config(tmp_path, {"DEEPSEEK_API_KEY": KEY, "DSH_BASE_URL": "http://alias"})
    assert config.api_key == KEY
    assert config.base_url == "http://alias"
    both = load_provider_config(
        tmp_path, {"DEEPSEEK_BASE_URL": "http://primary", "DSH_BASE_URL": "http://alias"}
    )
    assert both.base_url == "http://primary"
    empty = load_provider_config(tmp_path, {"DEEPSEEK_API_KEY": "", "DSH_MODEL": ""})
    assert empty.api_key == "file-key" and empty.model == DEFAULT_MODEL


def test_prices_merge_over_defaults(tmp_path: Path) -> None:
    write_config(
        tmp_path, {"prices": {"deepseek-v4-flash": {"cacheHit": 0.0028, "cacheMiss": 0.14, "output": 0.28}}}
    )
    config = load_provider_config(tmp_path, {})
    assert config.price("deepseek-v4-flash") == ModelPrice(0.0028, 0.14, 0.28)
    assert config.price("deepseek-v4-pro") == DEFAULT_PRICES["deepseek-v4-pro"]


@pytest.mark.parametrize(
    ("provider", "fragment"),
    [
        ({"baseURL": "http://x"}, "unknown provider setting 'baseURL'"),
        ({"maxTokens": 0}, "maxTokens must be a positive integer"),
        ({"thinking": "yes"}, "thinking must be true, false or null"),
        ({"baseUrl": "api.deepseek.com"}, "must start with http"),
        ({"idleTimeoutS": -1}, "positive number"),
        ({"prices": {"m": {"cacheHit": 1}}}, "exactly cacheHit, cacheMiss and output"),
    ],
)
def test_bad_values_are_named(tmp_path: Path, provider: dict[str, object], fragment: str) -> None:
    write_config(tmp_path, provider)
    with pytest.raises(ConfigError, match=r"config\.json") as caught:
        load_provider_config(tmp_path, {})
    assert fragment in str(caught.value)


def test_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_provider_config(tmp_path, {})


def test_repr_and_str_never_show_the_key(tmp_path: Path) -> None:
    config = load_provider_config(tmp_path, {"DEEPSEEK_API_KEY": KEY})
    for text in (repr(config), str(config), f"{config}", repr([config])):
        assert KEY not in text
        assert "api_key=<set>" in text
    assert "api_key=<unset>" in repr(ProviderConfig())


def test_a_pasted_key_is_stripped_and_a_malformed_one_refused_without_echoing_it(tmp_path: Path) -> None:
    from dsh_daemon.llm.config import ConfigError, load_provider_config

    assert load_provider_config(tmp_path, {"DEEPSEEK_API_KEY": "sk-abc123\n"}).api_key == "sk-abc123"
    for bad in ("sk-a\nb", "sk-é", "sk a"):
        with pytest.raises(ConfigError) as error:
            load_provider_config(tmp_path, {"DEEPSEEK_API_KEY": bad})
        assert bad not in str(error.value)


def test_context_windows_default_and_override(tmp_path: Path) -> None:
    from dsh_daemon.llm.config import DEFAULT_CONTEXT_WINDOWS
    from dsh_daemon.llm.deepseek import DeepSeekProvider

    config = load_provider_config(tmp_path, {})
    assert config.context_window("deepseek-v4-flash") == 1_000_000
    assert config.context_window("deepseek-v4-pro") == 1_000_000
    assert config.context_window("some-local-model") is None
    assert config.compact_at_ratio == 0.85
    assert DeepSeekProvider(config).context_window("") == 1_000_000  # the configured model's
    write_config(tmp_path, {"contextWindow": {"local": 32768}, "compactAtRatio": 0.5})
    config = load_provider_config(tmp_path, {})
    assert config.context_window("local") == 32768
    assert config.context_window("deepseek-v4-pro") == DEFAULT_CONTEXT_WINDOWS["deepseek-v4-pro"]
    assert config.compact_at_ratio == 0.5
    # A bare integer is every model's window; a later object goes back to the per-model table.
    config = load_provider_config(tmp_path, {}, flags={"contextWindow": 8192})
    assert (config.context_window("local"), config.context_window("deepseek-v4-pro")) == (8192, 8192)
    config = load_provider_config(
        tmp_path, {}, flags={"contextWindow": 8192}, init_options={"contextWindow": {"x": 100}}
    )
    assert (config.context_window("x"), config.context_window("local")) == (100, 32768)
    config = load_provider_config(tmp_path, {}, init_options={"compactAtRatio": None})
    assert config.compact_at_ratio is None


@pytest.mark.parametrize(
    ("provider", "fragment"),
    [
        ({"contextWindow": 0}, "contextWindow must be a positive integer"),
        ({"contextWindow": {"m": "big"}}, "contextWindow.m must be a positive integer"),
        ({"compactAtRatio": 1.5}, "compactAtRatio must be a number in (0, 1]"),
        ({"compactAtRatio": 0}, "compactAtRatio must be a number in (0, 1]"),
    ],
)
def test_bad_context_settings_are_named(tmp_path: Path, provider: dict[str, object], fragment: str) -> None:
    write_config(tmp_path, provider)
    with pytest.raises(ConfigError) as caught:
        load_provider_config(tmp_path, {})
    assert fragment in str(caught.value)
