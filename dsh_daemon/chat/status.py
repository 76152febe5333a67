"""What the status line shows: idle / running / awaiting permission, the queue, tokens and cost."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Status:
    session_id: str = ""
    state: str = "idle"  # the daemon's agent/status: idle | running
    permission: bool = False  # a permission request is waiting for the person
    pending: dict[str, str] = field(default_factory=dict)  # inbox message id -> target
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = False

    @property
    def queued(self) -> int:
        return sum(1 for target in self.pending.values() if target == "next-turn")

    @property
    def context(self) -> int:
        return sum(1 for target in self.pending.values() if target == "next-step")

    def reset_inbox(self, inbox: dict[str, Any]) -> None:
        self.pending = {m["id"]: "next-turn" for m in inbox.get("nextTurn", [])}
        self.pending.update({m["id"]: "next-step" for m in inbox.get("nextStep", [])})

    def on_event(self, kind: str, data: Any) -> bool:
        """Track one event; True when what the status line shows may have changed."""
        if kind == "agent/status":
            self.state = data["status"]
        elif kind == "agent/inbox/inserted":
            self.pending[data["message"]["id"]] = data["target"]
        elif kind in ("agent/inbox/claimed", "agent/inbox/discarded"):
            self.pending.pop(data["message"]["id"], None)
        elif kind == "turn/usage":
            self.add_usage(data["usage"])
        else:
            return False
        return True

    def add_usage(self, usage: dict[str, Any]) -> None:
        self.input_tokens += int(usage.get("inputTokens") or 0)
        self.output_tokens += int(usage.get("outputTokens") or 0)
        if usage.get("costUsd") is not None:
            self.cost_usd += float(usage["costUsd"])
            self.cost_known = True

    @property
    def label(self) -> str:
        if self.permission:
            return "awaiting permission"
        return self.state

    def line(self) -> str:
        parts = [self.label]
        if self.queued:
            parts.append(f"queued {self.queued}")
        if self.context:
            parts.append(f"context {self.context}")
        tokens = self.input_tokens + self.output_tokens
        split = f"{_count(self.input_tokens)} in, {_count(self.output_tokens)} out"
        parts.append(f"{_count(tokens)} tokens ({split})")
        if self.cost_known:
            parts.append(f"${self.cost_usd:.4f}" if self.cost_usd >= 0.01 else f"${self.cost_usd:.6f}")
        if self.session_id:
            parts.append(f"session {self.session_id[:8]}")
        return " · ".join(parts)


def _count(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return str(n)
