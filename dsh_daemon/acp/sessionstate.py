"""What a session reply carries besides its id: ACP's `SessionModeState` and `SessionConfigOption`s.

Light on purpose (no session machinery): a first `session/new` is answered with them before the
agent and the tools are loaded (`host/early.py`), and every later reply builds them the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MODES: tuple[dict[str, str], ...] = (
    {"id": "ask", "name": "Ask", "description": "Edits and commands ask before they run"},
    {"id": "accept-edits", "name": "Accept edits", "description": "Edits apply at once; commands ask"},
    {"id": "plan", "name": "Plan", "description": "Read-only: no edit or command tools are offered"},
)


def mode_state(mode: str) -> dict[str, Any]:
    """ACP `SessionModeState`: the session's mode and the three there are."""
    return {"currentModeId": mode, "availableModes": list(MODES)}


def config_options(models: Sequence[dict[str, Any]], current: tuple[str, bool, str]) -> list[dict[str, Any]]:
    """ACP `SessionConfigOption`s: the model picker, thinking on/off, the reasoning effort, from the
    models offered and the session's (model, thinking, reasoning effort)."""
    model, thinking, effort = current
    return [
        {
            "id": "model",
            "name": "Model",
            "category": "model",
            "type": "select",
            "currentValue": model,
            "options": [{"value": m["id"], "name": m["name"]} | _context_window(m) for m in models],
        },
        {
            "id": "thinking",
            "name": "Thinking",
            "description": "Let the model reason before it answers",
            "category": "thought_level",
            "type": "boolean",
            "currentValue": thinking,
        },
        {
            "id": "reasoning_effort",
            "name": "Reasoning effort",
            "category": "thought_level",
            "type": "select",
            "currentValue": effort,
            "options": [{"value": "high", "name": "High"}, {"value": "max", "name": "Max"}],
        },
    ]


def _context_window(model: dict[str, Any]) -> dict[str, str]:
    if "contextWindow" not in model:
        return {}
    return {"description": f"{model['contextWindow']:,} tokens of context"}
