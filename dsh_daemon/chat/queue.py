"""The session's queue as the chat shows it: every inbox item gets a number (`#3`) the first time the
chat sees it, and keeps it until the chat ends, whatever happens to the items around it.

A command names an item by that number, never by its position, so `/drop 2` cannot hit another item
because a turn took the head meanwhile. An item the turn claimed, or that was removed, keeps its
number in the book with what became of it, so a command on it is refused with a line that says why.
A reworded item (`dsh/inbox/replace`) gets a new message id from the daemon; the chat reserves that id
for the old number before it asks, so the number survives the edit."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from dsh_daemon.chat.render import message_text

NEXT_TURN, NEXT_STEP = "next-turn", "next-step"


@dataclass
class QueueItem:
    number: int
    id: str
    target: str
    text: str
    verb: str = ""  # followup | steer | inject | send | context
    source: dict[str, Any] = field(default_factory=dict)
    context: list[dict[str, Any]] = field(default_factory=list)  # editor messages travelling with it
    state: str = "pending"  # pending | claimed (by turn `turn`) | removed
    turn: int | None = None

    @property
    def label(self) -> str:
        """`#3`"""
        return f"#{self.number}"

    def why_not_pending(self) -> str:
        if self.state == "claimed":
            by = f"turn {self.turn}" if self.turn else "a turn"
            return f"{self.label} is no longer queued: {by} took it"
        return f"{self.label} was removed from the queue"


class QueueBook:
    def __init__(self) -> None:
        self._numbers = itertools.count(1)
        self.items: dict[str, QueueItem] = {}  # message id -> item (pending or not)
        self.by_number: dict[int, QueueItem] = {}
        self.order: dict[str, list[str]] = {NEXT_TURN: [], NEXT_STEP: []}  # pending ids in queue order
        self._reserved: dict[str, int] = {}  # a replacement's id -> the number it inherits

    # ---- what the daemon says ---------------------------------------------------------------------

    def inserted(self, message: dict[str, Any], target: str, index: int | None = None) -> QueueItem:
        msg_id = str(message.get("id", ""))
        number = self._reserved.pop(msg_id, None)
        item = self.items.get(msg_id)
        if item is None or number is not None:
            item = QueueItem(number or next(self._numbers), msg_id, target, "")
            self.items[msg_id] = item
            self.by_number[item.number] = item
        item.target = target
        item.state, item.turn = "pending", None
        item.text = message_text(message.get("content") or "")
        item.verb = str(message.get("verb") or "")
        item.source = dict(message.get("source") or {})
        item.context = list(message.get("context") or [])
        order = self.order.setdefault(target, [])
        for ids in self.order.values():
            if msg_id in ids:
                ids.remove(msg_id)
        order.insert(len(order) if index is None or index < 0 else min(index, len(order)), msg_id)
        return item

    def claimed(self, message: dict[str, Any], turn: int | None) -> None:
        self._gone(str(message.get("id", "")), "claimed", turn)

    def discarded(self, message: dict[str, Any]) -> None:
        self._gone(str(message.get("id", "")), "removed", None)

    def _gone(self, msg_id: str, state: str, turn: int | None) -> None:
        for ids in self.order.values():
            if msg_id in ids:
                ids.remove(msg_id)
        item = self.items.get(msg_id)
        if item is not None and item.state == "pending":
            item.state, item.turn = state, turn

    def reset(self, inbox: dict[str, Any]) -> None:
        """The inbox as a reply states it (attach): what is not in it is no longer pending."""
        listed = {NEXT_TURN: inbox.get("nextTurn") or [], NEXT_STEP: inbox.get("nextStep") or []}
        present = {str(m.get("id")) for items in listed.values() for m in items}
        for msg_id in [i for ids in self.order.values() for i in ids]:
            if msg_id not in present:
                self._gone(msg_id, "removed", None)
        for target, items in listed.items():
            self.order[target] = []
            for message in items:
                self.inserted(message, target)

    def forget(self) -> None:
        """Another session: its items are not these (numbers keep counting, so none is reused)."""
        self.items.clear()
        self.by_number.clear()
        self.order = {NEXT_TURN: [], NEXT_STEP: []}
        self._reserved.clear()

    def reserve(self, new_id: str, item: QueueItem) -> None:
        """`new_id` will replace `item` (a reworded prompt): it keeps the item's number."""
        self._reserved[new_id] = item.number

    # ---- what the chat asks -----------------------------------------------------------------------

    def pending(self, target: str = NEXT_TURN) -> list[QueueItem]:
        return [self.items[i] for i in self.order.get(target, [])]

    def count(self, target: str) -> int:
        return len(self.order.get(target, []))

    def find(self, number: int) -> QueueItem | None:
        return self.by_number.get(number)
