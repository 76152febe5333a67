"""`dsh-daemon chat`: a small terminal client that talks to the daemon exactly like an editor does.

It spawns `python -m dsh_daemon` over stdio and speaks the dsh/* protocol. The reply streams as it
arrives (reasoning dimmed, tool calls as one-line cards); permissions are asked at the prompt; a
line typed while the agent is busy is queued (a followup); `/steer TEXT` steers the running turn;
Ctrl-C cancels the turn keeping the queue (a second Ctrl-C when idle quits); `--resume` continues a
session. With a prompt argument and no terminal, it runs that prompt (plus any piped lines) and exits
when the agent is idle.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

DIM, RED, CYAN, RESET = "\x1b[2m", "\x1b[31m", "\x1b[36m", "\x1b[0m"
HELP = "commands: /steer TEXT, /inject TEXT, /queue, /cancel, /help, /quit (Enter while busy queues)"


class RpcPipe:
    """A minimal JSON-RPC client over the daemon's stdio (Content-Length framing)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self.on_notification: Any = lambda method, params: None
        self.on_request: Any = None
        self._tasks: set[asyncio.Future[Any]] = set()

    def _write(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        body = json.dumps(message).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def request(self, method: str, params: Any = None) -> Any:
        msg_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[msg_id] = future
        self._write({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return await future

    def notify(self, method: str, params: Any = None) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    async def read_forever(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        while True:
            length = None
            while True:
                line = await stdout.readline()
                if not line:
                    for future in self._waiting.values():
                        if not future.done():
                            future.set_exception(ConnectionError("the daemon exited"))
                    return
                if line in (b"\r\n", b"\n"):
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if length is None:
                continue
            message = json.loads(await stdout.readexactly(length))
            if "method" in message and "id" in message:
                self.spawn(self._answer(message))
            elif "method" in message:
                self.on_notification(message["method"], message.get("params"))
            else:
                future = self._waiting.pop(message.get("id"), None)
                if future is not None and not future.done():
                    if "error" in message:
                        future.set_exception(RuntimeError(message["error"].get("message", "error")))
                    else:
                        future.set_result(message.get("result"))

    def spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            print(f"dsh-daemon chat: {task.exception()}", file=sys.stderr)

    async def _answer(self, message: dict[str, Any]) -> None:
        try:
            result = await self.on_request(message["method"], message.get("params"))
            self._write({"jsonrpc": "2.0", "id": message["id"], "result": result})
        except Exception as exc:
            self._write(
                {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32603, "message": str(exc)}}
            )


class Chat:
    def __init__(self, rpc: RpcPipe, out: TextIO, *, color: bool, auto_allow: bool) -> None:
        self.rpc = rpc
        self.out = out
        self.color = color
        self.auto_allow = auto_allow
        self.session_id = ""
        self.status = "idle"
        self.idle = asyncio.Event()
        self.idle.set()
        self.answer: asyncio.Future[str] | None = None
        self.in_reasoning = False
        self.replaying = False
        self.tool_names: dict[str, str] = {}

    def paint(self, code: str, text: str) -> str:
        return f"{code}{text}{RESET}" if self.color else text

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    # ---- events ------------------------------------------------------------------------------------

    def on_notification(self, method: str, params: Any) -> None:
        if method != "dsh/event" or params.get("sessionId") != self.session_id:
            return
        kind, data = params["type"], params["data"]
        if self.replaying:
            self.render_history(kind, data)
            return
        if kind == "agent/status":
            self.status = data["status"]
            (self.idle.set if self.status == "idle" else self.idle.clear)()
        elif kind == "assistant/delta":
            delta = data["delta"]
            if delta["type"] == "reasoning":
                if not self.in_reasoning:
                    self.in_reasoning = True
                self.write(self.paint(DIM, delta["text"]))
            elif delta["type"] == "text":
                if self.in_reasoning:
                    self.in_reasoning = False
                    self.write("\n")
                self.write(delta["text"])
        elif kind == "tool/call":
            self.tool_names[data["callId"]] = data["name"]
            self.write("\n" + self.paint(CYAN, f"  ⚙ {data['name']} {_clip(data['arguments'], 90)}") + "\n")
        elif kind == "tool/output":
            self.write(self.paint(DIM, data["text"]))
        elif kind == "tool/result":
            call_id = data["message"]["source"]["callId"]
            name = self.tool_names.get(call_id, "tool")
            text = "".join(b.get("text", "") for b in data["message"]["content"][0]["content"])
            mark = self.paint(RED, "  ✗") if data.get("error") else "  ✓"
            self.write(f"{mark} {name}: {_clip(text, 100)}\n")
        elif kind == "llm/retry":
            self.write(
                self.paint(
                    DIM, f"\n[retry {data['retry']} in {data['delayMs']} ms: {data['error']['code']}]\n"
                )
            )
        elif kind == "turn/end":
            reason = data["reason"]
            if reason["kind"] == "error":
                self.write(
                    "\n" + self.paint(RED, f"[error {reason['error']['code']}: {reason['error']['message']}]")
                )
            elif reason["kind"] == "aborted":
                self.write("\n" + self.paint(DIM, f"[cancelled: {reason.get('cause', 'user')}]"))
            self.write("\n")
            self.in_reasoning = False

    def render_history(self, kind: str, data: Any) -> None:
        if kind == "user/message" and data["source"].get("kind") == "user":
            self.write(self.paint(CYAN, "> ") + _text(data["content"]) + "\n")
        elif kind == "assistant/message" and data["message"]["content"]:
            self.write(_text(data["message"]["content"]) + "\n")

    async def on_request(self, method: str, params: Any) -> Any:
        if method != "dsh/requestPermission":
            raise RuntimeError(f"unsupported request {method}")
        if self.auto_allow:
            return {"outcome": "allow-once"}
        args = json.dumps(params.get("arguments"), ensure_ascii=False)
        self.write(f"\n{self.paint(CYAN, '? ' + params['title'])}\n  {_clip(args, 300)}\n")
        self.write("  allow? [y]es once / [a]lways / [n]o / [c]ancel turn: ")
        self.answer = asyncio.get_running_loop().create_future()
        try:
            choice = (await self.answer).strip().lower()
        finally:
            self.answer = None
        outcome = {"y": "allow-once", "yes": "allow-once", "a": "allow-always", "n": "reject", "no": "reject"}
        return {"outcome": outcome.get(choice, "cancelled")}

    # ---- input -------------------------------------------------------------------------------------

    async def handle_line(self, line: str) -> bool:
        """Returns False to quit."""
        if self.answer is not None and not self.answer.done():
            self.answer.set_result(line)
            return True
        text = line.strip()
        if not text:
            return True
        if text in ("/quit", "/exit"):
            return False
        if text == "/help":
            self.write(HELP + "\n")
            return True
        if text == "/cancel":
            await self.rpc.request("dsh/cancel", {"sessionId": self.session_id, "keepInbox": True})
            return True
        if text == "/queue":
            listing = await self.rpc.request("dsh/inbox/list", {"sessionId": self.session_id})
            for item in listing["nextTurn"]:
                self.write(f"  queued: {_text(item['content'])}\n")
            return True
        method = "dsh/followup"
        if text.startswith("/steer "):
            method, text = "dsh/steer", text[len("/steer ") :]
        elif text.startswith("/inject "):
            method, text = "dsh/inject", text[len("/inject ") :]
        busy = self.status == "running"
        await self.rpc.request(method, {"sessionId": self.session_id, "message": {"content": text}})
        if busy and method == "dsh/followup":
            self.write(self.paint(DIM, "[queued]\n"))
        return True


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


def _clip(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def _chat(args: argparse.Namespace, state_dir: Path) -> int:
    from dsh_daemon.cli import provider_flags

    command = [sys.executable, "-m", "dsh_daemon", "--state-dir", str(state_dir)]
    for key, flag in (("model", "--model"), ("baseUrl", "--base-url")):
        if key in provider_flags(args):
            command += [flag, provider_flags(args)[key]]
    if args.no_thinking:
        command.append("--no-thinking")
    # Its own session: Ctrl-C in the terminal reaches this client (which cancels the turn), never the
    # daemon itself.
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=None,
        start_new_session=True,
    )
    rpc = RpcPipe(proc)
    interactive = sys.stdin.isatty()
    chat = Chat(rpc, sys.stdout, color=sys.stdout.isatty(), auto_allow=args.yes)
    rpc.on_notification = chat.on_notification
    rpc.on_request = chat.on_request
    reader = asyncio.ensure_future(rpc.read_forever())
    cwd = os.getcwd()
    await rpc.request(
        "initialize", {"processId": os.getpid(), "rootUri": Path(cwd).as_uri(), "capabilities": {}}
    )
    rpc.notify("initialized", {})
    if args.resume is not None:
        session_id = args.resume
        if not session_id:
            sessions = (await rpc.request("dsh/session/list", {"cwd": cwd}))["sessions"]
            if not sessions:
                print("dsh-daemon chat: no session to resume in this directory", file=sys.stderr)
                return 1
            session_id = sessions[0]["sessionId"]
        chat.session_id = session_id
        chat.replaying = True
        attached = await rpc.request("dsh/session/attach", {"sessionId": session_id})
        chat.replaying = False
        pending = len(attached["inbox"]["nextTurn"]) + len(attached["inbox"]["nextStep"])
        if pending:
            chat.write(
                chat.paint(DIM, f"[{pending} queued item(s) parked; they run with your next message]\n")
            )
    else:
        chat.session_id = (await rpc.request("dsh/session/new", {"cwd": cwd}))["sessionId"]

    loop = asyncio.get_running_loop()
    quit_requested = asyncio.Event()

    def on_sigint() -> None:
        if chat.status == "running":
            rpc.spawn(rpc.request("dsh/cancel", {"sessionId": chat.session_id, "keepInbox": True}))
        else:
            quit_requested.set()

    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    if args.prompt:
        await chat.handle_line(" ".join(args.prompt))
    if interactive:
        chat.write(chat.paint(DIM, f"session {chat.session_id} — {HELP}\n"))
    while not quit_requested.is_set():
        line_task = loop.run_in_executor(None, sys.stdin.readline)
        quit_task = asyncio.ensure_future(quit_requested.wait())
        done, _ = await asyncio.wait({line_task, quit_task}, return_when=asyncio.FIRST_COMPLETED)
        quit_task.cancel()
        if line_task not in done:
            break
        line = line_task.result()
        if not line:  # EOF: finish what was asked, then leave
            await chat.idle.wait()
            break
        if not await chat.handle_line(line):
            break
    with contextlib.suppress(Exception):
        await asyncio.wait_for(rpc.request("shutdown"), 10)
        rpc.notify("exit")
    with contextlib.suppress(Exception):
        await asyncio.wait_for(proc.wait(), 10)
    reader.cancel()
    return 0


def run_chat(args: argparse.Namespace, state_dir: Path) -> int:
    try:
        return asyncio.run(_chat(args, state_dir))
    except KeyboardInterrupt:
        return 130
    except ConnectionError as exc:
        print(f"dsh-daemon chat: {exc}", file=sys.stderr)
        return 1
