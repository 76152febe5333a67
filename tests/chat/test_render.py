"""The pieces of what the chat shows: status line, wrapping, markdown, diffs, control codes."""

from __future__ import annotations

from dsh_daemon.chat.render import clip, diff_lines, hard_wrap, markdown_ansi, sanitize
from dsh_daemon.chat.status import Status


def test_the_status_line_follows_the_events() -> None:
    status = Status(session_id="7f3a2c1e-aaaa")
    assert status.line().startswith("idle · 0 tokens")
    status.on_event("agent/status", {"status": "running"})
    status.on_event("agent/inbox/inserted", {"message": {"id": "q1"}, "target": "next-turn"})
    status.on_event("agent/inbox/inserted", {"message": {"id": "q2"}, "target": "next-turn"})
    status.on_event("agent/inbox/inserted", {"message": {"id": "c1"}, "target": "next-step"})
    status.on_event("agent/inbox/claimed", {"message": {"id": "q1"}, "turn": 2})
    status.on_event(
        "turn/usage", {"turn": 1, "usage": {"inputTokens": 1200, "outputTokens": 34, "costUsd": 0.0123}}
    )
    assert (
        status.line()
        == "running · queued 1 · context 1 · 1.2k tokens (1.2k in, 34 out) · $0.0123 · session 7f3a2c1e"
    )
    status.permission = True
    assert status.line().startswith("awaiting permission · queued 1")
    status.on_event("agent/inbox/discarded", {"message": {"id": "q2"}})
    assert status.queued == 0


def test_text_from_the_model_cannot_drive_the_terminal() -> None:
    assert sanitize("a\x1b[31mb\x07c\td\ne") == "a[31mbc\td\ne"
    assert clip("x\x1b]0;title\x07 y", 20) == "x]0;title y"
    assert "\x1b[31m" not in markdown_ansi(sanitize("a\x1b[31mb"), 40)


def test_wrapping_markdown_and_diffs() -> None:
    assert hard_wrap("abcdefghijkl\nxy", 10) == ["abcdefghij", "kl", "xy"]
    assert hard_wrap("日本語日本語", 10) == ["日本語日本", "語"]  # two cells each
    rendered = markdown_ansi("# Title\n\n```python\nprint(1)\n```\n", 40)
    assert "Title" in rendered and "print" in rendered and "```" not in rendered
    colored = diff_lines("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n same", True)
    assert (
        colored[3] == "\x1b[31m-old\x1b[0m" and colored[4] == "\x1b[32m+new\x1b[0m" and colored[5] == " same"
    )
    assert diff_lines("-old", False) == ["-old"]
