"""A frame is written whole even when the daemon is stopped and continued while its client is behind.

write(2) on a full pipe waits for the reader; a signal that reaches the writer meanwhile (SIGSTOP
then SIGCONT: Ctrl-Z, a debugger attaching, a frozen container) ends it with only the bytes that
fit, and a frame cut short makes the client read the next frame's header as the rest of its body,
for the rest of the connection (CI once saw `Invalid control character` in a client this way).
`host/stdio.py`'s `WholeWrites` writes the rest. Real pipes, real signals; nothing here measures
a time: the test waits for the pipe to be full and for the kernel to report the process stopped.
"""

from __future__ import annotations

import array
import fcntl
import os
import signal
import termios
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dsh_daemon.host.stdio import WholeWrites
from dsh_daemon.server.stdout import CoalescingWriter
from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.test_coalesce import RawLsp, _content, _stream

TIMEOUT_S = 60.0
F_GETPIPE_SZ = 1032
PIPE_BYTES = 65536
PAGE_BYTES = 4096


@pytest.fixture
def fake() -> Iterator[FakeDeepSeek]:
    with FakeDeepSeek() as server:
        yield server


def _unread(fd: int) -> int:
    count = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count, True)
    return count[0]


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.005)


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]  # the field after the command name, which may hold spaces


def _waiting_in_a_pipe_write(pid: int, out: int, size: int) -> bool:
    """The daemon's main thread asleep with the pipe as full as it gets (pages are not always filled
    to the brim); where the kernel names the wait (`wchan`), it is a pipe's (`anon_pipe_write` on
    6.x, `pipe_write` or `pipe_wait` on older kernels)."""
    if _unread(out) < size - PAGE_BYTES or _state(pid) != "S":
        return False
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return True
    return wchan in ("", "0") or "pipe" in wchan


def test_a_daemon_stopped_and_continued_mid_frame_sends_the_whole_frame(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    lsp = RawLsp(tmp_path / "state", fake)
    try:
        assert lsp.proc.stdout is not None
        out = lsp.proc.stdout.fileno()
        fcntl.fcntl(out, fcntl.F_SETPIPE_SZ, PIPE_BYTES)  # (RawLsp made room for a whole turn)
        size = fcntl.fcntl(out, F_GETPIPE_SZ)
        text = "".join(f"line {i}: the reply goes on\n" for i in range(12_000))  # ~330 KB in one delta
        fake.script(Reply.stream(_stream([_content(text)])))
        session_id = lsp.call("dsh/session/new", {})["sessionId"]
        lsp.call("dsh/followup", {"sessionId": session_id, "message": {"content": "hi"}})
        # The delta's frame is five times the pipe: once the pipe is full the daemon is inside that
        # write, waiting for room.
        _wait_for(lambda: _waiting_in_a_pipe_write(lsp.proc.pid, out, size), "waiting to write")
        os.kill(lsp.proc.pid, signal.SIGSTOP)
        _wait_for(lambda: _state(lsp.proc.pid) == "T", "stopped")
        os.kill(lsp.proc.pid, signal.SIGCONT)

        lsp.read_until_idle()
        events = lsp.events(session_id)
        deltas = [e["data"]["delta"]["text"] for e in events if e["type"] == "assistant/delta"]
        assert "".join(deltas) == text
        assert [e["type"] for e in events].count("turn/end") == 1
    finally:
        lsp.close()


def test_a_signal_during_a_blocked_write_loses_no_byte_of_the_frames() -> None:
    """The writer both front ends use (`protect_stdout`'s stream): a signal handled by the writing
    thread while the pipe is full, as SIGTERM's handler or any other would be."""
    read_end, write_end = os.pipe()
    previous = signal.signal(signal.SIGUSR1, lambda _signum, _frame: None)
    writer_thread = threading.get_ident()
    size = fcntl.fcntl(write_end, F_GETPIPE_SZ)
    frames = [b"a" * 10, b"b" * 300_000, b"c" * 20]  # the second one five times the pipe
    received = bytearray()

    def read_after_a_signal() -> None:
        _wait_for(lambda: _unread(read_end) >= size - PAGE_BYTES, "a full pipe")
        signal.pthread_kill(writer_thread, signal.SIGUSR1)
        while chunk := os.read(read_end, 1 << 16):
            received.extend(chunk)

    reader = threading.Thread(target=read_after_a_signal)
    reader.start()
    try:
        writer = CoalescingWriter(WholeWrites(write_end, "wb"))
        for frame in frames:
            writer.write(frame)
        writer.close()
    finally:
        reader.join()
        os.close(read_end)
        signal.signal(signal.SIGUSR1, previous)
    assert bytes(received) == b"".join(frames)
