"""The wrapper a client's terminal runs for a confined command (issue 41.4):

    python -I -S attach_client.py SOCKET -- CMD…   (the one-time token in $DSH_ATTACH_TOKEN)

It connects to the session's attach socket (`attach.py`), hands the daemon its stdin, stdout and
stderr (SCM_RIGHTS) with the token, and waits: the daemon runs the command it registered for that
token in the session's sandbox on those fds and sends back its exit status, which this exits with
(128 + N for a signal N). SIGINT, SIGTERM and SIGHUP are forwarded as "kill the command's tree"; if
this process dies, its socket closes and the daemon kills the tree too. `CMD…` is shown by the
terminal only: the daemon runs what it registered, never what a wrapper names.

Run as a file with `-I -S`: it imports only what the interpreter has built in or at hand (no
package, no site), and the C modules `_socket` and `_signal` rather than `socket` and `signal`,
whose enums cost more than the interpreter's own start: it starts in a few milliseconds.
"""

import _signal  # type: ignore[import-not-found]  # no stub; `signal` would import enum (~5 ms)
import _socket
import os
import sys

TOKEN_VARIABLE = "DSH_ATTACH_TOKEN"
SUN_PATH_MAX = 107  # sockaddr_un's sun_path, less the terminating NUL
REFUSED = 126  # the daemon refused or could not run the command (as a shell's "cannot execute")


def _connect(sock: _socket.socket, path: str) -> None:
    """Connect by `path`, or through a directory fd when the path is too long for sun_path."""
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        sock.connect(path)
        return
    directory, name = os.path.split(path)
    fd = os.open(directory, os.O_PATH | os.O_DIRECTORY)
    try:
        sock.connect(f"/proc/self/fd/{fd}/{name}")
    finally:
        os.close(fd)


def _say(text: str) -> None:
    try:
        os.write(2, f"dsh-daemon: {text}\n".encode(errors="replace"))
    except OSError:
        pass


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] != "--":
        _say("usage: attach_client.py SOCKET -- CMD… (with the token in $DSH_ATTACH_TOKEN)")
        return 2
    token = os.environ.pop(TOKEN_VARIABLE, "")
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET | _socket.SOCK_CLOEXEC)
    handed_over = False
    stop_asked = False

    def forward(_signum: int, _frame: object) -> None:
        nonlocal stop_asked
        stop_asked = True
        if handed_over:
            try:
                sock.send(b"K")
            except OSError:
                pass

    # Before connecting: a signal that comes while the fds are on their way is not lost.
    for signum in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP):
        _signal.signal(signum, forward)
    try:
        _connect(sock, argv[0])
        fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (0, 1, 2))
        sock.sendmsg([b"T" + token.encode()], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        handed_over = True
        if stop_asked:
            sock.send(b"K")
    except OSError as exc:
        _say(f"could not reach the daemon to run the command: {exc}")
        return REFUSED
    while True:
        try:
            message = sock.recv(4096)
        except OSError as exc:
            _say(f"lost the daemon: {exc}")
            return REFUSED
        if not message:
            _say("the daemon went away; the command was killed")
            return REFUSED
        kind, body = message[:1], message[1:]
        if kind == b"X":
            status = int(body)
            return status if status >= 0 else 128 - status
        if kind == b"E":
            _say(body.decode(errors="replace"))
            return REFUSED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
