"""dsh events as ACP `session/update`s.

Live: `assistant/delta` -> `agent_message_chunk` / `agent_thought_chunk`; `tool/call` -> `tool_call`
(or an update of the one a permission request announced); `tool/output` -> `tool_call_update` with
the end of the command's output (bounded: see `_on_tool_output`), or nothing when the command runs
in the client's terminal (then the call's content is that terminal, kept to the end);
`tool/result` -> `tool_call_update` (completed / failed, an edit's diff); `turn/usage` ->
`usage_update`; a new title -> `session_info_update`; a change of the agent's plan (`plan/updated`, or a
`conversation/cut` that takes one back) -> `plan` with the whole plan, live and on replay. A
subagent's `run_subagent` call shows the child's tool calls as lines of its content
(`subagent/started`, live `subagent/event`), then its summary; a background process is a card of
its own (`process/started` … `process/exited`), live and on replay.
Replay (`session/load`): the durable log only, with whole messages instead of deltas: user and editor
messages as `user_message_chunk` (editor context as `resource` blocks), assistant text and reasoning,
tool calls and their results.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dsh_daemon.acp.context import resource_block
from dsh_daemon.model import events as ev
from dsh_daemon.model.codec import WireValueError, structure
from dsh_daemon.model.events import Event
from dsh_daemon.model.messages import join_prompt_text
from dsh_daemon.model.payloads import (
    AssistantMessageLogged,
    ContextCompacted,
    HookFailed,
    HooksUntrusted,
    ProcessExited,
    ProcessStarted,
    ReviewFinding,
    SessionModeSet,
    SessionNoticed,
    SessionTitled,
    SubagentEvent,
    SubagentStarted,
    ToolCalled,
    ToolOutput,
    ToolResulted,
    TurnUsage,
)
from dsh_daemon.model.plan import PLAN_EVENTS, PlanTracker
from dsh_daemon.model.review import typed_review as review_typed
from dsh_daemon.model.usage import UsageTotals

# Live command output: each update shows at most the last LIVE_TAIL_CHARS (after a marker saying how
# much came before), and a call's updates together put at most LIVE_RATIO characters per character
# printed on the wire (plus one tail): an update that would exceed it waits for more output (or the
# result, which shows the output as the model got it). ACP's `content` replaces the previous one, so
# "only the new text" would erase what was shown; a bounded tail is the nearest honest thing.
LIVE_TAIL_CHARS = 8_000
LIVE_RATIO = 2
MAX_RESULT_CHARS = 64_000
TEXT_CHUNKS = {"text": "agent_message_chunk", "reasoning": "agent_thought_chunk"}
KINDS = {
    "read_file": "read",
    "list_dir": "read",
    "find_files": "search",
    "grep": "search",
    "edit_file": "edit",
    "write_file": "edit",
    "run_command": "execute",
    "update_plan": "think",  # it only records the plan: the agent thinking aloud, in ACP's words
    "report_finding": "think",  # it only records a review's finding (protocol.md "Review")
    "process_read": "read",  # a background process's output
    "process_write": "execute",  # input to a running command
    "process_stop": "execute",
    "propose_plan": "switch_mode",  # approving it leaves plan mode (protocol.md §3 "Plan approval")
    "run_subagent": "think",  # its steps are the child's own cards' lines (Translator._on_subagent_event)
}
# No tool of dsh's fetches (ACP's `fetch`); an MCP tool is `other` whatever it does: its server does
# not say.
PROCESS_TITLES = {
    "process_read": "Read the output of process",
    "process_write": "Write to process",
    "process_stop": "Stop process",
}
PLAN_STATUS = {"pending": "pending", "in_progress": "in_progress", "done": "completed"}

MCP_PREFIX = "mcp__"  # an MCP tool's name: mcp__{server}__{tool}
# A subagent's card shows at most this many of its latest steps (a line each), after a count of the rest.
SUBAGENT_LINES = 40
# A background process is a card of its own (its id never names a call: `p1`, `p2`, … per session).
PROCESS_CALL_PREFIX = "process-"

Send = Callable[[dict[str, Any]], None]


def iso_time(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class ToolDescription:
    """How a call is shown: a title, an ACP tool kind and the files it touches."""

    title: str
    kind: str
    locations: tuple[dict[str, Any], ...] = ()


def _absolute(path: str, cwd: str | None) -> str:
    return os.path.normpath(path if os.path.isabs(path) or cwd is None else os.path.join(cwd, path))


def describe_tool(name: str, args: Mapping[str, Any] | None, cwd: str | None) -> ToolDescription:
    args = args or {}
    kind = KINDS.get(name, "other")
    path = args.get("path") if isinstance(args.get("path"), str) else None
    where = _absolute(path, cwd) if path else None
    locations: tuple[dict[str, Any], ...] = ()
    if where is not None:
        location: dict[str, Any] = {"path": where}
        offset = args.get("offset")
        if name == "read_file" and isinstance(offset, int) and not isinstance(offset, bool) and offset > 0:
            location["line"] = offset
        start = args.get("startLine")
        if name == "report_finding" and isinstance(start, int) and not isinstance(start, bool) and start > 0:
            location["line"] = start
        locations = (location,)
    elif name in ("find_files", "grep", "list_dir") and cwd is not None:
        locations = ({"path": cwd},)
    shown_path = path or "."
    if name == "read_file":
        title = f"Read {shown_path}"
    elif name == "list_dir":
        title = f"List {shown_path}"
    elif name == "find_files":
        title = f"Find {args.get('pattern', '')} in {shown_path}"
    elif name == "grep":
        title = f"Search {args.get('pattern', '')!s} in {shown_path}"
    elif name == "edit_file":
        title = f"Edit {shown_path}"
    elif name == "write_file":
        title = f"Write {shown_path}"
    elif name == "run_command":
        started = "Run in the background" if args.get("background") is True else "Run"
        title = f"{started}: {args.get('command', '')}"
    elif name in PROCESS_TITLES:
        title = f"{PROCESS_TITLES[name]} {args.get('process_id', '?')}"
    elif name == "update_plan":
        title = "Update the plan"
    elif name == "propose_plan":
        title = "Approve the plan?"
    elif name == "run_subagent":
        title = f"Subagent “{args.get('description', '')}”"
    elif name == "report_finding":
        where = f"{shown_path}:{args.get('startLine', '?')}"
        title = f"{args.get('severity', 'finding')}: {args.get('title', '')} ({where})"
    elif name.startswith(MCP_PREFIX) and "__" in name[len(MCP_PREFIX) :]:
        server, tool = name[len(MCP_PREFIX) :].split("__", 1)
        title = f"{server}: {tool}"  # `mcp__everything__echo` -> "everything: echo"
    else:
        title = name
    return ToolDescription(title[:300], kind, locations)


def diff_texts(unified: str) -> tuple[str | None, str]:
    """(old, new) text of a unified diff's hunks (the changed regions with their context); old is None
    when the diff creates the file."""
    old: list[str] = []
    new: list[str] = []
    created = False
    for line in unified.splitlines(keepends=True):
        if line.startswith("--- "):
            created = line.strip() == "--- /dev/null"
        elif line.startswith(("+++ ", "@@", "\\")):
            if line.startswith("@@") and (old or new):
                old.append("…\n")
                new.append("…\n")
        elif line.startswith("-"):
            old.append(line[1:])
        elif line.startswith("+"):
            new.append(line[1:])
        elif line.startswith(" "):
            old.append(line[1:])
            new.append(line[1:])
    return (None if created else "".join(old)), "".join(new)


def diff_content(path: str, unified: str) -> dict[str, Any]:
    old, new = diff_texts(unified)
    out: dict[str, Any] = {"type": "diff", "path": path, "newText": new}
    if old is not None:
        out["oldText"] = old
    return out


def text_content(text: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": text}}


def _text_of(blocks: Any) -> str:
    parts = []
    for block in blocks or ():
        if isinstance(block, Mapping):
            if block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif block.get("type") == "tool-result":
                parts.append(_text_of(block.get("content")))
    return "".join(parts)


def _parse_args(arguments: Any) -> Mapping[str, Any] | None:
    if isinstance(arguments, Mapping):
        return arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return None
        return value if isinstance(value, dict) else None
    return None


@dataclass
class _Call:
    description: ToolDescription
    output: str = ""  # the end of the live output (at most LIVE_TAIL_CHARS)
    printed: int = 0  # characters of live output received
    sent: int = 0  # characters of live output put on the wire
    terminal_id: str | None = None  # runs in the client's terminal


@dataclass
class _Subagent:
    """A running child's card: its `run_subagent` call's content, a line per step of the child."""

    heading: str
    lines: list[str] = field(default_factory=list)
    hidden: int = 0  # earlier lines no longer shown

    def add(self, line: str) -> None:
        self.lines.append(line)
        if len(self.lines) > SUBAGENT_LINES:
            del self.lines[0]
            self.hidden += 1

    def text(self) -> str:
        earlier = [f"(… {self.hidden} earlier steps)"] if self.hidden else []
        return "\n".join([self.heading, *earlier, *self.lines]) + "\n"


def process_call_id(process_id: str) -> str:
    return f"{PROCESS_CALL_PREFIX}{process_id}"


def process_ending(exited: ProcessExited) -> tuple[str, str]:
    """(ACP status, words) for how a background process ended."""
    stopper = {
        "agent": "stopped by the agent",
        "person": "stopped by you",
        "cancel": "stopped by a cancel",
        "session-close": "stopped as the session closed here",
        "shutdown": "stopped as dsh-daemon shut down",
        "daemon-stopped": "ended with the dsh-daemon that ran it",
    }
    if exited.stopped_by is not None:
        return "completed", stopper.get(exited.stopped_by, f"stopped ({exited.stopped_by})")
    if exited.exit_code is not None:
        return ("completed" if exited.exit_code == 0 else "failed"), f"exited with code {exited.exit_code}"
    if exited.signal is not None:
        return "failed", f"ended by signal {exited.signal}"
    return "completed", "ended"


def terminal_content(terminal_id: str) -> dict[str, Any]:
    return {"type": "terminal", "terminalId": terminal_id}


def earlier_marker(hidden: int) -> str:
    return f"[… {hidden:,} earlier characters not shown here; the result keeps the beginning and end]\n"


@dataclass
class Translator:
    """One session's translation state (which tool calls were announced, their output so far, the
    title last shown, the session's cost so far)."""

    send: Send
    # Live deltas and command output: may be merged while the client is behind (acp/transport.py)
    send_live: Send | None = None
    cwd: str | None = None
    context_window: int | None = None
    title: Callable[[], str | None] = lambda: None
    # The session's config options (with the given mode, or its mode now): a live mode or model
    # settings change is also a `config_option_update`, so a client's pickers follow it.
    config_options: Callable[[str | None], list[dict[str, Any]]] | None = None
    # Whether this connection sent the message with this id (its client already shows it).
    sent_here: Callable[[str], bool] = lambda _message_id: True
    _calls: dict[str, _Call] = field(default_factory=dict)
    _shown_title: str | None = None
    _time: int | None = None  # the time of the latest stored event seen (the session's updatedAt)
    _shown_time: int | None = None
    # The turns of the subagents it started, summed apart (`dsh/session/usage`'s `subagents`): seeded
    # from the store for a session that has some, then each child's live `turn/usage`. `cost` adds them,
    # so the editor's figure is what the whole task cost.
    subagent_usage: UsageTotals = field(default_factory=UsageTotals)
    _usage: UsageTotals = field(default_factory=UsageTotals)  # the session's turns so far (`cost`: their sum)
    _used: int = 0
    _plan: PlanTracker = field(default_factory=PlanTracker)
    _findings: dict[str, ReviewFinding] = field(default_factory=dict)  # by callId, until its result
    _subagents: dict[str, _Subagent] = field(default_factory=dict)  # by run_subagent callId, live

    # ---- tool calls ----------------------------------------------------------------------------------

    def describe(self, call_id: str, name: str, arguments: Any) -> ToolDescription:
        call = self._calls.get(call_id)
        if call is None:
            call = _Call(describe_tool(name, _parse_args(arguments), self.cwd))
            self._calls[call_id] = call
        return call.description

    def tool_call_update(self, call_id: str, **fields: Any) -> dict[str, Any]:
        return {"sessionUpdate": "tool_call_update", "toolCallId": call_id, **fields}

    def announce(
        self,
        call_id: str,
        name: str,
        arguments: Any,
        *,
        status: str,
        content: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The `tool_call` that first shows a call (also used by the permission request)."""
        description = self.describe(call_id, name, arguments)
        update: dict[str, Any] = {
            "sessionUpdate": "tool_call",
            "toolCallId": call_id,
            "title": description.title,
            "kind": description.kind,
            "status": status,
            "locations": list(description.locations),
            "rawInput": _parse_args(arguments) or {"arguments": arguments},
        }
        if content is not None:
            update["content"] = content
        return update

    def _on_tool_call(self, call: ToolCalled, replay: bool) -> None:
        known = call.call_id in self._calls
        if known and not replay:
            if not call.synthetic:  # a synthetic call never runs: its result follows at once
                self.send(self.tool_call_update(call.call_id, status="in_progress"))
        else:
            status = "pending" if call.synthetic else "in_progress"
            self.send(self.announce(call.call_id, call.name, call.arguments, status=status))

    def terminal_started(self, call_id: str, terminal_id: str) -> None:
        """The call's command runs in the client's terminal: its content is that terminal from now on."""
        call = self._calls.get(call_id)
        if call is not None:
            call.terminal_id = terminal_id
        content = [terminal_content(terminal_id)]
        self.send(self.tool_call_update(call_id, status="in_progress", content=content))

    def terminal_abandoned(self, call_id: str) -> None:
        """The command did not run in that terminal after all: the call shows its output as text again."""
        call = self._calls.get(call_id)
        if call is not None:
            call.terminal_id = None
        note = text_content("(the editor's terminal could not run it: it runs in dsh-daemon instead)\n")
        self.send(self.tool_call_update(call_id, status="in_progress", content=[note]))

    def _on_tool_output(self, output: ToolOutput) -> None:
        call = self._calls.get(output.call_id)
        if call is None or call.terminal_id is not None:
            return  # a terminal shows its own output
        call.printed += len(output.text)
        call.output = (call.output + output.text)[-LIVE_TAIL_CHARS:]
        hidden = call.printed - len(call.output)
        shown = earlier_marker(hidden) + call.output if hidden else call.output
        # Invariant: the wire cost of a call's live output stays proportional to the output.
        if call.sent + len(shown) > LIVE_RATIO * call.printed + LIVE_TAIL_CHARS:
            return
        call.sent += len(shown)
        update = self.tool_call_update(output.call_id, status="in_progress", content=[text_content(shown)])
        (self.send_live or self.send)(update)

    def _on_tool_result(self, result: ToolResulted) -> None:
        call_id = result.call_id
        self._subagents.pop(call_id, None)  # its result is the child's summary
        if call_id not in self._calls:
            self.send(self.announce(call_id, result.name, None, status="in_progress"))
        text = _text_of(result.message.get("content"))
        if len(text) > MAX_RESULT_CHARS:
            text = text[:MAX_RESULT_CHARS] + "\n[truncated]"
        error, meta = result.error, result.meta
        content: list[dict[str, Any]] = []
        call = self._calls.get(call_id)
        if call is not None and call.terminal_id is not None:
            # The terminal stays embedded (the client keeps showing a released one); a failure's own
            # words (timed out, cancelled) follow it.
            content.append(terminal_content(call.terminal_id))
            if error is not None:
                content.append(text_content(text.rstrip("\n").rsplit("\n", 1)[-1]))
            self._finish_call(call_id, error, content, meta)
            return
        if meta is not None and isinstance(meta.get("diff"), str) and error is None:
            content.append(diff_content(str(meta.get("path", "")), meta["diff"]))
        finding = self._findings.pop(call_id, None)
        if finding is not None and error is None:
            content += self._finding_content(finding)
        content.append(text_content(text))
        shown = meta.get("mcpContent") if meta is not None else None
        if isinstance(shown, list | tuple):
            # An MCP tool's images, resource links and embedded resources (MCP's blocks are ACP's).
            content += [
                {"type": "content", "content": block} for block in shown if isinstance(block, Mapping)
            ]
        self._finish_call(call_id, error, content, meta)

    def _finding_content(self, finding: ReviewFinding) -> list[dict[str, Any]]:
        """A review finding as its call's content: what and why, and the suggested fix as a diff."""
        where = f"{finding.path}:{finding.start_line}"
        if finding.end_line != finding.start_line:
            where += f"-{finding.end_line}"
        out = [text_content(f"{finding.severity} {where}: {finding.title}\n\n{finding.body}\n\n")]
        if finding.suggested_patch:
            out.append(diff_content(_absolute(finding.path, self.cwd), finding.suggested_patch))
        return out

    def _on_review_finding(self, event: Event) -> None:
        """Kept for its call's result (it comes between the call and the result), which shows it with
        the finding's location (`locations`: the file and its first line) and content."""
        try:
            finding = ReviewFinding.of(event)
        except WireValueError:
            return
        if finding.call_id is not None:
            self._findings[finding.call_id] = finding
            location = {"path": _absolute(finding.path, self.cwd), "line": finding.start_line}
            self.send(self.tool_call_update(finding.call_id, locations=[location]))

    def _finish_call(
        self, call_id: str, error: Any, content: list[dict[str, Any]], meta: Mapping[str, Any] | None
    ) -> None:
        fields: dict[str, Any] = {"status": "failed" if error else "completed", "content": content}
        if error is not None:
            fields["rawOutput"] = {"error": {"name": error.name, "code": error.code}}
        elif meta is not None and "exitCode" in meta:
            fields["rawOutput"] = {"exitCode": meta.get("exitCode")}
        self.send(self.tool_call_update(call_id, **fields))
        self._calls.pop(call_id, None)

    # ---- subagents and background processes -----------------------------------------------------

    def _on_subagent_started(self, started: SubagentStarted) -> None:
        """The `run_subagent` card shows the child's steps from now on, live (they are not stored)."""
        agent = f" ({started.agent})" if started.agent else ""
        heading = f"Subagent “{started.description}”{agent}, session {started.child_id}:"
        card = self._subagents[started.call_id] = _Subagent(heading)
        update = self.tool_call_update(
            started.call_id, status="in_progress", content=[text_content(card.text())]
        )
        (self.send_live or self.send)(update)

    def _on_subagent_event(self, sub: SubagentEvent) -> None:
        """A child's tool call is a line of its parent's `run_subagent` card; a call of the child that a
        permission request announced as a card of its own (permissions.py) is also finished there."""
        inner_type, data = sub.event_.get("type"), sub.event_.get("data")
        if inner_type == ev.USAGE and isinstance(data, Mapping):
            try:
                self.subagent_usage = self.subagent_usage.plus(structure(data, TurnUsage).usage)
            except WireValueError:
                return
            self._send_usage()
            return
        card = self._subagents.get(sub.call_id)
        if card is None or not isinstance(data, Mapping):
            return
        try:
            if inner_type == ev.TOOL_CALL:
                called = structure(data, ToolCalled)
                description = describe_tool(called.name, _parse_args(called.arguments), self.cwd)
                card.add(f"▸ {description.title}")
                if called.call_id in self._calls:
                    self.send(self.tool_call_update(called.call_id, status="in_progress"))
            elif inner_type == ev.TOOL_RESULT:
                resulted = structure(data, ToolResulted)
                if resulted.error is not None:
                    card.add(f"  ✗ {resulted.error.code}")
                if resulted.call_id in self._calls:
                    self._on_tool_result(resulted)
                if resulted.error is None:
                    return
            else:
                return
        except WireValueError:
            return
        update = self.tool_call_update(sub.call_id, status="in_progress", content=[text_content(card.text())])
        (self.send_live or self.send)(update)

    def _on_process_started(self, started: ProcessStarted) -> None:
        """A background process is a card of its own, open while it runs."""
        where = "in the sandbox" if started.confined else "unconfined"
        words = f"{started.process_id} runs `{started.command}` (pid {started.pid}, {where})."
        self.send(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": process_call_id(started.process_id),
                "title": f"Background {started.process_id}: {started.command}"[:300],
                "kind": "execute",
                "status": "in_progress",
                "content": [text_content(words)],
                "rawInput": {"processId": started.process_id, "command": started.command},
            }
        )

    def _on_process_exited(self, exited: ProcessExited) -> None:
        status, how = process_ending(exited)
        raw: dict[str, Any] = {"exitCode": exited.exit_code}
        if exited.signal is not None:
            raw["signal"] = exited.signal
        if exited.stopped_by is not None:
            raw["stoppedBy"] = exited.stopped_by
        content = [text_content(f"{exited.process_id} {how}.")]
        self.send(
            self.tool_call_update(
                process_call_id(exited.process_id), status=status, content=content, rawOutput=raw
            )
        )

    # ---- usage and title -----------------------------------------------------------------------------

    def _on_assistant_usage(self, logged: AssistantMessageLogged) -> None:
        usage = logged.usage
        if usage is not None:
            self._used = int(usage.get("inputTokens", 0) or 0) + int(usage.get("outputTokens", 0) or 0)

    def _on_turn_usage(self, turn_usage: TurnUsage) -> None:
        self._usage = self._usage.plus(turn_usage.usage)
        self._send_usage()

    def _send_usage(self) -> None:
        """`usage_update`: the context meter (the session's own last request) and what the session
        and its subagents have cost."""
        update: dict[str, Any] = {
            "sessionUpdate": "usage_update",
            "used": self._used,
            "size": max(self.context_window or 0, self._used),
        }
        cost = self._usage.added(self.subagent_usage).cost_usd
        if cost:
            update["cost"] = {"amount": round(cost, 6), "currency": "USD"}
        self.send(update)

    def options_changed(self, mode: str | None = None) -> None:
        """The session's config options as they are now (`mode`: the one just set)."""
        if self.config_options is not None:
            options = self.config_options(mode)
            self.send({"sessionUpdate": "config_option_update", "configOptions": options})

    def notice(self, text: str) -> None:
        """Words for the person about the session itself (who drives it), as a short agent message
        of its own paragraph (ACP has no notice update in its stable schema)."""
        content = {"type": "text", "text": f"_{text}_\n\n"}
        self.send({"sessionUpdate": "agent_message_chunk", "content": content})

    def title_changed(self, title: str | None = None) -> None:
        """Show the session's title once it is known or changes, and when it was last updated (the
        time of the latest stored event) once that changed: one `session_info_update` for both."""
        title = title if title is not None else self.title()
        update: dict[str, Any] = {"sessionUpdate": "session_info_update"}
        if title and title != self._shown_title:
            self._shown_title = title
            update["title"] = title
        if self._time is not None and self._time != self._shown_time:
            self._shown_time = self._time
            update["updatedAt"] = iso_time(self._time)
        if len(update) > 1:
            self.send(update)

    def _stored_notice(self, event: Event) -> None:
        """A notice the log keeps (a compaction, an MCP server that failed, a take-over), live and in
        a replay alike."""
        if event.type == ev.CONTEXT_COMPACTED:
            compacted = ContextCompacted.of(event)
            why = {"ratio": "the context was filling up", "overflow": "the context overflowed"}.get(
                compacted.reason, "asked"
            )
            self.notice(
                f"Compacted the conversation ({why}): {compacted.tokens_before:,} → "
                f"{compacted.tokens_after:,} tokens; a summary now stands for the earlier messages."
            )
        else:
            self.notice(SessionNoticed.of(event).message)

    # ---- entry points --------------------------------------------------------------------------------

    def _on_plan_event(self, event: Event) -> None:
        """The whole plan again whenever it changed (ACP: each `plan` update replaces the last)."""
        if self._plan.feed(event):
            plan = self._plan.current
            entries = [
                {"content": step.title, "priority": "medium", "status": PLAN_STATUS[step.status]}
                for step in (plan.steps if plan is not None else ())
            ]
            self.send({"sessionUpdate": "plan", "entries": entries})

    def live(self, event: Event) -> None:
        kind = event.type
        if event.time is not None:
            self._time = event.time
        if kind in PLAN_EVENTS:
            self._on_plan_event(event)
        if kind == ev.ASSISTANT_DELTA:
            delta = event.data["delta"]  # the hottest path: read as sent (payloads.AssistantDelta)
            self._send_text(delta, self.send_live or self.send)
        elif kind == ev.USER_MESSAGE:
            # A prompt another window sent: shown as it is entered, so the answer that follows is a
            # reply of its own in this client, not text glued onto the reply it showed last.
            if not self.sent_here(str(event.data.get("id", ""))):
                self._replay_user(event.data)
        elif kind == ev.TOOL_CALL:
            self._on_tool_call(ToolCalled.of(event), replay=False)
        elif kind == ev.TOOL_OUTPUT:
            self._on_tool_output(ToolOutput.of(event))
        elif kind == ev.REVIEW_FINDING:
            self._on_review_finding(event)
        elif kind == ev.TOOL_RESULT:
            self._on_tool_result(ToolResulted.of(event))
        elif kind == ev.ASSISTANT_MESSAGE:
            self._on_assistant_usage(AssistantMessageLogged.of(event))
        elif kind == ev.USAGE:
            self._on_turn_usage(TurnUsage.of(event))
        elif kind == ev.SESSION_TITLE:
            self.title_changed(SessionTitled.of(event).title or None)
        elif kind == ev.SESSION_MODE:
            mode = SessionModeSet.of(event).mode
            self.send({"sessionUpdate": "current_mode_update", "currentModeId": mode})
            self.options_changed(mode)
        elif kind == ev.SESSION_SETTINGS:
            self.options_changed()
        elif kind in (ev.INBOX_INSERTED, ev.INBOX_SPLICED, ev.TURN_END):
            self.title_changed()
        elif kind in (ev.CONTEXT_COMPACTED, ev.SESSION_NOTICE):
            self._stored_notice(event)
        elif kind == ev.SUBAGENT_STARTED:
            self._on_subagent_started(SubagentStarted.of(event))
        elif kind == ev.SUBAGENT_EVENT:
            self._on_subagent_event(SubagentEvent.of(event))
        elif kind == ev.PROCESS_STARTED:
            self._on_process_started(ProcessStarted.of(event))
        elif kind == ev.PROCESS_EXITED:
            self._on_process_exited(ProcessExited.of(event))
        elif kind == ev.HOOK_FAILED:
            failed = HookFailed.of(event)
            self.notice(f"The {failed.event_} hook {failed.hook} failed ({failed.reason}); it was ignored.")
        elif kind == ev.HOOKS_UNTRUSTED:
            waiting = HooksUntrusted.of(event)
            what = "changed since you trusted them" if waiting.changed else "not trusted yet"
            self.notice(
                f"The project's hooks in {waiting.path} ({', '.join(waiting.events)}) do not run: "
                f"{what}. `_dsh/project/trust` with root {waiting.root} runs them."
            )

    def replay(self, event: Event) -> None:
        kind = event.type
        if event.time is not None:
            self._time = event.time
        if kind in PLAN_EVENTS:
            self._on_plan_event(event)
        if kind == ev.USER_MESSAGE:
            self._replay_user(event.data)  # the payload is the message itself
        elif kind == ev.ASSISTANT_MESSAGE:
            logged = AssistantMessageLogged.of(event)
            self._on_assistant_usage(logged)
            for block in logged.message.get("content") or ():
                if isinstance(block, Mapping):
                    self._send_text(block, self.send)
        elif kind == ev.TOOL_CALL:
            self._on_tool_call(ToolCalled.of(event), replay=True)
        elif kind == ev.REVIEW_FINDING:
            self._on_review_finding(event)
        elif kind == ev.TOOL_RESULT:
            self._on_tool_result(ToolResulted.of(event))
        elif kind == ev.USAGE:
            self._on_turn_usage(TurnUsage.of(event))
        elif kind == ev.SESSION_TITLE:
            self.title_changed(SessionTitled.of(event).title or None)
        elif kind == ev.SESSION_MODE:
            self.send(
                {"sessionUpdate": "current_mode_update", "currentModeId": SessionModeSet.of(event).mode}
            )
        elif kind in (ev.CONTEXT_COMPACTED, ev.SESSION_NOTICE):
            self._stored_notice(event)
        elif kind == ev.PROCESS_STARTED:
            self._on_process_started(ProcessStarted.of(event))
        elif kind == ev.PROCESS_EXITED:
            self._on_process_exited(ProcessExited.of(event))

    def _send_text(self, part: Mapping[str, Any], send: Send) -> None:
        """A live delta or a stored content block of text or reasoning, as its message chunk."""
        chunk = TEXT_CHUNKS.get(str(part.get("type")))
        text = part.get("text")
        if chunk is not None and isinstance(text, str) and text:
            send({"sessionUpdate": chunk, "content": {"type": "text", "text": text}})

    def _replay_user(self, data: Mapping[str, Any]) -> None:
        source = data.get("source")
        source_kind = source.get("kind") if isinstance(source, Mapping) else "user"
        blocks = data.get("content") or ()
        text = join_prompt_text(
            str(b.get("text", "")) for b in blocks if isinstance(b, Mapping) and b.get("type") == "text"
        )
        command = source.get("command") if isinstance(source, Mapping) else None
        review = source.get("review") if isinstance(source, Mapping) else None
        content: dict[str, Any]
        if source_kind == "user" and isinstance(review, Mapping):
            # A review's message holds the diff: shown as the command that started it.
            content = {"type": "text", "text": review_typed(review)}
        elif source_kind == "user" and isinstance(command, Mapping) and isinstance(command.get("name"), str):
            # A custom command the daemon expanded (protocol.md §18): shown as the person typed it.
            typed = f"/{command['name']} {command.get('arguments') or ''}".rstrip()
            rest = [
                str(b.get("text", ""))
                for b in blocks[1:]
                if isinstance(b, Mapping) and b.get("type") == "text"
            ]
            content = {"type": "text", "text": join_prompt_text([typed, *rest])}
        elif source_kind == "user":
            content = {"type": "text", "text": text}
        elif source_kind == "editor" and isinstance(source, Mapping):
            if source.get("contextKind") == "snapshot":
                return  # ambient editor state: not something the person said or attached
            content = resource_block(source, text)
        else:
            return  # tool- and plugin-sourced context is not the person's message
        self.send({"sessionUpdate": "user_message_chunk", "content": content})
