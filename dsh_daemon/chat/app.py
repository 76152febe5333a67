"""Start the daemon like an editor would, pick a view, and run the chat until the person leaves.

Exit status: 0; 1 when something failed (a turn ended in error, a permission question no one could
answer, the daemon exited, a session that `--resume` could not find); 130 after Ctrl-C at startup.
Errors are one line on stderr, never a traceback (`DSH_CHAT_DEBUG=1` shows it)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

from dsh_daemon.chat import rewind as rewinding
from dsh_daemon.chat.commands import Commands
from dsh_daemon.chat.core import Chat
from dsh_daemon.chat.plain import PlainView
from dsh_daemon.chat.render import RED, paint
from dsh_daemon.chat.rpc import RpcError, RpcPipe
from dsh_daemon.chat.sessions import NoSuchSession, find_session


class ChatError(RuntimeError):
    """A reason to stop that the person can act on, said in one line."""


async def _forward_stderr(stream: asyncio.StreamReader, chat: Chat) -> None:
    """The daemon's log lines, shown dim in the scrollback (the terminal view must not be torn)."""
    while line := await stream.readline():
        chat.note(line.decode(errors="replace").rstrip())


async def _session_to_open(rpc: RpcPipe, args: argparse.Namespace, cwd: str) -> str | None:
    """The session `--resume X` / `--continue` names (None: a new one, made on the first prompt)."""
    if args.continue_session or args.resume == "":
        sessions = (await rpc.request("dsh/session/list", {"cwd": cwd}))["sessions"]
        if not sessions:
            raise ChatError("no session to continue in this directory (`dsh-daemon sessions` lists them all)")
        return str(sessions[0]["sessionId"])
    if args.resume:
        every = (await rpc.request("dsh/session/list", {}))["sessions"]
        try:
            return str(find_session(every, args.resume)["sessionId"])
        except NoSuchSession as exc:
            raise ChatError(str(exc)) from None
    return None


async def _chat(args: argparse.Namespace, state_dir: Path) -> int:
    stdin_tty = sys.stdin.isatty()
    interactive = stdin_tty and sys.stdout.isatty() and os.environ.get("TERM") != "dumb" and not args.json
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
        # Piped: the answers on stdout, everything else on stderr, so the chat composes in pipelines.
        color = sys.stderr.isatty() and os.environ.get("TERM") != "dumb"
        view = PlainView(
            sys.stdout, sys.stderr, color=color, stream_answers=sys.stdout.isatty(), answers_off=args.json
        )
    chat = Chat(
        rpc,
        view,
        cwd=os.getcwd(),
        auto_allow=args.yes,
        allow_tools=frozenset(args.allow or ()),
        answers=interactive or stdin_tty,
        worktree=None if args.worktree is None else ({"branch": args.worktree} if args.worktree else {}),
    )
    if interactive:
        view.chat = chat
    commands = Commands(chat, state_dir=state_dir)
    if interactive:
        view.pull_last = commands.pull_last
        view.show_last = lambda: commands.show("")
        view.open_rewind = lambda: commands.guard(rewinding.rewind(chat, ""))

    def output_closed() -> None:
        """Whoever reads our stdout went away (`| head`): stop quietly, like any command in a pipe."""
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit either
        chat.closed.set()

    if not interactive:
        view.on_closed = output_closed

    def on_notification(method: str, params: Any) -> None:
        if args.json and method == "dsh/event" and isinstance(params, dict) and not chat.closed.is_set():
            if chat.session_id and params.get("sessionId") == chat.session_id:
                try:
                    sys.stdout.write(json.dumps(params, ensure_ascii=False) + "\n")
                    sys.stdout.flush()
                except BrokenPipeError:
                    output_closed()
        chat.on_notification(method, params)

    rpc.on_notification = on_notification
    rpc.on_request = chat.on_request
    rpc.on_error = lambda exc: chat.error(f"[{exc}]")
    reader = asyncio.ensure_future(rpc.read_forever())

    def daemon_gone(task: asyncio.Future[None]) -> None:
        lost = chat.closed.is_set()  # our own output went away first
        chat.closed.set()
        chat.idle.set()
        if not chat.leaving and not lost:
            chat.failed = True
            fault = None if task.cancelled() else task.exception()
            chat.error(
                f"[connection to the daemon lost: {fault}]"
                if fault
                else "[the daemon exited; see its log above]"
            )
            if interactive:
                view.quit()

    reader.add_done_callback(daemon_gone)
    if proc.stderr is not None:
        rpc.spawn(_forward_stderr(proc.stderr, chat))
    try:
        initialized = await rpc.request(
            "initialize", {"processId": os.getpid(), "rootUri": Path(chat.cwd).as_uri(), "capabilities": {}}
        )
        capabilities = ((initialized or {}).get("capabilities") or {}).get("experimental") or {}
        chat.capabilities = dict(capabilities.get("dsh") or {})
        rpc.notify("initialized", {})
        session_id = await _session_to_open(rpc, args, chat.cwd)
        if session_id is not None:
            await chat.attach(session_id)
        else:
            await chat.load_custom_commands(tell=True)  # for Tab and /help before the first prompt
        if interactive:
            await _interactive(chat, commands, view, " ".join(args.prompt))
        else:
            await _plain(chat, commands, " ".join(args.prompt), stdin_tty)
        waiting = chat.status.queued + chat.status.context
        if waiting and not chat.closed.is_set():
            chat.note(
                f"[{waiting} queued item(s) stay parked in session {chat.session_id[:8]}:"
                f" `dsh-daemon chat --resume {chat.session_id[:8]}` continues it]"
            )
    finally:
        chat.leaving = True
        if not await rpc.stop_daemon():
            print("dsh-daemon chat: the daemon did not exit when asked; it was killed", file=sys.stderr)
        reader.cancel()
    return 1 if chat.failed and not interactive else 0


async def _interactive(chat: Chat, commands: Commands, view: Any, prompt: str) -> None:
    from dsh_daemon.chat.tui import Edit

    lines: asyncio.Queue[str | Edit] = asyncio.Queue()

    async def worker() -> None:
        while True:
            line = await lines.get()
            try:
                if isinstance(line, Edit):
                    keep_going = True
                    await commands.guard(commands.save_edit(line.number, line.text))
                else:
                    keep_going = await commands.handle_line(line)
            except Exception as exc:  # a broken command must not end the chat
                chat.error(f"[{type(exc).__name__}: {exc}]")
                keep_going = True
            if not keep_going:
                view.quit()
                return

    where = f"session {chat.session_id[:8]}" if chat.session_id else "new session"
    chat.note(f"{where} — Enter sends, /help lists commands")
    if prompt:
        lines.put_nowait(prompt)
    task = asyncio.ensure_future(worker())
    try:
        await view.run(lines.put_nowait)
    finally:
        task.cancel()


async def _plain(chat: Chat, commands: Commands, prompt: str, stdin_tty: bool) -> None:
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
    if stdin_tty:
        chat.note("Enter sends; /help lists commands; a question takes a line (1-4, yes, always, no, cancel)")
    while not quit_requested.is_set():
        line_task = loop.run_in_executor(None, sys.stdin.readline)
        quit_task = asyncio.ensure_future(quit_requested.wait())
        done, _ = await asyncio.wait({line_task, quit_task}, return_when=asyncio.FIRST_COMPLETED)
        quit_task.cancel()
        if line_task not in done:
            break
        line = line_task.result()
        if not line:  # EOF: no more answers; finish what was asked, then leave
            chat.input_ended()
            await chat.idle.wait()
            break
        if chat.answer_line(line):  # a whole line that answers the open question
            continue
        if not await commands.handle_line(line):
            break


def _say(message: str) -> None:
    print(paint(sys.stderr.isatty(), RED, f"dsh-daemon chat: {message}"), file=sys.stderr)


def run_chat(args: argparse.Namespace, state_dir: Path) -> int:
    try:
        return asyncio.run(_chat(args, state_dir))
    except KeyboardInterrupt:
        return 130
    except (ChatError, ConnectionError) as exc:
        _say(str(exc))
    except RpcError as exc:
        _say(f"{exc.code or 'error'}: {exc}")
    except Exception as exc:  # one line, never a traceback (unless asked for)
        if os.environ.get("DSH_CHAT_DEBUG"):
            traceback.print_exc()
        _say(f"unexpected {type(exc).__name__}: {exc} (DSH_CHAT_DEBUG=1 shows where)")
    return 1
