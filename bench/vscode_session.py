"""A long session written straight into a state directory, for the VS Code panel benchmark.

    .venv/bin/python -m bench.vscode_session STATE_DIR [--turns 2000] [--cwd DIR]

Prints the session id. Each turn is what a real one logs: the prompt, a markdown reply (paragraphs,
a list, a fenced code block, sometimes a table), and every third turn a tool call with its result
before the answer; usage and the turn end. Turn N's prompt holds the marker `⟪TNNNN⟫` so a driver
can tell which turns a view shows.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dsh_daemon.model.events import Event
from dsh_daemon.model.jsonvalue import freeze_json
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.session.store import SessionStore

SESSION_ID = "bench-long-session"
TITLE = "Benchmark: a long session"
MODEL = {"kind": "model", "provider": "bench", "model": "bench-model"}


def answer(turn: int) -> str:
    table = (
        "\n| file | lines | status |\n|---|---:|---|\n| `src/app.py` | 120 | changed |\n| `tests/test_app.py` | 48 | new |\n"
        if turn % 5 == 0
        else ""
    )
    return (
        f"Here is what I found for step {turn}. The parser reads the **whole line** before it splits it, "
        f"so a trailing `\\r` stays in the last field; that is why the comparison fails on Windows files.\n\n"
        f"- strip the line ending first\n- keep the `maxsplit` argument\n- add a test with `\\r\\n` input\n"
        f"{table}\n"
        f"```python\ndef parse(line: str) -> list[str]:\n    line = line.rstrip('\\r\\n')\n"
        f"    return line.split(',', maxsplit={turn % 7 + 1})\n```\n\n"
        f"After this change `pytest -q` passes ({turn} tests)."
    )


def build(state: Path, turns: int, cwd: str | None) -> str:
    store = SessionStore(state)
    store.create_session(SESSION_ID, title=TITLE, cwd=cwd)
    batch: list[Event] = []
    seq = 0
    now = 1_796_000_000_000

    def add(kind: str, data: dict[str, Any]) -> None:
        nonlocal seq
        batch.append(Event(kind, freeze_json(data), seq, now + seq))
        seq += 1

    add("session/title", {"title": TITLE})
    for turn in range(1, turns + 1):
        add("turn/start", {"turn": turn})
        add("step/start", {"turn": turn, "step": 1})
        add(
            "user/message",
            UserMessage.create(f"⟪T{turn:04d}⟫ why does the parser fail on line {turn}?").to_json(),
        )
        step = 1
        if turn % 3 == 0:
            call_id = f"call_{turn}"
            arguments = '{"path": "src/app.py"}'
            add(
                "assistant/message",
                {
                    "turn": turn,
                    "step": 1,
                    "message": {
                        "id": f"m{turn}a",
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": "Let me read the parser."},
                            {"type": "tool-call", "id": call_id, "name": "read_file", "arguments": arguments},
                        ],
                        "source": MODEL,
                    },
                    "finishReason": "tool-calls",
                    "sourceEventSeqs": [],
                },
            )
            add(
                "tool/call",
                {"turn": turn, "step": 1, "callId": call_id, "name": "read_file", "arguments": arguments},
            )
            output = "\n".join(
                f"{i}\tdef parse(line): return line.split(',')  # {turn}" for i in range(1, 13)
            )
            add(
                "tool/result",
                {
                    "turn": turn,
                    "step": 1,
                    "callId": call_id,
                    "name": "read_file",
                    "message": {
                        "id": f"m{turn}r",
                        "role": "user",
                        "content": [
                            {
                                "type": "tool-result",
                                "toolCallId": call_id,
                                "content": [{"type": "text", "text": output}],
                            }
                        ],
                        "source": {"kind": "tool", "callId": call_id},
                    },
                },
            )
            add("step/end", {"turn": turn, "step": 1})
            step = 2
            add("step/start", {"turn": turn, "step": 2})
        add(
            "assistant/message",
            {
                "turn": turn,
                "step": step,
                "message": {
                    "id": f"m{turn}",
                    "role": "assistant",
                    "content": [{"type": "text", "text": answer(turn)}],
                    "source": MODEL,
                },
                "finishReason": "stop",
                "sourceEventSeqs": [],
            },
        )
        add("step/end", {"turn": turn, "step": step})
        add(
            "turn/usage",
            {"turn": turn, "usage": {"inputTokens": 1200 + turn, "outputTokens": 180, "costUsd": 0.0004}},
        )
        add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        if len(batch) >= 5000:
            store.append_events(SESSION_ID, batch)
            batch = []
    store.append_events(SESSION_ID, batch)
    store.close()
    return SESSION_ID


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("state", type=Path)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--cwd")
    args = parser.parse_args()
    print(build(args.state, args.turns, args.cwd))


if __name__ == "__main__":
    main()
