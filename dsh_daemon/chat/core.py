"""The chat's model of one session: daemon events in, lines for a view out; permission answers.

A view (plain text for pipes, or the prompt_toolkit terminal UI) decides how things look; this module
decides what is said. The reducer is `Chat.on_notification(method, params)`: every `dsh/event` goes
through it, live (`live_event`) or replayed on attach (`history_event`); a transcript page is drawn by
`history_turn`. What it keeps besides the screen: the status (`Status`: state, numbered queue, tokens,
context), the tool cards (`/show N`), the code blocks (`/copy N`) and the open permission question."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

from dsh_daemon.chat import plan as plans
from dsh_daemon.chat import processes, review, subagents, turndiff
from dsh_daemon.chat import rewind as rewinding
from dsh_daemon.chat import sandbox as sandboxes
from dsh_daemon.chat.cards import CardBook
from dsh_daemon.chat.permission import CANCELLED, SAID, Question, is_plan, wire_answer
from dsh_daemon.chat.queue import QueueItem
from dsh_daemon.chat.render import (
    CYAN,
    DIM,
    RED,
    YELLOW,
    CodeBlock,
    clip,
    code_blocks,
    diff_lines,
    message_reasoning,
    message_text,
    paint,
    sanitize,
    word_wrap,
)
from dsh_daemon.chat.rpc import RpcPipe
from dsh_daemon.chat.status import Status, count, next_mode
from dsh_daemon.model import events as ev
from dsh_daemon.model.codec import structure
from dsh_daemon.model.events import Event
from dsh_daemon.model.jsonvalue import freeze_json
from dsh_daemon.model.payloads import PlanUpdated
from dsh_daemon.model.plan import PLAN_EVENTS, PlanTracker
from dsh_daemon.model.review import REVIEW_EVENTS, ReviewTracker
from dsh_daemon.model.usage import UsageTotals

RESUME_PAGE_TURNS = 10  # turns shown when a session is resumed (the rest: `dsh-daemon export`)


class View(Protocol):
    color: bool
    interactive: bool  # a person at a terminal (pickers, menus, keys)

    @property
    def width(self) -> int: ...  # columns of the terminal
    def print(self, text: str) -> None: ...  # whole lines into the scrollback (ANSI allowed)
    def stream(self, kind: str, text: str) -> None: ...  # a streamed delta: reasoning | text | tool
    def message_done(
        self, reasoning: str, text: str, *, streamed: bool, interrupted: bool, final: bool, first_block: int
    ) -> None: ...  # `final`: this turn's answer (piped: stdout); code blocks numbered from first_block
    def discard_stream(self) -> None: ...  # a retried request: what streamed so far is void
    def flush_stream(self) -> None: ...  # whatever is still live goes to the scrollback
    def refresh(self) -> None: ...  # the status line may have changed
    def show_permission(self, question: Question | None) -> None: ...  # None: the question is gone
    async def pick(
        self, title: str, options: list[str], preview: Callable[[int], Awaitable[str]] | None = None
    ) -> int | None: ...
    def copy(self, text: str) -> str: ...  # onto the clipboard; says how
    def load_input(self, text: str, editing: int | None) -> bool: ...  # False: no input line to load


class Chat:
    def __init__(
        self,
        rpc: RpcPipe,
        view: View,
        *,
        cwd: str,
        auto_allow: bool,
        allow_tools: frozenset[str] = frozenset(),
        answers: bool = True,
        worktree: dict[str, Any] | None = None,
    ) -> None:
        self.rpc = rpc
        self.view = view
        self.cwd = cwd
        self.auto_allow = auto_allow  # --yes
        self.allow_tools = allow_tools  # --allow TOOL
        self.answers = answers  # someone can answer questions (False: stdin is not a terminal)
        self.worktree = worktree  # --worktree: the new session gets a git worktree of its own
        self.status = Status()
        self.idle = asyncio.Event()
        self.idle.set()
        self.closed = asyncio.Event()  # the daemon is gone
        self.leaving = False  # we are shutting it down
        self.question: Question | None = None
        self.replaying = False
        self.status_during_attach: str | None = None  # a live agent/status seen while attaching
        self._creating = False  # a `dsh/session/new` is on its way
        self._early: list[dict[str, Any]] = []  # the events that came before its reply
        self.shown_seq = -1  # events up to this seq are already drawn (a transcript page)
        self.clearing = False
        self.failed = False  # a turn ended in error or a question had no answer (exit status)
        # The last `agent/error` shown: the turn that it ends repeats it in `turn/end`, and a person
        # should read one line per failure, not two.
        self.error_shown: tuple[Any, Any] | None = None
        self.cards = CardBook()
        self.plan = PlanTracker()  # the agent's plan (model/plan.py), from every event seen
        self.reviews = ReviewTracker()  # the open review findings (model/review.py), likewise
        self.turn_diff: dict[str, Any] | None = None  # the latest live `turn/diff`
        self.blocks: list[CodeBlock] = []  # every code block shown, for /copy N
        self.attachments: list[dict[str, Any]] = []  # travel with the next prompt
        self.uri_labels: dict[str, str] = {}  # what to call an attachment's uri when it is entered
        self.session_list: list[dict[str, Any]] = []  # the last /sessions listing
        self.settings: dict[str, Any] = {}  # what /model changed (sent whole each time)
        self.capabilities: dict[str, Any] = {}  # the daemon's experimental.dsh flags
        # The session's custom slash commands ("/NAME" -> dsh/commands/list's entry), flag customCommands
        self.custom_commands: dict[str, dict[str, Any]] = {}
        self._permission_lock = asyncio.Lock()
        self._feedback = ""  # the words a plan was sent back with (the question being answered)
        self._session_lock = asyncio.Lock()
        self._shell_docs = 0
        self.shell: asyncio.Future[Any] | None = None  # a `!cmd` running (Esc / Ctrl-C stops it)

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
        if method == "window/showMessage" and isinstance(params, dict):
            # /model's settings go through workspace/didChangeConfiguration; a refusal comes back here.
            text = f"[daemon: {params.get('message', '')}]"
            self.error(text) if params.get("type") == 1 else self.note(text)
            return
        if method != "dsh/event" or not isinstance(params, dict):
            return
        if not self.session_id and self._creating:
            # `dsh/session/new`'s first events (a project's hooks waiting, the sandbox's status) may
            # be read before its reply is: kept, and shown once the reply names the session.
            self._early.append(params)
            return
        if not self.session_id or params.get("sessionId") != self.session_id:
            return
        kind, data = params["type"], params["data"]
        seq = params.get("seq")
        if kind in PLAN_EVENTS:
            self.plan_event(kind, data, seq)
        if kind in REVIEW_EVENTS:  # every one counts, those a transcript page drew too
            self.reviews.feed(Event(kind, freeze_json(data), seq if isinstance(seq, int) else None))
        if self.replaying and seq is not None and seq <= self.shown_seq:
            # Already on screen from the transcript page (and its usage already counted): only what the
            # page does not carry is taken from it (the context gauge, the model).
            if kind in ("context/usage", "context/compacted", "request/header"):
                self.status.on_event(kind, data)
            return
        if self.replaying and kind == "agent/status" and seq is None:
            self.status_during_attach = str(data["status"])
        if self.status.on_event(kind, data):
            if kind == "agent/status":
                (self.idle.set if data["status"] == "idle" else self.idle.clear)()
            self.view.refresh()
        if self.replaying:
            self.history_event(kind, data)
        else:
            self.live_event(kind, data)

    def plan_event(self, kind: str, data: Any, seq: Any) -> None:
        """Every plan event counts (those a transcript page already drew too); an update not on the
        screen yet gets its line in the scrollback."""
        if not self.plan.feed(Event(kind, freeze_json(data), seq if isinstance(seq, int) else None)):
            return
        if kind == ev.PLAN_UPDATED and not (isinstance(seq, int) and seq <= self.shown_seq):
            self.view.print(
                self.paint(DIM, "  " + sanitize(plans.summary_line(self.plan.current, self.view.width)))
            )
        self.view.refresh()

    def history_event(self, kind: str, data: Any) -> None:
        if kind == "user/message":
            self.user_message(data)
        elif kind == "assistant/message":
            self.assistant_message(data, streamed=False, live=False)
        elif kind in ("tool/call", "tool/result", "context/compacted", "rewind/files", "conversation/cut"):
            self.live_event(kind, data)
        elif kind in (
            ev.REVIEW_FINDING,
            ev.REVIEW_COMPLETED,
            ev.REVIEW_DISMISSED,
            ev.SUBAGENT_STARTED,
            ev.SUBAGENT_FINISHED,
            ev.PROCESS_STARTED,
            ev.PROCESS_EXITED,
        ):
            self.live_event(kind, data)
        elif kind == "turn/end" and data["reason"]["kind"] in ("error", "aborted", "interrupted", "budget"):
            self.view.print(self.paint(DIM, f"[turn {data['turn']} ended: {data['reason']['kind']}]"))

    def history_turn(self, turn: dict[str, Any]) -> None:
        """One turn of a transcript page, drawn as the live events would have drawn it."""
        for item in turn.get("items", ()):
            kind = item.get("type")
            if kind == "message":
                source = item.get("source") or {}
                if source.get("kind") == "user":
                    shown = typed_text(source, str(item.get("text", "")))
                    self.view.print(self.paint(CYAN, "› ") + sanitize(shown))
                elif source.get("kind") == "editor":
                    self.note(f"  📎 {self.context_label(source)}")
                elif source.get("kind") == "hook":
                    self.hook_note(source, item.get("text", ""))
            elif kind == "assistant":
                self.show_message(
                    item.get("reasoning") or "",
                    item.get("text") or "",
                    streamed=False,
                    interrupted=bool(item.get("interrupted")),
                    final=False,
                )
            elif kind == "event" and item.get("event") in PAGE_LINES:
                self.live_event(str(item["event"]), item.get("data") or {})
            elif kind == "tool":
                self.tool_call(item["callId"], item["name"], item.get("arguments", ""))
                result = item.get("result")
                if result is not None:
                    self.tool_result(
                        item["callId"],
                        item["name"],
                        result.get("output", ""),
                        error=bool(result.get("isError")),
                        meta=result.get("meta"),
                        truncated=bool(result.get("truncated")),
                    )
        end = turn.get("end") or {}
        if end.get("kind") in ("error", "aborted", "interrupted", "budget"):
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
            self.assistant_message(data, streamed=True, live=True)
        elif kind == "tool/call":
            self.tool_call(data["callId"], data["name"], data["arguments"])
        elif kind == "tool/output":
            view.stream("tool", data["text"])
        elif kind == "tool/result":
            view.flush_stream()
            message = data["message"]
            blocks = message["content"][0].get("content", []) if message["content"] else []
            self.tool_result(
                message["source"]["callId"],
                data.get("name") or "tool",
                "".join(b.get("text", "") for b in blocks),
                error=bool(data.get("error")),
                meta=data.get("meta"),
            )
        elif kind == "context/compacted":
            before, after = data.get("tokensBefore"), data.get("tokensAfter")
            sizes = f": about {count(before)} → {count(after)} tokens" if before and after else ""
            self.note(f"[context compacted ({data.get('reason', '')}){sizes}]")
        elif kind in ("rewind/files", "conversation/cut"):
            rewinding.show_event(self, kind, data)
        elif kind in (ev.PROCESS_STARTED, ev.PROCESS_EXITED):
            self.note(processes.event_line(kind, data))
        elif kind == ev.REVIEW_FINDING:
            view.flush_stream()
            for line in review.finding_lines(data):
                view.print(line)
        elif kind == ev.REVIEW_COMPLETED:
            self.note(f"[review done: {data.get('findings', 0)} finding(s)]")
        elif kind == ev.REVIEW_DISMISSED:
            self.note(review.dismissed_line(self.reviews.finding(str(data.get("findingId", "")))))
        elif kind == ev.SUBAGENT_STARTED:
            view.flush_stream()
            self.note(subagents.started_line(data))
        elif kind == ev.SUBAGENT_EVENT:
            for line in subagents.child_event_lines(data, view.width):
                view.flush_stream()
                self.note(line)
        elif kind == ev.SUBAGENT_FINISHED:
            view.flush_stream()
            for line in subagents.finished_lines(data, view.width):
                self.note(line)
        elif kind == "llm/retry":
            view.discard_stream()
            self.note(f"[retry {data['retry']} in {data['delayMs']} ms: {data['error']['code']}]")
        elif kind == "agent/error":
            error = data.get("error") or {}
            self.error_shown = (error.get("code"), error.get("message"))
            self.error(f"[{error.get('code', 'error')}: {error.get('message', '')}]{what_to_do(error)}")
        elif kind == "turn/end":
            view.flush_stream()
            self.turn_end(data["reason"])
        elif kind == ev.TURN_DIFF:
            turndiff.show_event(self, data)
        elif kind == "hook/failed":
            self.note(f"[the {data['event']} hook {data['hook']} failed: {data['reason']}; it was ignored]")
        elif kind == "hooks/untrusted":
            what = "changed since you trusted them" if data.get("changed") else "not trusted yet"
            self.note(
                f"[the project's hooks in {data['path']} do not run: {what}; /trust runs them from now on]"
            )

    def tool_call(self, call_id: str, name: str, arguments: Any) -> None:
        card = self.cards.call(call_id, name, arguments)
        self.view.print(self.paint(CYAN, f"  ⚙ {card.summary}"))

    def tool_result(
        self, call_id: str, name: str, output: str, *, error: bool, meta: Any, truncated: bool = False
    ) -> None:
        card = self.cards.result(
            call_id,
            name,
            output,
            error=error,
            meta=meta if isinstance(meta, dict) else None,
            truncated=truncated,
        )
        mark = self.paint(RED, "  ✗") if card.failed else "  ✓"
        more = card.diff is not None or (card.output or "").strip().count("\n") > 0 or card.failed
        hint = self.paint(DIM, f" · /show {card.number}") if more else ""
        self.view.print(f"{mark} {card.result_line()}{hint}")

    def context_label(self, source: dict[str, Any]) -> str:
        uri = str(source.get("uri", ""))
        if uri in self.uri_labels:
            return self.uri_labels[uri]
        return f"{source.get('contextKind', 'context')}: {_short_uri(uri, self.cwd)}"

    def user_message(self, data: dict[str, Any]) -> None:
        source = data.get("source") or {}
        if source.get("kind") == "user":
            shown = typed_text(source, message_text(data["content"]))
            self.view.print(self.paint(CYAN, "› ") + sanitize(shown))
        elif source.get("kind") == "editor":
            self.note(f"  📎 {self.context_label(source)}")
        elif source.get("kind") == "hook":
            self.hook_note(source, message_text(data["content"]))

    def hook_note(self, source: dict[str, Any], text: str) -> None:
        """What one of the person's hooks told the model: its first line, cut short."""
        lines = text.strip().splitlines()
        first = lines[0] if lines else ""
        shown = first if len(first) <= 120 and len(lines) <= 1 else first[:119] + "…"
        self.note(f"  ↪ hook {source.get('hook')} ({source.get('event')}): {sanitize(shown)}")

    def assistant_message(self, data: dict[str, Any], *, streamed: bool, live: bool) -> None:
        content = data["message"]["content"]
        self.show_message(
            message_reasoning(content),
            message_text(content),
            streamed=streamed,
            interrupted=bool(data.get("interrupted")),
            final=live and data.get("finishReason") != "tool-calls",
        )

    def show_message(
        self, reasoning: str, text: str, *, streamed: bool, interrupted: bool, final: bool
    ) -> None:
        blocks = code_blocks(text) if text.strip() else []
        first = len(self.blocks) + 1 if blocks else 0
        self.blocks.extend(blocks)
        self.view.message_done(
            reasoning, text, streamed=streamed, interrupted=interrupted, final=final, first_block=first
        )

    def turn_end(self, reason: dict[str, Any]) -> None:
        kind = reason["kind"]
        shown, self.error_shown = self.error_shown, None
        if kind == "completed":  # the answer says it
            return
        if kind == "error":
            self.failed = True
            error = reason.get("error") or {}
            if shown != (error.get("code"), error.get("message")):
                self.error(f"[error {error.get('code')}: {error.get('message')}]{what_to_do(error)}")
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
        elif kind == "budget":
            self.view.print(self.paint(YELLOW, f"[{budget_said(reason.get('budget') or {})}]"))
        elif kind in ("blocked", "max-tokens", "interrupted"):
            self.note(f"[turn ended: {kind}]")
        else:  # a kind newer than this client
            self.note(f"[turn ended: {kind}]")

    # ---- permissions -------------------------------------------------------------------------------

    async def on_request(self, method: str, params: Any) -> Any:
        if method != "dsh/requestPermission":
            raise RuntimeError(f"unsupported request {method}")
        tool = str(params.get("tool") or "")
        if self.auto_allow or tool in self.allow_tools:
            self.view.flush_stream()
            by = "--yes" if self.auto_allow else f"--allow {tool}"
            self.note(f"  → {clip(str(params.get('title') or tool), 80)}: allowed by {by}")
            return {"outcome": "allow-once"}
        async with self._permission_lock:
            outcome = await self.ask_permission(params)
            return wire_answer(outcome, self._feedback)

    async def ask_permission(self, params: dict[str, Any]) -> str:
        view = self.view
        view.flush_stream()
        title = sanitize(str(params.get("title") or params.get("tool")))
        if is_plan(params):  # the menu asks the question: the plan's own header says what it is
            title = "The model proposes this plan:"
        # Wrapped between words (the terminal would cut a word at its edge), each line under "? ".
        for index, line in enumerate(word_wrap(title, max(view.width - 2, 20))):
            view.print(self.paint(YELLOW, f"{'? ' if index == 0 else '  '}{line}"))
        preview = params.get("preview") or {}
        self._feedback = ""
        if is_plan(params):
            self.show_plan(str(preview.get("plan") or ""))
        elif preview.get("diff"):
            for line in diff_lines(preview["diff"], view.color):
                view.print("  " + line)
        elif preview.get("command"):
            where = self.paint(DIM, f"   (in {sanitize(str(preview.get('cwd', '')))})")
            view.print("  " + self.paint(CYAN, f"$ {sanitize(preview['command'])}") + where)
        else:
            view.print("  " + clip(json.dumps(params.get("arguments"), ensure_ascii=False), 300))
        escalation = sandboxes.escalation_of(params)
        if escalation is not None:  # the reason and the exact widening, before the menu
            for line in sandboxes.escalation_lines(escalation):
                view.print("  " + self.paint(YELLOW, line))
        if not self.answers:
            return self.unanswerable(params)
        loop = asyncio.get_running_loop()
        self.question = question = Question(
            params,
            loop.create_future(),
            loop.time(),
            persist_widening=bool(self.capabilities.get("persistWidening")),
        )
        self.status.permission = True
        view.show_permission(self.question)
        view.refresh()
        try:
            outcome = await self.question.answer
        except asyncio.CancelledError:
            self.note("  → withdrawn by the daemon (the turn ended)")
            raise
        finally:
            self.question = None
            self.status.permission = False
            view.show_permission(None)
            view.refresh()
        if outcome == CANCELLED and not self.answers:
            return self.unanswerable(params)
        self.note(f"  → {SAID.get(outcome, SAID[CANCELLED])}")
        if question.feedback:
            self._feedback = question.feedback
            self.note(f"    with: {clip(sanitize(question.feedback), 200)}")
        return outcome

    def show_plan(self, plan: str) -> None:
        """The proposed plan in full, above the menu, each line wrapped under a bar."""
        view = self.view
        for line in sanitize(plan).splitlines() or [""]:
            for part in word_wrap(line, max(view.width - 4, 20)) or [""]:
                view.print(self.paint(DIM, "  │ ") + part)

    def unanswerable(self, params: dict[str, Any]) -> str:
        """Nobody can answer (piped input, or it ended): `cancelled`, and how to allow it next time."""
        self.failed = True
        tool = str(params.get("tool") or "TOOL")
        self.error(
            f"  → cancelled: no one can answer this question (the input is not a terminal, or it ended);"
            f" allow it with --allow {tool} (or every tool with --yes)"
        )
        return CANCELLED

    @property
    def asking(self) -> bool:
        return self.question is not None and not self.question.answer.done()

    def answer(self, outcome: str) -> bool:
        """Resolve the open question; False when none is open."""
        return self.question is not None and self.question.resolve(outcome)

    def answer_line(self, line: str) -> bool:
        """A whole typed line that answers the open question (the plain view); False when no question is
        open or the line is not an answer (it is then a prompt like any other)."""
        if self.question is None or not self.asking:
            return False
        outcome = self.question.outcome_of_line(line)
        if outcome is None:
            return self.question.revise_with(line)  # a plan's approval: the words to revise it by
        return self.answer(outcome)

    def input_ended(self) -> None:
        """The person's input is gone (stdin at EOF): an open question, and any later one, is answered
        `cancelled` with a line saying how to allow it."""
        self.answers = False
        if self.question is not None:
            self.question.resolve(CANCELLED)

    # ---- sessions ----------------------------------------------------------------------------------

    async def ensure_session(self) -> str:
        """The session, created on the first prompt (a chat left without one keeps no empty session)."""
        async with self._session_lock:
            if not self.session_id:
                self._creating, self._early = True, []
                try:
                    params: dict[str, Any] = {"cwd": self.cwd}
                    if self.worktree is not None:
                        params["worktree"] = self.worktree
                    result = await self.rpc.request("dsh/session/new", params)
                finally:
                    self._creating = False
                self.status.session_id = result["sessionId"]
                early, self._early = self._early, []
                for params in early:
                    self.on_notification("dsh/event", params)
                if self.status.mode != "ask":  # chosen with Shift-Tab before the first prompt
                    await self.rpc.request(
                        "dsh/session/setMode", {"sessionId": self.session_id, "mode": self.status.mode}
                    )
                self.view.refresh()
        return self.session_id

    async def cycle_mode(self) -> None:
        """Shift-Tab: ask → accept edits → plan → ask, on the session as the other clients set it
        (`dsh/session/setMode`: durable, from the next request); before the first prompt, kept
        for the session that prompt creates."""
        mode = next_mode(self.status.mode)
        if self.session_id:
            try:
                await self.rpc.request("dsh/session/setMode", {"sessionId": self.session_id, "mode": mode})
            except Exception as exc:  # read-only, or an older daemon: say so, change nothing
                self.error(f"[mode not changed: {exc}]")
                return
        self.status.mode = mode
        self.view.refresh()

    async def attach(self, session_id: str) -> None:
        """Show the session's last turns (a transcript page), then follow it live from there: the
        events after the page's `lastSeq` are replayed, so nothing is missed or shown twice. The
        newest turn's events are replayed too, without drawing them, for the context gauge."""
        previous = self.session_id
        if previous and previous != session_id:
            # A switcher lets go of the session it leaves (protocol.md §3, detach).
            await self.rpc.request("dsh/session/detach", {"sessionId": previous})
        queue = self.status.queue
        queue.forget()
        # The sandbox's mode and level are the daemon's and the machine's: kept until the attach reply
        # (or a live `sandbox/status`) says this session's.
        self.status = Status(
            session_id=session_id, queue=queue, model=self.status.model, sandbox=self.status.sandbox
        )
        self.plan = PlanTracker()
        self.reviews = ReviewTracker()
        self.turn_diff = None
        page = await self.rpc.request(
            "dsh/session/transcript", {"sessionId": session_id, "limit": RESUME_PAGE_TURNS}
        )
        if page.get("hasMore"):
            self.note(f"[earlier turns not shown: `dsh-daemon export {session_id}` has them all]")
        for turn in reversed(page["turns"]):
            self.history_turn(turn)
        await self.count_usage(session_id)
        self.shown_seq = page["lastSeq"]
        after = page["lastSeq"]
        if page["turns"]:
            after = min(after, int(page["turns"][0]["startSeq"]) - 1)
        self.replaying = True
        self.status_during_attach = None
        try:
            params: dict[str, Any] = {"sessionId": session_id}
            if after >= 0:
                params["afterSeq"] = after
            attached = await self.rpc.request("dsh/session/attach", params)
        finally:
            self.replaying = False
        # A live `agent/status` that came while the attach was answered is newer than the reply's
        # `status` (a forked turn that ends during the attach: the reply said running, the idle
        # came first, and the chat stayed "running" for good).
        self.status.state = self.status_during_attach or attached.get("status", "idle")
        self.status.mode = str(attached.get("mode") or "ask")
        if isinstance(attached.get("sandbox"), dict):
            self.status.sandbox = dict(attached["sandbox"])
        # The plan as the daemon folds the whole log: the replay above starts at the page's first turn.
        self.plan.current = structure(attached["plan"], PlanUpdated) if attached.get("plan") else None
        (self.idle.set if self.status.state == "idle" else self.idle.clear)()
        await self.load_custom_commands(tell=True)
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

    async def load_custom_commands(self, *, tell: bool = False) -> None:
        """The session's custom commands, read again by the daemon (a file may have been added);
        with `tell`, the files it left out are said once."""
        if not self.capabilities.get("customCommands"):
            return
        where = {"sessionId": self.session_id} if self.session_id else {"cwd": self.cwd}
        listed = await self.rpc.request("dsh/commands/list", where)
        self.custom_commands = {f"/{c['name']}": c for c in listed.get("commands") or []}
        if tell:
            for problem in listed.get("problems") or []:
                self.note(f"[custom commands and skills: {problem}]")

    async def count_usage(self, session_id: str) -> None:
        """The session's token and cost totals, summed by the daemon over every turn's `turn/usage`
        (`dsh/session/usage`), whichever turns a page shows."""
        answer = await self.rpc.request("dsh/session/usage", {"sessionId": session_id})
        self.status.usage = UsageTotals.from_json(answer)
        subagents = answer.get("subagents")
        self.status.subagent_usage = (
            (int(subagents.get("sessions") or 0), UsageTotals.from_json(subagents))
            if isinstance(subagents, dict)
            else None
        )

    # ---- sending -----------------------------------------------------------------------------------

    async def send(self, method: str, text: str, extra: list[dict[str, Any]] | None = None) -> str | None:
        """Send a prompt (followup / steer / inject) with the pending attachments and `extra` ones (the
        `@path` mentions in it); the new message's id."""
        session_id = await self.ensure_session()
        busy = self.status.state == "running"
        parked = self.status.queued if not busy and method == "dsh/followup" else 0
        params: dict[str, Any] = {"sessionId": session_id, "message": {"content": text}}
        attachments = [*self.attachments, *(extra or [])]
        if method in ("dsh/followup", "dsh/steer") and attachments:
            # The context is read now and queued with this prompt as one item (protocol.md §4).
            params["context"] = [attachment["params"] for attachment in attachments]
            self.open_documents(attachments)
        try:
            result = await self.rpc.request(method, params)
        finally:
            self.close_documents(attachments if "context" in params else [])
        if "context" in params:
            self.attachments.clear()
        message_id = str((result or {}).get("messageId", ""))
        item = self.status.queue.items.get(message_id)
        number = f" {item.label}" if item is not None and item.state == "pending" else ""
        if method == "dsh/followup" and busy:
            self.note(f"[queued{number}] {clip(text, 80)}")
        elif parked:
            self.note(f"[queued{number} behind {parked} parked prompt(s), which run first] {clip(text, 80)}")
        elif method == "dsh/steer":
            self.note(f"[steer] {clip(text, 80)}")
        elif method == "dsh/inject":
            self.note(f"[injected, for the next request] {clip(text, 80)}")
        return message_id

    def open_documents(self, attachments: list[dict[str, Any]]) -> None:
        """Attachments with their own text (a `!cmd`'s output) are documents this client opens for the
        daemon, like an editor's unsaved buffer, so they are read as editor context."""
        for attachment in attachments:
            document = attachment.get("document")
            if document is not None:
                self.rpc.notify("textDocument/didOpen", {"textDocument": document})

    def close_documents(self, attachments: list[dict[str, Any]]) -> None:
        for attachment in attachments:
            document = attachment.get("document")
            if document is not None:
                self.rpc.notify("textDocument/didClose", {"textDocument": {"uri": document["uri"]}})

    def attach_text(self, label: str, text: str) -> None:
        """Attach `text` (a shell command's output) to the next prompt, as an editor document."""
        self._shell_docs += 1
        uri = f"untitled:dsh-chat-shell-{self._shell_docs}-{uuid.uuid4().hex[:8]}.txt"
        self.uri_labels[uri] = label
        self.attachments.append(
            {
                "params": {"uri": uri, "kind": "file"},
                "label": label,
                "document": {"uri": uri, "languageId": "text", "version": 1, "text": text},
            }
        )

    async def reword(self, item: QueueItem, text: str) -> None:
        """Replace queued `item`'s text; it keeps its number (the new id is reserved for it)."""
        new_id = uuid.uuid4().hex
        self.status.queue.reserve(new_id, item)
        params = {
            "sessionId": self.session_id,
            "messageId": item.id,
            "message": {"id": new_id, "content": text},
        }
        await self.rpc.request("dsh/inbox/replace", params)

    async def configure(self, settings: dict[str, Any]) -> None:
        """Change the daemon's settings the way an editor does (`workspace/didChangeConfiguration`)."""
        for key, value in settings.items():
            if isinstance(value, dict) and isinstance(self.settings.get(key), dict):
                self.settings[key] = {**self.settings[key], **value}
            else:
                self.settings[key] = value
        self.rpc.notify("workspace/didChangeConfiguration", {"settings": {"dsh": self.settings}})


def _short_uri(uri: str, cwd: str) -> str:
    if uri.startswith("file://"):
        path = Path(unquote(urlparse(uri).path))
        try:
            return str(path.relative_to(cwd))
        except ValueError:
            return str(path)
    return uri


# What a person can do about a failure the provider reported, by its typed code (model/provider.py).
WHAT_TO_DO = {
    "AUTH": "set DEEPSEEK_API_KEY (or provider.apiKey in config.json), then send again",
    "CONFIG": "`dsh-daemon config` shows the configuration and where each value comes from",
    "QUOTA": "the account's balance is used up: top it up, then send again",
    "TRANSPORT": "check the network or provider.baseUrl (`dsh-daemon config`), then send again",
    "CONTEXT_WINDOW_EXCEEDED": "/compact shortens the conversation, then send again",
}


BUDGET_NAMES = {"costUsd": "cost (USD)", "tokens": "tokens", "steps": "model requests"}


def budget_said(budget: dict[str, Any]) -> str:
    """A `budget` turn end explained: which cap, what the turn used of it, what to do."""
    limit, used, cap = str(budget.get("limit", "?")), budget.get("used"), budget.get("cap")
    used_shown = "an unknown amount (the model has no price)" if used is None else f"{used:g}"
    cap_shown = f"{cap:g}" if isinstance(cap, int | float) else "?"
    return (
        f"turn stopped by its budget before the next model request: {BUDGET_NAMES.get(limit, limit)}"
        f" used {used_shown} of {cap_shown}; send a prompt to go on, or raise agent.budget.{limit}"
    )


def what_to_do(error: dict[str, Any]) -> str:
    advice = WHAT_TO_DO.get(str(error.get("code")))
    return f" — {advice}" if advice else ""


# The `event` items of a transcript page this chat draws, as it draws the live events.
PAGE_LINES = frozenset({ev.PROCESS_STARTED, ev.PROCESS_EXITED, ev.SUBAGENT_STARTED, ev.SUBAGENT_FINISHED})


def typed_text(source: dict[str, Any], text: str) -> str:
    """A person's message as they typed it: `/NAME arguments` for a custom command the daemon
    expanded (its source records the command, protocol.md §18), else its text."""
    if isinstance(source.get("review"), dict):  # a review's message holds the diff: show the command
        return review.typed(source["review"])
    approved = source.get("approvedPlan")
    if isinstance(approved, dict):  # the plan the person approved, not something they typed
        shown = "accept edits" if approved.get("mode") == "accept-edits" else "ask"
        return f"[approved plan · {shown}] " + " ".join(text.split())
    command = source.get("command")
    if isinstance(command, dict) and isinstance(command.get("name"), str):
        arguments = command.get("arguments") or ""
        return f"/{command['name']} {arguments}".rstrip()
    return text
