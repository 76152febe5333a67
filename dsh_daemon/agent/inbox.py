"""The inbox (D2): a FIFO of next-turn prompts and a next-step list, both projections of durable splices.

Invariants kept here:
- Every change is first committed as one `agent/inbox/spliced` event, then applied in memory, then
  announced live (`discarded` per removed message unless it was a claim, `inserted` per inserted one).
- Ids are unique across both lists while pending; a duplicate is refused before anything is logged.
- Direct inbox edits never wake the driver.
- Conservation: every inserted message is claimed, discarded or still pending, exactly once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal, TypeAlias

from dsh_daemon.agent.events import (
    INBOX_DISCARDED,
    INBOX_INSERTED,
    INBOX_SPLICED,
    Event,
    EventBus,
)
from dsh_daemon.agent.messages import MessageId, UserMessage
from dsh_daemon.jsonvalue import FrozenDict, freeze_json
from dsh_daemon.session.log import SessionLog

Target: TypeAlias = Literal["next-turn", "next-step"]
TARGETS: tuple[Target, Target] = ("next-turn", "next-step")


class DuplicateMessageIdError(ValueError):
    def __init__(self, message_id: str) -> None:
        super().__init__(f"a message with id {message_id!r} is already pending")
        self.message_id = message_id


class UnknownMessageError(KeyError):
    def __init__(self, message_id: str) -> None:
        super().__init__(message_id)
        self.message_id = message_id

    def __str__(self) -> str:
        return f"no pending message with id {self.message_id!r}"


class InvalidSpliceError(ValueError):
    pass


def apply_splice(lists: dict[str, list[UserMessage]], data: FrozenDict, seq: int | None = None) -> None:
    """Apply a stored splice to `lists` (used on load); an impossible splice is corruption."""
    try:
        target = data["target"]
        items = lists[target]
        start = int(data["start"])
        removed = int(data.get("removedCount", 0))
        inserted = [UserMessage.from_json(m) for m in data.get("inserted", ())]
        if not 0 <= start <= len(items) or start + removed > len(items):
            raise InvalidSpliceError("range out of bounds")
        items[start : start + removed] = inserted
    except (KeyError, ValueError, TypeError) as exc:
        raise InvalidSpliceError(f"invalid persisted inbox splice at session seq {seq}: {exc}") from exc


class Inbox:
    def __init__(self, log: SessionLog, bus: EventBus) -> None:
        self._log = log
        self._bus = bus
        self._lists: dict[str, list[UserMessage]] = {"next-turn": [], "next-step": []}

    def replay(self, events: Iterable[Event]) -> None:
        for event in events:
            if event.type == INBOX_SPLICED:
                apply_splice(self._lists, event.data, event.seq)

    # ---- reading -------------------------------------------------------------------------------------

    @property
    def next_turn(self) -> tuple[UserMessage, ...]:
        return tuple(self._lists["next-turn"])

    @property
    def next_step(self) -> tuple[UserMessage, ...]:
        return tuple(self._lists["next-step"])

    @property
    def has_pending(self) -> bool:
        return bool(self._lists["next-turn"] or self._lists["next-step"])

    def __len__(self) -> int:
        return len(self._lists["next-turn"]) + len(self._lists["next-step"])

    def find(self, message_id: MessageId) -> tuple[Target, int] | None:
        for target in TARGETS:
            for index, message in enumerate(self._lists[target]):
                if message.id == message_id:
                    return target, index
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "nextTurn": [m.to_json() for m in self._lists["next-turn"]],
            "nextStep": [m.to_json() for m in self._lists["next-step"]],
        }

    # ---- durable mutation ----------------------------------------------------------------------------

    def splice(
        self,
        target: Target,
        start: int,
        delete_count: int,
        inserted: Sequence[UserMessage] = (),
        *,
        outcome: str | None = None,
        commit: bool = True,
        claim: bool = False,
    ) -> list[UserMessage]:
        """JS-style splice (negative start counts from the end; clamped). Returns the removed messages."""
        if target not in self._lists:
            raise InvalidSpliceError(f"unknown inbox target {target!r}")
        items = self._lists[target]
        size = len(items)
        start = max(size + start, 0) if start < 0 else min(start, size)
        delete_count = max(0, min(delete_count, size - start))
        removed = items[start : start + delete_count]
        remaining = {m.id for m in self._all() if m not in removed}
        seen: set[str] = set()
        for message in inserted:
            if message.id in remaining or message.id in seen:
                raise DuplicateMessageIdError(message.id)
            seen.add(message.id)
        if not removed and not inserted:
            return []
        data: dict[str, Any] = {"target": target, "start": start, "inserted": [m.to_json() for m in inserted]}
        if removed:
            data["removedCount"] = len(removed)
            data["removedIds"] = [m.id for m in removed]
            if not claim:
                data["outcome"] = outcome or "canceled"
        after = len(self) - len(removed) + len(inserted)
        self._log.append(
            INBOX_SPLICED, freeze_json(data), commit=commit, pending_after=after, undo_on_failure=commit
        )
        items[start : start + delete_count] = list(inserted)
        if not claim:
            for message in removed:
                self._bus.publish(Event(INBOX_DISCARDED, FrozenDict({"message": message.to_json()})))
        for message in inserted:
            self._bus.publish(
                Event(INBOX_INSERTED, FrozenDict({"message": message.to_json(), "target": target}))
            )
        return removed

    def append(self, target: Target, message: UserMessage) -> None:
        self.splice(target, len(self._lists[target]), 0, [message])

    def remove(self, message_id: MessageId) -> bool:
        found = self.find(message_id)
        if found is None:
            return False
        self.splice(found[0], found[1], 1)
        return True

    def replace(self, message_id: MessageId, message: UserMessage) -> None:
        """Swap a pending message in place (it may change id); live: discarded(old), inserted(new)."""
        found = self.find(message_id)
        if found is None:
            raise UnknownMessageError(message_id)
        self.splice(found[0], found[1], 1, [message], outcome="replaced")

    def move(self, message_id: MessageId, target: Target, index: int) -> None:
        """Move a pending message to `index` of `target` (two splices: out, then in)."""
        found = self.find(message_id)
        if found is None:
            raise UnknownMessageError(message_id)
        if target not in self._lists:
            raise InvalidSpliceError(f"unknown inbox target {target!r}")
        message = self._lists[found[0]][found[1]]
        # Both halves land in one commit (the second commits the first), so a move never loses it.
        self.splice(found[0], found[1], 1, outcome="moved", commit=False)
        self.splice(target, index if index >= 0 else len(self._lists[target]) + 1 + index, 0, [message])

    def clear(self, outcome: str = "canceled") -> list[UserMessage]:
        """Discard everything pending: next-step first, then next-turn."""
        removed = self.splice("next-step", 0, len(self._lists["next-step"]), outcome=outcome)
        removed += self.splice("next-turn", 0, len(self._lists["next-turn"]), outcome=outcome)
        return removed

    def return_claimed_durably(
        self, next_step: Sequence[UserMessage], prompt: UserMessage | None, *, discard: bool
    ) -> None:
        """Put input that a boundary claimed but no step entered back at the front of its lists, one
        durable splice per list; with `discard` (a clearing cancel aborted the turn), then discard
        exactly those. A message whose id a client has reused in the meantime stays with the newer one."""
        pending = {m.id for m in self._all()}
        groups: tuple[tuple[Target, Sequence[UserMessage]], ...] = (
            ("next-step", next_step),
            ("next-turn", () if prompt is None else (prompt,)),
        )
        for target, messages in groups:
            back = [m for m in messages if m.id not in pending]
            if not back:
                continue
            self.splice(target, 0, 0, back, commit=False)
            if discard:
                self.splice(target, 0, len(back), outcome="canceled", commit=False)

    def claim_next_step(self) -> list[UserMessage]:
        return self.splice("next-step", 0, len(self._lists["next-step"]), commit=False, claim=True)

    def claim_next_turn(self) -> UserMessage | None:
        removed = self.splice("next-turn", 0, 1, commit=False, claim=True)
        return removed[0] if removed else None

    def _all(self) -> list[UserMessage]:
        return self._lists["next-turn"] + self._lists["next-step"]
