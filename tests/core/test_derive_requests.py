"""A request's messages are the derivation's entries at that moment, built from only what was entered
since the last request (issue 40.4: listing a 28,000-message history at every step held the loop
3 ms). Counted in walks over the history, never in time."""

from __future__ import annotations

from typing import Any

from dsh_daemon.agent.derive import Derivation
from dsh_daemon.model.jsonvalue import freeze_json
from dsh_daemon.model.messages import Message, UserMessage


class _Walked(list[tuple[int, Message]]):
    """An entries list that counts the times it is walked from its start."""

    walks = 0

    def __iter__(self) -> Any:
        self.walks += 1
        return super().__iter__()


def _derivation(count: int) -> Derivation:
    derivation = Derivation()
    derivation.header = freeze_json({"config": {"provider": "p", "model": "m"}})
    derivation.entries = _Walked((seq, UserMessage.create(f"m{seq}")) for seq in range(count))
    return derivation


def _messages(derivation: Derivation) -> tuple[Message, ...]:
    return tuple(message for _, message in list.__iter__(derivation.entries))


def test_a_request_lists_only_the_messages_entered_since_the_last() -> None:
    derivation = _derivation(500)
    entries = derivation.entries
    assert isinstance(entries, _Walked)
    assert derivation.request().messages == _messages(derivation)
    walks = entries.walks
    entries.append((500, UserMessage.create("one more")))
    second = derivation.request()
    assert second.messages == _messages(derivation) and len(second.messages) == 501
    assert entries.walks == walks  # the 500 known ones were not listed again
    assert derivation.messages == list(second.messages)


def test_a_new_entries_list_is_listed_afresh() -> None:
    """A compaction or a cut starts a new list (shorter, or another one of the same length)."""
    derivation = _derivation(50)
    derivation.request()
    derivation.entries = [(7, UserMessage.create("summary")), *derivation.entries[40:]]
    assert derivation.request().messages == _messages(derivation)
    assert len(derivation.request().messages) == 11
    same_length = [(seq, UserMessage.create(f"other {seq}")) for seq in range(11)]
    derivation.entries = same_length
    assert derivation.request().messages == tuple(m for _, m in same_length)
