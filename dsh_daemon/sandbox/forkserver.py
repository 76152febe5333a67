"""The fork server: one per session, single-threaded, started by the daemon with a control socket.

Why a separate process: the daemon is multi-threaded, and what must happen between fork and exec
(Landlock, dropping capabilities, seccomp) cannot run safely in a child forked from threads. This
process imports only the standard library (os, socket, json, signal, select, ctypes, struct, fcntl)
through the three small modules beside it, never the daemon's dependencies.

Layer 1: the launcher unshares user, mount, network, PID, IPC and UTS namespaces, maps its ids to
themselves, and forks the server as PID 1 of the new PID namespace; the server sets up the mounts
(read-only binds over the protected paths, empty read-only tmpfs over secret directories, /dev/null
over secret files, the private temp dir over /tmp, a fresh /proc), brings `lo` up and makes the
proxy's listening socket inside the new network namespace, handing it to the daemon (SCM_RIGHTS).
Layer 0 alone: the same server without namespaces (a child subreaper instead of PID 1).

The server forks spare pairs ahead of need and hands each to the daemon as two sockets: a shepherd
(a subreaper: nothing the command starts, setsid or double-forked, escapes it) and the command's
child it forked. Per command the daemon sends the child {argv, cwd, env} and four fds (stdin,
stdout, stderr, the command's own socket), and the shepherd that socket; so neither the server nor a
fork is on a command's path. The spare child prepares while it waits (setsid, the signals reset,
no_new_privs, Landlock (the ruleset built once), capabilities dropped, seccomp (the program packed
once)), then says it is ready (the daemon learns its pid from SCM_CREDENTIALS); once its request
comes: its stdio, every other fd closed, chdir, exec. Any failed step ends the child with status 126
and the reason on its stderr: a command never runs less confined than asked. The shepherd reports
the exit status, kills the tree when asked, when the daemon's socket closes, and (unless kept) what
is left when the command itself exits.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import sys
from typing import Any

from dsh_daemon.sandbox import kernel, landlock, seccomp

SETUP_FAILED = 126
NOT_FOUND = 127
MAX_MESSAGE = 1 << 20
# Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec.
RESET_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP)


class Confinement:
    """What the server applies to each command, prepared once: the Landlock ruleset fd and the
    seccomp program."""

    def __init__(self, rules: dict[str, Any]) -> None:
        self.confine: bool = rules["confine"]
        self.ruleset_fd = -1
        self.program = b""
        self.drop_capabilities = False
        if self.confine:
            self.drop_capabilities = kernel.has_capabilities()
            paths = [(str(p), int(r)) for p, r in rules["paths"]]
            self.ruleset_fd = landlock.build_ruleset(
                int(rules["abi"]), paths, rules["connect_ports"], scoped=True
            )
            self.program = seccomp.filter_program()

    def close(self) -> None:
        if self.ruleset_fd >= 0:
            os.close(self.ruleset_fd)
            self.ruleset_fd = -1


def _send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.send(data)


def _close_all_but(keep: set[int]) -> None:
    """Close every fd from 3 up except `keep` (close_range under os.closerange)."""
    low = 3
    for fd in sorted(keep):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, 1 << 20)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as f:
                found += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return found


def signal_descendants(sig: int) -> int:
    """Send `sig` to every descendant of this process (a subreaper: orphans come back to it).
    Returns how many were found."""
    todo = _children(os.getpid())
    seen: set[int] = set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        todo += _children(pid)
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    return len(seen)


def _prepare(confinement: Confinement) -> None:
    """In a spare command child, before it waits for its request: everything that does not depend on
    the request, so that none of it is on the command's path. A new session, the signals as a fresh
    process has them, then the confinement: no_new_privs, Landlock (the ruleset built once),
    capabilities dropped, seccomp (the program packed once). What runs after it (the request read,
    stdio, closing fds, chdir, exec) runs confined, as the command will: Landlock does not govern
    chdir, and seccomp refuses none of those calls."""
    os.setsid()
    for sig in RESET_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    signal.set_wakeup_fd(-1)
    if confinement.confine:
        kernel.no_new_privs()
        landlock.restrict_self(confinement.ruleset_fd)
        os.close(confinement.ruleset_fd)
        confinement.ruleset_fd = -1
        if confinement.drop_capabilities:
            kernel.drop_capabilities()
        seccomp.install(confinement.program)


def _exec_command(
    request: dict[str, Any], fds: list[int], channel: int, failed: BaseException | None
) -> None:
    """In the command's child, prepared (`_prepare`; `failed`: how that failed): never returns."""
    try:
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        _close_all_but({channel})
        os.set_inheritable(channel, False)
        if failed is not None:
            raise failed
        os.chdir(request["cwd"])
    except BaseException as exc:
        text = f"dsh-daemon sandbox: cannot confine the command, it was not run: {exc}"
        try:
            os.write(2, (text + "\n").encode())
            os.write(channel, b"E" + text.encode())
        finally:
            os._exit(SETUP_FAILED)
    try:
        argv = request["argv"]
        os.execvpe(argv[0], argv, request["env"])
    except BaseException as exc:
        try:
            os.write(2, f"dsh-daemon sandbox: cannot run {request['argv'][0]!r}: {exc}\n".encode())
        finally:
            os._exit(NOT_FOUND if isinstance(exc, FileNotFoundError) else SETUP_FAILED)


class Spare:
    """A shepherd and its command's child forked ahead of the next request, so that no fork is on a
    command's critical path (a fork costs about a millisecond on a small VM): the child waits for the
    request and its fds, the shepherd for the command's own socket."""

    def __init__(self, pid: int, to_shepherd: socket.socket, to_child: socket.socket) -> None:
        self.pid = pid
        self.to_shepherd = to_shepherd
        self.to_child = to_child

    def assign(self, data: bytes, fds: list[int], keep_leftovers: bool) -> None:
        assign(self.to_child, self.to_shepherd, data, fds, keep_leftovers)

    def close(self) -> None:
        """Unused or assigned: the server lets go of it (an unused one sees EOF and exits)."""
        self.to_shepherd.close()
        self.to_child.close()


def assign(
    to_child: socket.socket, to_shepherd: socket.socket, data: bytes, fds: list[int], keep_leftovers: bool
) -> None:
    """Give a spare pair its command: the request and stdio to the child, the command's own socket
    to the shepherd. The daemon does this itself with the pairs the server hands it."""
    socket.send_fds(to_child, [data], fds)
    socket.send_fds(to_shepherd, [b"keep" if keep_leftovers else b"kill"], [fds[3]])


def prefork(control: socket.socket, confinement: Confinement) -> Spare:
    to_shepherd, shepherd_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    to_child, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        control.close()
        to_shepherd.close()
        to_child.close()
        _shepherd(shepherd_end, child_end, confinement)
    shepherd_end.close()
    child_end.close()
    return Spare(pid, to_shepherd, to_child)


def _recv_request(sock: socket.socket) -> tuple[bytes, list[int]]:
    """A request and its fds; room is left for credentials too, and a message whose fds did not all
    fit counts as none (the command is then not run at all)."""
    space = socket.CMSG_SPACE(12) + socket.CMSG_SPACE(8 * 4)
    data, ancillary, flags, _addr = sock.recvmsg(MAX_MESSAGE, space)
    fds: list[int] = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += list(struct.unpack(f"{len(payload) // 4}i", payload[: len(payload) - len(payload) % 4]))
    if flags & socket.MSG_CTRUNC:
        return b"", fds
    return data, fds


def _await_request(child_end: socket.socket, confinement: Confinement) -> None:
    """In the pre-forked command child: prepares, then waits for its request; never returns. A
    failed preparation is reported once a request comes (on its stderr and socket): the command
    is refused, never run less confined than asked."""
    failed: BaseException | None = None
    try:
        _prepare(confinement)
    except BaseException as exc:
        failed = exc
    try:
        # Ready: the daemon reads this process's pid from the message's credentials when it takes
        # this spare, so that nothing need come back between a command's hand-over and its exec.
        child_end.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        child_end.send(b"R")
        child_end.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 0)
        data, fds = _recv_request(child_end)
    except OSError:
        os._exit(0)
    if not data or len(fds) != 4:
        os._exit(0)
    child_end.close()
    _exec_command(json.loads(data), fds, fds[3], failed)


def _shepherd(assignments: socket.socket, child_end: socket.socket, confinement: Confinement) -> None:
    """In the shepherd: never returns. Forks the command's child ahead, then waits for the command's
    socket; reports its status, kills its tree."""
    channel = -1
    status_sent = False
    try:
        kernel.set_child_subreaper()
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(wake_w)
        command = os.fork()
        if command == 0:
            assignments.close()
            _await_request(child_end, confinement)
        child_end.close()
        confinement.close()
        data, fds, _flags, _addr = socket.recv_fds(assignments, 64, 1)
        if not data or len(fds) != 1:
            os.kill(command, signal.SIGKILL)
            os._exit(0)
        assignments.close()
        channel = fds[0]
        keep_leftovers = data == b"keep"
        killing = False
        done = False
        while True:
            while True:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    pid, status = -1, 0
                if pid <= 0:
                    break
                if pid == command:
                    done = True
                    code = os.waitstatus_to_exitcode(status)
                    try:
                        os.write(channel, b"X%d" % code)
                    except OSError:
                        pass
                    status_sent = True
                    killing = killing or not keep_leftovers
            if pid < 0 and done:
                os._exit(0)
            if killing:
                signal_descendants(signal.SIGKILL)
            ready, _, _ = select.select([channel, wake_r], [], [], 0.05 if killing else None)
            if wake_r in ready:
                try:
                    os.read(wake_r, 512)
                except BlockingIOError:
                    pass
            if channel in ready:
                try:
                    data = os.read(channel, 64)
                except OSError:
                    data = b""
                if not data:
                    killing = True
                elif data.startswith(b"K"):
                    sig = int(data[1:])
                    if sig == signal.SIGKILL:
                        killing = True
                    signal_descendants(sig)
    except BaseException as exc:
        try:
            os.write(2, f"dsh-daemon sandbox: shepherd failed: {exc}\n".encode())
            signal_descendants(signal.SIGKILL)
            if channel >= 0 and not status_sent:
                os.write(channel, b"X%d" % SETUP_FAILED)
        finally:
            os._exit(1)


def _reap(*_: object) -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid <= 0:
            return


def _setup_namespace(rules: dict[str, Any]) -> None:
    """In PID 1 of the new namespaces: the mounts, /proc, lo."""
    mounts = rules["mounts"]
    kernel.mount("none", "/", None, kernel.MS_REC | kernel.MS_PRIVATE)
    kernel.mount("proc", "/proc", "proc", kernel.MS_NOSUID | kernel.MS_NODEV | kernel.MS_NOEXEC)
    if mounts.get("tmp"):
        kernel.mount(mounts["tmp"], "/tmp", None, kernel.MS_BIND | kernel.MS_REC)
    for path in mounts.get("pins", []):  # before the binds inside them
        kernel.pin(path)
    for path in mounts["ro_binds"]:
        kernel.bind_read_only(path)
    masked = kernel.MS_NOSUID | kernel.MS_NODEV | kernel.MS_NOEXEC | kernel.MS_RDONLY
    for path in mounts["mask_dirs"]:
        kernel.mount("tmpfs", path, "tmpfs", masked, "size=4k,mode=000")
    for path in mounts["mask_files"]:
        kernel.mount("/dev/null", path, None, kernel.MS_BIND)
        kernel.mount("none", path, None, kernel.MS_BIND | kernel.MS_REMOUNT | masked)
    kernel.loopback_up()


def serve(control: socket.socket, rules: dict[str, Any]) -> None:
    """The server loop (PID 1 in layer 1). Sends the ready message first."""
    proxy: socket.socket | None = None
    try:
        if rules.get("namespaces"):
            _setup_namespace(rules)
            proxy = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            proxy.bind(("127.0.0.1", 0))
            proxy.listen(128)
        else:
            kernel.set_child_subreaper()
        confinement = Confinement(rules)
    except Exception as exc:
        _send(control, {"ok": False, "error": str(exc)})
        return
    _send(control, {"ok": True}, [proxy.fileno()] if proxy else None)
    if proxy:
        proxy.close()
    signal.signal(signal.SIGCHLD, _reap)
    try:
        _serve_requests(control, rules, confinement)
    finally:
        _kill_everything()


def _serve_requests(control: socket.socket, rules: dict[str, Any], confinement: Confinement) -> None:
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(control, MAX_MESSAGE, 8)
        except OSError:
            data, fds = b"", []
        if not data:
            break
        request = json.loads(data)
        if request.get("op") == "spare":
            # The daemon hands the next command straight to this pair: the server is not on a
            # command's path at all, and the pair's forks happen while the daemon waits for a model.
            for fd in fds:
                os.close(fd)
            handed = prefork(control, confinement)
            try:
                _send(control, {"spare": True}, [handed.to_child.fileno(), handed.to_shepherd.fileno()])
            except OSError:
                break  # the daemon is gone
            finally:
                handed.close()
            continue
        if request.get("op") == "rules":
            for fd in fds:
                os.close(fd)
            try:
                if rules.get("namespaces"):
                    for path in request["mounts"].get("pins", []):
                        if path not in rules["mounts"].get("pins", []):
                            kernel.pin(path)
                    for path in request["mounts"].get("ro_binds", []):
                        if path not in rules["mounts"]["ro_binds"]:
                            kernel.bind_read_only(path)
                fresh = Confinement(request)
            except Exception as exc:
                _send(control, {"ok": False, "error": str(exc)})
                continue
            confinement.close()
            confinement, rules = fresh, request
            _send(control, {"ok": True, "rules": True})  # spares handed out before it are stale
            continue
        if len(fds) != 4:
            for fd in fds:
                os.close(fd)
            continue
        try:
            spare = prefork(control, confinement)
            try:
                spare.assign(data, fds, bool(request.get("keep_leftovers")))
            finally:
                spare.close()
        except OSError as exc:
            try:
                os.write(fds[3], b"E" + f"the sandbox's spare process is gone: {exc}".encode())
                os.write(fds[3], b"X%d" % SETUP_FAILED)
            except OSError:
                pass
        for fd in fds:
            os.close(fd)


def _kill_everything() -> None:
    """The daemon is gone or closed the sandbox (or the server failed): nothing it started outlives
    it."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for _ in range(200):
        if not signal_descendants(signal.SIGKILL):
            break
        _reap()
        select.select([], [], [], 0.01)


def launch(control: socket.socket) -> int:
    data = control.recv(MAX_MESSAGE)
    if not data:
        return 0
    rules = json.loads(data)
    if not rules.get("namespaces"):
        serve(control, rules)
        return 0
    try:
        kernel.unshare(
            kernel.CLONE_NEWUSER | kernel.CLONE_NEWNS | kernel.CLONE_NEWNET | kernel.CLONE_NEWPID
            | kernel.CLONE_NEWIPC | kernel.CLONE_NEWUTS
        )  # fmt: skip
        kernel.write_id_maps(int(rules["uid"]), int(rules["gid"]))
    except Exception as exc:
        _send(control, {"ok": False, "error": f"namespaces refused: {exc}"})
        return 1
    pid = os.fork()
    if pid == 0:
        try:
            serve(control, rules)
        finally:
            os._exit(0)
    control.close()
    _pid, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def probe_namespaces() -> str | None:
    """None when layer 1's namespaces can be set up here, else why not (run in a child process)."""
    uid, gid = os.getuid(), os.getgid()  # before unshare: after it they read as the overflow id
    try:
        kernel.unshare(
            kernel.CLONE_NEWUSER | kernel.CLONE_NEWNS | kernel.CLONE_NEWNET | kernel.CLONE_NEWPID
        )  # fmt: skip
        kernel.write_id_maps(uid, gid)
    except Exception as exc:
        return f"namespaces refused: {exc}"
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            kernel.mount("none", "/", None, kernel.MS_REC | kernel.MS_PRIVATE)
            kernel.mount("proc", "/proc", "proc", kernel.MS_NOSUID | kernel.MS_NODEV | kernel.MS_NOEXEC)
            kernel.mount("tmpfs", "/tmp", "tmpfs", kernel.MS_NOSUID | kernel.MS_NODEV, "size=4k")
            kernel.loopback_up()
        except BaseException as exc:
            os.write(w, str(exc).encode())
            os._exit(1)
        os._exit(0)
    os.close(w)
    _pid, status = os.waitpid(pid, 0)
    error = os.read(r, 4096).decode(errors="replace")
    if status != 0:
        return f"namespaces refused: {error or status}"
    return None


def main() -> int:
    if sys.argv[-1] == "--probe":
        reason = probe_namespaces()
        # The probe is a process of its own (sandbox/level.py runs it with its output captured): this
        # line is its answer on its own stdout, never the daemon's protocol stream.
        print(reason or "ok", flush=True)
        return 0
    control = socket.socket(fileno=int(sys.argv[-1]))
    os.set_inheritable(control.fileno(), False)
    return launch(control)


if __name__ == "__main__":
    sys.exit(main())
