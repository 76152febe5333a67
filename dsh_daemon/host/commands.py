"""Custom slash commands in a session (protocol.md "Custom commands and skills").

A person's message (`source.kind == "user"`) whose first block is text starting with `/NAME`, NAME
one of the session's custom commands (`tools/library.py`), is expanded when it is sent, before it
is queued: the message keeps its id, its content becomes the command's prompt (`$ARGUMENTS`
replaced by what followed the name; the message's other blocks follow), and its source records
what the person typed: `{kind: "user", command: {name, arguments, origin, path, allowedTools?,
model?}}`. So the log holds exactly what the model reads (every request rebuilds from it, whatever
the file says later) and every reader of the log can show `/NAME arguments` instead.

A command's `allowed-tools` narrows the turn its message enters: from that step on, only the tools
it names (that the session offers anyway) are offered, and a call to any other is refused. It never
widens anything: a tool the person's settings deny stays unoffered, one they ask about is still
asked. Its `model` is used for the turn's requests when the command is the person's own; a
project's command cannot choose the model (what a turn costs is the person's choice).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from dsh_daemon.agent.hooks import PreStepContext, PreStepDecision, RequestConfig, RequestContext
from dsh_daemon.agent.tools import Deny, ToolCall
from dsh_daemon.model.messages import TextBlock, UserMessage
from dsh_daemon.tools.library import CustomCommand, Found, SkillCatalogue
from dsh_daemon.tools.skills import SKILL_TOOL

MAX_ARGUMENT_CHARS = 100_000


def command_word(message: UserMessage) -> tuple[str, str, bool] | None:
    """(name, arguments, escaped) when the person's message starts with `/word` (`//word`: escaped,
    the way to send a line starting with `/NAME` as text)."""
    if message.source.get("kind") != "user" or "command" in message.source or not message.content:
        return None
    first = message.content[0]
    if not isinstance(first, TextBlock):
        return None
    text = first.text.lstrip()
    escaped = text.startswith("//")
    if not text.startswith("/"):
        return None
    parts = text[2 if escaped else 1 :].split(None, 1)
    if not parts:
        return None
    return parts[0], parts[1].strip() if len(parts) > 1 else "", escaped


def expand(command: CustomCommand, arguments: str) -> str:
    """The command's prompt: `$ARGUMENTS` replaced; without it, the arguments follow the body."""
    body = command.body.strip("\n")
    if "$ARGUMENTS" in body:
        return body.replace("$ARGUMENTS", arguments)
    return f"{body}\n\nArguments: {arguments}" if arguments else body


def expand_message(message: UserMessage, found: Found) -> UserMessage:
    """`message` as the model will read it: expanded when it invokes a custom command; the same
    message otherwise (an unknown `/word` is ordinary text)."""
    typed = command_word(message)
    if typed is None:
        return message
    name, arguments, escaped = typed
    command = next((c for c in found.commands if c.name == name), None)
    if command is None or len(arguments) > MAX_ARGUMENT_CHARS:
        return message
    if escaped:  # `//NAME …`: the text `/NAME …`, as typed less one slash
        first = message.content[0]
        assert isinstance(first, TextBlock)
        unescaped = first.text.replace("//", "/", 1)
        rest = [block.to_json() for block in message.content[1:]]
        return UserMessage.create([{"type": "text", "text": unescaped}, *rest], message.source, id=message.id)
    record: dict[str, Any] = {
        "name": name,
        "arguments": arguments,
        "origin": command.origin,
        "path": str(command.path),
    }
    if command.allowed_tools is not None:
        record["allowedTools"] = list(command.allowed_tools)
    if command.model and command.origin == "user":
        record["model"] = command.model
    content = [{"type": "text", "text": expand(command, arguments)}]
    content += [block.to_json() for block in message.content[1:]]
    return UserMessage.create(content, {**message.source, "command": record}, id=message.id)


def _invoked(message: UserMessage) -> Mapping[str, Any] | None:
    command = message.source.get("command") if message.source.get("kind") == "user" else None
    return command if isinstance(command, Mapping) else None


class CommandTurns:
    """What the commands that entered a turn ask of it: the tools it may offer, the model. Kept per
    turn as its steps enter them (a pre-step hook), read by the request hook and the tool hook."""

    def __init__(self, skills: SkillCatalogue | None = None) -> None:
        self.allowed: dict[int, frozenset[str]] = {}
        self.model: dict[int, str] = {}
        self.skills = skills

    async def pre_step(
        self, ctx: PreStepContext, next_: Callable[[], Awaitable[PreStepDecision]]
    ) -> PreStepDecision:
        decision = await next_()
        if decision.kind != "enter":
            return decision
        for message in decision.messages:
            command = _invoked(message)
            if command is None:
                continue
            tools = command.get("allowedTools")
            if isinstance(tools, (list, tuple)):
                names = frozenset(t for t in tools if isinstance(t, str))
                before = self.allowed.get(ctx.turn)
                self.allowed[ctx.turn] = names if before is None else before & names  # only narrower
            model = command.get("model")
            if isinstance(model, str) and model:
                self.model[ctx.turn] = model
        for old in [t for t in self.allowed if t < ctx.turn]:
            del self.allowed[old]
        for old in [t for t in self.model if t < ctx.turn]:
            del self.model[old]
        return decision

    async def request(
        self, ctx: RequestContext, next_: Callable[[], Awaitable[RequestConfig]]
    ) -> RequestConfig:
        config = await next_()
        tools = config.tools
        if self.skills is not None and not self.skills.found().skills:
            tools = tuple(t for t in tools if t.name != SKILL_TOOL)  # nothing to read: not offered
        allowed = self.allowed.get(ctx.turn)
        if allowed is not None:
            tools = tuple(t for t in tools if t.name in allowed)
        settings = config.config
        model = self.model.get(ctx.turn)
        if model is not None:
            settings = type(settings)({**settings, "model": model})
        return RequestConfig(settings, config.system, tools)

    async def pre_execute(self, call: ToolCall, signal: object) -> Deny | None:
        allowed = self.allowed.get(call.turn)
        if allowed is None or call.name in allowed:
            return None
        return Deny(
            f"this turn runs a custom command that allows only: {', '.join(sorted(allowed)) or 'no tool'}",
            reason="command",
        )
