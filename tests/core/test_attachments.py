"""A queued prompt carries its own editor context (issue 10): one inbox item, claimed, moved, replaced
and discarded together, its attachments entered just before it."""

from __future__ import annotations

from pathlib import Path

from dsh_daemon.llm.scripted import Hang, reply
from dsh_daemon.model import events as ev
from dsh_daemon.model.messages import UserMessage
from tests.core.harness import Harness, msg
from tests.core.test_cancel import started


def sel(text: str, id: str) -> UserMessage:
    return msg(text, {"kind": "editor", "uri": "file:///w/a.py", "contextKind": "selection"}, id=id)


async def _busy(h: Harness) -> None:
    h.agent.followup(msg("first", id="p0"))
    await started(h)


async def test_a_prompt_queued_while_busy_enters_with_its_attachments_in_its_own_turn(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Hang()], reply("done")])
    await _busy(h)
    h.agent.send(msg("explain this", id="p1"), target="next-turn", wakeup=True,
                 attachments=[sel("x = 1", "c1"), sel("y = 2", "c2")])  # fmt: skip
    item = h.agent.inbox.items("next-turn")[0]
    assert item.ids == ("c1", "c2", "p1") and item.verb == "followup" and item.wakeup is True
    assert isinstance(item.queued_at, int)
    wire = h.agent.inbox.to_json()["nextTurn"][0]
    assert wire["id"] == "p1" and [c["id"] for c in wire["context"]] == ["c1", "c2"]
    assert wire["target"] == "next-turn" and wire["verb"] == "followup" and wire["queuedAt"] == item.queued_at
    inserted = h.live(ev.INBOX_INSERTED)[-1].data
    assert inserted["index"] == 0 and inserted["message"]["context"][0]["id"] == "c1"
    h.agent.cancel(keep_inbox=True)
    await h.idle()
    h.agent.wake()
    await h.idle()
    turns = [t for t, _ in h.user_messages()]
    assert h.user_messages()[-3:] == [(2, "x = 1"), (2, "y = 2"), (2, "explain this")]
    assert turns.count(2) == 3
    h.check()


async def test_removing_a_prompt_discards_its_attachments_and_replace_keeps_them(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Hang()]])
    await _busy(h)
    h.agent.send(msg("a", id="a"), target="next-turn", wakeup=True, attachments=[sel("s", "ca")])
    h.agent.send(msg("b", id="b"), target="next-turn", wakeup=True, attachments=[sel("t", "cb")])
    h.agent.inbox.replace("a", msg("a2", id="a2"))
    assert h.agent.inbox.items("next-turn")[0].ids == ("ca", "a2")
    h.agent.inbox.replace("a2", msg("a3", id="a3"), [sel("u", "cu")])
    assert h.agent.inbox.items("next-turn")[0].ids == ("cu", "a3")
    h.agent.inbox.move("b", "next-step", 0)
    assert h.agent.inbox.items("next-step")[0].ids == ("cb", "b")
    assert h.agent.inbox.remove("a3")
    discarded = [e.data["message"]["id"] for e in h.live(ev.INBOX_DISCARDED)]
    assert "cu" in discarded and "a3" in discarded
    assert h.agent.inbox.pending_ids() == ["cb", "b"]
    h.agent.cancel()
    await h.idle()
    assert h.agent.inbox.pending_ids() == []
    h.check()


async def test_an_attachment_id_must_be_unique_among_pending_messages(tmp_path: Path) -> None:
    import pytest

    from dsh_daemon.agent.inbox import DuplicateMessageIdError

    h = Harness(tmp_path, [[Hang()]])
    await _busy(h)
    h.agent.send(msg("a", id="a"), target="next-turn", wakeup=True, attachments=[sel("s", "c")])
    with pytest.raises(DuplicateMessageIdError):
        h.agent.send(msg("b", id="b"), target="next-turn", wakeup=True, attachments=[sel("t", "c")])
    assert h.agent.inbox.pending_ids() == ["c", "a"]


async def test_items_survive_a_reload_with_their_attachments_and_labels(tmp_path: Path) -> None:
    h = Harness(tmp_path, [[Hang()]])
    await _busy(h)
    h.agent.send(msg("a", id="a"), target="next-turn", wakeup=True, attachments=[sel("s", "c")])
    h.agent.inject(msg("i", id="i"))
    again = await h.reopen()
    assert again.agent.inbox.items("next-turn")[0].ids == ("c", "a")
    assert again.agent.inbox.items("next-step")[0].verb == "inject"
    again.check()
    await again.manager.close()
