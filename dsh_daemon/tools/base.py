"""What every tool here shares: argument checking, typed errors turned into error results, and the
hooks' view of a tool (a permission title, the paths it will touch)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from dsh_daemon.agent.tools import ToolCall, ToolContext, ToolOutcome
from dsh_daemon.model.jsonvalue import freeze_json
from dsh_daemon.model.provider import ToolSpec
from dsh_daemon.tools.errors import InvalidArgumentsError, ToolError


def make_spec(name: str, description: str, properties: Mapping[str, Any], required: list[str]) -> ToolSpec:
    schema = {
        "type": "object",
        "properties": dict(properties),
        "required": required,
        "additionalProperties": False,
    }
    return ToolSpec(name, description, freeze_json(schema))


def get_str(
    args: Mapping[str, Any], name: str, default: str | None = None, *, allow_empty: bool = True
) -> str:
    value = args.get(name, default)
    if value is None:
        raise InvalidArgumentsError(f"missing required argument '{name}'")
    if not isinstance(value, str):
        raise InvalidArgumentsError(f"'{name}' must be a string")
    if not allow_empty and not value:
        raise InvalidArgumentsError(f"'{name}' must not be empty")
    return value


def get_opt_str(args: Mapping[str, Any], name: str) -> str | None:
    value = args.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidArgumentsError(f"'{name}' must be a string")
    return value


def get_int(args: Mapping[str, Any], name: str, default: int, *, minimum: int) -> int:
    value = args.get(name, default)
    if value is None:
        return default
    # Models sometimes send 10.0 or "10"; accept exact integers, refuse the rest.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgumentsError(f"'{name}' must be an integer")
    if value < minimum:
        raise InvalidArgumentsError(f"'{name}' must be at least {minimum}")
    return value


def get_bool(args: Mapping[str, Any], name: str, default: bool = False) -> bool:
    value = args.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidArgumentsError(f"'{name}' must be true or false")
    return value


class ToolBase:
    """A `Tool` whose body raises `ToolError`s; `execute` turns them into error results."""

    spec: ToolSpec  # set per subclass, at class level
    parallel_safe: bool = True
    _refusals: dict[tuple[str, int, int], ToolError] | None = None  # see `refuse`

    def refuse(self, call: ToolCall, error: ToolError) -> None:
        """The permission policy found that `call` cannot succeed: it ends with `error`, unrun."""
        if self._refusals is None:
            self._refusals = {}
        self._refusals[_call_key(call)] = error
        while len(self._refusals) > 256:  # a call another hook denied after the policy never runs
            del self._refusals[next(iter(self._refusals))]

    async def execute(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        call = getattr(ctx, "call", None)
        if self._refusals and call is not None:
            refused = self._refusals.pop(_call_key(call), None)
            if refused is not None:
                return ToolOutcome.error(f"Error: {refused}", refused.code)
        try:
            return await self.run(args, ctx)
        except ToolError as exc:
            return ToolOutcome.error(f"Error: {exc}", exc.code)
        except asyncio.CancelledError:
            raise
        except OSError as exc:
            return ToolOutcome.error(f"Error: {exc.strerror or exc}", "IO_ERROR")

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        raise NotImplementedError

    def permission_title(self, args: Mapping[str, Any]) -> str:
        """What the person is asked to allow."""
        return f"Run {self.spec.name}"

    def permission_scope(self, args: Mapping[str, Any]) -> str | None:
        """What an allow-always answer covers; None: the whole tool."""
        return None

    async def permission_preview(self, args: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """What the call would do, shown beside the permission question (None: nothing to show)."""
        return None

    def target_paths(self, args: Mapping[str, Any]) -> list[str]:
        """Paths the call will touch, checked against the workspace before anyone is asked."""
        return []


def _call_key(call: ToolCall) -> tuple[str, int, int]:
    return (call.call_id, call.turn, call.step)


def short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split()) if "\n" in text else text
    return text if len(text) <= limit else text[: limit - 1] + "…"
