"""Provider configuration: where the model lives, how to reach it, what it costs.

Sources, in rising priority (a later source overrides a key an earlier one set):

1. built-in defaults: DeepSeek at `https://api.deepseek.com`, model `deepseek-v4-flash`, thinking
   enabled, `maxTokens` 256000, DeepSeek's published prices and context windows, `compactAtRatio` 0.85;
2. the config file `<state_dir>/config.json` (its `provider` object);
3. the environment: `DEEPSEEK_API_KEY`, `DEEPSEEK_BASE_URL` (alias `DSH_BASE_URL`, used only when
   `DEEPSEEK_BASE_URL` is unset), `DSH_MODEL`; empty values count as unset;
4. command-line flags;
5. the editor's `initializationOptions`.

Flags and `initializationOptions` use the same keys as the file's `provider` object (a mapping that
has a `provider` object is read through it, so the whole `initializationOptions` can be passed).
snake_case spellings of the keys (`base_url`, `api_key`, ...) are accepted too. File format (plain JSON;
the comments below only explain the keys, and every key is optional)::

    {
      "provider": {
        "name": "deepseek",                      // recorded in each assistant message's source
        "baseUrl": "https://api.deepseek.com",   // any OpenAI-compatible endpoint: {baseUrl}/chat/completions
        "apiKey": "sk-...",                      // prefer DEEPSEEK_API_KEY; never logged
        "model": "deepseek-v4-flash",            // deepseek-v4-pro and any other id pass through
        "thinking": true,                        // true | false | null (null: send no `thinking` field)
        "reasoningEffort": "high",               // "high" | "max" | ...; "off" disables thinking
        "maxTokens": 256000,                     // adapter default, written into each request header
        "connectTimeoutS": 10,                   // TCP/TLS connect
        "idleTimeoutS": 300,                     // longest silence on a stream; keep-alives re-arm it
        "prices": {                              // USD per 1M tokens; merged over the shipped defaults
          "deepseek-v4-flash": {"cacheHit": 0.028, "cacheMiss": 0.14, "output": 0.28}
        },
        "contextWindow": {"my-local-model": 32768},  // tokens per model, merged over the defaults;
                                                 // a bare integer sets the window of every model
        "compactAtRatio": 0.85                   // compact when the last input reached this share of
                                                 // the window; null: only on overflow or by hand
      }
    }

Unknown keys are rejected with an error naming them (a misspelt key silently ignored is worse). The
daemon reads config.json through `host/config_file.py`, which checks each entry alone and reports a
bad one (left out) instead of refusing the whole configuration.
A missing API key is not an error here: the daemon starts, and the first model request fails with
a `CONFIG` failure that says how to set one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dsh_daemon.model.configfile import CONFIG_FILE, ConfigFileError, read_config_file

DEFAULT_BASE_URL = "https://api.deepseek.com"
DEFAULT_MODEL = "deepseek-v4-flash"
DEFAULT_MAX_TOKENS = 256_000
DEFAULT_COMPACT_AT_RATIO = 0.85


class ConfigError(ValueError):
    """A configuration source holds a value of the wrong type or an unknown key."""


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """USD per million tokens. DeepSeek bills cache hits, cache misses and output separately."""

    cache_hit: float
    cache_miss: float
    output: float

    def cost_usd(self, hit_tokens: int, miss_tokens: int, output_tokens: int) -> float:
        return (
            hit_tokens * self.cache_hit + miss_tokens * self.cache_miss + output_tokens * self.output
        ) / 1e6


_FLASH = ModelPrice(cache_hit=0.028, cache_miss=0.14, output=0.28)
# Published V4 prices (api-docs pricing page, archived 2026-04-26); pro was under a 75% promotion then.
# These are configuration defaults, not facts the code relies on: the file's `prices` override them.
DEFAULT_PRICES: Mapping[str, ModelPrice] = {
    "deepseek-v4-flash": _FLASH,
    "deepseek-v4-pro": ModelPrice(cache_hit=0.03625, cache_miss=0.435, output=0.87),
    # The legacy names alias V4-Flash's two modes until DeepSeek removes them.
    "deepseek-chat": _FLASH,
    "deepseek-reasoner": _FLASH,
}

# Context windows in tokens. Source: DeepSeek's models & pricing page
# (https://api-docs.deepseek.com/quick_start/pricing, archived 2026-04-26):
# deepseek-v4-flash and deepseek-v4-pro have a 1,000,000-token context (384K maximum
# output), and the legacy names alias V4-Flash. Configuration defaults like the prices: the file's
# `contextWindow` overrides them; a model not listed has no known window (no automatic compaction).
DEFAULT_CONTEXT_WINDOWS: Mapping[str, int] = {
    "deepseek-v4-flash": 1_000_000,
    "deepseek-v4-pro": 1_000_000,
    "deepseek-chat": 1_000_000,
    "deepseek-reasoner": 1_000_000,
}


@dataclass(frozen=True)
class ProviderConfig:
    base_url: str = DEFAULT_BASE_URL
    api_key: str | None = field(default=None, repr=False)
    model: str = DEFAULT_MODEL
    name: str = "deepseek"
    thinking: bool | None = True
    reasoning_effort: str | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    prices: Mapping[str, ModelPrice] = field(default_factory=lambda: dict(DEFAULT_PRICES), hash=False)
    connect_timeout_s: float = 10.0
    idle_timeout_s: float = 300.0
    context_windows: Mapping[str, int] = field(
        default_factory=lambda: dict(DEFAULT_CONTEXT_WINDOWS), hash=False
    )
    context_window_all: int | None = None  # a bare-integer `contextWindow`: every model's window
    compact_at_ratio: float | None = DEFAULT_COMPACT_AT_RATIO

    def __repr__(self) -> str:
        # Hand-written so the key can never leak through a repr, an f-string or a log line.
        key = "<set>" if self.api_key else "<unset>"
        return (
            f"ProviderConfig(name={self.name!r}, base_url={self.base_url!r}, api_key={key}, "
            f"model={self.model!r}, thinking={self.thinking!r}, reasoning_effort={self.reasoning_effort!r}, "
            f"max_tokens={self.max_tokens}, connect_timeout_s={self.connect_timeout_s}, "
            f"idle_timeout_s={self.idle_timeout_s}, prices={sorted(self.prices)}, "
            f"context_windows={dict(self.context_windows)}, context_window_all={self.context_window_all}, "
            f"compact_at_ratio={self.compact_at_ratio})"
        )

    __str__ = __repr__

    @property
    def chat_url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def price(self, model: str) -> ModelPrice | None:
        return self.prices.get(model)

    def context_window(self, model: str) -> int | None:
        """The model's context window in tokens, None when unknown."""
        if self.context_window_all is not None:
            return self.context_window_all
        return self.context_windows.get(model)


# ---- loading ---------------------------------------------------------------------------------------

# The file's camelCase keys -> ProviderConfig attributes.
_KEYS: dict[str, str] = {
    "name": "name",
    "baseUrl": "base_url",
    "apiKey": "api_key",
    "model": "model",
    "thinking": "thinking",
    "reasoningEffort": "reasoning_effort",
    "maxTokens": "max_tokens",
    "connectTimeoutS": "connect_timeout_s",
    "idleTimeoutS": "idle_timeout_s",
    "prices": "prices",
    "contextWindow": "context_windows",
    "compactAtRatio": "compact_at_ratio",
}
_SNAKE = {attr: attr for attr in _KEYS.values()} | {"context_window": "context_windows"}


def load_provider_config(
    state_dir: Path,
    env: Mapping[str, str],
    flags: Mapping[str, Any] | None = None,
    init_options: Mapping[str, Any] | None = None,
    *,
    file_section: Mapping[str, Any] | None = None,
) -> ProviderConfig:
    """The effective provider configuration (see the module docstring for sources and format).
    `file_section`: config.json's provider settings, already read and checked (`host/config_file.py`,
    which reports a bad one instead of refusing them all); None: read the file here, strictly."""
    config = ProviderConfig()
    section = _read_file(Path(state_dir)) if file_section is None else file_section
    config = _apply(config, section, "config.json")
    config = _apply(config, _from_env(env), "environment")
    config = _apply(config, _section(flags or {}), "flags")
    return _apply(config, _section(init_options or {}), "initializationOptions")


def is_provider_key(key: str) -> bool:
    """A provider setting's name (camelCase or snake_case)."""
    return key in _KEYS or key in _SNAKE


def environment_keys(env: Mapping[str, str]) -> dict[str, str]:
    """Which provider setting each environment variable in `env` sets: {camelCase key: variable}."""
    out: dict[str, str] = {}
    if env.get("DEEPSEEK_API_KEY"):
        out["apiKey"] = "DEEPSEEK_API_KEY"
    if env.get("DEEPSEEK_BASE_URL"):
        out["baseUrl"] = "DEEPSEEK_BASE_URL"
    elif env.get("DSH_BASE_URL"):
        out["baseUrl"] = "DSH_BASE_URL"
    if env.get("DSH_MODEL"):
        out["model"] = "DSH_MODEL"
    return out


def camel_key(key: str) -> str:
    """A provider setting's camelCase name (`base_url` -> `baseUrl`)."""
    if key in _KEYS:
        return key
    attr = _SNAKE.get(key, key)
    return next((camel for camel, a in _KEYS.items() if a == attr), key)


def check_provider_setting(key: str, value: Any, where: str) -> None:
    """`ConfigError` naming `where` when `key: value` is no valid provider setting."""
    _apply(ProviderConfig(), {key: value}, where)


def _read_file(state_dir: Path) -> Mapping[str, Any]:
    try:
        data = read_config_file(state_dir)
    except ConfigFileError as exc:
        raise ConfigError(str(exc)) from exc
    path = state_dir / CONFIG_FILE
    section = data.get("provider", {})
    if not isinstance(section, Mapping):
        raise ConfigError(f"{path}: 'provider' must be an object")
    return section


def _section(source: Mapping[str, Any]) -> Mapping[str, Any]:
    inner = source.get("provider")
    return inner if isinstance(inner, Mapping) else source


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if env.get("DEEPSEEK_API_KEY"):
        out["apiKey"] = env["DEEPSEEK_API_KEY"]
    base_url = env.get("DEEPSEEK_BASE_URL") or env.get("DSH_BASE_URL")
    if base_url:
        out["baseUrl"] = base_url
    if env.get("DSH_MODEL"):
        out["model"] = env["DSH_MODEL"]
    return out


def _apply(config: ProviderConfig, values: Mapping[str, Any], where: str) -> ProviderConfig:
    changes: dict[str, Any] = {}
    for key, value in values.items():
        attr = _KEYS.get(key) or _SNAKE.get(key)
        if attr is None:
            raise ConfigError(f"{where}: unknown provider setting {key!r} (known: {', '.join(_KEYS)})")
        if attr == "prices":
            changes["prices"] = {**config.prices, **_prices(value, where)}
        elif attr == "context_windows":
            if isinstance(value, Mapping):
                changes["context_windows"] = {**config.context_windows, **_windows(value, where)}
                changes["context_window_all"] = None
            else:
                changes["context_window_all"] = _window(value, f"{where}: {key}")
        else:
            changes[attr] = _check(attr, value, f"{where}: {key}")
    return replace(config, **changes) if changes else config


def _check(attr: str, value: Any, where: str) -> Any:
    if attr in ("base_url", "model", "name"):
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{where} must be a non-empty string")
        if attr == "base_url" and not value.startswith(("http://", "https://")):
            raise ConfigError(f"{where} must start with http:// or https://")
        return value
    if attr == "api_key":
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{where} must be a string or null")
        key = (value or "").strip()  # a pasted key often brings a newline along
        if key and not (key.isascii() and key.isprintable() and " " not in key):
            # Named without its value: an HTTP library's complaint about it would quote the key.
            raise ConfigError(f"{where} holds characters an API key cannot have (non-ASCII, space, control)")
        return key or None
    if attr == "reasoning_effort":
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{where} must be a string or null")
        return value or None
    if attr == "thinking":
        if value is not None and not isinstance(value, bool):
            raise ConfigError(f"{where} must be true, false or null")
        return value
    if attr == "compact_at_ratio":
        if value is not None and (not _is_number(value) or not 0 < value <= 1):
            raise ConfigError(f"{where} must be a number in (0, 1], or null")
        return None if value is None else float(value)
    if attr == "max_tokens":
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"{where} must be a positive integer")
        return value
    # timeouts
    if not _is_number(value) or value <= 0:
        raise ConfigError(f"{where} must be a positive number of seconds")
    return float(value)


def _prices(value: Any, where: str) -> dict[str, ModelPrice]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: prices must be an object of model -> price")
    out: dict[str, ModelPrice] = {}
    for model, entry in value.items():
        if not isinstance(entry, Mapping) or set(entry) != {"cacheHit", "cacheMiss", "output"}:
            raise ConfigError(f"{where}: prices.{model} must have exactly cacheHit, cacheMiss and output")
        if not all(_is_number(v) and v >= 0 for v in entry.values()):
            raise ConfigError(f"{where}: prices.{model} values must be non-negative numbers")
        out[str(model)] = ModelPrice(
            float(entry["cacheHit"]), float(entry["cacheMiss"]), float(entry["output"])
        )
    return out


def _window(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{where} must be a positive integer (tokens) or an object of model -> tokens")
    return value


def _windows(value: Mapping[str, Any], where: str) -> dict[str, int]:
    return {str(model): _window(tokens, f"{where}: contextWindow.{model}") for model, tokens in value.items()}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
