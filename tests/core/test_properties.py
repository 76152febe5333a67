"""Hypothesis: random interleavings of sends, cancels, wakes and inbox edits keep every invariant.

After every rule: conservation, FIFO claims, one prompt per turn, balanced turns and steps (the tail
may be open while running), status alternation, contiguous seqs, and request == derivation.

The machine must be a pure function of its rule sequence: Hypothesis replays prefixes and checks that
each replay draws the same choices (the `edit` precondition and its `sampled_from` read the inbox). So
nothing the driver does may wait on the wall clock: retries use `NO_WAIT_RETRY` (a zero sleep costs a
few loop ticks, never time). With a real backoff, whether `run_loop(n)` got past a retry depended on how
fast the machine was, and a loaded run (`-n 2`) failed with `FlakyStrategyDefinition`. (The write-behind
timer still runs on the clock; it only decides how stream deltas are grouped into `assistant/chunk`
events, which no rule or precondition reads.)
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from dsh_daemon.agent.invariants import check_log, requests_match_log, unaccounted
from dsh_daemon.llm.scripted import Fail, Sleep, reply
from dsh_daemon.model import events as ev
from dsh_daemon.model.provider import SERVER, LlmFailure, TextDelta
from tests.core.harness import NO_WAIT_RETRY, Harness, echo_tool, msg

REPLIES = [
    reply("plain"),
    [TextDelta("slow "), Sleep(0), TextDelta("reply"), *reply("")[-1:]],
    reply("", tool_calls=[("c1", "echo", '{"x": 1}'), ("c2", "echo", "{}")]),
    [Fail(LlmFailure(SERVER, "transient"))],
]


class AgentMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.tmp = Path(tempfile.mkdtemp(prefix="dsh-prop-"))
        self.counter = itertools.count()
        self.acknowledged: set[str] = set()
        self.h = self.loop.run_until_complete(self._make())

    async def _make(self) -> Harness:
        h = Harness(self.tmp, tools=[echo_tool()], retry=NO_WAIT_RETRY)
        cycle = itertools.cycle(REPLIES)
        h.provider.script = _Endless(cycle)  # type: ignore[assignment]
        return h

    def _run(self, ticks: int = 1) -> None:
        async def spin() -> None:
            for _ in range(ticks):
                await asyncio.sleep(0)

        self.loop.run_until_complete(spin())

    def _text(self) -> str:
        return f"m{next(self.counter)}"

    # ---- rules ---------------------------------------------------------------------------------------

    @rule(preset=st.sampled_from(["followup", "steer", "inject"]))
    def send_preset(self, preset: str) -> None:
        async def go() -> None:
            self.acknowledged.add(getattr(self.h.agent, preset)(msg(self._text())))

        self.loop.run_until_complete(go())

    @rule(where=st.sampled_from(["next-turn", "next-step"]), wakeup=st.booleans())
    def send(self, where: str, wakeup: bool) -> None:
        async def go() -> None:
            sent = self.h.agent.send(msg(self._text()), target=where, wakeup=wakeup)  # type: ignore[arg-type]
            self.acknowledged.add(sent)

        self.loop.run_until_complete(go())

    @rule(keep=st.booleans())
    def cancel(self, keep: bool) -> None:
        self.h.agent.cancel(keep_inbox=keep)

    @rule()
    def wake(self) -> None:
        async def go() -> None:
            self.h.agent.wake()

        self.loop.run_until_complete(go())

    @precondition(lambda self: len(self.h.agent.inbox) > 0)
    @rule(data=st.data())
    def edit(self, data: st.DataObject) -> None:
        pending = list(self.h.agent.inbox.next_turn + self.h.agent.inbox.next_step)
        victim = data.draw(st.sampled_from(pending))
        action = data.draw(st.sampled_from(["remove", "replace", "move"]))
        if action == "remove":
            self.h.agent.inbox.remove(victim.id)
        elif action == "replace":
            replacement = msg(self._text())
            self.h.agent.inbox.replace(victim.id, replacement)
            self.acknowledged.add(replacement.id)
        else:
            target = data.draw(st.sampled_from(["next-turn", "next-step"]))
            self.h.agent.inbox.move(victim.id, target, data.draw(st.integers(0, 3)))  # type: ignore[arg-type]

    @rule(ticks=st.integers(1, 30))
    def run_loop(self, ticks: int) -> None:
        self._run(ticks)

    @rule()
    def settle(self) -> None:
        self.loop.run_until_complete(asyncio.wait_for(self.h.idle(), 10))

    # ---- invariants ----------------------------------------------------------------------------------

    @invariant()
    def log_is_sound(self) -> None:
        inbox = self.h.agent.inbox
        problems = check_log(self.h.log, inbox.pending_ids())
        if self.h.agent.running:
            problems = [p for p in problems if not p.endswith("left open")]
        problems += requests_match_log(self.h.log, self.h.provider.requests)
        statuses = self.h.statuses()
        problems += [
            f"status repeats at {i}" for i in range(1, len(statuses)) if statuses[i] == statuses[i - 1]
        ]
        assert self.h.agent.status == ("running" if self.h.agent.running else "idle")
        if not self.h.agent.running:  # mid-boundary, a claimed batch is neither pending nor entered yet
            lost = unaccounted(self.h.log, self.acknowledged, inbox.pending_ids())
            if lost:
                problems.append(f"acknowledged but lost: {sorted(lost)}")
        assert problems == [], problems

    def teardown(self) -> None:
        try:
            self.loop.run_until_complete(asyncio.wait_for(self.h.agent.dispose(), 10))
            closed = check_log(self.h.log)
            inbox = self.h.agent.inbox
            pending = inbox.pending_ids()
            assert unaccounted(self.h.log, self.acknowledged, pending) == set()
            assert [p for p in closed if not p.startswith("conservation")] == [], closed
            assert not any(e.type == ev.TURN_START for e in self.h.log[-1:])
            self.loop.run_until_complete(self.h.manager.close())
        finally:
            self.loop.close()
            shutil.rmtree(self.tmp, ignore_errors=True)


class _Endless(list):  # type: ignore[type-arg]
    """A script that never runs out: pops the next reply from a cycle."""

    def __init__(self, cycle: itertools.cycle) -> None:  # type: ignore[type-arg]
        super().__init__([None])
        self._cycle = cycle

    def pop(self, index: int = -1):  # type: ignore[no-untyped-def, override]
        return next(self._cycle)


TestAgentInterleavings = AgentMachine.TestCase
TestAgentInterleavings.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# ---- the machine does not depend on the wall clock ---------------------------------------------------

# Three settled turns reach the fourth reply (tool calls, then the failing request and its retry), then
# single ticks walk the driver through the retry; a last settle drains everything.
_CLOCK_RULES: list[tuple[str, dict[str, object]]] = [
    ("send_preset", {"preset": "followup"}),
    ("settle", {}),
    ("send_preset", {"preset": "followup"}),
    ("settle", {}),
    ("send_preset", {"preset": "followup"}),
    *[("run_loop", {"ticks": 1})] * 60,
    ("settle", {}),
]


def _replay(rules: Sequence[tuple[str, dict[str, object]]], pause_s: float) -> list[tuple[int, int, int]]:
    """Run `rules` on a fresh machine, sleeping `pause_s` of wall time before each; after each rule the
    shape of the state: (durable events other than chunks, pending messages, provider requests)."""
    machine = AgentMachine()
    shapes: list[tuple[int, int, int]] = []
    try:
        for name, kwargs in rules:
            time.sleep(pause_s)
            getattr(machine, name)(**kwargs)
            h = machine.h
            durable = sum(1 for e in h.log if e.type != ev.ASSISTANT_CHUNK)
            shapes.append((durable, len(h.agent.inbox), len(h.provider.requests)))
            machine.log_is_sound()
        assert any(e.type == ev.LLM_RETRY for e in machine.h.log), "the rules must exercise a retry"
    finally:
        machine.teardown()
    return shapes


def test_machine_does_not_depend_on_wall_clock() -> None:
    """The same rules reach the same states whether or not time passes between them (a retry's sleep
    must not be a wall-clock timer), so Hypothesis can replay and shrink what it finds."""
    assert _replay(_CLOCK_RULES, 0.0) == _replay(_CLOCK_RULES, 0.003)
