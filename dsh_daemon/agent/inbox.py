"""The inbox (D2): a FIFO of next-turn prompts and a next-step list, both projections of durable splices.

Invariants kept here:
- Every change is first committed as one `agent/inbox/spliced` event, then applied in memory, then
  announced live (`discarded` per removed message unless it was a claim, `inserted` per inserted one).
- Ids are unique across both lists while pending; a duplicate is refused before anything is logged.
- Direct inbox edits never wake the driver.
- Conservation: every inserted message is claimed, discarded or still pending, exactly once.
- An item is one message plus the editor context attached to it when it was sent: they are inserted,
  claimed, moved and discarded together, and the attachments are entered just before the message.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dsh_daemon.agent.errors import AgentError
from dsh_daemon.model.events import (
    INBOX_SPLICED,
    Event,
    EventBus,
)
from dsh_daemon.model.inbox import (
    TARGETS,
    InboxItem,
    InvalidSpliceError,
    Target,
    apply_splice,
    item_wire,
)
from dsh_daemon.model.messages import MessageId, UserMessage
from dsh_daemon.model.payloads import InboxDiscarded, InboxInserted, InboxSpliced, entry
from dsh_daemon.session.log import SessionLog


class DuplicateMessageIdError(AgentError, ValueError):
    def __init__(self, message_id: str) -> None:
        super().__init__(f"a message with id {message_id!r} is already pending")
        self.message_id = message_id


class UnknownMessageError(AgentError, KeyError):
    def __init__(self, message_id: str) -> None:
        super().__init__(message_id)
        self.message_id = message_id

    def __str__(self) -> str:
        return f"no pending message with id {self.message_id!r}"


class Inbox:
    def __init__(self, log: SessionLog, bus: EventBus) -> None:
        self._log = log
        self._bus = bus
        self._lists: dict[str, list[InboxItem]] = {"next-turn": [], "next-step": []}

    def restore(self, lists: Mapping[str, Sequence[InboxItem]]) -> None:
        """Start from the pending lists a derived-state snapshot recorded (then `replay` what follows)."""
        self._lists = {target: list(lists.get(target, ())) for target in TARGETS}

    def lists(self) -> dict[str, tuple[InboxItem, ...]]:
        """The pending lists as they stand (a snapshot records them)."""
        return {target: tuple(items) for target, items in self._lists.items()}

    def replay(self, events: Iterable[Event]) -> None:
        for event in events:
            if event.type == INBOX_SPLICED:
                apply_splice(self._lists, event.data, event.seq, event.time)

    # ---- reading -------------------------------------------------------------------------------------

    @property
    def next_turn(self) -> tuple[UserMessage, ...]:
        """The pending prompts (each item's own message), oldest first."""
        return tuple(item.message for item in self._lists["next-turn"])

    @property
    def next_step(self) -> tuple[UserMessage, ...]:
        return tuple(item.message for item in self._lists["next-step"])

    def items(self, target: Target) -> tuple[InboxItem, ...]:
        return tuple(self._lists[target])

    def pending_ids(self) -> list[MessageId]:
        """Every pending message id, attachments included."""
        return [i for item in self._all() for i in item.ids]

    @property
    def has_pending(self) -> bool:
        return bool(self._lists["next-turn"] or self._lists["next-step"])

    def __len__(self) -> int:
        return len(self._lists["next-turn"]) + len(self._lists["next-step"])

    def find(self, message_id: MessageId) -> tuple[Target, int] | None:
        for target in TARGETS:
            for index, item in enumerate(self._lists[target]):
                if item.id == message_id:
                    return target, index
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "nextTurn": [item_wire(item, "next-turn") for item in self._lists["next-turn"]],
            "nextStep": [item_wire(item, "next-step") for item in self._lists["next-step"]],
        }

    # ---- durable mutation ----------------------------------------------------------------------------

    def splice(
        self,
        target: Target,
        start: int,
        delete_count: int,
        inserted: Sequence[InboxItem] = (),
        *,
        outcome: str | None = None,
        commit: bool = True,
        claim: bool = False,
    ) -> list[InboxItem]:
        """JS-style splice (negative start counts from the end; clamped). Returns the removed items."""
        if target not in self._lists:
            raise InvalidSpliceError(f"unknown inbox target {target!r}")
        items = self._lists[target]
        size = len(items)
        start = max(size + start, 0) if start < 0 else min(start, size)
        delete_count = max(0, min(delete_count, size - start))
        removed = items[start : start + delete_count]
        remaining = {i for item in self._all() if item not in removed for i in item.ids}
        seen: set[str] = set()
        for item in inserted:
            for message_id in item.ids:
                if message_id in remaining or message_id in seen:
                    raise DuplicateMessageIdError(message_id)
                seen.add(message_id)
        if not removed and not inserted:
            return []
        spliced = InboxSpliced(
            target,
            start,
            tuple(i.to_json() for i in inserted),
            len(removed) if removed else None,
            tuple(i for item in removed for i in item.ids) if removed else None,
            (outcome or "canceled") if removed and not claim else None,  # type: ignore[arg-type]
        )
        after = len(self) - len(removed) + len(inserted)
        self._log.append(*entry(spliced), commit=commit, pending_after=after, undo_on_failure=commit)
        items[start : start + delete_count] = list(inserted)
        if not claim:
            for item in removed:
                for message in item.messages:
                    self._bus.publish(InboxDiscarded(message.to_json()).event())
        for offset, item in enumerate(inserted):
            self._bus.publish(InboxInserted(item_wire(item, target), target, start + offset).event())
        return removed

    def append(
        self,
        target: Target,
        message: UserMessage,
        attachments: Sequence[UserMessage] = (),
        *,
        wakeup: bool | None = None,
        verb: str | None = None,
    ) -> None:
        item = InboxItem(message, tuple(attachments), wakeup, verb, int(time.time() * 1000))
        self.splice(target, len(self._lists[target]), 0, [item])

    def remove(self, message_id: MessageId) -> bool:
        found = self.find(message_id)
        if found is None:
            return False
        self.splice(found[0], found[1], 1)
        return True

    def replace(
        self, message_id: MessageId, message: UserMessage, attachments: Sequence[UserMessage] | None = None
    ) -> None:
        """Swap a pending message in place (it may change id); its attachments stay unless new ones are
        given; how and when it was sent stay. Live: discarded(old), inserted(new)."""
        found = self.find(message_id)
        if found is None:
            raise UnknownMessageError(message_id)
        old = self._lists[found[0]][found[1]]
        kept = old.attachments if attachments is None else tuple(attachments)
        item = InboxItem(message, kept, old.wakeup, old.verb, old.queued_at)
        self.splice(found[0], found[1], 1, [item], outcome="replaced")

    def move(self, message_id: MessageId, target: Target, index: int) -> None:
        """Move a pending message to `index` of `target` (two splices: out, then in)."""
        found = self.find(message_id)
        if found is None:
            raise UnknownMessageError(message_id)
        if target not in self._lists:
            raise InvalidSpliceError(f"unknown inbox target {target!r}")
        item = self._lists[found[0]][found[1]]
        # Both halves land in one commit (the second commits the first), so a move never loses it.
        self.splice(found[0], found[1], 1, outcome="moved", commit=False)
        self.splice(target, index if index >= 0 else len(self._lists[target]) + 1 + index, 0, [item])

    def clear(self, outcome: str = "canceled") -> list[InboxItem]:
        """Discard everything pending: next-step first, then next-turn."""
        removed = self.splice("next-step", 0, len(self._lists["next-step"]), outcome=outcome)
        removed += self.splice("next-turn", 0, len(self._lists["next-turn"]), outcome=outcome)
        return removed

    def return_claimed_durably(
        self, next_step: Sequence[InboxItem], prompt: InboxItem | None, *, discard: bool
    ) -> None:
        """Put input that a boundary claimed but no step entered back at the front of its lists, one
        durable splice per list; with `discard` (a clearing cancel aborted the turn), then discard
        exactly those. An item whose ids a client has reused in the meantime stays with the newer one."""
        pending = set(self.pending_ids())
        groups: tuple[tuple[Target, Sequence[InboxItem]], ...] = (
            ("next-step", next_step),
            ("next-turn", () if prompt is None else (prompt,)),
        )
        for target, items in groups:
            back = [item for item in items if not pending.intersection(item.ids)]
            if not back:
                continue
            self.splice(target, 0, 0, back, commit=False)
            if discard:
                self.splice(target, 0, len(back), outcome="canceled", commit=False)

    def claim_next_step(self) -> list[InboxItem]:
        return self.splice("next-step", 0, len(self._lists["next-step"]), commit=False, claim=True)

    def claim_next_turn(self) -> InboxItem | None:
        removed = self.splice("next-turn", 0, 1, commit=False, claim=True)
        return removed[0] if removed else None

    def _all(self) -> list[InboxItem]:
        return self._lists["next-turn"] + self._lists["next-step"]
