"""What a turn and its tool batches may use of the agent they run in.

The driver (`Agent`, `agent/loop.py`) is one; a turn (`agent/turn.py`), its compactions
(`agent/compacting.py`) and its tool batches (`agent/toolrun.py`) see only this, so none of them
imports the driver: the loop opens turns, turns never reach back into the loop.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, Protocol

from dsh_daemon.agent.derive import Derivation
from dsh_daemon.agent.hooks import AgentControl, Hooks
from dsh_daemon.agent.inbox import Inbox
from dsh_daemon.agent.options import AgentOptions
from dsh_daemon.agent.tools import Approver, ToolRegistry
from dsh_daemon.model.events import EventBus
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.model.provider import Provider
from dsh_daemon.session.log import SessionLog


class TurnContext(Protocol):
    session_id: str
    log: SessionLog  # where the turn writes
    bus: EventBus  # where its live events go
    inbox: Inbox  # what it claims at each boundary
    hooks: Hooks
    tools: ToolRegistry
    provider: Provider | None
    options: AgentOptions
    approver: Approver | None  # who answers permission questions
    always_allowed: set[str]  # the session's "allow always" answers
    rng: random.Random  # the retry jitter's
    header_logged: bool  # this process logged a `request/header` for the session
    compact_requested: bool  # `compact()` asked the running turn to compact at its next boundary

    @property
    def control(self) -> AgentControl:
        """What hooks may do with the agent (send, cancel, wake, read the inbox)."""
        ...

    def derive(self) -> Derivation:
        """The model's history, caught up with the log."""
        ...

    def context_window(self, model: str | None = None) -> int | None: ...

    def publish_error(self, turn: int, step: int | None, error: Mapping[str, Any]) -> None: ...

    def announce_claims(self, batch: tuple[UserMessage, ...], turn: int) -> None: ...

    def cancel(self, cause: str = "user", *, keep_inbox: bool = False) -> None: ...
