"""Inbox items as values: what is pending, how a stored splice changes the lists, and the wire form.

`agent/inbox.py` keeps the lists and their invariants; this module only describes the values, so the
durable log's readers (crash repair, read-only views) can rebuild the lists without the agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from dsh_daemon.model.errors import ModelError
from dsh_daemon.model.jsonvalue import FrozenDict
from dsh_daemon.model.messages import MessageId, UserMessage

Target: TypeAlias = Literal["next-turn", "next-step"]
TARGETS: tuple[Target, Target] = ("next-turn", "next-step")

# The presets of `send(target × wakeup)` (D1): the one place they are spelled out.
PRESETS: dict[str, tuple[Target, bool]] = {
    "followup": ("next-turn", True),
    "steer": ("next-step", True),
    "inject": ("next-step", False),
}


def preset_of(target: Target, wakeup: bool) -> str:
    """The name of the preset that sends this way (`send` for a parked next-turn prompt)."""
    for name, (preset_target, preset_wakeup) in PRESETS.items():
        if (preset_target, preset_wakeup) == (target, wakeup):
            return name
    return "send"


class InvalidSpliceError(ModelError):
    pass


@dataclass(frozen=True, slots=True)
class InboxItem:
    """One pending entry: a message, the editor context that travels with it, and how it was sent
    (`verb`: followup, steer, inject, send or context; `queued_at`: ms since the epoch)."""

    message: UserMessage
    attachments: tuple[UserMessage, ...] = ()
    wakeup: bool | None = None
    verb: str | None = None
    queued_at: int | None = None

    @property
    def id(self) -> MessageId:
        return self.message.id

    @property
    def messages(self) -> tuple[UserMessage, ...]:
        """In the order a step enters them: the attachments, then the message."""
        return (*self.attachments, self.message)

    @property
    def ids(self) -> tuple[MessageId, ...]:
        return tuple(m.id for m in self.messages)

    def to_json(self) -> dict[str, Any]:
        """The stored and wire form: the message's own fields plus what the item adds."""
        out = self.message.to_json()
        if self.attachments:
            out["context"] = [m.to_json() for m in self.attachments]
        if self.wakeup is not None:
            out["wakeup"] = self.wakeup
        if self.verb is not None:
            out["verb"] = self.verb
        if self.queued_at is not None:
            out["queuedAt"] = self.queued_at
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], queued_at: int | None = None) -> InboxItem:
        wakeup = obj.get("wakeup")
        verb = obj.get("verb")
        stamp = obj.get("queuedAt", queued_at)
        return cls(
            UserMessage.from_json(obj),
            tuple(UserMessage.from_json(m) for m in obj.get("context", ())),
            wakeup if isinstance(wakeup, bool) else None,
            verb if isinstance(verb, str) else None,
            stamp if isinstance(stamp, int) and not isinstance(stamp, bool) else None,
        )


def apply_splice(
    lists: dict[str, list[InboxItem]], data: FrozenDict, seq: int | None = None, time: int | None = None
) -> None:
    """Apply a stored splice to `lists` (used on load); an impossible splice is corruption."""
    try:
        target = data["target"]
        items = lists[target]
        start = int(data["start"])
        removed = int(data.get("removedCount", 0))
        inserted = [InboxItem.from_json(m, time) for m in data.get("inserted", ())]
        if not 0 <= start <= len(items) or start + removed > len(items):
            raise InvalidSpliceError("range out of bounds")
        items[start : start + removed] = inserted
    except (KeyError, ValueError, TypeError) as exc:
        raise InvalidSpliceError(f"invalid persisted inbox splice at session seq {seq}: {exc}") from exc


def item_wire(item: InboxItem, target: Target) -> dict[str, Any]:
    """A pending item as clients see it: the message, its attachments under `context`, and how, where
    and when it was queued."""
    return {**item.to_json(), "target": target}
