"""A session's sandbox on the daemon's side: starts the fork server, hands it each command, and
reads back pids and exit statuses without blocking the event loop (`Sandbox`, `SandboxedProcess`)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import socket
import struct
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dsh_daemon.sandbox.forkserver import assign
from dsh_daemon.sandbox.level import probe_level, server_argv
from dsh_daemon.sandbox.policy import SandboxLevel, SandboxPolicy, SandboxUnavailable
from dsh_daemon.sandbox.rules import compute_rules

MAX_MESSAGE = 1 << 16
# After a command starts, the next spare pair is forked when it exits or this long after, whichever
# comes first: two forks of the server's process then do not compete with the command for the CPU
# while it starts. A command asked for before then takes no longer than it would have (its spawn asks
# for a spare itself when none is ready).
SPARE_DELAY = 0.05
# Names a confined command never sees, whatever the caller passes: the daemon's own key and anything
# that looks like a credential. (Callers build the environment; this is the last line.)
SECRET_NAME_PARTS = ("API_KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
PROXY_NAMES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


class SandboxStartError(SandboxUnavailable):
    """The fork server could not set up what the level promised."""


def command_environment(
    env: Mapping[str, str],
    *,
    tmpdir: str,
    proxy_port: int | None,
    own_env: Mapping[str, str] | None = None,
    own_loopback: bool = False,
) -> dict[str, str]:
    """What a confined command sees: the caller's environment without credentials, TMPDIR the
    private temp dir, and the proxy (or none) for every HTTP client that reads the usual names.
    `own_env`: variables the process was configured with itself (an MCP server's `env`, its own
    token among them), kept whatever their names; they cannot replace TMPDIR or the proxy.
    `own_loopback`: the command has the session's own loopback (layer 1's network namespace), where
    the session's background servers listen: HTTP clients reach it directly, not through the proxy
    (which refuses loopback). Without it (layer 0) loopback stays behind the proxy, whose refusal says
    why, as a direct connection would be refused by the seccomp filter anyway."""
    clean = {k: v for k, v in env.items() if not any(part in k.upper() for part in SECRET_NAME_PARTS)}
    clean.update(own_env or {})
    for name in ("NO_PROXY", "no_proxy"):
        clean.pop(name, None)
    clean["TMPDIR"] = tmpdir
    for name in PROXY_NAMES:
        clean.pop(name, None)
        if proxy_port:
            clean[name] = f"http://127.0.0.1:{proxy_port}"
    if own_loopback:
        clean["NO_PROXY"] = clean["no_proxy"] = "localhost,127.0.0.1,::1"
    return clean


def _present(paths: list[str]) -> list[str]:
    """Which of `paths` exist (a few lstat calls on the workspace's roots, as cheap as the rules'
    own look at them: not worth a thread per command)."""
    return [path for path in paths if os.path.lexists(path)]


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


class _Channel:
    """A SOCK_SEQPACKET end read from the event loop: each message with its fds and the sender's
    pid (SCM_CREDENTIALS, translated into our PID namespace by the kernel)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.setblocking(False)

    async def recv(self) -> tuple[bytes, list[int], int | None]:
        loop = asyncio.get_running_loop()
        while True:
            try:
                return self._recv_now()
            except BlockingIOError:
                pass
            ready = loop.create_future()
            fd = self.sock.fileno()
            loop.add_reader(fd, _wake, ready)
            try:
                await ready
            finally:
                # close() may have run while we waited (it stops watching fd itself): the socket's
                # fileno is then -1, and asking the loop about -1 would turn a cancel into an error.
                if self.sock.fileno() == fd:
                    loop.remove_reader(fd)

    def close(self) -> None:
        """Stop watching the socket (now, not when a cancelled read unwinds) and close it."""
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().remove_reader(self.sock.fileno())
        self.sock.close()

    def _recv_now(self) -> tuple[bytes, list[int], int | None]:
        space = socket.CMSG_SPACE(12) + socket.CMSG_SPACE(4 * 4)
        data, ancillary, _flags, _addr = self.sock.recvmsg(MAX_MESSAGE, space)
        fds: list[int] = []
        pid: int | None = None
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                usable = len(payload) - len(payload) % 4
                fds += list(struct.unpack(f"{usable // 4}i", payload[:usable]))
            elif level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = struct.unpack("iII", payload[:12])[0]
        return data, fds, pid


class SandboxedProcess:
    """A command started in the sandbox. `pid` is its pid as the daemon sees it (0 if it never
    started); `wait` gives the exit status as subprocess does (negative: the signal). Once it has
    exited, its socket is closed unless its leftovers are kept (closing would kill them)."""

    def __init__(
        self,
        channel: _Channel,
        pid: int,
        status: int | None,
        setup_error: str | None,
        *,
        keep_leftovers: bool = False,
        forget: Callable[[SandboxedProcess], None] = lambda _process: None,
        exited: Callable[[], None] = lambda: None,
    ) -> None:
        self._channel = channel
        self.pid = pid
        self.setup_error = setup_error  # the child's message when confinement failed (status 126)
        self._status = status
        self._closed = False
        self._keep_leftovers = keep_leftovers
        self._forget = forget
        self._exited = exited
        self._reading: asyncio.Task[int] | None = None
        self._eof: asyncio.Task[None] | None = None
        if status is not None:
            exited()
            if not keep_leftovers:
                self.close()

    async def wait(self) -> int:
        """The exit status; any number of callers may wait at once."""
        if self._status is not None:
            return self._status
        if self._reading is None:
            self._reading = asyncio.get_running_loop().create_task(self._read_status())
        return await asyncio.shield(self._reading)

    async def _read_status(self) -> int:
        while self._status is None:
            data, fds, _pid = await self._channel.recv()
            for fd in fds:
                os.close(fd)
            if not data:
                self._status = -signal.SIGKILL  # the shepherd died without a word: treat as killed
            elif data.startswith(b"X"):
                self._status = int(data[1:])
            elif data.startswith(b"E"):
                self.setup_error = data[1:].decode(errors="replace")
        self._exited()
        if not self._keep_leftovers:
            self.close()  # its tree is dead or being killed: nothing left to control
        elif not self._closed:
            self._eof = asyncio.get_running_loop().create_task(self._close_at_eof())
        return self._status

    async def _close_at_eof(self) -> None:
        """A kept tree: the shepherd closes its end once the last of it has exited."""
        with contextlib.suppress(OSError):
            while (await self._channel.recv())[0]:
                pass
        self._eof = None
        self.close()

    @property
    def returncode(self) -> int | None:
        return self._status

    @property
    def closed(self) -> bool:
        return self._closed

    def kill_tree(self, sig: int = signal.SIGKILL) -> None:
        """Signal the command and everything it started (setsid and double fork included): the
        shepherd is their subreaper."""
        if self._closed:
            return
        try:
            self._channel.sock.send(b"K%d" % sig)
        except OSError:
            pass

    def close(self) -> None:
        """Forget the command; the shepherd kills whatever of its tree is still running."""
        if not self._closed:
            self._closed = True
            if self._eof is not None:
                self._eof.cancel()
            self._channel.close()
            self._forget(self)


@dataclasses.dataclass
class _Server:
    """The daemon's side of one fork server. After the ready message, one task reads the control
    socket: spare pairs (a shepherd and a command's child forked ahead, handed over as two sockets)
    and replies, in the server's order. One spare is kept ready: a command goes straight to it."""

    process: subprocess.Popen[bytes]
    control: _Channel
    rules: dict[str, Any]
    proxy: socket.socket | None
    spares: list[tuple[socket.socket, socket.socket]] = dataclasses.field(default_factory=list)
    replies: asyncio.Queue[dict[str, Any]] = dataclasses.field(default_factory=asyncio.Queue)
    changed: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    requested: int = 0
    gone: bool = False
    reader: asyncio.Task[None] | None = None
    later: asyncio.TimerHandle | None = None

    def begin(self) -> None:
        self.reader = asyncio.get_running_loop().create_task(self._read())
        self.replenish()

    def replenish_later(self) -> None:
        """Ask for the next spare pair once the command just started is past its start (SPARE_DELAY)."""
        if self.later is None:
            self.later = asyncio.get_running_loop().call_later(SPARE_DELAY, self.replenish)

    def replenish(self) -> None:
        if self.later is not None:
            self.later.cancel()
            self.later = None
        if not self.gone and len(self.spares) + self.requested < 1:
            self.requested += 1
            self.send(b'{"op": "spare"}', [])

    async def take_spare(self) -> tuple[socket.socket, socket.socket]:
        while not self.spares:
            if self.gone:
                raise SandboxUnavailable("the sandbox's fork server is gone")
            self.replenish()
            self.changed.clear()
            await self.changed.wait()
        return self.spares.pop(0)

    async def _read(self) -> None:
        try:
            while True:
                data, fds, _pid = await self.control.recv()
                if not data:
                    break
                message = json.loads(data)
                if message.get("spare") and len(fds) == 2:
                    self.requested -= 1
                    self.spares.append((socket.socket(fileno=fds[0]), socket.socket(fileno=fds[1])))
                else:
                    for fd in fds:
                        os.close(fd)
                    if message.get("rules"):
                        self._drop_spares()  # forked with the rules just replaced
                    self.replies.put_nowait(message)
                self.changed.set()
        except (OSError, ValueError):
            pass
        finally:
            self.gone = True
            self._drop_spares()
            self.replies.put_nowait({"ok": False, "error": "the fork server exited"})
            self.changed.set()

    def _drop_spares(self) -> None:
        for to_child, to_shepherd in self.spares:
            to_child.close()
            to_shepherd.close()
        self.spares.clear()

    def send(self, data: bytes, fds: list[int]) -> None:
        """One message to the server. Blocking for that moment: the control socket is read by the
        event loop (non-blocking), and a full buffer (a burst of spawns) must wait, not fail."""
        sock = self.control.sock
        sock.setblocking(True)
        try:
            if fds:
                socket.send_fds(sock, [data], fds)
            else:
                sock.send(data)
        finally:
            sock.setblocking(False)

    async def close(self) -> None:
        if self.later is not None:
            self.later.cancel()
            self.later = None
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.reader
        self._drop_spares()
        self.control.sock.close()
        if self.proxy is not None:
            self.proxy.close()
        await asyncio.to_thread(self._wait)

    def _wait(self) -> None:
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _popen_server(control: socket.socket) -> subprocess.Popen[bytes]:
    """The fork server's process (fork and exec by _posixsubprocess: safe from a threaded daemon)."""
    return subprocess.Popen(
        server_argv(str(control.fileno())),
        pass_fds=[control.fileno()],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},  # nothing of the daemon's secrets
        cwd="/",
    )


async def _start_server(rules: dict[str, Any]) -> tuple[_Server, list[int]]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        process = _popen_server(theirs)
    finally:
        theirs.close()
    message = json.dumps(rules).encode()
    # The rules are one SOCK_SEQPACKET message: a protected path beside thousands of entries (a
    # crowded /tmp or home: Landlock grants each sibling by name) passed the default send buffer
    # (~208 KiB) and failed as "Message too long". The fork server reads up to 1 MiB; the kernel caps
    # the buffer at net.core.wmem_max, and a message it still refuses is said in words.
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 2 * len(message) + (64 << 10))
    try:
        ours.send(message)
    except OSError as exc:
        ours.close()
        process.kill()
        await asyncio.to_thread(process.wait)
        raise SandboxStartError(
            f"sandbox fork server: its rules ({len(message) // 1024} KiB: every entry beside a protected "
            f"path is named) could not be sent: {exc.strerror}"
        ) from exc
    control = _Channel(ours)
    data, fds, _pid = await control.recv()
    answer = json.loads(data) if data else {"ok": False, "error": "the fork server exited"}
    if not answer.get("ok"):
        for fd in fds:
            os.close(fd)
        ours.close()
        await asyncio.to_thread(process.wait)
        raise SandboxStartError(f"sandbox fork server: {answer.get('error')}")
    server = _Server(process, control, rules, None)
    server.begin()
    return server, fds


class Sandbox:
    """One per session: its fork server, its rules, the proxy's listening socket."""

    def __init__(self, policy: SandboxPolicy, level: SandboxLevel, server: _Server) -> None:
        self.policy = policy
        self.level = level
        self._server = server
        self._retired: list[_Server] = []
        self._processes: set[SandboxedProcess] = set()
        self._lock = asyncio.Lock()
        self._appeared: list[str] = []  # protected names found by `spawn`, not yet told

    @property
    def proxy_port(self) -> int | None:
        proxy = self._server.proxy
        return int(proxy.getsockname()[1]) if proxy is not None else None

    def proxy_socket(self) -> socket.socket | None:
        """The listening socket the egress proxy serves (inside the session's network namespace in
        layer 1, on the host's loopback in layer 0); None in full-access."""
        return self._server.proxy

    @property
    def layer1(self) -> bool:
        return bool(self._server.rules.get("namespaces"))

    @classmethod
    async def start(cls, policy: SandboxPolicy, level: SandboxLevel | None = None) -> Sandbox:
        """Start the session's fork server. A confined mode that cannot be had raises
        SandboxUnavailable (never a silent fallback to unconfined); layer 1 failing at start falls
        back to layer 0 and the level says why."""
        level = level if level is not None else await asyncio.to_thread(probe_level)
        level, server = await cls._server_for(policy, level)
        return cls(policy, level, server)

    @staticmethod
    async def _server_for(policy: SandboxPolicy, level: SandboxLevel) -> tuple[SandboxLevel, _Server]:
        if not policy.confined:
            rules = compute_rules(policy, level, namespaces=False, proxy_port=None)
            server, _fds = await _start_server(rules)
            return level, server
        if policy.layers == "none":
            raise SandboxUnavailable(
                f"{policy.mode}: confinement is switched off (layers=none); only full-access can run commands"
            )
        if not level.confined:
            raise SandboxUnavailable(f"{policy.mode} cannot be had here: {level.describe()}")
        if level.namespaces and policy.layers == "landlock-only":
            level = dataclasses.replace(
                level, namespaces=False, reasons=(*level.reasons, "namespaces switched off (landlock-only)")
            )
        if level.namespaces:
            rules = compute_rules(policy, level, namespaces=True, proxy_port=None)
            try:
                server, fds = await _start_server(rules)
            except SandboxStartError as exc:
                level = dataclasses.replace(
                    level, namespaces=False, reasons=(*level.reasons, f"namespaces failed at start: {exc}")
                )
            else:
                server.proxy = socket.socket(fileno=fds[0]) if fds else None
                return level, server
        proxy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            proxy.bind(("127.0.0.1", 0))
            proxy.listen(128)
            rules = compute_rules(policy, level, namespaces=False, proxy_port=proxy.getsockname()[1])
            server, _fds = await _start_server(rules)
        except BaseException:
            proxy.close()
            raise
        server.proxy = proxy
        return level, server

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        stdin: int,
        stdout: int,
        stderr: int,
        keep_leftovers: bool = False,
        own_env: Mapping[str, str] | None = None,
    ) -> SandboxedProcess:
        """Start `argv` as this session's policy allows. When the command exits, what it left
        running is killed unless `keep_leftovers` (a background command's own children).
        `own_env`: the process's own configured variables (`command_environment`)."""
        if not argv:
            raise ValueError("empty argv")
        self._appeared += await self._protect_appeared()
        rules = self._server.rules
        if rules["confine"]:
            env = command_environment(
                env,
                tmpdir=rules["tmpdir"],
                proxy_port=self.proxy_port,
                own_env=own_env,
                own_loopback=self.layer1,
            )
        elif own_env:
            env = {**env, **own_env}
        request = {"argv": list(argv), "cwd": str(cwd), "env": dict(env), "keep_leftovers": keep_leftovers}
        data = json.dumps(request).encode()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        channel = _Channel(ours)
        pid = 0
        try:
            for attempt in range(3):
                to_child, to_shepherd = await self._server.take_spare()
                try:
                    # The spare's child said it was ready (its pid in the credentials) once prepared:
                    # normally long before, so this reads a message already there.
                    to_child.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
                    ready, fds, sender = await _Channel(to_child).recv()
                    for fd in fds:
                        os.close(fd)
                    if ready != b"R" or not sender:
                        raise OSError(f"the spare's child is gone ({ready!r})")
                    pid = sender
                    to_child.setblocking(True)
                    assign(
                        to_child, to_shepherd, data, [stdin, stdout, stderr, theirs.fileno()], keep_leftovers
                    )
                    break
                except OSError as exc:
                    if attempt == 2:  # three spares gone in a row: the server is in trouble
                        raise SandboxUnavailable(f"the sandbox's spare processes are gone: {exc}") from exc
                finally:
                    to_child.close()
                    to_shepherd.close()
                    self._server.replenish_later()
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        # Nothing is waited for: a setup that fails (status 126) is told with the exit status.
        process = SandboxedProcess(
            channel,
            pid,
            None,
            None,
            keep_leftovers=keep_leftovers,
            forget=self._processes.discard,
            exited=self._replenish,
        )
        self._processes.add(process)
        return process

    def _replenish(self) -> None:
        """A command exited: the session's (current) server forks the next spare pair now."""
        self._server.replenish()

    async def protect_appeared(self) -> list[str]:
        """Protected names (`.git`, `.dsh` of a root) that were missing when the rules were computed
        and exist now: the rules are rebuilt so they are protected from now on (in layer 1 for the
        commands still running too: the binds are added in their mount namespace). Returns them (and
        those found by `spawn` since the last call), for the caller to tell the person: what was
        written there before they were protected is not undone. A few `lstat`s when nothing changed."""
        appeared, self._appeared = [*self._appeared, *await self._protect_appeared()], []
        return appeared

    async def _protect_appeared(self) -> list[str]:
        watch = self._server.rules.get("watch") or []
        appeared = _present(watch)
        if appeared:
            await self.update(self.policy)
        return appeared

    async def update(self, policy: SandboxPolicy) -> None:
        """The roots, mode or widenings changed: the rules are rebuilt once. Running commands keep
        the rules they started with. A change to or from full-access starts a new fork server
        (call proxy_socket() again)."""
        async with self._lock:
            if policy.confined == self.policy.confined and policy.layers == self.policy.layers:
                rules = compute_rules(policy, self.level, namespaces=self.layer1, proxy_port=self.proxy_port)
                self._server.send(json.dumps({"op": "rules", **rules}).encode(), [])
                answer = await self._server.replies.get()
                if not answer.get("ok"):
                    raise SandboxUnavailable(f"sandbox rules not applied: {answer.get('error')}")
                self._server.rules = rules
            else:
                level, server = await self._server_for(policy, probe_level())
                self._retired.append(self._server)
                self._server, self.level = server, level
            self.policy = policy

    async def aclose(self) -> None:
        """Kill everything this sandbox started and stop its fork servers."""
        for process in list(self._processes):
            process.kill_tree(signal.SIGKILL)
            process.close()
        self._processes.clear()
        for server in [self._server, *self._retired]:
            await server.close()
        self._retired.clear()
