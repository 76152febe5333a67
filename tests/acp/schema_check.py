"""Every message the agent writes, checked against the official Python ACP SDK's pydantic models,
losslessly: a message must validate, and validating it must keep every field that was sent (pydantic
ignores unknown fields, so a field the schema does not have, or spells otherwise, would otherwise be
lost without a word, as a client built on the SDK loses it)."""

from __future__ import annotations

from typing import Any

import acp.schema as schema
from pydantic import BaseModel, ValidationError

RESPONSES: dict[str, type[BaseModel]] = {
    "initialize": schema.InitializeResponse,
    "authenticate": schema.AuthenticateResponse,
    "session/new": schema.NewSessionResponse,
    "session/load": schema.LoadSessionResponse,
    "session/resume": schema.ResumeSessionResponse,
    "session/fork": schema.ForkSessionResponse,
    "session/list": schema.ListSessionsResponse,
    "session/close": schema.CloseSessionResponse,
    "session/delete": schema.DeleteSessionResponse,
    "session/set_mode": schema.SetSessionModeResponse,
    "session/set_config_option": schema.SetSessionConfigOptionResponse,
    "session/prompt": schema.PromptResponse,
}
REQUESTS: dict[str, type[BaseModel]] = {
    "session/request_permission": schema.RequestPermissionRequest,
    "fs/read_text_file": schema.ReadTextFileRequest,
    "fs/write_text_file": schema.WriteTextFileRequest,
    "terminal/create": schema.CreateTerminalRequest,
    "terminal/output": schema.TerminalOutputRequest,
    "terminal/wait_for_exit": schema.WaitForTerminalExitRequest,
    "terminal/kill": schema.KillTerminalRequest,
    "terminal/release": schema.ReleaseTerminalRequest,
}


def lost_fields(sent: Any, kept: Any, path: str = "") -> list[str]:
    """The paths of what `sent` has and `kept` (the SDK's reading of it) does not, or has otherwise."""
    if isinstance(sent, dict):
        if not isinstance(kept, dict):
            return [path or "."]
        lost: list[str] = []
        for key, value in sent.items():
            if key not in kept:
                if value is not None:  # an explicit null reads as absent
                    lost.append(f"{path}.{key}")
            else:
                lost += lost_fields(value, kept[key], f"{path}.{key}")
        return lost
    if isinstance(sent, list):
        if not isinstance(kept, list) or len(kept) != len(sent):
            return [path or "."]
        return [
            lost
            for index, item in enumerate(sent)
            for lost in lost_fields(item, kept[index], f"{path}[{index}]")
        ]
    return [] if sent == kept else [f"{path} ({sent!r} read as {kept!r})"]


def check(model: type[BaseModel], value: Any, what: str) -> list[dict[str, Any]]:
    """The violations of one message's payload (empty when the SDK reads all of it as sent)."""
    try:
        parsed = model.model_validate(value)
    except ValidationError as exc:
        return [{"what": what, "errors": exc.errors(include_url=False)[:3], "value": value}]
    kept = parsed.model_dump(mode="json", by_alias=True, exclude_unset=True)
    lost = lost_fields(value, kept)
    return [{"what": what, "lost": lost, "value": value}] if lost else []


class WireChecker:
    """Fed both directions of one connection: our requests' methods (to read their answers), the
    agent's messages checked as they come."""

    def __init__(self) -> None:
        self.asked: dict[Any, str] = {}
        self.violations: list[dict[str, Any]] = []
        self.checked = 0

    def outgoing(self, message: dict[str, Any]) -> None:
        if "method" in message and message.get("id") is not None:
            self.asked[message["id"]] = message["method"]

    def incoming(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method == "session/update":
            self._check(schema.SessionNotification, message.get("params"), method)
        elif method in REQUESTS and message.get("id") is not None:
            self._check(REQUESTS[method], message.get("params"), method)
        elif method is None and "result" in message:
            answered = self.asked.get(message.get("id"))
            if answered in RESPONSES:
                self._check(RESPONSES[answered], message["result"], f"{answered} result")

    def _check(self, model: type[BaseModel], value: Any, what: str) -> None:
        self.checked += 1
        self.violations += check(model, value, what)
