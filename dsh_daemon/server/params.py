"""Validation of `dsh/*` params: plain dicts in, clear `invalid_params` errors out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsh_daemon.agent.messages import InvalidMessageError, UserMessage
from dsh_daemon.server.errors import invalid_params

TARGETS = ("next-turn", "next-step")
DELIVERIES = ("inject", "steer", "followup")
CONTEXT_KINDS = ("file", "selection", "diagnostics")
MODEL_ONLY_BLOCKS = frozenset({"tool-call", "tool-result"})


def as_object(params: Any, method: str) -> Mapping[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise invalid_params(f"{method}: params must be an object")
    return params


def req_str(params: Mapping[str, Any], key: str, method: str) -> str:
    value = params.get(key)
    if not isinstance(value, str) or not value:
        raise invalid_params(f"{method}: '{key}' must be a non-empty string")
    return value


def opt_str(params: Mapping[str, Any], key: str, method: str) -> str | None:
    value = params.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid_params(f"{method}: '{key}' must be a string")
    return value


def opt_bool(params: Mapping[str, Any], key: str, method: str, default: bool) -> bool:
    value = params.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid_params(f"{method}: '{key}' must be a boolean")
    return value


def req_bool(params: Mapping[str, Any], key: str, method: str) -> bool:
    value = params.get(key)
    if not isinstance(value, bool):
        raise invalid_params(f"{method}: '{key}' is required (a boolean)")
    return value


def opt_int(params: Mapping[str, Any], key: str, method: str) -> int | None:
    value = params.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise invalid_params(f"{method}: '{key}' must be an integer")
    return value


def one_of(
    params: Mapping[str, Any], key: str, method: str, choices: tuple[str, ...], default: str | None = None
) -> str:
    value = params.get(key)
    if value is None:
        value = default
    if value not in choices:
        raise invalid_params(f"{method}: '{key}' must be one of {', '.join(choices)}")
    return str(value)


def message(params: Mapping[str, Any], method: str, key: str = "message") -> UserMessage:
    raw = params.get(key)
    if not isinstance(raw, Mapping):
        raise invalid_params(f"{method}: '{key}' must be an object {{id?, content, source?}}")
    if "content" not in raw:
        raise invalid_params(
            f"{method}: '{key}.content' is required (a string or an array of content blocks)"
        )
    try:
        message = UserMessage.create(raw["content"], raw.get("source"), id=raw.get("id"))
    except InvalidMessageError as exc:
        raise invalid_params(f"{method}: {exc}") from exc
    except (TypeError, ValueError) as exc:
        raise invalid_params(f"{method}: invalid message: {exc}") from exc
    for block in message.content:
        if block.type in MODEL_ONLY_BLOCKS:
            # Tool calls and results come from the model and the tools; a client-made one would be an
            # orphan the provider refuses, on every later request of the session.
            raise invalid_params(f"{method}: a client message cannot contain a {block.type!r} block")
    return message
