"""What the status line shows: idle / running / awaiting permission, the queue, context, tokens and
cost; and the session's running totals behind `/cost` and `/context`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dsh_daemon.chat import sandbox as sandboxes
from dsh_daemon.chat.queue import NEXT_STEP, NEXT_TURN, QueueBook
from dsh_daemon.model.usage import UsageTotals


@dataclass
class Status:
    session_id: str = ""  # "" until the first prompt creates the session
    state: str = "idle"  # the daemon's agent/status: idle | running
    permission: bool = False  # a permission request is waiting for the person
    queue: QueueBook = field(default_factory=QueueBook)
    # The session's turns counted so far: the daemon's sum (`dsh/session/usage`) on attach and for
    # /cost, each live `turn/usage` added in between.
    usage: UsageTotals = field(default_factory=UsageTotals)
    # Its subagents' sessions' turns, summed apart by the daemon (`subagents`); None: it started none.
    subagent_usage: tuple[int, UsageTotals] | None = None  # (sessions, their totals)
    context_used: int | None = None  # the last request's input tokens (`context/usage`)
    context_window: int | None = None
    model: str = ""  # from the last `request/header`, or what /model set
    mode: str = "ask"  # the session's mode (`session/mode`, the attach reply; Shift-Tab cycles it)
    header: dict[str, Any] = field(default_factory=dict)  # the last `request/header`'s header
    compactions: list[dict[str, Any]] = field(default_factory=list)  # `context/compacted` data
    sandbox: dict[str, Any] | None = None  # the last `sandbox/status` data (None: not told yet)

    @property
    def queued(self) -> int:
        return self.queue.count(NEXT_TURN)

    @property
    def context(self) -> int:
        return self.queue.count(NEXT_STEP)

    def reset_inbox(self, inbox: dict[str, Any]) -> None:
        self.queue.reset(inbox)

    def on_event(self, kind: str, data: Any) -> bool:
        """Track one event; True when what the status line shows may have changed."""
        if kind == "agent/status":
            self.state = data["status"]
        elif kind == "agent/inbox/inserted":
            self.queue.inserted(data["message"], data["target"], data.get("index"))
        elif kind == "agent/inbox/claimed":
            self.queue.claimed(data["message"], data.get("turn"))
        elif kind == "agent/inbox/discarded":
            self.queue.discarded(data["message"])
        elif kind == "turn/usage":
            self.add_usage(data["usage"])
        elif kind == "session/mode":
            self.mode = str(data.get("mode") or "ask")
        elif kind == "context/usage":
            self.context_used = data.get("used")
            self.context_window = data.get("window")
        elif kind == "context/compacted":
            self.compactions.append(dict(data))
            self.context_used = data.get("tokensAfter", self.context_used)
        elif kind == "sandbox/status":
            self.sandbox = dict(data)
        elif kind == "request/header":
            self.header = dict(data.get("header") or {})
            self.model = str((self.header.get("config") or {}).get("model") or self.model)
        else:
            return False
        return True

    def add_usage(self, usage: dict[str, Any]) -> None:
        self.usage = self.usage.plus(usage)

    @property
    def label(self) -> str:
        if self.permission:
            return "awaiting permission"
        return self.state

    def cost(self) -> str:
        return dollars(self.usage.cost_usd)

    def context_gauge(self) -> str:
        """`ctx 12k/1.0M (1%)`, or "" before the first reply reported it."""
        if self.context_used is None:
            return ""
        if not self.context_window:
            return f"ctx {count(self.context_used)}"
        share = 100 * self.context_used / self.context_window
        return f"ctx {count(self.context_used)}/{count(self.context_window)} ({share:.0f}%)"

    def line(self) -> str:
        parts = [self.label]
        if self.queued:
            parts.append(f"queued {self.queued}")
        if self.context:
            parts.append(f"context {self.context}")
        usage = self.usage
        tokens = usage.input_tokens + usage.output_tokens
        split = f"{count(usage.input_tokens)} in, {count(usage.output_tokens)} out"
        parts.append(f"{count(tokens)} tokens ({split})")
        if usage.cost_known:
            parts.append(self.cost())
        gauge = self.context_gauge()
        if gauge:
            parts.append(gauge)
        if self.model:
            parts.append(self.model)
        if self.mode != "ask":
            parts.append(MODE_LABELS.get(self.mode, self.mode))
        if self.sandbox:
            parts.append(sandboxes.toolbar_part(self.sandbox))
        parts.append(f"session {self.session_id[:8]}" if self.session_id else "new session")
        return " · ".join(parts)

    @property
    def sandbox_refused(self) -> bool:
        """Commands are refused for want of confinement (the status line warns)."""
        return sandboxes.refused(self.sandbox)

    def toolbar(self) -> str:
        """The status line without the state or the sandbox (`sandbox_part`), short enough for a narrow
        terminal."""
        parts = []
        if self.queued:
            parts.append(f"queued {self.queued}")
        if self.context:
            parts.append(f"context {self.context}")
        parts.append(f"{count(self.usage.input_tokens + self.usage.output_tokens)} tokens")
        if self.usage.cost_known:
            parts.append(self.cost())
        if self.context_used is not None and self.context_window:
            parts.append(f"ctx {100 * self.context_used / self.context_window:.0f}%")
        if self.model:
            parts.append(self.model)
        if self.mode != "ask":  # the default goes unsaid on the narrow line
            parts.append(MODE_LABELS.get(self.mode, self.mode))
        parts.append(self.session_id[:8] if self.session_id else "new session")
        return " · ".join(parts)

    def sandbox_part(self) -> str:
        return sandboxes.toolbar_part(self.sandbox)


MODES = ("ask", "accept-edits", "plan")  # Shift-Tab's order (protocol.md §3 dsh/session/setMode)
MODE_LABELS = {"ask": "ask", "accept-edits": "⏵⏵ accept edits", "plan": "⏸ plan"}


def next_mode(mode: str) -> str:
    return MODES[(MODES.index(mode) + 1) % len(MODES)] if mode in MODES else MODES[0]


def dollars(cost: float) -> str:
    return f"${cost:.4f}" if cost >= 0.01 else f"${cost:.6f}"


def count(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return str(n)
