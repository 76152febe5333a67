"""The models a session may use and its own model settings (issue 24.8): the model, thinking on or
off, the reasoning effort. Offered to clients as ACP config options and by `dsh/models/list`.

Per session and durable (`session/settings`, written by `HostedSession.set_model_settings_durably`):
a process that loads the session or takes it over keeps its choices; the daemon-wide configuration
(`workspace/didChangeConfiguration`) changes the model of the sessions that did not choose one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dsh_daemon.llm.config import ProviderConfig

FEATURED = ("deepseek-v4-flash", "deepseek-v4-pro")  # offered first, with DeepSeek's defaults
LEGACY = frozenset({"deepseek-chat", "deepseek-reasoner"})  # aliases of V4 Flash: not offered again
NAMES = {"deepseek-v4-flash": "DeepSeek V4 Flash", "deepseek-v4-pro": "DeepSeek V4 Pro"}
EFFORTS = ("high", "max")


def configured_models(config: ProviderConfig) -> list[dict[str, Any]]:
    """The configured model first, then DeepSeek's Flash and Pro, then every model the configuration
    names (prices, context windows); the legacy aliases only when configured as the model."""
    ids: list[str] = []
    for model in (config.model, *FEATURED, *config.context_windows, *config.prices):
        if model and model not in ids and (model not in LEGACY or model == config.model):
            ids.append(model)
    out = []
    for model in ids:
        row: dict[str, Any] = {"id": model, "name": NAMES.get(model, model)}
        window = config.context_window(model)
        if window is not None:
            row["contextWindow"] = window
        if model in FEATURED:  # DeepSeek V4 thinks at an effort; other models' are unknown here
            row["reasoningEfforts"] = list(EFFORTS)
        out.append(row)
    return out


@dataclass
class ModelSettings:
    """A session's own choices (None: the daemon's configuration)."""

    model: str | None = None
    thinking: bool | None = None
    reasoning_effort: str | None = None

    def effective(self, config: ProviderConfig) -> tuple[str, bool, str]:
        model = self.model or config.model
        thinking = self.thinking if self.thinking is not None else config.thinking is not False
        effort = self.reasoning_effort or config.reasoning_effort or "high"
        return model, thinking, effort

    def request_config(self) -> dict[str, Any]:
        """What the session's requests override (AgentOptions.config)."""
        out: dict[str, Any] = {}
        if self.thinking is not None:
            out["thinking"] = self.thinking
        if self.reasoning_effort is not None:
            out["reasoningEffort"] = self.reasoning_effort
        return out
