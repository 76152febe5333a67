"""One event semantics for every client: the recorded event sequences of tests/fixtures/events (real
daemon, fake provider; tests/fixtures/events/README.md) replayed through the terminal chat's reducer
(`dsh_daemon/chat/core.py`) must end where the daemon ended: the same transcript (prompts, replies,
tool calls and their outcome), queue, status and token counts, and the plan where the scenario
names one. Every recorded event also fits its
declared payload (`model/payloads.py`). The VS Code and Neovim clients replay the same files."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.chat import processes, subagents
from dsh_daemon.chat.core import Chat
from dsh_daemon.chat.status import Status
from dsh_daemon.model import events as ev
from dsh_daemon.model.codec import structure
from dsh_daemon.model.methods import EventParams
from dsh_daemon.model.payloads import PAYLOADS
from tests.fixtures.events.record import SCENARIOS, record_all

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "events"


def fixture_files(directory: Path = FIXTURES) -> list[Path]:
    return sorted(directory.glob("*.json"))


class RecordingView:
    """A chat view that keeps what the chat shows, as the items of a transcript (a tool's line is
    resolved against the chat's tool cards once the replay ends)."""

    color = False
    interactive = False
    width = 100

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.lines: list[str] = []
        self.tool_lines = 0

    def print(self, text: str) -> None:
        self.lines.append(text)
        if text.startswith("› "):
            self.items.append({"type": "user", "text": text[2:]})
        elif text.startswith("  ⚙ "):
            self.items.append({"type": "tool", "card": self.tool_lines})
            self.tool_lines += 1

    def stream(self, kind: str, text: str) -> None:
        return None

    def message_done(
        self, reasoning: str, text: str, *, streamed: bool, interrupted: bool, final: bool, first_block: int
    ) -> None:
        if text or reasoning or interrupted:  # an empty anchor shows nothing
            item: dict[str, Any] = {"type": "assistant", "text": text}
            if reasoning:
                item["reasoning"] = reasoning
            if interrupted:
                item["interrupted"] = True
            self.items.append(item)

    def discard_stream(self) -> None:
        return None

    def flush_stream(self) -> None:
        return None

    def refresh(self) -> None:
        return None

    def show_permission(self, question: Any) -> None:
        return None

    async def pick(self, title: str, options: list[str], preview: Any = None) -> int | None:
        return None

    def copy(self, text: str) -> str:
        return ""

    def load_input(self, text: str, editing: int | None) -> bool:
        return False


def replay_through_chat(fixture: dict[str, Any]) -> tuple[Chat, list[dict[str, Any]]]:
    """Feed the fixture's events to a chat as the daemon sent them (the attach replay first, when the
    client attached an existing session, then the live stream); what it shows, as transcript items."""
    view = RecordingView()
    chat = Chat(None, view, cwd="/state/work", auto_allow=False)  # type: ignore[arg-type]  # no rpc needed
    chat.status = Status(session_id=fixture["sessionId"])
    attached_at = fixture["attachedAt"]
    for index, event in enumerate(fixture["events"]):
        chat.replaying = attached_at is not None and index < attached_at
        chat.on_notification("dsh/event", {"sessionId": fixture["sessionId"], **event})
    chat.replaying = False
    shown = []
    for item in view.items:
        if item["type"] == "tool":
            card = chat.cards.cards[item["card"]]
            result = None if card.output is None else "error" if card.error else "ok"
            item = {"type": "tool", "callId": card.call_id, "name": card.name, "result": result}
            if card.note():  # what the language server told the agent, read from meta
                item["note"] = card.note()
        shown.append(item)
    return chat, shown


def check_fixture(fixture: dict[str, Any]) -> None:
    events = fixture["events"]
    for event in events:
        structure({"sessionId": fixture["sessionId"], **event}, EventParams)
        assert ("seq" in event) == (event["type"] in ev.DURABLE_TYPES), event
        structure(event["data"], PAYLOADS[event["type"]])
    seqs = [e["seq"] for e in events if "seq" in e]
    assert seqs == sorted(set(seqs)), "durable events arrive once each, in order"
    chat, shown = replay_through_chat(fixture)
    expected = fixture["expected"]
    assert shown == expected["transcript"]
    queue = chat.status.queue.order
    assert (queue["next-turn"], queue["next-step"]) == (
        expected["queue"]["nextTurn"],
        expected["queue"]["nextStep"],
    )
    assert chat.status.state == expected["status"]
    usage = expected["usage"]
    assert (chat.status.usage.input_tokens, chat.status.usage.output_tokens) == (
        usage["inputTokens"],
        usage["outputTokens"],
    )
    check_extras(fixture, chat, [strip_paint(line) for line in chat.view.lines])  # type: ignore[attr-defined]
    if "expectedPlan" in fixture:
        plan = chat.plan.current
        shown = None if plan is None else {k: v for k, v in plan.data().items() if k in ("steps", "note")}
        assert shown == fixture["expectedPlan"]


def strip_paint(line: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", line)


def check_extras(fixture: dict[str, Any], chat: Chat, lines: list[str]) -> None:
    """What the chat shows of the scenario's processes, hooks, turn diff, review and subagents (the
    `expected*` beside `expected`; README), against the scrollback it printed and the state it keeps."""
    if "expectedProcesses" in fixture:
        want = []
        for row in fixture["expectedProcesses"]:
            want.append(processes.event_line(ev.PROCESS_STARTED, row))
            if not row["running"]:
                want.append(processes.event_line(ev.PROCESS_EXITED, row))
        shown = [line for line in lines if line.startswith(("  ⏵ ", "  ⏹ "))]
        assert sorted(shown) == sorted(want)  # each start and exit once, with how it ended
        if "transcriptPage" in fixture:  # a reload (/resume) draws them from the page's items
            again = [line for line in reloaded_lines(fixture) if line.startswith(("  ⏵ ", "  ⏹ "))]
            assert again == shown
    if "expectedHooks" in fixture:
        hooks = fixture["expectedHooks"]
        failed = [line for line in lines if " hook " in line and line.endswith("; it was ignored]")]
        assert [line.split(":")[0] for line in failed] == [
            f"[the {h['event']} hook {h['hook']} failed" for h in hooks["failed"]
        ]
        untrusted = [line for line in lines if line.startswith("[the project's hooks in ")]
        expected_untrusted = hooks["untrusted"]
        assert len(untrusted) == (1 if expected_untrusted else 0)
        if expected_untrusted:
            assert untrusted[0].startswith(f"[the project's hooks in {expected_untrusted['path']} do not run")
    if "expectedTurnDiff" in fixture:
        assert chat.turn_diff == fixture["expectedTurnDiff"]
        assert len([line for line in lines if line.startswith("  ± ")]) == 1  # told once per turn
    if "expectedFindings" in fixture:
        shown_findings = [
            {"findingId": f.finding_id, "path": f.path, "startLine": f.start_line, "severity": f.severity,
             "title": f.title}
            for f in chat.reviews.findings()
        ]  # fmt: skip
        assert shown_findings == fixture["expectedFindings"]
        reported = [line for line in lines if line[:2] in ("✗ ", "⚠ ", "ℹ ")]
        dismissed = [line for line in lines if line.startswith("[dismissed: ")]
        assert len(reported) == len(shown_findings) + len(dismissed)
    if "expectedSubagents" in fixture:
        for card in fixture["expectedSubagents"]:
            at = next(
                i for i, line in enumerate(lines) if line.startswith(f"  ⧉ subagent “{card['description']}”")
            )
            end = lines.index(f"  ⧉ subagent {card['status']}:", at)
            nested = lines[at + 1 : end]
            assert [line.split()[2] for line in nested if line.startswith("  │ ⚙ ")] == [
                t["name"] for t in card["tools"]
            ]
            assert [line for line in nested if line.startswith("  │ ✗ ")] == [] or any(
                t["result"] == "error" for t in card["tools"]
            )
            summary = [subagents.BAR + line for line in card["summary"].splitlines()]
            assert lines[end + 1 : end + 1 + len(summary)] == summary
            if "transcriptPage" in fixture:  # after a reload: the card's start, end and summary
                again = reloaded_lines(fixture)
                at = again.index(
                    subagents.started_line({"description": card["description"], "tools": "edit"})
                )
                end = again.index(f"  ⧉ subagent {card['status']}:", at)
                assert again[end + 1 : end + 1 + len(summary)] == summary


def reloaded_lines(fixture: dict[str, Any]) -> list[str]:
    """What a chat that reloads the session (`/resume`) draws from its transcript page."""
    view = RecordingView()
    reloaded = Chat(None, view, cwd="/state/work", auto_allow=False)  # type: ignore[arg-type]
    for turn in reversed(fixture["transcriptPage"]["turns"]):
        reloaded.history_turn(turn)
    return [strip_paint(line) for line in view.lines]


def test_a_reloaded_chat_skips_the_page_items_it_does_not_draw() -> None:
    """A model change (`session/settings`, protocol.md §3) and an event the chat does not know are
    items of a page too: the chat draws neither and goes on."""
    settings = {"model": "deepseek-v4-pro", "reasoningEffort": "max", "sandbox": None}
    items = [
        {"type": "event", "seq": 0, "step": None, "event": "session/settings", "data": settings},
        {"type": "message", "seq": 3, "step": 1, "id": "m1", "source": {"kind": "user"}, "text": "hi"},
        {"type": "event", "seq": 4, "step": 1, "event": "something/new", "data": {"x": 1}},
    ]
    turn = {"turn": 1, "startSeq": 1, "startedAt": 0, "items": items}
    assert reloaded_lines({"transcriptPage": {"turns": [turn]}}) == ["› hi"]


def test_every_scenario_has_its_fixture() -> None:
    assert {p.stem for p in fixture_files()} == set(SCENARIOS)


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.stem)
def test_the_chat_reducer_agrees_with_the_recording(path: Path) -> None:
    check_fixture(json.loads(path.read_text()))


def test_a_plan_reducer_that_disagrees_is_caught() -> None:
    fixture = json.loads((FIXTURES / "plan-rewind.json").read_text())
    fixture["expectedPlan"]["steps"][1]["status"] = "done"  # turn 2's plan, which the rewind took back
    with pytest.raises(AssertionError):
        check_fixture(fixture)


def test_a_reducer_that_disagrees_is_caught() -> None:
    fixture = json.loads((FIXTURES / "simple-turn.json").read_text())
    fixture["expected"]["transcript"][-1]["text"] += " (not what was streamed)"
    with pytest.raises(AssertionError):
        check_fixture(fixture)


@pytest.mark.parametrize(
    ("name", "dropped"),
    [
        ("review-findings-dismissed", "review/dismissed"),
        ("background-processes", "process/exited"),
        ("hooks-failed-and-untrusted", "hook/failed"),
        ("turn-diff-keep-undo", "turn/diff"),
        ("subagent-nested", "subagent/event"),
    ],
)
def test_a_reducer_that_drops_a_new_event_is_caught(name: str, dropped: str) -> None:
    """The comparisons of the `expected*` extras can fail: a recording missing one kind of event no
    longer matches (a chat that ignored it would show the same)."""
    fixture = json.loads((FIXTURES / f"{name}.json").read_text())
    fixture["events"] = [e for e in fixture["events"] if e["type"] != dropped]
    with pytest.raises((AssertionError, StopIteration, ValueError)):
        check_fixture(fixture)


@pytest.mark.slow
async def test_recording_afresh_gives_fixtures_the_reducer_agrees_with(tmp_path: Path) -> None:
    """The recorder, run now against the real daemon: each scenario records, every event fits its
    declaration, and the chat's replay ends where the daemon did (the fixtures here are not compared
    byte for byte: how streamed deltas coalesce into chunks depends on timing)."""
    written = await record_all(tmp_path)
    assert {p.stem for p in written} == set(SCENARIOS)
    for path in written:
        fresh = json.loads(path.read_text())
        check_fixture(fresh)
        committed = json.loads((FIXTURES / path.name).read_text())
        assert fresh["expected"] == committed["expected"], path.stem
