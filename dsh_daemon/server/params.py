"""Validation of `dsh/*` params: plain dicts in, clear `invalid_params` errors out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from dsh_daemon.host.errors import invalid_params, shown
from dsh_daemon.model.inbox import PRESETS
from dsh_daemon.model.inbox import TARGETS as MODEL_TARGETS
from dsh_daemon.model.messages import EDITOR_CONTEXT_KINDS, InvalidMessageError, UserMessage

TARGETS: tuple[str, ...] = MODEL_TARGETS
DELIVERIES = tuple(PRESETS)  # how dsh/context/add delivers: one of the send presets
# What a client may ask for (the ambient `snapshot` kind is the daemon's own).
CONTEXT_KINDS = tuple(sorted(EDITOR_CONTEXT_KINDS - {"snapshot"}))
MODEL_ONLY_BLOCKS = frozenset({"tool-call", "tool-result"})
MAX_ATTACHED_CONTEXT = 20  # context items on one send


@dataclass(frozen=True)
class ContextSpec:
    """One piece of editor context a client asks for: what `dsh/context/add` takes, minus delivery."""

    uri: str
    kind: str
    range: Mapping[str, Any] | None = None
    diagnostics: list[Mapping[str, Any]] | None = None


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
        raise invalid_params(f"{method}: {shown(str(exc), 500)}") from exc
    except (TypeError, ValueError) as exc:
        raise invalid_params(f"{method}: invalid message: {shown(str(exc), 500)}") from exc
    for block in message.content:
        if block.type in MODEL_ONLY_BLOCKS:
            # Tool calls and results come from the model and the tools; a client-made one would be an
            # orphan the provider refuses, on every later request of the session.
            raise invalid_params(f"{method}: a client message cannot contain a {block.type!r} block")
    return message


def _position(value: Any) -> bool:
    if not isinstance(value, Mapping):
        return False
    line, character = value.get("line"), value.get("character")
    return all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (line, character))


def is_range(value: Any) -> bool:
    return isinstance(value, Mapping) and _position(value.get("start")) and _position(value.get("end"))


def opt_range(params: Mapping[str, Any], key: str, method: str) -> Mapping[str, Any] | None:
    """An LSP Range `{start: {line, character}, end: {line, character}}` (non-negative integers)."""
    value = params.get(key)
    if value is None:
        return None
    if not is_range(value):
        raise invalid_params(
            f"{method}: '{key}' must be an LSP Range {{start: {{line, character}}, end: {{line, character}}}}"
        )
    return cast("Mapping[str, Any]", value)


def diagnostic_problem(value: Any) -> str | None:
    """Why `value` is not an LSP Diagnostic (None: it is one, as far as the daemon reads it)."""
    if not isinstance(value, Mapping):
        return "must be an object"
    if not is_range(value.get("range")):
        return "'range' must be an LSP Range"
    if not isinstance(value.get("message"), str):
        return "'message' must be a string"
    severity = value.get("severity")
    if severity is not None and (isinstance(severity, bool) or severity not in (1, 2, 3, 4)):
        return "'severity' must be 1, 2, 3 or 4"
    source = value.get("source")
    if source is not None and not isinstance(source, str):
        return "'source' must be a string"
    return None


def opt_diagnostics(params: Mapping[str, Any], key: str, method: str) -> list[Mapping[str, Any]] | None:
    value = params.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        raise invalid_params(f"{method}: '{key}' must be an array of LSP Diagnostics")
    for index, item in enumerate(value):
        problem = diagnostic_problem(item)
        if problem is not None:
            raise invalid_params(f"{method}: '{key}[{index}]' {problem}")
    return value


def context_spec(params: Mapping[str, Any], method: str, where: str = "") -> ContextSpec:
    """`{uri, kind, range?, diagnostics?}`; `where` (e.g. "context[0].") names the keys in errors."""
    named = {f"{where}{key}": value for key, value in params.items()}
    rng = opt_range(named, f"{where}range", method)
    kind = one_of(named, f"{where}kind", method, CONTEXT_KINDS)
    if kind == "selection" and rng is None:
        raise invalid_params(f"{method}: '{where}range' is required for a selection")
    return ContextSpec(
        req_str(named, f"{where}uri", method),
        kind,
        rng,
        opt_diagnostics(named, f"{where}diagnostics", method),
    )


def opt_context(params: Mapping[str, Any], key: str, method: str) -> tuple[ContextSpec, ...] | None:
    """The `context` array of a send: editor context that travels with the message (None: absent)."""
    value = params.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        raise invalid_params(f"{method}: '{key}' must be an array of {{uri, kind, range?, diagnostics?}}")
    if len(value) > MAX_ATTACHED_CONTEXT:
        raise invalid_params(f"{method}: '{key}' holds more than {MAX_ATTACHED_CONTEXT} items")
    specs = []
    for index, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise invalid_params(f"{method}: '{key}[{index}]' must be an object")
        specs.append(context_spec(item, method, f"{key}[{index}]."))
    return tuple(specs)
