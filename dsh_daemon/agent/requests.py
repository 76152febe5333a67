"""A model request, built the one way: the request hooks' configuration over the agent's, a durable
`request/header` when it changed, and the history from the log (D7: what is sent is by construction
what the log rebuilds). Used by a step's attempts and a compaction's alike."""

from __future__ import annotations

import logging
from typing import Any

from dsh_daemon.agent.errors import StepError
from dsh_daemon.agent.hooks import RequestConfig, RequestContext, run_waterfall
from dsh_daemon.agent.signal import AbortSignal
from dsh_daemon.agent.turncontext import TurnContext
from dsh_daemon.model.codec import structure
from dsh_daemon.model.jsonvalue import freeze_json
from dsh_daemon.model.payloads import RequestHeaderLogged, entry
from dsh_daemon.model.provider import ModelRequest
from dsh_daemon.model.wire import RequestHeader

logger = logging.getLogger(__name__)


async def build_request(ctx: TurnContext, turn: int, step: int, signal: AbortSignal) -> ModelRequest:
    """The next request of the session (logging a changed header first); `StepError` when no
    provider or model is configured."""
    base = base_config(ctx)

    async def innermost() -> RequestConfig:
        return base

    config = await run_waterfall(
        ctx.hooks.request, RequestContext(ctx.control, turn, step, signal, base), innermost
    )
    signal.check()
    if not config.config.get("provider") or not config.config.get("model"):
        raise StepError("no model configured: set a provider and a model (e.g. DSH_MODEL)")
    if ctx.provider is None:
        raise StepError("no provider configured")
    header = ModelRequest(config.config, config.system, config.tools, ()).header_json()
    derivation = ctx.derive()
    if not ctx.header_logged or derivation.header != header:
        reason = "change" if ctx.header_logged else ("resume" if derivation.header else "initial")
        logged = RequestHeaderLogged(structure(header, RequestHeader), reason)  # type: ignore[arg-type]
        ctx.log.append(*entry(logged))
        ctx.header_logged = True
        derivation = ctx.derive()
    return derivation.request()


def base_config(ctx: TurnContext) -> RequestConfig:
    """The agent's own request configuration, before the request hooks."""
    options, provider = ctx.options, ctx.provider
    config: dict[str, Any] = {
        "provider": provider.name if provider is not None else "",
        "model": options.model,
    }
    if provider is not None and options.model:
        config.update(provider.default_config(options.model))
    config.update(options.config)
    if options.max_tokens is not None:
        config["maxTokens"] = options.max_tokens
    return RequestConfig(freeze_json(config), options.system, ctx.tools.specs())


def error_chain(exc: BaseException) -> str:
    parts: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(parts) < 5:
        parts.append(f"{type(current).__name__}: {current}")
        current = current.__cause__ or current.__context__
    return " <- ".join(parts)


async def aclose_stream(stream: Any) -> None:
    """Close a provider stream (it must release its connection at once), quietly."""
    close = getattr(stream, "aclose", None)
    if close is not None:
        try:
            await close()
        except Exception:
            logger.debug("provider stream aclose failed", exc_info=True)
