"""The stdio transport to an MCP server: the SDK's `stdio_client`, rewritten to be linear and bounded.

The SDK's reader joins its whole buffer to every new chunk and splits it again (`(buffer +
chunk).split("\\n")`), so one message of n bytes costs O(n²): a 20 MB tool result took 12.5 s of CPU
and a 100 MB one kept a turn stuck for minutes, with nothing bounding how much a server may send.
This reader:
- looks for the newline in each new chunk only, and joins a message's chunks once (linear);
- caps a message at `max_bytes`: past it, only the head (the cap) and a small tail are kept while the
  rest streams by; the answer to a `tools/call` then becomes a result holding the head of its text and
  a marker saying how much was cut (as the tools' own results are cut), the answer to anything else a
  JSON-RPC error, and a message that answers nothing is dropped;
- refuses JSON nested deeper than `MAX_DEPTH` before decoding it (`model/jsondepth.py`);
- counts malformed lines in a `ProtocolMonitor` (rate-limited log, `failed` past a limit) and keeps
  stderr as a bounded `StderrTail` instead of a file that grows without end.

The process is started as the SDK starts it (its own session, the SDK's minimal inherited
environment plus the server's `env`); closing the transport closes its stdin, waits 2 s, then
terminates it (the connection kills its whole process tree afterwards).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsh_daemon.mcp.monitor import ProtocolMonitor, StderrTail
from dsh_daemon.model.jsondepth import TooDeepError, check_depth, top_level_member

if TYPE_CHECKING:
    from anyio.abc import Process
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.shared.message import SessionMessage

log = logging.getLogger(__name__)

TAIL_BYTES = 64 * 1024  # kept from the end of an over-long message (where some servers put the id)
TEXT_HEAD_CHARS = 1_000_000  # of a cut result's text; the tool result budget cuts it further
CLOSE_GRACE_S = 2.0
STDERR_DRAIN_S = 0.5  # a grandchild may hold stderr open: the tail is not waited for longer
_TEXT_START = re.compile(rb'"text"\s*:\s*"')
_STRING_BODY = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)  # unrolled: linear, no backtracking
_TRAILING_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$', re.DOTALL)


@dataclass
class StdioChannel:
    """What the connection sees of a running stdio transport: its process, stderr and monitor."""

    process: Process
    monitor: ProtocolMonitor
    stderr: StderrTail = field(default_factory=StderrTail)
    outgoing: dict[str | int, str] = field(default_factory=dict)  # request id -> method, until answered
    call_ids: dict[str, str | int] = field(default_factory=dict)  # a call's marker -> its request id
    # request id -> the cut result standing in for an answer over the cap (until its call takes it)
    cut_answers: dict[str | int, dict[str, Any]] = field(default_factory=dict)
    oversized: int = 0
    stderr_done: Any = None  # an anyio.Event, set once stderr reached its end

    async def stderr_drained(self, wait_s: float = STDERR_DRAIN_S) -> None:
        """Wait (a little) until everything the server wrote on stderr is in the tail: its last words
        explain why it stopped."""
        import anyio

        if self.stderr_done is not None:
            with anyio.move_on_after(wait_s):
                await self.stderr_done.wait()


CALL_MARKER = "dsh-daemon/call"  # in a tools/call request's `_meta`: which `call()` it belongs to


@asynccontextmanager
async def stdio_transport(
    command: str,
    args: Sequence[str],
    env: Mapping[str, str],
    cwd: str | None,
    *,
    max_bytes: int,
    monitor: ProtocolMonitor,
    start: Callable[[Sequence[str], Mapping[str, str]], Awaitable[Any]] | None = None,
) -> AsyncIterator[tuple[MemoryObjectReceiveStream[Any], MemoryObjectSendStream[Any], StdioChannel]]:
    """(read stream, write stream, channel) for `mcp.ClientSession`, over a started server process.
    `start(argv, base environment)`: starts the process another way (confined: `sandboxed.py`) and
    returns something shaped as anyio's process; `env` is then the caller's to pass."""
    import anyio
    from mcp.client.stdio import get_default_environment

    process: Any
    if start is not None:
        process = await start([command, *args], get_default_environment())
    else:
        process = await anyio.open_process(
            [command, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**get_default_environment(), **env},
            cwd=cwd,
            start_new_session=True,
        )
    channel = StdioChannel(process, monitor, stderr_done=anyio.Event())
    incoming_send, incoming = anyio.create_memory_object_stream[Any](0)
    outgoing, outgoing_receive = anyio.create_memory_object_stream[Any](0)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_read_stdout, channel, incoming_send, max_bytes)
            group.start_soon(_write_stdin, channel, outgoing_receive)
            group.start_soon(_read_stderr, channel)
            try:
                yield incoming, outgoing, channel
            finally:
                with anyio.CancelScope(shield=True):
                    await _close(process)
                    await channel.stderr_drained()
                group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            for stream in (incoming, outgoing, incoming_send, outgoing_receive):
                await stream.aclose()
            monitor.flush()


async def _close(process: Process) -> None:
    """Close stdin, give the server `CLOSE_GRACE_S` to exit, then SIGTERM, then SIGKILL; the pipes
    are closed in the end (an unclosed subprocess transport complains after the loop is gone)."""
    import anyio

    if process.stdin is not None:
        with contextlib.suppress(Exception):
            await process.stdin.aclose()
    for stop in (None, process.terminate, process.kill):
        if stop is not None:
            with contextlib.suppress(ProcessLookupError):
                stop()
        with anyio.move_on_after(CLOSE_GRACE_S):
            await process.wait()
            break
    with contextlib.suppress(Exception):
        await process.aclose()


async def _read_stderr(channel: StdioChannel) -> None:
    import anyio

    stream = channel.process.stderr
    try:
        if stream is None:
            return
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            while True:
                channel.stderr.feed(await stream.receive(65536))
    finally:
        channel.stderr_done.set()


async def _write_stdin(channel: StdioChannel, messages: MemoryObjectReceiveStream[Any]) -> None:
    import anyio
    from mcp.types import JSONRPCRequest

    stdin = channel.process.stdin
    assert stdin is not None
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
        async with messages:
            async for message in messages:
                root = message.message.root
                if isinstance(root, JSONRPCRequest):
                    channel.outgoing[root.id] = root.method
                    meta = (root.params or {}).get("_meta") or {}
                    if isinstance(meta, Mapping) and isinstance(meta.get(CALL_MARKER), str):
                        channel.call_ids[meta[CALL_MARKER]] = root.id
                data = message.message.model_dump_json(by_alias=True, exclude_none=True)
                await stdin.send(data.encode("utf-8") + b"\n")


async def _read_stdout(
    channel: StdioChannel, sink: MemoryObjectSendStream[SessionMessage], max_bytes: int
) -> None:
    """Lines of stdout as messages, linear in their size, each capped at `max_bytes`."""
    import anyio

    stdout = channel.process.stdout
    assert stdout is not None
    pieces: list[bytes] = []
    size = 0
    head = b""  # set while a message is over the cap: its first `max_bytes` bytes
    tail = bytearray()
    total = 0
    async with sink:
        while True:
            try:
                chunk = await stdout.receive(65536)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            start = 0
            while start <= len(chunk):
                newline = chunk.find(b"\n", start)
                piece = chunk[start:] if newline < 0 else chunk[start:newline]
                if head:
                    total += len(piece)
                    tail += piece
                    if len(tail) > TAIL_BYTES:
                        del tail[:-TAIL_BYTES]
                else:
                    pieces.append(piece)
                    size += len(piece)
                    if size > max_bytes:
                        joined = b"".join(pieces)
                        head, total = joined[:max_bytes], size
                        tail = bytearray(joined[-TAIL_BYTES:])
                        pieces, size = [], 0
                if newline < 0:
                    break
                if head:
                    await _deliver_oversized(channel, sink, head, bytes(tail), total, max_bytes)
                    head, tail, total = b"", bytearray(), 0
                else:
                    await _deliver_line(channel, sink, b"".join(pieces))
                    pieces, size = [], 0
                start = newline + 1


async def _deliver_line(
    channel: StdioChannel, sink: MemoryObjectSendStream[SessionMessage], line: bytes
) -> None:
    from mcp.shared.message import SessionMessage
    from mcp.types import JSONRPCError, JSONRPCMessage, JSONRPCResponse

    line = line.strip()
    if not line:
        return
    try:
        check_depth(line)
        message = JSONRPCMessage.model_validate_json(line)
    except TooDeepError as exc:
        channel.monitor.malformed(line, str(exc))
        return
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        channel.monitor.malformed(line, _reason(exc))
        return
    root = message.root
    if isinstance(root, JSONRPCResponse | JSONRPCError):
        channel.outgoing.pop(root.id, None)
    await sink.send(SessionMessage(message))


def _reason(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        with contextlib.suppress(Exception):
            first = errors()[0]
            return f"not a JSON-RPC message ({first.get('type')}: {first.get('msg')})"
    return "not a JSON-RPC message"


async def _deliver_oversized(
    channel: StdioChannel,
    sink: MemoryObjectSendStream[SessionMessage],
    head: bytes,
    tail: bytes,
    total: int,
    max_bytes: int,
) -> None:
    """A message over the cap: a `tools/call` answer becomes a cut result, another answer an error."""
    from mcp.shared.message import SessionMessage
    from mcp.types import ErrorData, JSONRPCError, JSONRPCMessage, JSONRPCResponse

    channel.oversized += 1
    msg_id = _message_id(head, tail)
    method = channel.outgoing.pop(msg_id, None) if msg_id is not None else None
    if method is None or top_level_member(head, "method") is not ...:
        channel.monitor.malformed(head[:200], f"a {total:,}-byte message over the {max_bytes:,}-byte limit")
        return
    assert msg_id is not None
    log.warning(
        "MCP server %s: a %s-byte answer to %s cut to the %s-byte limit",
        channel.monitor.server,
        f"{total:,}",
        method,
        f"{max_bytes:,}",
    )
    if method == "tools/call":
        marker = (
            f"\n[MCP result cut: the server sent {total:,} bytes in one message, over the "
            f"{max_bytes:,}-byte limit (maxMessageBytes); the rest was dropped. Ask the tool for less.]"
        )
        result = {"content": [{"type": "text", "text": _text_head(head) + marker}], "isError": False}
        if msg_id in channel.call_ids.values():  # a call still waits for it (not abandoned)
            channel.cut_answers[msg_id] = result
        message = JSONRPCMessage(JSONRPCResponse(jsonrpc="2.0", id=msg_id, result=result))
    else:
        error = ErrorData(
            code=-32603,
            message=f"the answer to {method} was {total:,} bytes, over the {max_bytes:,}-byte limit",
        )
        message = JSONRPCMessage(JSONRPCError(jsonrpc="2.0", id=msg_id, error=error))
    await sink.send(SessionMessage(message))


def _message_id(head: bytes, tail: bytes) -> str | int | None:
    """The message's top-level id: in its head (found past any depth), or its last member."""
    found = top_level_member(head, "id")
    if found is ...:
        match = _TRAILING_ID.search(tail)
        if match is None:
            return None
        with contextlib.suppress(ValueError):
            found = json.loads(match.group(1))
    if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)):
        return found
    return None


def _text_head(head: bytes) -> str:
    """The start of the first `text` string in a cut message (as much as the head holds)."""
    match = _TEXT_START.search(head)
    if match is None:
        return ""
    window = head[match.end() : match.end() + TEXT_HEAD_CHARS * 4]  # enough bytes for the chars kept
    body = _STRING_BODY.match(window)
    raw = body.group(0) if body is not None else b""
    text = raw.decode("utf-8", "ignore")  # a character cut in half at the end is dropped
    for cut in range(7):  # an escape cut in half (`\`, `\u12`) at the end is dropped
        with contextlib.suppress(ValueError):
            return str(json.loads('"' + text[: len(text) - cut] + '"'))[:TEXT_HEAD_CHARS]
    return text[:TEXT_HEAD_CHARS]
