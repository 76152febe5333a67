"""The person's hooks: commands the daemon runs at points of a session (protocol.md "Hooks").

Configured as `hooks` in `$DSH_HOME/config.json`, in `initializationOptions` (ACP: `_meta.dsh`) and
in a project's `.dsh/config.json` (run only once the person trusted it), each the same shape:

    {"preToolUse": [{"command": "./check.sh", "matcher": "run_command|edit_file", "timeoutS": 10}]}

Parsed once into frozen values here (a leaf: no I/O); what runs them is `dsh_daemon/hooks/`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, get_args

from dsh_daemon.model.errors import ModelError

HookEvent: TypeAlias = Literal[
    "sessionStart",
    "userPromptSubmit",
    "preToolUse",
    "postToolUse",
    "permissionRequest",
    "stop",
    "subagentStop",  # a subagent ended (host/children.py)
]
HOOK_EVENTS: tuple[HookEvent, ...] = get_args(HookEvent)
TOOL_EVENTS = frozenset({"preToolUse", "postToolUse", "permissionRequest"})  # the ones a matcher narrows
HookOrigin: TypeAlias = Literal["user", "project"]
ENTRY_KEYS = frozenset({"command", "matcher", "timeoutS", "name"})
DEFAULT_TIMEOUT_S = 30.0
MAX_TIMEOUT_S = 600.0
MAX_LABEL = 80


class HookConfigError(ModelError, ValueError):
    """A `hooks` setting of the wrong shape, named in the message."""


@dataclass(frozen=True, slots=True)
class HookCommand:
    """One configured hook. `command` is a shell line (run with `/bin/sh -c`) or an argv."""

    event: HookEvent
    command: str | tuple[str, ...]
    matcher: str | None = None  # a regular expression the tool's whole name must match (None: every tool)
    timeout_s: float = DEFAULT_TIMEOUT_S
    name: str | None = None
    origin: HookOrigin = "user"

    @property
    def label(self) -> str:
        """How reports name it: its `name`, or its command cut to MAX_LABEL characters."""
        if self.name:
            return self.name
        text = self.command if isinstance(self.command, str) else " ".join(self.command)
        return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"

    def argv(self) -> list[str]:
        return ["/bin/sh", "-c", self.command] if isinstance(self.command, str) else list(self.command)

    def matches(self, tool: str | None) -> bool:
        if self.matcher is None or tool is None:
            return True
        return re.fullmatch(self.matcher, tool) is not None


@dataclass(frozen=True, slots=True)
class HookSettings:
    """Every configured hook, in the order they run (config.json's, the editor's, the project's)."""

    hooks: tuple[HookCommand, ...] = ()

    def for_event(self, event: HookEvent, tool: str | None = None) -> tuple[HookCommand, ...]:
        return tuple(h for h in self.hooks if h.event == event and h.matches(tool))

    def __add__(self, other: HookSettings) -> HookSettings:
        return HookSettings((*self.hooks, *other.hooks))

    @property
    def events(self) -> tuple[str, ...]:
        return tuple(e for e in HOOK_EVENTS if any(h.event == e for h in self.hooks))

    def __bool__(self) -> bool:
        return bool(self.hooks)


def parse_hooks(raw: Any, where: str = "hooks", origin: HookOrigin = "user") -> HookSettings:
    """A `hooks` object, all of it or `HookConfigError` naming the first bad entry."""
    settings, problems = parse_hooks_leniently(raw, where, origin)
    if problems:
        raise HookConfigError(problems[0])
    return settings


def parse_hooks_leniently(
    raw: Any, where: str = "hooks", origin: HookOrigin = "user"
) -> tuple[HookSettings, list[str]]:
    """Each entry checked alone: the good ones, and a problem naming every other one (config files:
    a mistake leaves that hook out, it does not keep the daemon from starting)."""
    if raw is None:
        return HookSettings(), []
    if not isinstance(raw, Mapping):
        return HookSettings(), [f"{where} must be an object {{event: [hooks]}}, not {_shown(raw)}"]
    hooks: list[HookCommand] = []
    problems: list[str] = []
    for event, entries in raw.items():
        if event not in HOOK_EVENTS:
            problems.append(f"{where}: unknown event {_shown(event)} (known: {', '.join(HOOK_EVENTS)})")
            continue
        if not isinstance(entries, Sequence) or isinstance(entries, str):
            problems.append(f"{where}.{event} must be a list of hooks, not {_shown(entries)}")
            continue
        for index, item in enumerate(entries):
            try:
                hooks.append(parse_hook(event, item, f"{where}.{event}[{index}]", origin))
            except HookConfigError as exc:
                problems.append(str(exc))
    return HookSettings(tuple(hooks)), problems


def parse_hook(event: HookEvent, raw: Any, where: str, origin: HookOrigin = "user") -> HookCommand:
    if not isinstance(raw, Mapping):
        raise HookConfigError(f"{where} must be an object {{command, matcher?, timeoutS?, name?}}")
    unknown = set(raw) - ENTRY_KEYS
    if unknown:
        known = ", ".join(sorted(ENTRY_KEYS))
        raise HookConfigError(f"{where}: unknown keys {sorted(map(_shown, unknown))} (known: {known})")
    command = raw.get("command")
    if isinstance(command, str):
        if not command.strip() or "\0" in command:
            raise HookConfigError(f"{where}.command must be a non-empty shell line")
        parsed: str | tuple[str, ...] = command
    elif (
        isinstance(command, list | tuple)
        and command
        and all(isinstance(a, str) and "\0" not in a for a in command)
        and command[0]
    ):
        parsed = tuple(command)
    else:
        raise HookConfigError(f"{where}.command must be a shell line or an argv list, not {_shown(command)}")
    matcher = raw.get("matcher")
    if matcher in ("", "*"):
        matcher = None
    if matcher is not None:
        if event not in TOOL_EVENTS:
            raise HookConfigError(f"{where}.matcher: only {', '.join(sorted(TOOL_EVENTS))} hooks match tools")
        if not isinstance(matcher, str):
            raise HookConfigError(f"{where}.matcher must be a regular expression, not {_shown(matcher)}")
        try:
            re.compile(matcher)
        except re.error as exc:
            raise HookConfigError(f"{where}.matcher is not a regular expression: {exc}") from None
    timeout = raw.get("timeoutS", DEFAULT_TIMEOUT_S)
    if timeout is None:
        timeout = DEFAULT_TIMEOUT_S
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or not 0 < timeout <= MAX_TIMEOUT_S
    ):
        raise HookConfigError(
            f"{where}.timeoutS must be seconds in (0, {MAX_TIMEOUT_S:g}], not {_shown(timeout)}"
        )
    name = raw.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise HookConfigError(f"{where}.name must be a non-empty string, not {_shown(name)}")
    return HookCommand(event, parsed, matcher, float(timeout), name, origin)


def _shown(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
