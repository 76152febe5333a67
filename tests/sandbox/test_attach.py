"""The attach socket and its wrapper (issue 41.4), the daemon's side played by the test: the real
wrapper (`python -I -S attach_client.py`) as a process, its fds received, its exit status the one
sent back, its signals forwarded as a kill, and every connection that is not the issued token's
refused."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path

import pytest

from dsh_daemon.sandbox.attach import CLIENT, TOKEN_VARIABLE, AttachPoint, wrapper_argv

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_PEERCRED is Linux's")


async def start_wrapper(point: AttachPoint, token: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *wrapper_argv(point.path, ["echo", "shown only"]),
        env={TOKEN_VARIABLE: token, "PATH": os.environ.get("PATH", "")},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


@pytest.mark.parametrize("deep", [False, True])
async def test_the_wrapper_hands_over_its_stdio_and_exits_with_the_status_sent(
    tmp_path: Path, deep: bool
) -> None:
    # deep: a run dir whose socket path is longer than sun_path holds (bound and reached by a dir fd)
    run = tmp_path / ("d" * 60) / ("e" * 60) / "run" if deep else tmp_path / "run"
    point = AttachPoint.open(run)
    try:
        assert (run.stat().st_mode & 0o777) == 0o700 and (point.path.stat().st_mode & 0o777) == 0o600
        assert len(os.fsencode(point.path)) > 107 or not deep
        ticket = point.expect()
        wrapper = await start_wrapper(point, ticket.token)
        stdio = await asyncio.wait_for(ticket.attached, 10)
        os.write(stdio.stdout, b"written to the wrapper's stdout\n")
        os.write(stdio.stderr, b"and to its stderr\n")
        stdio.close()
        ticket.finish(3)
        out, err = await asyncio.wait_for(wrapper.communicate(), 10)
        assert wrapper.returncode == 3
        assert out == b"written to the wrapper's stdout\n" and err == b"and to its stderr\n"
    finally:
        await point.aclose()
    assert not point.path.exists()


async def test_a_signal_to_the_wrapper_asks_for_the_kill_and_a_signal_status_is_128_plus_n(
    tmp_path: Path,
) -> None:
    point = AttachPoint.open(tmp_path / "run")
    try:
        ticket = point.expect()
        wrapper = await start_wrapper(point, ticket.token)
        (await asyncio.wait_for(ticket.attached, 10)).close()
        wrapper.send_signal(signal.SIGTERM)
        await asyncio.wait_for(ticket.kill.wait(), 10)
        assert wrapper.returncode is None  # it waits for the command's status
        ticket.finish(-signal.SIGTERM)
        await asyncio.wait_for(wrapper.wait(), 10)
        assert wrapper.returncode == 128 + signal.SIGTERM
        # Killed outright: its socket's end is the kill request.
        ticket = point.expect()
        wrapper = await start_wrapper(point, ticket.token)
        (await asyncio.wait_for(ticket.attached, 10)).close()
        wrapper.kill()
        await asyncio.wait_for(ticket.kill.wait(), 10)
        await wrapper.wait()
    finally:
        await point.aclose()


def hello(path: Path, token: str, fds: list[int]) -> bytes:
    """The daemon's answer to a wrapper presenting `token` and `fds` (b"" when it just closed)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        try:
            socket.send_fds(sock, [b"T" + token.encode()], fds)
            return sock.recv(4096)
        except (BrokenPipeError, ConnectionResetError):
            return b""


async def test_only_an_issued_unused_token_with_three_fds_is_taken(tmp_path: Path) -> None:
    point = AttachPoint.open(tmp_path / "run")
    r, w = os.pipe()
    try:
        ticket = point.expect()
        for token, fds in (("forged", [r, w, w]), (ticket.token, [r, w]), ("", [r, w, w])):
            answer = await asyncio.to_thread(hello, point.path, token, fds)
            assert answer.startswith(b"Erefused"), (token, fds)
        # A refused attempt with the right token but two fds used it up: the token is one-time.
        assert not ticket.attached.done()
        second = point.expect()
        wrapper = await start_wrapper(point, second.token)
        (await asyncio.wait_for(second.attached, 10)).close()
        second.finish(0)
        assert await asyncio.wait_for(wrapper.wait(), 10) == 0
        answer = await asyncio.to_thread(hello, point.path, second.token, [r, w, w])
        assert answer.startswith(b"Erefused")  # used once: never again
        # A ticket the call closed before its wrapper came: the late wrapper is refused, says why.
        third = point.expect()
        third.close()
        wrapper = await start_wrapper(point, third.token)
        _out, err = await asyncio.wait_for(wrapper.communicate(), 10)
        assert wrapper.returncode == 126 and b"refused" in err
    finally:
        os.close(r)
        os.close(w)
        await point.aclose()


async def test_a_peer_of_another_user_is_closed_unanswered(tmp_path: Path) -> None:
    """SO_PEERCRED: the daemon takes only its own user's wrappers (here the daemon plays another
    user, as the test cannot change its own)."""
    point = AttachPoint.open(tmp_path / "run")
    point.uid = os.getuid() + 1
    r, w = os.pipe()
    try:
        ticket = point.expect()
        answer = await asyncio.to_thread(hello, point.path, ticket.token, [r, w, w])
        assert answer == b""  # closed, no word
        assert not ticket.attached.done()
    finally:
        os.close(r)
        os.close(w)
        await point.aclose()


def test_the_wrapper_imports_nothing_of_the_package() -> None:
    """It runs as a file with -I -S: only the standard library's own modules, no dsh_daemon, no site."""
    import subprocess

    ran = subprocess.run(
        [sys.executable, "-I", "-S", "-X", "importtime", str(CLIENT)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert ran.returncode == 2 and "usage" in ran.stderr  # no socket given
    imported = {
        line.split("|")[-1].strip() for line in ran.stderr.splitlines() if line.startswith("import time:")
    }
    heavy = ("dsh_daemon", "site", "asyncio", "json", "enum", "selectors")  # enum: `signal`, `socket`
    assert not any(name.startswith(heavy) for name in imported), imported
