"""What a session reply carries besides its id: ACP's `SessionModeState` and `SessionConfigOption`s.

Light on purpose (no session machinery): a first `session/new` is answered with them before the
agent and the tools are loaded (`host/early.py`), and every later reply builds them the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

MODES: tuple[dict[str, str], ...] = (
    {"id": "ask", "name": "Ask", "description": "Edits and commands ask before they run"},
    {"id": "accept-edits", "name": "Accept edits", "description": "Edits apply at once; commands ask"},
    {"id": "plan", "name": "Plan", "description": "Read-only: no edit or command tools are offered"},
)


def mode_state(mode: str) -> dict[str, Any]:
    """ACP `SessionModeState`: the session's mode and the three there are."""
    return {"currentModeId": mode, "availableModes": list(MODES)}


def takes_booleans(client_capabilities: Any) -> bool:
    """Whether the client said it shows `type: "boolean"` config options
    (`clientCapabilities.session.configOptions.boolean`, an object): ACP lets an agent send them only
    then, and a client that does not (CodeCompanion) shows an error in place of the option."""
    session = client_capabilities.get("session") if isinstance(client_capabilities, Mapping) else None
    options = session.get("configOptions") if isinstance(session, Mapping) else None
    return isinstance(options, Mapping) and isinstance(options.get("boolean"), Mapping)


ON_OFF = {"on": True, "off": False}  # the `thinking` select offered to clients without booleans
# The `sandbox` select: where the session's commands run (protocol.md §16). full-access is offered
# like the others: picking it in the client is the person's explicit choice, and its name says so.
SANDBOX_CHOICES: tuple[dict[str, str], ...] = (
    {
        "value": "read-only",
        "name": "Read only",
        "description": "Commands read, write nothing but a private temp directory, no network",
    },
    {
        "value": "workspace-write",
        "name": "Workspace write",
        "description": "Commands write inside the workspace only; network only to allowed domains",
    },
    {
        "value": "full-access",
        "name": "Full access (no sandbox)",
        "description": "Commands run unconfined with your whole account; each one asks first",
    },
)


def sandbox_option(chosen: str, configured: str) -> dict[str, Any]:
    """The `sandbox` select: the mode set for the session (`chosen`: its own choice, else the
    configured one), and what the configuration says, for a person who changed it here."""
    return {
        "id": "sandbox",
        "name": "Sandbox",
        "description": f"Where the agent's commands run (configured: {configured})",
        "type": "select",
        "currentValue": chosen,
        "options": [dict(choice) for choice in SANDBOX_CHOICES],
    }


def config_options(
    models: Sequence[dict[str, Any]],
    current: tuple[str, bool, str],
    mode: str,
    *,
    booleans: bool,
    sandbox: tuple[str, str] = ("workspace-write", "workspace-write"),
) -> list[dict[str, Any]]:
    """ACP `SessionConfigOption`s: the session's mode, the model picker, thinking on/off, the reasoning
    effort and the sandbox, from the models offered, the session's (model, thinking, reasoning effort),
    its mode and its (chosen, configured) sandbox mode.

    The mode is a config option too, as the reference agents offer it: a client that supports config
    options may ignore `modes` (the spec allows it; CodeCompanion has no `session/set_mode`). Thinking
    is a boolean only for a client that takes booleans (`takes_booleans`), else an `on`/`off` select."""
    model, thinking, effort = current
    thinking_option: dict[str, Any] = {
        "id": "thinking",
        "name": "Thinking",
        "description": "Let the model reason before it answers",
        "category": "thought_level",
    }
    if booleans:
        thinking_option |= {"type": "boolean", "currentValue": thinking}
    else:
        thinking_option |= {
            "type": "select",
            "currentValue": "on" if thinking else "off",
            "options": [{"value": "on", "name": "On"}, {"value": "off", "name": "Off"}],
        }
    return [
        {
            "id": "mode",
            "name": "Mode",
            "category": "mode",
            "type": "select",
            "currentValue": mode,
            "options": [
                {"value": m["id"], "name": m["name"], "description": m["description"]} for m in MODES
            ],
        },
        {
            "id": "model",
            "name": "Model",
            "category": "model",
            "type": "select",
            "currentValue": model,
            "options": [{"value": m["id"], "name": m["name"]} | _context_window(m) for m in models],
        },
        thinking_option,
        {
            "id": "reasoning_effort",
            "name": "Reasoning effort",
            "category": "thought_level",
            "type": "select",
            "currentValue": effort,
            "options": [{"value": "high", "name": "High"}, {"value": "max", "name": "Max"}],
        },
        sandbox_option(*sandbox),
    ]


def _context_window(model: dict[str, Any]) -> dict[str, str]:
    if "contextWindow" not in model:
        return {}
    return {"description": f"{model['contextWindow']:,} tokens of context"}
