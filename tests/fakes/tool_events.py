"""One tool call's `dsh/event` frames as the daemon sends them (protocol.md §6): its `tool/call`, then
its `tool/result` with the result text and, when given, `meta`. For client tests that feed a view
events without a daemon (the terminal chat, the Neovim plugin); each frame is checked against the typed
wire (`EventParams`, `PAYLOADS`: `meta` itself is free-form there)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dsh_daemon.model.codec import structure
from dsh_daemon.model.methods import EventParams
from dsh_daemon.model.payloads import PAYLOADS


def tool_call_events(
    session_id: str,
    seq: int,
    call_id: str,
    name: str,
    arguments: Mapping[str, Any],
    text: str,
    meta: Mapping[str, Any] | None = None,
    *,
    turn: int = 1,
    step: int = 1,
) -> list[dict[str, Any]]:
    """The `tool/call` frame at `seq` and its `tool/result` at `seq + 1`; `text` is the result the
    model got, `meta` what clients get beside it (absent when None)."""
    call = {"turn": turn, "step": step, "callId": call_id, "name": name, "arguments": json.dumps(arguments)}
    content = [{"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": text}]}]
    message = {
        "id": f"r-{call_id}",
        "role": "user",
        "content": content,
        "source": {"kind": "tool", "callId": call_id},
    }
    result: dict[str, Any] = {"turn": turn, "step": step, "callId": call_id, "name": name, "message": message}
    if meta is not None:
        result["meta"] = dict(meta)
    frames = [
        {"sessionId": session_id, "seq": seq, "type": "tool/call", "data": call},
        {"sessionId": session_id, "seq": seq + 1, "type": "tool/result", "data": result},
    ]
    for frame in frames:
        structure(frame, EventParams)
        structure(frame["data"], PAYLOADS[frame["type"]])
    return frames
