"""Slash commands and plain lines: what a typed line does."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

from dsh_daemon.chat import agents, processes, review, turndiff, worktree
from dsh_daemon.chat import plan as plans
from dsh_daemon.chat import rewind as rewinding
from dsh_daemon.chat import sandbox as sandboxes
from dsh_daemon.chat.core import Chat
from dsh_daemon.chat.queue import NEXT_STEP, NEXT_TURN, QueueItem
from dsh_daemon.chat.render import CYAN, DIM, YELLOW, clip, diff_lines
from dsh_daemon.chat.rpc import RpcError
from dsh_daemon.chat.sessions import NoSuchSession, describe, find_session
from dsh_daemon.chat.shell import cap, run_shell
from dsh_daemon.chat.status import count, dollars

# One line each, in the order /help shows them. A command that needs a daemon feature names the
# `experimental.dsh` capability flag in NEEDS and is listed (and completed) only when the daemon
# advertises it.
COMMANDS: dict[str, str] = {
    "/queue": "the queue by number (#N); it also shows above the input",
    "/edit": "/edit N [TEXT] — reword queued prompt #N (alone: load it into the input)",
    "/drop": "/drop N — remove queued prompt #N",
    "/wake": "run the parked queue now (after a cancel)",
    "/steer": "/steer TEXT — redirect the running turn at its next step",
    "/inject": "/inject TEXT — context for the next request; starts nothing",
    "/attach": "/attach PATH[:L1-L2] — a file or lines go with your next prompt (or @PATH in it)",
    "/cancel": "cancel the running turn, keep the queue (Esc, Ctrl-C)",
    "/clear": "cancel the running turn and discard the whole queue",
    "/plan": "the agent's plan, every step (while a turn runs it also shows above the input)",
    "/show": "/show [N] — the diff or whole output of tool call N (the last without N)",
    "/review": review.USAGE_REVIEW,
    "/ps": processes.USAGE_PS,
    "/kill": processes.USAGE_KILL,
    "/agents": agents.USAGE_AGENTS,
    "/copy": "/copy [N] — code block N (the last without N) to the clipboard (OSC 52)",
    "/model": "/model [NAME] — list the models, or switch (from the next request)",
    "/sandbox": "/sandbox [MODE] — how commands are confined here; read-only, workspace-write or"
    " full-access changes it",
    "/context": "how full the context window is, and with what",
    "/compact": "summarise older turns now to free the context window",
    "/cost": "this session's tokens and cost",
    "/undo": "take back the file changes of the last turn (the conversation stays)",
    "/diff": turndiff.USAGE_DIFF,
    "/undo-hunk": turndiff.USAGE_UNDO_HUNK,
    "/keep": turndiff.USAGE_KEEP,
    "/rewind": rewinding.USAGE_REWIND,
    "/fork": rewinding.USAGE_FORK,
    "/sessions": "the sessions in this directory (a worktree's branch and changes too)",
    "/worktree": worktree.USAGE_WORKTREE,
    "/resume": "/resume [N|ID|TITLE] — switch to a session (a picker without argument)",
    "/trust": "/trust [PATH] — run this project's .dsh/config.json hooks from now on (remembered)",
    "/help": "this list",
    "/quit": "leave (Ctrl-D)",
}
NEEDS: dict[str, str] = {  # command -> flag
    "/undo": "rewind",
    "/rewind": "rewind",
    "/fork": "rewind",
    "/diff": "turnDiff",
    "/undo-hunk": "turnDiff",
    "/keep": "turnDiff",
    "/ps": "processes",
    "/review": "review",
    "/kill": "processes",
    "/worktree": "worktrees",
    "/agents": "namedAgents",
}
INPUT_HELP = (
    ("@PATH[:L1-L2]", "in a prompt: that file (or those lines) goes with it; Tab completes paths"),
    ("!CMD", "run a shell command here; its output goes with your next prompt"),
    ("//TEXT", "send a line that starts with /"),
    ("Enter", "send (while a turn runs: queued behind it); Alt-Enter adds a line"),
    ("Alt-Up", "pull the last queued prompt back into the input"),
    ("Esc", "cancel the running turn, keep the queue (also Ctrl-C; twice Ctrl-C when idle leaves)"),
    ("Tab", "complete a command, a path after @ or /attach, a #number after /edit or /drop"),
    ("Shift-Tab", "cycle the session's mode: ask → accept edits → plan (shown in the status line)"),
    ("Ctrl-G", "edit the input in $VISUAL / $EDITOR (also Ctrl-X Ctrl-E); the saved text comes back"),
    ("Ctrl-O", "the whole output or diff of the last tool call (as /show)"),
)
# Model ids DeepSeek serves (README "Model provider"): what `/model` lists, with any the configuration
# names, when the daemon is too old to answer `dsh/models/list` (flag `models`).
KNOWN_MODELS = ("deepseek-v4-flash", "deepseek-v4-pro")
SHELL_SHOWN_LINES = 40

ATTACH_RE = re.compile(r"^(?P<path>.+?)(?::(?P<l1>\d+)(?:-(?P<l2>\d+))?)?$")
MENTION_RE = re.compile(r"(?<!\S)@(\S+)")


def available_commands(capabilities: dict[str, Any]) -> dict[str, str]:
    return {
        name: text for name, text in COMMANDS.items() if name not in NEEDS or capabilities.get(NEEDS[name])
    }


def file_attachment(cwd: str, spec: str) -> dict[str, Any] | str:
    """`PATH[:L1-L2]` as an attachment (`{params, label}`), or why it cannot be one."""
    match = ATTACH_RE.match(spec)
    if match is None:
        return f"not a path: {spec}"
    path = Path(cwd, match["path"]).expanduser().resolve()
    if not path.is_file():
        return f"no such file: {match['path']}"
    params: dict[str, Any] = {"uri": path.as_uri(), "kind": "file"}
    label = match["path"]
    if match["l1"]:
        first = int(match["l1"])
        last = int(match["l2"] or first)
        if first < 1 or last < first:
            return "lines count from 1: PATH:L1-L2 with L1 ≤ L2"
        params["kind"] = "selection"
        params["range"] = {
            "start": {"line": first - 1, "character": 0},
            "end": {"line": last, "character": 0},
        }
        label += f" lines {first}-{last}"
    return {"params": params, "label": label}


def mentions(cwd: str, text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The `@path[:L1-L2]` mentions in a prompt that name files: (attachments, problems)."""
    found: list[dict[str, Any]] = []
    problems: list[str] = []
    for match in MENTION_RE.finditer(text):
        spec = match[1].rstrip(",.;!?)\"'")
        attachment = file_attachment(cwd, spec)
        if isinstance(attachment, dict):
            if all(a["params"] != attachment["params"] for a in found):
                found.append(attachment)
        elif "/" in spec or "." in spec:  # it looked like a path: say why it is not attached
            problems.append(f"@{spec}: {attachment}; sent as text")
    return found, problems


def _number(arg: str) -> tuple[int | None, str]:
    head, _, rest = arg.strip().partition(" ")
    head = head.removeprefix("#")
    return (int(head) if head.isdigit() else None), rest.strip()


class Commands:
    def __init__(self, chat: Chat, *, state_dir: Path | None = None) -> None:
        self.chat = chat
        self.state_dir = state_dir
        self.review = turndiff.TurnReview(chat)
        self.worktree = worktree.WorktreeCommand(chat)
        self.table: dict[str, Callable[[str], Awaitable[None]]] = {
            "/queue": self.queue,
            "/wake": self.wake,
            "/drop": self.drop,
            "/edit": self.edit,
            "/steer": lambda arg: self.send("dsh/steer", arg),
            "/inject": lambda arg: self.send("dsh/inject", arg),
            "/attach": self.attach,
            "/cancel": self.cancel,
            "/clear": self.clear,
            "/plan": self.plan,
            "/show": self.show,
            "/ps": lambda arg: processes.ps(self.chat, arg),
            "/review": lambda arg: review.start(self.chat, arg),
            "/kill": lambda arg: processes.kill(self.chat, arg),
            "/agents": lambda arg: agents.agents(self.chat, arg, partial(self.prompt, "dsh/followup")),
            "/copy": self.copy,
            "/model": self.model,
            "/sandbox": self.sandbox,
            "/context": self.context,
            "/compact": self.compact,
            "/cost": self.cost,
            "/sessions": self.sessions,
            "/worktree": self.worktree.run,
            "/resume": self.resume,
            "/undo": lambda arg: rewinding.undo(self.chat, arg),
            "/diff": self.review.diff,
            "/undo-hunk": self.review.undo_hunk,
            "/keep": self.review.keep,
            "/rewind": lambda arg: rewinding.rewind(self.chat, arg),
            "/fork": lambda arg: rewinding.fork(self.chat, arg),
            "/trust": self.trust,
            "/help": self.help,
        }

    async def handle_line(self, line: str) -> bool:
        """Run one typed line; False to quit."""
        chat = self.chat
        text = line.strip()
        if not text:
            return True
        if text.startswith("!") and len(text) > 1:
            await self.guard(self.shell(text[1:].strip()))
            return True
        if not text.startswith("/") or text.startswith("//"):
            # `//NAME` of a custom command goes as typed: the daemon sends it as text `/NAME` (§18).
            escaped = text.startswith("//") and text[1:].split(None, 1)[0] not in chat.custom_commands
            await self.guard(self.prompt("dsh/followup", text[1:] if escaped else text))
            return True
        name, _, arg = text.partition(" ")
        if name in ("/quit", "/exit"):
            return False
        handler = self.table.get(name)
        if handler is None and chat.capabilities.get("customCommands"):
            if name not in chat.custom_commands:
                await self.guard(chat.load_custom_commands())  # a file added since: found now
            if name in chat.custom_commands:
                # The daemon expands it when the prompt is sent (protocol.md §18): sent as typed.
                await self.guard(self.prompt("dsh/followup", text))
                return True
        if handler is None or name not in available_commands(chat.capabilities):
            chat.error(f"[unknown command {name}; /help lists them, // sends a line starting with /]")
            return True
        await self.guard(handler(arg.strip()))
        return True

    async def guard(self, action: Awaitable[None]) -> None:
        try:
            await action
        except RpcError as exc:
            self.chat.error(f"[{exc.code or 'error'}: {exc}]")

    # ---- prompts -----------------------------------------------------------------------------------

    async def prompt(self, method: str, text: str) -> None:
        """A prompt, with the files its `@path` mentions name attached."""
        found, problems = mentions(self.chat.cwd, text)
        for problem in problems:
            self.chat.note(f"[{problem}]")
        for attachment in found:
            self.chat.note(f"[📎 {attachment['label']}]")
        await self.chat.send(method, text, found)

    async def send(self, method: str, text: str) -> None:
        if not text:
            self.chat.error(f"[{method.removeprefix('dsh/')} needs a text]")
            return
        if method == "dsh/steer":
            await self.prompt(method, text)
        else:
            await self.chat.send(method, text)

    async def plan(self, _: str) -> None:
        chat = self.chat
        for line in plans.full_lines(chat.plan.current, chat.view.width):
            chat.view.print(line)  # (titles and the note come clipped and sanitized)

    # ---- the queue ---------------------------------------------------------------------------------

    async def queue(self, _: str) -> None:
        chat = self.chat
        book = chat.status.queue
        if not book.count(NEXT_TURN) and not book.count(NEXT_STEP):
            chat.note("[the queue is empty]")
            return
        for item in book.pending(NEXT_TURN):
            chat.view.print(f"  {chat.paint(CYAN, item.label)} {clip(item.text, 100)}{self._extras(item)}")
        for item in book.pending(NEXT_STEP):
            what = item.source.get("uri") or item.text
            kind = item.verb or item.source.get("kind", "context")
            chat.view.print(chat.paint(DIM, f"  {item.label} ({kind}, next step) {clip(what, 90)}"))
        if chat.status.state == "idle":
            chat.note("[parked: /wake runs them]")

    @staticmethod
    def _extras(item: QueueItem) -> str:
        return f"  📎{len(item.context)}" if item.context else ""

    def queued_item(self, arg: str, usage: str) -> tuple[QueueItem, str] | None:
        """The pending item `#N` names (with the rest of the argument), or None after saying why not."""
        chat = self.chat
        number, rest = _number(arg)
        if number is None:
            chat.error(f"[{usage}: N is the #number /queue shows]")
            return None
        item = chat.status.queue.find(number)
        if item is None:
            chat.error(f"[no queued item #{number}; /queue lists them]")
            return None
        if item.state != "pending":
            chat.error(f"[{item.why_not_pending()}]")
            return None
        return item, rest

    async def drop(self, arg: str) -> None:
        found = self.queued_item(arg, "/drop N")
        if found is None:
            return
        item, _ = found
        params = {"sessionId": self.chat.session_id, "messageId": item.id}
        removed = (await self.chat.rpc.request("dsh/inbox/remove", params))["removed"]
        if removed:
            self.chat.note(f"[dropped {item.label}: {clip(item.text, 80)}]")
        else:
            self.chat.error(f"[{item.label} is no longer queued: a turn took it just now]")

    async def edit(self, arg: str) -> None:
        chat = self.chat
        found = self.queued_item(arg, "/edit N [TEXT]")
        if found is None:
            return
        item, text = found
        if not text:
            if chat.view.load_input(item.text, item.number):
                chat.note(f"[editing {item.label}: Enter saves it in place, Esc leaves it as it was]")
            else:
                chat.view.print(f"  {chat.paint(CYAN, item.label)} {item.text}")
                chat.note(f"[/edit {item.number} TEXT rewords it]")
            return
        await self.reword(item, text)

    async def reword(self, item: QueueItem, text: str) -> bool:
        """Replace queued `item`'s text; refused with a clear line (False) if a turn took it meanwhile."""
        chat = self.chat
        if item.state != "pending":
            chat.error(f"[{item.why_not_pending()}; not edited]")
            return False
        try:
            await chat.reword(item, text)
        except RpcError as exc:
            if exc.code != "unknown_message":
                raise
            chat.error(f"[{item.label} is no longer queued: a turn took it just now; not edited]")
            return False
        chat.note(f"[edited {item.label}: {clip(text, 80)}]")
        return True

    async def save_edit(self, number: int, text: str) -> None:
        """The input line, edited after `/edit N`, goes back in place of #N. If a turn took #N
        meanwhile, the text comes back into the input, where Enter sends it as a new prompt."""
        chat = self.chat
        item = chat.status.queue.find(number)
        if not text.strip():
            chat.note(f"[edit #{number} left as it was (/drop {number} removes it)]")
            return
        if item is None or not await self.reword(item, text):
            if chat.view.load_input(text, None):
                chat.note("[your text is back in the input: Enter sends it as a new prompt]")

    async def pull_last(self) -> str | None:
        """Alt-Up: take the last queued prompt out of the queue, for the input line (its attachments
        come back as pending attachments, read again when it is sent)."""
        chat = self.chat
        items = chat.status.queue.pending(NEXT_TURN)
        if not items:
            chat.note("[nothing queued to pull back]")
            return None
        item = items[-1]
        params = {"sessionId": chat.session_id, "messageId": item.id}
        if not (await chat.rpc.request("dsh/inbox/remove", params))["removed"]:
            chat.error(f"[{item.label} is no longer queued: a turn took it just now]")
            return None
        for message in item.context:
            source = message.get("source") or {}
            if source.get("uri") and source.get("contextKind") in ("file", "selection"):
                ref: dict[str, Any] = {"uri": source["uri"], "kind": source["contextKind"]}
                if source.get("range"):
                    ref["range"] = source["range"]
                chat.attachments.append({"params": ref, "label": chat.context_label(source)})
        chat.note(f"[pulled {item.label} back into the input: Enter queues it again]")
        return item.text

    async def wake(self, _: str) -> None:
        if not self.chat.session_id:
            self.chat.note("[nothing is queued]")
            return
        result = await self.chat.rpc.request("dsh/wake", {"sessionId": self.chat.session_id})
        if not result.get("started"):
            busy = self.chat.status.state == "running"
            self.chat.note("[a turn is already running]" if busy else "[nothing is queued]")

    async def trust(self, arg: str) -> None:
        """The person trusts a project's hooks (the session's folder, or PATH): they run from now on."""
        root = os.path.join(self.chat.cwd, arg)  # the daemon takes its real path
        result = await self.chat.rpc.request("dsh/project/trust", {"root": root})
        events = ", ".join(result.get("events", ()))
        self.chat.note(f"[{result['hooks']} hooks of {result['root']} run from now on ({events})]")

    async def cancel(self, _: str) -> None:
        if self.chat.session_id:
            await self.chat.rpc.request("dsh/cancel", {"sessionId": self.chat.session_id, "keepInbox": True})

    async def clear(self, _: str) -> None:
        chat = self.chat
        if not chat.session_id:
            chat.note("[queue cleared]")
            return
        was_idle = chat.status.state == "idle"
        chat.clearing = True
        try:
            await chat.rpc.request("dsh/cancel", {"sessionId": chat.session_id, "keepInbox": False})
        finally:
            chat.clearing = False
        if was_idle:  # otherwise the turn's end says it
            chat.note("[queue cleared]")

    # ---- context -----------------------------------------------------------------------------------

    async def attach(self, arg: str) -> None:
        chat = self.chat
        if not arg:
            if not chat.attachments:
                chat.note("[nothing attached; /attach PATH[:L1-L2]]")
            for attachment in chat.attachments:
                chat.note(f"  📎 {attachment['label']}")
            return
        made = file_attachment(chat.cwd, arg)
        if isinstance(made, str):
            chat.error(f"[{made}]")
            return
        chat.attachments.append(made)
        chat.note(f"[📎 {made['label']}: goes with your next prompt]")

    async def shell(self, command: str) -> None:
        """`!cmd`: run it here, show its output, attach the output to the next prompt."""
        chat = self.chat
        chat.view.print(chat.paint(CYAN, f"$ {command}"))
        shown = [0]

        def show(text: str) -> None:
            lines = text.splitlines()
            room = max(0, SHELL_SHOWN_LINES - shown[0])
            for line in lines[:room]:
                chat.view.print(chat.paint(DIM, f"  │ {line}"))
            shown[0] += len(lines)

        task = asyncio.ensure_future(run_shell(command, chat.cwd, show))
        chat.shell = task
        try:
            await asyncio.wait({task})
        finally:
            chat.shell = None
        if task.cancelled():
            chat.note("[stopped; nothing attached]")
            return
        try:
            output, status = task.result()
        except OSError as exc:
            chat.error(f"[cannot run it: {exc}]")
            return
        lines = output.count("\n") + (0 if output.endswith("\n") or not output else 1)
        if lines > SHELL_SHOWN_LINES:
            chat.note(f"  … {lines - SHELL_SHOWN_LINES} more lines")
        label = f"$ {clip(command, 60)} (exit {status}, {lines} line{'s' if lines != 1 else ''})"
        body = f"$ {command}\n{cap(output)}{'' if output.endswith(chr(10)) or not output else chr(10)}"
        chat.attach_text(label, f"{body}[exit status {status}; run by the person in {chat.cwd}]\n")
        chat.note(f"[📎 {label}: goes with your next prompt]")

    # ---- what was shown ----------------------------------------------------------------------------

    async def show(self, arg: str) -> None:
        chat = self.chat
        number, _ = _number(arg)
        card = chat.cards.get(number) if number is not None else chat.cards.last()
        if card is None:
            chat.error(f"[no tool call {arg}]" if arg else "[no tool call yet]")
            return
        chat.view.print(chat.paint(CYAN, f"── /show {card.number}: {card.summary}"))
        if card.diff is not None:
            for line in diff_lines(card.diff, chat.view.color):
                chat.view.print(line)
        else:
            chat.view.print(card.details().rstrip("\n"))
        if card.truncated:
            chat.note(f"[only the first part is kept here; `dsh-daemon export {chat.session_id}` has it all]")

    async def copy(self, arg: str) -> None:
        chat = self.chat
        number, _ = _number(arg)
        blocks = chat.blocks
        if not blocks:
            chat.error("[no code block yet]")
            return
        index = (number or len(blocks)) - 1
        if not 0 <= index < len(blocks):
            chat.error(f"[no code block {number}; there are {len(blocks)}]")
            return
        block = blocks[index]
        how = chat.view.copy(block.code)
        lines = block.code.count("\n")
        chat.note(f"[code block {index + 1} ({block.language or 'code'}, {lines} lines) {how}]")

    # ---- model and context -------------------------------------------------------------------------

    def known_models(self) -> list[str]:
        names = list(KNOWN_MODELS)
        if self.state_dir is not None:
            from dsh_daemon.model.configfile import ConfigFileError, read_config_file

            try:
                provider = read_config_file(self.state_dir).get("provider") or {}
            except ConfigFileError:
                provider = {}
            for key in ("prices", "contextWindow"):
                table = provider.get(key) if isinstance(provider, dict) else None
                names += list(table) if isinstance(table, dict) else []
            if isinstance(provider, dict) and isinstance(provider.get("model"), str):
                names.append(provider["model"])
        if self.chat.status.model:
            names.append(self.chat.status.model)
        return list(dict.fromkeys(names))

    async def listed_models(self) -> tuple[list[str], str]:
        """The daemon's own list (`dsh/models/list`) and the model new requests use; the local
        guess when the daemon does not offer the list."""
        chat = self.chat
        if not chat.capabilities.get("models"):
            return self.known_models(), chat.status.model
        result = await chat.rpc.request("dsh/models/list", {})
        names = [str(entry["id"]) for entry in result.get("models") or [] if isinstance(entry, dict)]
        current = str(result.get("current") or chat.status.model)
        return list(dict.fromkeys([*names, current] if current else names)), current

    async def model(self, arg: str) -> None:
        chat = self.chat
        current = chat.status.model
        if not arg:
            names, current = await self.listed_models()
            now = current or "not known until the first request (the daemon's configuration picks it)"
            if chat.view.interactive:
                options = [f"{name}{'  (current)' if name == current else ''}" for name in names]
                choice = await chat.view.pick(f"model — now {now}", options)
                if choice is None:
                    return
                arg = names[choice]
            else:
                chat.note(f"[model: {now}]")
                for name in names:
                    mark = chat.paint(CYAN, "❯") if name == current else " "
                    chat.view.print(f"  {mark} {name}")
                chat.note("[/model NAME switches, from the next request; any id the endpoint serves works]")
                return
        if arg == current:
            chat.note(f"[already {arg}]")
            return
        await chat.configure({"provider": {"model": arg}})
        chat.status.model = arg
        chat.view.refresh()
        chat.note(f"[model: {arg}, from the next request]")

    async def sandbox(self, arg: str) -> None:
        """`/sandbox`: what the daemon said of the sandbox. `/sandbox MODE`: change it daemon-wide, as an
        editor's settings do; full-access is confirmed first (a picker, or `confirm` after it)."""
        chat = self.chat
        mode, _, rest = arg.partition(" ")
        if not mode:
            first, *rest_lines = sandboxes.report_lines(chat.status.sandbox)
            chat.view.print(chat.paint(CYAN, first))
            for line in rest_lines:  # a warning (commands refused) stands out
                chat.view.print(chat.paint(YELLOW, line) if line.lstrip().startswith("⚠") else line)
            return
        if mode not in sandboxes.MODES:
            chat.error(f"[no sandbox mode {clip(mode, 40)}: one of {', '.join(sandboxes.MODES)}]")
            return
        current = (chat.status.sandbox or {}).get("configuredMode")
        if mode == current:
            chat.note(f"[the sandbox is already {mode}]")
            return
        if mode == "full-access" and rest.strip() != "confirm" and not await self.full_access_confirmed():
            return
        await chat.configure({"tools": {"sandbox": {"mode": mode}}})
        chat.note(f"[sandbox: {mode}, from the next command, in every session of this daemon]")

    async def full_access_confirmed(self) -> bool:
        chat = self.chat
        chat.view.print(chat.paint(YELLOW, f"[{sandboxes.FULL_ACCESS_WARNING}]"))
        if not chat.view.interactive:
            chat.note("[`/sandbox full-access confirm` chooses it]")
            return False
        keep = f"No, keep {(chat.status.sandbox or {}).get('configuredMode') or 'the sandbox as it is'}"
        choice = await chat.view.pick(
            "full-access: run commands unconfined, as your whole account?",
            [keep, "Yes, full-access: commands run unconfined (each asks first)"],
        )
        if choice != 1:
            chat.note("[the sandbox is unchanged]")
            return False
        return True

    async def context(self, _: str) -> None:
        chat = self.chat
        status = chat.status
        if status.context_used is None:
            chat.note("[no reply yet in this session: nothing in the context window]")
            return
        used, window = status.context_used, status.context_window
        share = f" ({100 * used / window:.0f}%)" if window else ""
        of = f" of {count(window)}" if window else " (window size not known for this model)"
        chat.view.print(f"  context: {count(used)}{of} tokens{share}, as of the last request")
        header = status.header
        if header:
            system = len(str(header.get("system") or "")) // 4
            tools = len(str(header.get("tools") or "")) // 4
            rest = max(0, used - system - tools)
            chat.view.print(
                f"  about {count(system)} system prompt · {count(tools)} tool definitions"
                f" · {count(rest)} conversation"
            )
            chat.note("  (the split is estimated at 4 characters a token)")
        if status.compactions:
            last = status.compactions[-1]
            chat.view.print(
                f"  compacted {len(status.compactions)} time(s); last: about"
                f" {count(last.get('tokensBefore', 0))} → {count(last.get('tokensAfter', 0))} tokens"
                f" ({last.get('reason', '')})"
            )
        chat.note("  [/compact summarises older turns now; it also happens on its own near the window's end]")

    async def compact(self, _: str) -> None:
        chat = self.chat
        if not chat.session_id:
            chat.note("[nothing to compact yet]")
            return
        chat.note("[compacting: one model call summarises the older turns…]")
        result = await chat.rpc.request("dsh/session/compact", {"sessionId": chat.session_id})
        if result.get("compacted"):
            return  # the `context/compacted` event has said it
        if result.get("scheduled"):
            chat.note("[a turn is running: it compacts at its next step]")
        elif result.get("error"):
            error = result["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            chat.error(f"[compaction failed: {message}]")
        else:
            chat.note("[nothing to compact yet]")

    async def cost(self, _: str) -> None:
        """The session's totals as the daemon sums them (every turn, whichever process ran it)."""
        chat = self.chat
        status = chat.status
        if chat.session_id:
            await chat.count_usage(chat.session_id)
        usage = status.usage
        cached = f" ({count(usage.cache_read_tokens)} read from cache)" if usage.cache_read_tokens else ""
        reasoning = f" ({count(usage.reasoning_tokens)} reasoning)" if usage.reasoning_tokens else ""
        money = status.cost() if usage.cost_known else "cost not known for this model"
        if usage.cost_known and usage.priced_turns < usage.turns:
            money += f" ({usage.turns - usage.priced_turns} turn(s) without a price)"
        name = f"session {chat.session_id[:8]}" if chat.session_id else "this chat"
        chat.view.print(
            f"  {name}: {usage.turns} turn(s) · {count(usage.input_tokens)} tokens in{cached}"
            f" · {count(usage.output_tokens)} out{reasoning} · {money}"
        )
        if status.subagent_usage is not None:
            sessions, sub = status.subagent_usage
            sub_money = dollars(sub.cost_usd) if sub.cost_known else "cost not known"
            chat.view.print(
                f"  its subagents ({sessions} session(s)): {sub.turns} turn(s) · {count(sub.input_tokens)}"
                f" tokens in · {count(sub.output_tokens)} out · {sub_money}"
            )

    # ---- sessions ----------------------------------------------------------------------------------

    async def list_sessions(self) -> list[dict[str, Any]]:
        sessions: list[dict[str, Any]] = (
            await self.chat.rpc.request("dsh/session/list", {"cwd": self.chat.cwd})
        )["sessions"]
        self.chat.session_list = sessions
        return sessions

    async def sessions(self, _: str) -> None:
        chat = self.chat
        sessions = await self.list_sessions()
        if not sessions:
            chat.note("[no sessions in this directory]")
        for number, session in enumerate(sessions, 1):
            chat.view.print(f"  {chat.paint(CYAN, str(number))}. {describe(session, chat.session_id)}")

    async def last_exchange(self, session_id: str) -> str:
        """The session's last prompt and answer, for the /resume picker's preview."""
        page = await self.chat.rpc.request("dsh/session/transcript", {"sessionId": session_id, "limit": 1})
        if not page["turns"]:
            return "(no turns yet)"
        prompt, answer = "", ""
        for item in page["turns"][0].get("items", ()):
            if item.get("type") == "message" and (item.get("source") or {}).get("kind") == "user":
                prompt = item.get("text", "")
            elif item.get("type") == "assistant" and (item.get("text") or "").strip():
                answer = item["text"]
        return f"› {prompt}\n{answer}"

    async def resume(self, arg: str) -> None:
        chat = self.chat
        if chat.status.state == "running":
            chat.error("[a turn is running: Esc (or /cancel) first]")
            return
        sessions = await self.list_sessions()
        if not arg:
            if not sessions:
                chat.note("[no sessions in this directory]")
                return

            async def preview(index: int) -> str:
                return await self.last_exchange(sessions[index]["sessionId"])

            titles = [describe(s, chat.session_id) for s in sessions]
            choice = await chat.view.pick("resume which session? (type to filter)", titles, preview)
            if choice is None:
                if not chat.view.interactive:
                    for number, session in enumerate(sessions, 1):
                        chat.view.print(f"  {number}. {describe(session, chat.session_id)}")
                    chat.note("[/resume N, an id or a title picks one]")
                return
            session_id = sessions[choice]["sessionId"]
        elif arg.isdigit() and 1 <= int(arg) <= len(sessions):
            session_id = sessions[int(arg) - 1]["sessionId"]
        else:
            every = (await chat.rpc.request("dsh/session/list", {}))["sessions"]
            try:
                session_id = find_session(every, arg)["sessionId"]
            except NoSuchSession as exc:
                chat.error(f"[{exc}]")
                return
        if session_id == chat.session_id:
            chat.note("[already in this session]")
            return
        chat.note(f"[resuming {session_id}]")
        await chat.attach(session_id)

    async def help(self, _: str) -> None:
        chat = self.chat
        for name, text in available_commands(chat.capabilities).items():
            chat.view.print(f"  {chat.paint(CYAN, f'{name:<10}')} {text}")
        await self.guard(chat.load_custom_commands())
        for name, command in chat.custom_commands.items():
            if name not in COMMANDS:
                hint = f"{name} {command['argumentHint']} — " if command.get("argumentHint") else ""
                where = "this project's" if command.get("source") == "project" else "your"
                text = f"{hint}{command.get('description', '')} ({where} command)"
                chat.view.print(f"  {chat.paint(CYAN, f'{name:<10}')} {text}")
        for name, text in INPUT_HELP:
            chat.view.print(f"  {chat.paint(CYAN, f'{name:<10}')} {text}")
