"""Checks of the log's invariants, used by tests, the property test and the crash test.

`check_log(events)` returns a list of violations (empty when the log is sound):
- seqs contiguous from 0;
- turns and steps open and close exactly once, properly nested, turns numbered 1, 2, ... in order;
- execution events (steps, messages, requests, tools) only inside a turn; inbox splices anywhere;
- at most one next-turn prompt claimed per turn, always the oldest (claim splices start at 0);
- conservation: every inserted message id is claimed, discarded or still pending, exactly once;
- nothing vanishes into an abort or a crash: input a turn claimed but no step entered is back in the
  inbox (pending, or discarded by the cancel) before that turn ends `aborted` or `interrupted`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from dsh_daemon.agent.derive import rebuild_requests
from dsh_daemon.model import events as ev
from dsh_daemon.model.events import Event
from dsh_daemon.model.jsonvalue import dumps
from dsh_daemon.model.provider import ModelRequest

_TURN_ENCLOSED = frozenset(
    {
        ev.STEP_START,
        ev.STEP_END,
        ev.USER_MESSAGE,
        ev.REQUEST_HEADER,
        ev.LLM_REQUEST,
        ev.ASSISTANT_CHUNK,
        ev.ASSISTANT_MESSAGE,
        ev.TOOL_CALL,
        ev.TOOL_RESULT,
        ev.LLM_RETRY,
        ev.USAGE,
        ev.CONTEXT_USAGE,
        ev.CONTEXT_COMPACTED,
    }
)


def check_log(events: Sequence[Event], pending_ids: Sequence[str] | None = None) -> list[str]:
    problems: list[str] = []
    turn: int | None = None
    step: int | None = None
    last_turn = 0
    turn_prompts = 0
    unentered: set[str] = set()
    inserted: Counter[str] = Counter()
    removed: Counter[str] = Counter()
    # per list, each pending item's message ids (its attachments, then its own)
    pending: dict[str, list[list[str]]] = {"next-turn": [], "next-step": []}
    for index, event in enumerate(events):
        if event.seq != index:
            problems.append(f"seq {event.seq} at position {index}")
        kind = event.type
        if kind == ev.TURN_START:
            if turn is not None:
                problems.append(f"turn/start {event.data['turn']} while turn {turn} is open")
            turn = int(event.data["turn"])
            if turn != last_turn + 1:
                problems.append(f"turn {turn} follows turn {last_turn}")
            last_turn = turn
            turn_prompts = 0
        elif kind == ev.TURN_END:
            if turn is None or event.data["turn"] != turn:
                problems.append(f"turn/end {event.data['turn']} without its turn/start (open: {turn})")
            if step is not None:
                problems.append(f"turn/end with step {step} open")
            reason = event.data.get("reason", {}).get("kind")
            if unentered and reason in ("aborted", "interrupted"):
                problems.append(f"turn {turn} ended {reason}; claimed, never entered: {sorted(unentered)}")
            turn, step = None, None
            unentered = set()
        elif kind == ev.STEP_START:
            if step is not None:
                problems.append(f"step/start while step {step} is open")
            step = int(event.data["step"])
            unentered = set()
        elif kind == ev.STEP_END:
            if step is None or event.data["step"] != step:
                problems.append(f"step/end {event.data['step']} without its step/start")
            step = None
        if kind in _TURN_ENCLOSED and turn is None:
            problems.append(f"{kind} at seq {event.seq} outside a turn")
        if kind == ev.INBOX_SPLICED:
            target = str(event.data["target"])
            start = int(event.data["start"])
            count = int(event.data.get("removedCount", 0))
            items = pending[target]
            gone = [i for item in items[start : start + count] for i in item]
            claim = count and "outcome" not in event.data
            if claim:
                if turn is None:
                    problems.append(f"claim splice at seq {event.seq} outside a turn")
                if target == "next-turn":
                    turn_prompts += count
                    if start != 0 or turn_prompts > 1:
                        problems.append(f"turn {turn} claimed a prompt out of FIFO order or more than one")
            removed.update(gone)
            if claim:
                unentered.update(gone)
            new_items = [
                [*(str(a["id"]) for a in m.get("context", ())), str(m["id"])]
                for m in event.data.get("inserted", ())
            ]
            new = [i for item in new_items for i in item]
            unentered.difference_update(new)
            inserted.update(new)
            items[start : start + count] = new_items
    if turn is not None:
        problems.append(f"turn {turn} left open")
    still = Counter(i for item in pending["next-turn"] + pending["next-step"] for i in item)
    for message_id, count in inserted.items():
        if count != removed[message_id] + still[message_id]:
            problems.append(
                f"conservation: {message_id} inserted {count}x, removed {removed[message_id]}x, "
                f"pending {still[message_id]}x"
            )
    if pending_ids is not None and sorted(pending_ids) != sorted(still):
        problems.append(f"inbox {sorted(pending_ids)} != log projection {sorted(still)}")
    return problems


def unaccounted(events: Sequence[Event], acknowledged: Iterable[str], pending_ids: Iterable[str]) -> set[str]:
    """The acknowledged message ids that are neither entered (a `user/message`), nor pending, nor
    removed by a discarding splice (cancel, remove, replace, move): empty when nothing was lost."""
    accounted = set(pending_ids)
    for event in events:
        if event.type == ev.USER_MESSAGE:
            accounted.add(str(event.data["id"]))
        elif event.type == ev.INBOX_SPLICED and "outcome" in event.data:
            accounted.update(str(i) for i in event.data.get("removedIds", ()))
    return set(acknowledged) - accounted


def requests_match_log(events: Sequence[Event], requests: Sequence[ModelRequest], skip: int = 0) -> list[str]:
    """Every request the provider received equals, byte for byte, its rebuild from the log
    (`skip`: requests the log holds from before this provider, e.g. another process's)."""
    rebuilt = rebuild_requests(events)[skip:]
    problems: list[str] = []
    if len(rebuilt) != len(requests):
        problems.append(f"{len(requests)} requests sent, the log rebuilds {len(rebuilt)}")
    for index, (sent, again) in enumerate(zip(requests, rebuilt, strict=False)):
        if dumps(sent.to_json()) != dumps(again.to_json()):
            problems.append(f"request {index} differs from its derivation")
    return problems
