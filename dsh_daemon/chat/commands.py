"""Slash commands and plain lines: what a typed line does."""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from dsh_daemon.chat.core import Chat
from dsh_daemon.chat.render import CYAN, DIM, clip, message_text
from dsh_daemon.chat.rpc import RpcError

COMMANDS: dict[str, str] = {
    "/queue": "list the queue (prompts waiting for their turn, context waiting for the next step)",
    "/wake": "run the parked queue now (after a cancel)",
    "/drop": "/drop N — remove queued prompt N",
    "/edit": "/edit N TEXT — reword queued prompt N",
    "/steer": "/steer TEXT — redirect the running turn at its next step",
    "/inject": "/inject TEXT — context for the next request; starts nothing",
    "/attach": "/attach PATH[:L1-L2] — a file or lines travel with your next prompt",
    "/cancel": "cancel the running turn, keep the queue (Ctrl-C)",
    "/clear": "cancel the running turn and discard the whole queue",
    "/sessions": "list the sessions in this directory",
    "/resume": "/resume [N|ID] — switch to a session (a picker without argument)",
    "/help": "this list",
    "/quit": "leave (Ctrl-D)",
}

ATTACH_RE = re.compile(r"^(?P<path>.+?)(?::(?P<l1>\d+)(?:-(?P<l2>\d+))?)?$")


class Commands:
    def __init__(self, chat: Chat) -> None:
        self.chat = chat
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
            "/sessions": self.sessions,
            "/resume": self.resume,
            "/help": self.help,
        }

    async def handle_line(self, line: str) -> bool:
        """Run one typed line; False to quit."""
        chat = self.chat
        text = line.strip()
        if not text:
            return True
        if not text.startswith("/") or text.startswith("//"):
            await self.guard(chat.send("dsh/followup", text[1:] if text.startswith("//") else text))
            return True
        name, _, arg = text.partition(" ")
        if name in ("/quit", "/exit"):
            return False
        handler = self.table.get(name)
        if handler is None:
            chat.error(f"[unknown command {name}; /help lists them, // sends a line starting with /]")
            return True
        await self.guard(handler(arg.strip()))
        return True

    async def guard(self, action: Awaitable[None]) -> None:
        try:
            await action
        except RpcError as exc:
            self.chat.error(f"[{exc.code or 'error'}: {exc}]")

    # ---- the queue ---------------------------------------------------------------------------------

    async def send(self, method: str, text: str) -> None:
        if not text:
            self.chat.error(f"[{method.removeprefix('dsh/')} needs a text]")
            return
        await self.chat.send(method, text)

    async def inbox(self) -> dict[str, list[dict[str, Any]]]:
        listed: dict[str, list[dict[str, Any]]] = await self.chat.rpc.request(
            "dsh/inbox/list", {"sessionId": self.chat.session_id}
        )
        return listed

    async def queue(self, _: str) -> None:
        chat = self.chat
        listing = await self.inbox()
        if not listing["nextTurn"] and not listing["nextStep"]:
            chat.note("[the queue is empty]")
            return
        for number, item in enumerate(listing["nextTurn"], 1):
            chat.view.print(f"  {chat.paint(CYAN, str(number))}. {clip(message_text(item['content']), 100)}")
        for item in listing["nextStep"]:
            source = item.get("source") or {}
            what = source.get("uri") or message_text(item["content"])
            chat.view.print(chat.paint(DIM, f"  +  {source.get('kind', 'user')}: {clip(what, 96)}"))
        if chat.status.state == "idle":
            chat.note("[parked: /wake runs them]")

    async def numbered(self, arg: str) -> tuple[dict[str, Any], str] | None:
        chat = self.chat
        number, _, rest = arg.partition(" ")
        if not number.isdigit():
            chat.error("[give the queue number shown by /queue]")
            return None
        items = (await self.inbox())["nextTurn"]
        index = int(number) - 1
        if not 0 <= index < len(items):
            chat.error(f"[no queued prompt {number}; {len(items)} queued]")
            return None
        return items[index], rest.strip()

    async def drop(self, arg: str) -> None:
        found = await self.numbered(arg)
        if found is None:
            return
        item, _ = found
        params = {"sessionId": self.chat.session_id, "messageId": item["id"]}
        removed = (await self.chat.rpc.request("dsh/inbox/remove", params))["removed"]
        text = clip(message_text(item["content"]), 80)
        self.chat.note(f"[dropped: {text}]" if removed else "[already taken by a turn]")

    async def edit(self, arg: str) -> None:
        found = await self.numbered(arg)
        if found is None:
            return
        item, text = found
        if not text:
            self.chat.error("[/edit N TEXT]")
            return
        params = {"sessionId": self.chat.session_id, "messageId": item["id"], "message": {"content": text}}
        await self.chat.rpc.request("dsh/inbox/replace", params)
        self.chat.note(f"[edited: {clip(text, 80)}]")

    async def wake(self, _: str) -> None:
        result = await self.chat.rpc.request("dsh/wake", {"sessionId": self.chat.session_id})
        if not result.get("started"):
            busy = self.chat.status.state == "running"
            self.chat.note("[a turn is already running]" if busy else "[nothing is queued]")

    async def cancel(self, _: str) -> None:
        await self.chat.rpc.request("dsh/cancel", {"sessionId": self.chat.session_id, "keepInbox": True})

    async def clear(self, _: str) -> None:
        chat = self.chat
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
        match = ATTACH_RE.match(arg)
        assert match is not None
        path = Path(chat.cwd, match["path"]).expanduser().resolve()  # noqa: ASYNC240 (a local stat)
        if not path.is_file():
            chat.error(f"[no such file: {match['path']}]")
            return
        params: dict[str, Any] = {"uri": path.as_uri(), "kind": "file"}
        label = match["path"]
        if match["l1"]:
            first = int(match["l1"])
            last = int(match["l2"] or first)
            if first < 1 or last < first:
                chat.error("[lines count from 1: PATH:L1-L2 with L1 ≤ L2]")
                return
            params["kind"] = "selection"
            params["range"] = {
                "start": {"line": first - 1, "character": 0},
                "end": {"line": last, "character": 0},
            }
            label += f" lines {first}-{last}"
        chat.attachments.append({"params": params, "label": label})
        chat.note(f"[📎 {label}: goes with your next prompt]")

    # ---- sessions ----------------------------------------------------------------------------------

    async def list_sessions(self) -> list[dict[str, Any]]:
        sessions: list[dict[str, Any]] = (
            await self.chat.rpc.request("dsh/session/list", {"cwd": self.chat.cwd})
        )["sessions"]
        self.chat.session_list = sessions
        return sessions

    def describe(self, session: dict[str, Any]) -> str:
        current = " (this one)" if session["sessionId"] == self.chat.session_id else ""
        pending = f", {session['pending']} queued" if session.get("pending") else ""
        title = clip(session.get("title") or "(untitled)", 60)
        return f"{session['sessionId'][:8]}  {title}  — {_ago(session['updatedAt'])}{pending}{current}"

    async def sessions(self, _: str) -> None:
        chat = self.chat
        sessions = await self.list_sessions()
        if not sessions:
            chat.note("[no sessions in this directory]")
        for number, session in enumerate(sessions, 1):
            chat.view.print(f"  {chat.paint(CYAN, str(number))}. {self.describe(session)}")

    async def resume(self, arg: str) -> None:
        chat = self.chat
        if chat.status.state == "running":
            chat.error("[a turn is running: Ctrl-C (or /cancel) first]")
            return
        sessions = await self.list_sessions()
        if not arg:
            if not sessions:
                chat.note("[no sessions in this directory]")
                return
            choice = await chat.view.pick("resume which session?", [self.describe(s) for s in sessions])
            if choice is None:
                if not chat.view.interactive:
                    for number, session in enumerate(sessions, 1):
                        chat.view.print(f"  {number}. {self.describe(session)}")
                    chat.note("[/resume N picks one]")
                return
            session_id = sessions[choice]["sessionId"]
        elif arg.isdigit() and 1 <= int(arg) <= len(sessions):
            session_id = sessions[int(arg) - 1]["sessionId"]
        else:
            matches = [s["sessionId"] for s in sessions if s["sessionId"].startswith(arg)]
            session_id = matches[0] if len(matches) == 1 else arg
        if session_id == chat.session_id:
            chat.note("[already in this session]")
            return
        chat.note(f"[resuming {session_id}]")
        await chat.attach(session_id)

    async def help(self, _: str) -> None:
        for name, text in COMMANDS.items():
            self.chat.view.print(f"  {self.chat.paint(CYAN, f'{name:<10}')} {text}")
        self.chat.note(
            "  Enter sends (queued while busy) · Alt-Enter new line"
            " · Ctrl-C cancels the turn, keeps the queue"
        )


def _ago(ms: int) -> str:
    seconds = max(0, time.time() - ms / 1000)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return "just now"
