"""Start the daemon like an editor would, pick a view, and run the chat until the person leaves."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

from dsh_daemon.chat.commands import Commands
from dsh_daemon.chat.core import Chat
from dsh_daemon.chat.plain import PlainView
from dsh_daemon.chat.render import RED, paint
from dsh_daemon.chat.rpc import RpcPipe

HELP = "commands: /queue /wake /drop N /edit N TEXT /steer /inject /attach /clear /sessions /resume /help"


async def _forward_stderr(stream: asyncio.StreamReader, chat: Chat) -> None:
    """The daemon's log lines, shown dim in the scrollback (the terminal view must not be torn)."""
    while line := await stream.readline():
        chat.note(line.decode(errors="replace").rstrip())


async def _chat(args: argparse.Namespace, state_dir: Path) -> int:
    interactive = sys.stdin.isatty() and sys.stdout.isatty() and os.environ.get("TERM") != "dumb"
    command = [sys.executable, "-m", "dsh_daemon", "--state-dir", str(state_dir)]
    # The daemon gets the same provider flags the person gave `dsh-daemon chat`.
    for value, flag in ((args.model, "--model"), (args.base_url, "--base-url")):
        if value:
            command += [flag, value]
    if args.no_thinking:
        command.append("--no-thinking")
    # Its own session: Ctrl-C in the terminal reaches this client (which cancels the turn), never the
    # daemon itself.
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE if interactive else None,
        start_new_session=True,
    )
    rpc = RpcPipe(proc)
    view: Any
    if interactive:
        from dsh_daemon.chat.tui import TuiView

        view = TuiView(state_dir / "chat-history")
    else:
        view = PlainView(sys.stdout, color=sys.stdout.isatty())
    chat = Chat(rpc, view, cwd=os.getcwd(), auto_allow=args.yes)
    if interactive:
        view.chat = chat
    commands = Commands(chat)
    rpc.on_notification = chat.on_notification
    rpc.on_request = chat.on_request
    rpc.on_error = lambda exc: chat.error(f"[{exc}]")
    reader = asyncio.ensure_future(rpc.read_forever())

    def daemon_gone(_: object) -> None:
        chat.closed.set()
        chat.idle.set()
        if not chat.leaving:
            chat.error("[the daemon exited; see its log above]")
            if interactive:
                view.quit()

    reader.add_done_callback(daemon_gone)
    if proc.stderr is not None:
        rpc.spawn(_forward_stderr(proc.stderr, chat))
    try:
        await rpc.request(
            "initialize", {"processId": os.getpid(), "rootUri": Path(chat.cwd).as_uri(), "capabilities": {}}
        )
        rpc.notify("initialized", {})
        if args.resume is not None:
            session_id = args.resume
            if not session_id:
                sessions = (await rpc.request("dsh/session/list", {"cwd": chat.cwd}))["sessions"]
                if not sessions:
                    print("dsh-daemon chat: no session to resume in this directory", file=sys.stderr)
                    return 1
                session_id = sessions[0]["sessionId"]
            await chat.attach(session_id)
        else:
            await chat.new_session()
        if interactive:
            await _interactive(chat, commands, view, " ".join(args.prompt))
        else:
            await _plain(chat, commands, " ".join(args.prompt))
        waiting = chat.status.queued + chat.status.context
        if waiting and interactive and not chat.closed.is_set():
            chat.note(
                f"[{waiting} queued item(s) stay parked in session {chat.session_id[:8]}:"
                " `dsh-daemon chat --resume` continues it]"
            )
    finally:
        chat.leaving = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(rpc.request("shutdown"), 10)
            rpc.notify("exit")
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait(), 10)
        reader.cancel()
    return 0


async def _interactive(chat: Chat, commands: Commands, view: Any, prompt: str) -> None:
    lines: asyncio.Queue[str] = asyncio.Queue()

    async def worker() -> None:
        while True:
            line = await lines.get()
            try:
                keep_going = await commands.handle_line(line)
            except Exception as exc:  # a broken command must not end the chat
                chat.error(f"[{type(exc).__name__}: {exc}]")
                keep_going = True
            if not keep_going:
                view.quit()
                return

    chat.note(f"session {chat.session_id} — Enter sends, /help lists commands")
    if prompt:
        lines.put_nowait(prompt)
    task = asyncio.ensure_future(worker())
    try:
        await view.run(lines.put_nowait)
    finally:
        task.cancel()


async def _plain(chat: Chat, commands: Commands, prompt: str) -> None:
    loop = asyncio.get_running_loop()
    quit_requested = chat.closed  # the daemon is gone, or Ctrl-C when idle

    def on_sigint() -> None:
        if chat.status.state == "running":
            chat.rpc.spawn(chat.rpc.request("dsh/cancel", {"sessionId": chat.session_id, "keepInbox": True}))
        else:
            quit_requested.set()

    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    if prompt:
        await commands.handle_line(prompt)
    if sys.stdin.isatty():
        chat.note(f"session {chat.session_id} — {HELP}")
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
        if chat.give_answer(line):  # an open permission question takes the next line
            continue
        if not await commands.handle_line(line):
            break


def run_chat(args: argparse.Namespace, state_dir: Path) -> int:
    try:
        return asyncio.run(_chat(args, state_dir))
    except KeyboardInterrupt:
        return 130
    except ConnectionError as exc:
        color = sys.stderr.isatty()
        print(paint(color, RED, f"dsh-daemon chat: {exc}"), file=sys.stderr)
        return 1
