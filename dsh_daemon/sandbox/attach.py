"""A client's terminal as the stdio of a confined command (issue 41.4): the daemon's side.

An ACP client's terminal cannot be confined, but what it shows can come from a confined command:
the terminal runs a tiny wrapper (`attach_client.py`) that connects to the session's attach socket,
hands over its stdin, stdout and stderr (SCM_RIGHTS) with a one-time token, and waits for the exit
status. The daemon runs the command it registered for that token, in the session's own sandbox, on
those fds (`Sandbox.spawn` takes fds), and sends the status back.

What makes a connection acceptable (anything else is refused and closed, nothing runs):
- the socket lives in DSH_HOME's run dir (mode 0700), which confined commands cannot reach (the
  sandbox masks DSH_HOME, and seccomp refuses them AF_UNIX sockets in layer 0);
- the peer is the daemon's own user (SO_PEERCRED);
- it sends a token the daemon issued for one command and has not seen used (each token is
  forgotten at its first use and when its command's call ends), with exactly three fds;
- the command is the one registered with the token: a wrapper's own argv is only what the terminal
  shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

TOKEN_VARIABLE = "DSH_ATTACH_TOKEN"  # the wrapper reads the token there (not in argv: /proc shows argv)
CLIENT = Path(__file__).with_name("attach_client.py")
SUN_PATH_MAX = 107
HELLO_TIMEOUT_S = 10.0  # a connection that sends no token in this long is dropped
_UCRED = struct.Struct("3i")  # pid, uid, gid


def wrapper_argv(socket_path: Path, shown: list[str]) -> list[str]:
    """What the client's terminal runs: the wrapper, as a file with `-I -S` (nothing of the package
    or site-packages is imported: it starts in a few milliseconds), then `shown` after `--`."""
    return [sys.executable, "-I", "-S", str(CLIENT), str(socket_path), "--", *shown]


@dataclass(frozen=True)
class Stdio:
    """The three fds a wrapper handed over (the daemon's copies: close them once passed on)."""

    stdin: int
    stdout: int
    stderr: int

    def close(self) -> None:
        for fd in (self.stdin, self.stdout, self.stderr):
            with contextlib.suppress(OSError):
                os.close(fd)


@dataclass
class Ticket:
    """One command expected from a client's terminal: its token, the wrapper's fds once it
    connects (`attached`), and whether the wrapper asked to stop it or went away (`kill`)."""

    token: str
    attached: asyncio.Future[Stdio]
    kill: asyncio.Event = field(default_factory=asyncio.Event)
    _conn: socket.socket | None = field(default=None, repr=False)
    _forget: Callable[[str], None] = field(default=lambda _token: None, repr=False)

    def finish(self, status: int) -> None:
        """The command's exit status (negative: a signal) to the wrapper, which exits with it."""
        self._send(b"X%d" % status)
        self.close()

    def refuse(self, message: str) -> None:
        """The command will not run (the sandbox cannot be had): the wrapper says why and exits 126."""
        self._send(b"E" + message.encode(errors="replace")[:4000])
        self.close()

    def _send(self, data: bytes) -> None:
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.send(data)

    def close(self) -> None:
        """The call is over: the token is forgotten and the wrapper's connection shut (what was sent
        is still read by the wrapper; the server's reader then sees the end and closes it)."""
        self._forget(self.token)
        if not self.attached.done():
            self.attached.cancel()
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class AttachPoint:
    """A session's attach socket: `expect()` issues a ticket per command; `aclose()` ends it all."""

    def __init__(self, path: Path, listener: socket.socket) -> None:
        self.path = path
        self._listener = listener
        self._tickets: dict[str, Ticket] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self.uid = os.getuid()  # the one user whose wrappers are taken (SO_PEERCRED)

    @classmethod
    def open(cls, run_dir: Path) -> AttachPoint:
        """Listen on a new socket in `run_dir` (made 0700 if missing). Call from the event loop."""
        run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(run_dir, 0o700)
        path = run_dir / f"attach-{secrets.token_hex(6)}.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        try:
            _bind(listener, path)
            os.chmod(path, 0o600)
            listener.listen(8)
            listener.setblocking(False)
        except BaseException:
            listener.close()
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        point = cls(path, listener)
        asyncio.get_running_loop().add_reader(listener.fileno(), point._accept)
        return point

    def expect(self) -> Ticket:
        """A one-time token for the next command from a client's terminal."""
        if self._closed:
            raise RuntimeError("the attach socket is closed")
        token = secrets.token_urlsafe(32)
        ticket = Ticket(token, asyncio.get_running_loop().create_future())
        ticket._forget = self._forget
        self._tickets[token] = ticket
        return ticket

    def _forget(self, token: str) -> None:
        self._tickets.pop(token, None)

    def _accept(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return
        task = asyncio.get_running_loop().create_task(self._serve(conn))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, conn: socket.socket) -> None:
        """One wrapper: checked (uid, token, three fds), then watched for a kill or its end."""
        conn.setblocking(False)
        ticket: Ticket | None = None
        try:
            _pid, uid, _gid = _UCRED.unpack(
                conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
            )
            if uid != self.uid:
                return  # another user: closed, unanswered
            data, fds = await asyncio.wait_for(_recv(conn, with_fds=True), HELLO_TIMEOUT_S)
            token = data[1:].decode(errors="replace") if data.startswith(b"T") else ""
            ticket = self._tickets.pop(token, None) if token else None
            if ticket is None or len(fds) != 3 or ticket.attached.done():
                for fd in fds:
                    os.close(fd)
                with contextlib.suppress(OSError):
                    conn.send(b"Erefused: this token is not one the daemon issued, or it was used already")
                ticket = None
                return
            ticket._conn = conn
            ticket.attached.set_result(Stdio(*fds))
            while True:  # a kill request, or the wrapper gone: either way the tree is killed
                message, _ = await _recv(conn, with_fds=False)
                if not message or message == b"K":
                    ticket.kill.set()
                if not message:
                    return
        except (OSError, TimeoutError, ValueError, struct.error):
            if ticket is not None:
                ticket.kill.set()
        finally:
            conn.close()

    async def aclose(self) -> None:
        """No more commands: every ticket refused, the socket closed and removed."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(RuntimeError, ValueError):
            asyncio.get_running_loop().remove_reader(self._listener.fileno())
        self._listener.close()
        with contextlib.suppress(OSError):
            self.path.unlink()
        for ticket in list(self._tickets.values()):
            ticket.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def _bind(sock: socket.socket, path: Path) -> None:
    """Bind by `path`, or through a directory fd when the path is too long for sun_path."""
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        sock.bind(str(path))
        return
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        sock.bind(f"/proc/self/fd/{fd}/{path.name}")
    finally:
        os.close(fd)


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


async def _recv(conn: socket.socket, *, with_fds: bool) -> tuple[bytes, list[int]]:
    """One message (and, `with_fds`, the fds it carried), read from the event loop."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            if with_fds:
                data, fds, _flags, _addr = socket.recv_fds(conn, 4096, 8, socket.MSG_CMSG_CLOEXEC)
                return data, list(fds)
            return conn.recv(4096), []
        except BlockingIOError:
            pass
        ready: asyncio.Future[None] = loop.create_future()
        fd = conn.fileno()
        loop.add_reader(fd, _wake, ready)
        try:
            await ready
        finally:
            if conn.fileno() == fd:
                loop.remove_reader(fd)
