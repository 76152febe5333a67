"""The chat's model of one session: daemon events in, lines for a view out; permission answers.

A view (plain text for pipes, or the prompt_toolkit terminal UI) decides how things look; this module
decides what is said."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Protocol

from dsh_daemon.chat.render import (
    CYAN,
    DIM,
    RED,
    YELLOW,
    clip,
    diff_lines,
    message_reasoning,
    message_text,
    paint,
    sanitize,
)
from dsh_daemon.chat.rpc import RpcPipe
from dsh_daemon.chat.status import Status

RESUME_PAGE_TURNS = 10  # turns shown when a session is resumed (the rest: `dsh-daemon export`)
PERMISSION_KEYS = {"y": "allow-once", "a": "allow-always", "n": "reject", "c": "cancelled"}
PERMISSION_WORDS = {"yes": "allow-once", "always": "allow-always", "no": "reject", "cancel": "cancelled"}


class View(Protocol):
    color: bool
    interactive: bool  # a person at a terminal (pickers, keys)

    def print(self, text: str) -> None: ...  # whole lines into the scrollback (ANSI allowed)
    def stream(self, kind: str, text: str) -> None: ...  # a streamed delta: reasoning | text | tool
    def message_done(self, reasoning: str, text: str, *, streamed: bool, interrupted: bool) -> None: ...
    def discard_stream(self) -> None: ...  # a retried request: what streamed so far is void
    def flush_stream(self) -> None: ...  # whatever is still live goes to the scrollback
    def refresh(self) -> None: ...  # the status line may have changed
    def show_permission(self, question: str | None) -> None: ...  # None: the question is gone
    async def pick(self, title: str, options: list[str]) -> int | None: ...


class Chat:
    def __init__(self, rpc: RpcPipe, view: View, *, cwd: str, auto_allow: bool) -> None:
        self.rpc = rpc
        self.view = view
        self.cwd = cwd
        self.auto_allow = auto_allow
        self.status = Status()
        self.idle = asyncio.Event()
        self.idle.set()
        self.closed = asyncio.Event()  # the daemon is gone
        self.leaving = False  # we are shutting it down
        self.answer: asyncio.Future[str] | None = None
        self.replaying = False
        self.clearing = False
        self.tool_names: dict[str, str] = {}
        self.attachments: list[dict[str, Any]] = []  # travel with the next prompt
        self.session_list: list[dict[str, Any]] = []  # the last /sessions listing
        self._permission_lock = asyncio.Lock()

    @property
    def session_id(self) -> str:
        return self.status.session_id

    def paint(self, code: str, text: str) -> str:
        return paint(self.view.color, code, text)

    def note(self, text: str) -> None:
        """A dim bracketed remark from the client itself."""
        self.view.print(self.paint(DIM, sanitize(text)))

    def error(self, text: str) -> None:
        self.view.print(self.paint(RED, sanitize(text)))

    # ---- events ------------------------------------------------------------------------------------

    def on_notification(self, method: str, params: Any) -> None:
        if method != "dsh/event" or not isinstance(params, dict):
            return
        if params.get("sessionId") != self.session_id:
            return
        kind, data = params["type"], params["data"]
        if self.status.on_event(kind, data):
            if kind == "agent/status":
                (self.idle.set if data["status"] == "idle" else self.idle.clear)()
            self.view.refresh()
        if self.replaying:
            self.history_event(kind, data)
        else:
            self.live_event(kind, data)

    def history_event(self, kind: str, data: Any) -> None:
        if kind == "user/message":
            self.user_message(data)
        elif kind == "assistant/message":
            self.assistant_message(data, streamed=False)
        elif kind in ("tool/call", "tool/result"):
            self.live_event(kind, data)
        elif kind == "turn/end" and data["reason"]["kind"] in ("error", "aborted", "interrupted"):
            self.view.print(self.paint(DIM, f"[turn {data['turn']} ended: {data['reason']['kind']}]"))

    def history_turn(self, turn: dict[str, Any]) -> None:
        """One turn of a transcript page, drawn as the live events would have drawn it."""
        for item in turn.get("items", ()):
            kind = item.get("type")
            if kind == "message":
                source = item.get("source") or {}
                if source.get("kind") == "user":
                    self.view.print(self.paint(CYAN, "› ") + sanitize(item.get("text", "")))
                elif source.get("kind") == "editor":
                    uri = _short_uri(source.get("uri", ""))
                    self.note(f"  📎 {source.get('contextKind', 'context')}: {uri}")
            elif kind == "assistant":
                self.view.message_done(
                    item.get("reasoning") or "",
                    item.get("text") or "",
                    streamed=False,
                    interrupted=bool(item.get("interrupted")),
                )
            elif kind == "tool":
                self.tool_names[item["callId"]] = item["name"]
                self.view.print(self.paint(CYAN, f"  ⚙ {item['name']} {clip(item.get('arguments', ''), 90)}"))
                result = item.get("result")
                if result is not None:
                    mark = self.paint(RED, "  ✗") if result.get("isError") else "  ✓"
                    self.view.print(f"{mark} {item['name']}: {clip(result.get('output', ''), 100)}")
        end = turn.get("end") or {}
        if end.get("kind") in ("error", "aborted", "interrupted"):
            self.view.print(self.paint(DIM, f"[turn {turn['turn']} ended: {end['kind']}]"))

    def live_event(self, kind: str, data: Any) -> None:
        view = self.view
        if kind == "assistant/delta":
            delta = data["delta"]
            if delta["type"] in ("reasoning", "text") and delta.get("text"):
                view.stream(delta["type"], delta["text"])
        elif kind == "user/message":
            self.user_message(data)
        elif kind == "assistant/message":
            self.assistant_message(data, streamed=True)
        elif kind == "tool/call":
            self.tool_names[data["callId"]] = data["name"]
            view.print(self.paint(CYAN, f"  ⚙ {data['name']} {clip(data['arguments'], 90)}"))
        elif kind == "tool/output":
            view.stream("tool", data["text"])
        elif kind == "tool/result":
            view.flush_stream()
            call_id = data["message"]["source"]["callId"]
            name = self.tool_names.get(call_id, "tool")
            blocks = data["message"]["content"][0].get("content", []) if data["message"]["content"] else []
            text = "".join(b.get("text", "") for b in blocks)
            mark = self.paint(RED, "  ✗") if data.get("error") else "  ✓"
            view.print(f"{mark} {name}: {clip(text, 100)}")
        elif kind == "llm/retry":
            view.discard_stream()
            self.note(f"[retry {data['retry']} in {data['delayMs']} ms: {data['error']['code']}]")
        elif kind == "agent/error":
            error = data.get("error") or {}
            self.error(f"[{error.get('code', 'error')}: {error.get('message', '')}]")
        elif kind == "turn/end":
            view.flush_stream()
            self.turn_end(data["reason"])

    def user_message(self, data: dict[str, Any]) -> None:
        source = data.get("source") or {}
        if source.get("kind") == "user":
            self.view.print(self.paint(CYAN, "› ") + sanitize(message_text(data["content"])))
        elif source.get("kind") == "editor":
            self.note(f"  📎 {source.get('contextKind', 'context')}: {_short_uri(source.get('uri', ''))}")

    def assistant_message(self, data: dict[str, Any], *, streamed: bool) -> None:
        content = data["message"]["content"]
        self.view.message_done(
            message_reasoning(content),
            message_text(content),
            streamed=streamed,
            interrupted=bool(data.get("interrupted")),
        )

    def turn_end(self, reason: dict[str, Any]) -> None:
        kind = reason["kind"]
        if kind == "error":
            error = reason.get("error") or {}
            self.error(f"[error {error.get('code')}: {error.get('message')}]")
        elif kind == "aborted":
            cause = reason.get("cause", "user")
            waiting = self.status.queued + self.status.context
            if self.clearing:
                self.note(f"[cancelled: {cause}; queue cleared]")
            elif waiting:
                self.view.print(
                    self.paint(YELLOW, f"[cancelled: {cause}; {waiting} queued item(s) parked")
                    + self.paint(YELLOW, " — /wake runs them, /queue lists, /drop N removes]")
                )
            else:
                self.note(f"[cancelled: {cause}]")
        elif kind in ("blocked", "max-tokens", "interrupted"):
            self.note(f"[turn ended: {kind}]")

    # ---- permissions -------------------------------------------------------------------------------

    async def on_request(self, method: str, params: Any) -> Any:
        if method != "dsh/requestPermission":
            raise RuntimeError(f"unsupported request {method}")
        if self.auto_allow:
            return {"outcome": "allow-once"}
        async with self._permission_lock:
            return {"outcome": await self.ask_permission(params)}

    async def ask_permission(self, params: dict[str, Any]) -> str:
        view = self.view
        view.flush_stream()
        view.print(self.paint(YELLOW, f"? {sanitize(str(params.get('title') or params.get('tool')))}"))
        preview = params.get("preview") or {}
        if preview.get("diff"):
            for line in diff_lines(preview["diff"], view.color):
                view.print("  " + line)
        elif preview.get("command"):
            where = self.paint(DIM, f"   (in {preview.get('cwd', '')})")
            view.print("  " + self.paint(CYAN, f"$ {sanitize(preview['command'])}") + where)
        else:
            view.print("  " + clip(json.dumps(params.get("arguments"), ensure_ascii=False), 300))
        self.answer = asyncio.get_running_loop().create_future()
        self.status.permission = True
        tool = params.get("tool", "this")
        view.show_permission(f"allow {tool}? [y]es once / [a]lways / [n]o / [c]ancel turn")
        view.refresh()
        try:
            choice = (await self.answer).strip().lower()
        except asyncio.CancelledError:
            self.note("  → withdrawn by the daemon (the turn ended)")
            raise
        finally:
            self.answer = None
            self.status.permission = False
            view.show_permission(None)
            view.refresh()
        outcome = PERMISSION_KEYS.get(choice) or PERMISSION_WORDS.get(choice) or "cancelled"
        label = {"allow-once": "allowed once", "allow-always": "allowed always", "reject": "rejected"}
        self.note(f"  → {label.get(outcome, 'cancelled (the turn stops, the queue stays)')}")
        return outcome

    @property
    def asking(self) -> bool:
        return self.answer is not None and not self.answer.done()

    def give_answer(self, text: str) -> bool:
        """A line or key for an open permission question; False when none is open."""
        if not self.asking:
            return False
        assert self.answer is not None
        self.answer.set_result(text)
        return True

    # ---- sessions ----------------------------------------------------------------------------------

    async def new_session(self) -> None:
        result = await self.rpc.request("dsh/session/new", {"cwd": self.cwd})
        self.status = Status(session_id=result["sessionId"])
        self.view.refresh()

    async def attach(self, session_id: str) -> None:
        """Show the session's last turns (a transcript page), then follow it live from there: the
        events after the page's `lastSeq` are replayed, so nothing is missed or shown twice."""
        self.status = Status(session_id=session_id)
        self.tool_names.clear()
        page = await self.rpc.request(
            "dsh/session/transcript", {"sessionId": session_id, "limit": RESUME_PAGE_TURNS}
        )
        if page.get("hasMore"):
            self.note(f"[earlier turns not shown: `dsh-daemon export {session_id}` has them all]")
        for turn in reversed(page["turns"]):
            self.history_turn(turn)
        self.replaying = True
        try:
            attached = await self.rpc.request(
                "dsh/session/attach", {"sessionId": session_id, "afterSeq": page["lastSeq"]}
            )
        finally:
            self.replaying = False
        self.status.state = attached.get("status", "idle")
        (self.idle.set if self.status.state == "idle" else self.idle.clear)()
        self.status.reset_inbox(attached["inbox"])
        self.view.refresh()
        if attached.get("readOnly"):
            holder = attached.get("holder") or {}
            self.error(f"[read-only: another daemon (pid {holder.get('pid', '?')}) drives this session]")
        waiting = self.status.queued + self.status.context
        if waiting:
            self.view.print(
                self.paint(YELLOW, f"[{waiting} queued item(s) parked — /wake runs them, /queue lists them]")
            )

    # ---- sending -----------------------------------------------------------------------------------

    async def send(self, method: str, text: str) -> None:
        busy = self.status.state == "running"
        parked = self.status.queued if not busy and method == "dsh/followup" else 0
        params: dict[str, Any] = {"sessionId": self.session_id, "message": {"content": text}}
        if method in ("dsh/followup", "dsh/steer") and self.attachments:
            # The context is read now and queued with this prompt as one item (protocol.md §4).
            params["context"] = [attachment["params"] for attachment in self.attachments]
        await self.rpc.request(method, params)
        if "context" in params:
            self.attachments.clear()
        if method == "dsh/followup" and busy:
            self.note(f"[queued] {clip(text, 80)}")
        elif parked:
            self.note(f"[queued behind {parked} parked prompt(s), which run first] {clip(text, 80)}")
        elif method == "dsh/steer":
            self.note(f"[steer] {clip(text, 80)}")
        elif method == "dsh/inject":
            self.note(f"[injected, for the next request] {clip(text, 80)}")


def _short_uri(uri: str) -> str:
    if uri.startswith("file://"):
        from urllib.parse import unquote, urlparse

        path = Path(unquote(urlparse(uri).path))
        try:
            return str(path.relative_to(Path.cwd()))
        except ValueError:
            return str(path)
    return uri
