"""An incremental decoder of HTTP/1.1 chunked transfer coding (RFC 9112 §7.1).

Feed it the body's bytes exactly as they arrive; it returns the payload bytes they complete. A read
usually holds whole chunks, so the common case is a few slices and one join. Chunk extensions are
ignored and trailer fields skipped; anything else that is not the grammar is a `ChunkedError`.
"""

from __future__ import annotations

SIZE, DATA, DATA_END, TRAILER, DONE = range(5)
MAX_SIZE_LINE = 4096  # a size line with extensions; a server that never ends one is refused
HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")


class ChunkedError(Exception):
    """The body is not valid chunked coding."""


class ChunkedDecoder:
    __slots__ = ("_pending", "_remaining", "_state", "extra")

    def __init__(self) -> None:
        self._state = SIZE
        self._remaining = 0  # payload bytes left in the current chunk
        self._pending = b""  # an incomplete size line, chunk end or trailer line
        self.extra = 0  # bytes received after the terminator (the connection cannot be reused)

    @property
    def done(self) -> bool:
        """The terminating zero-size chunk and the trailer section have been read."""
        return self._state == DONE

    def feed(self, data: bytes) -> bytes:
        if self._state == DONE:
            self.extra += len(data)
            return b""
        if self._pending:
            data = self._pending + data
            self._pending = b""
        out: list[bytes] = []
        pos = 0
        end = len(data)
        state = self._state
        while pos < end:
            if state == DATA:
                take = min(self._remaining, end - pos)
                out.append(data[pos : pos + take])
                pos += take
                self._remaining -= take
                if not self._remaining:
                    state = DATA_END
            elif state == DATA_END:
                if end - pos < 2:
                    self._pending = data[pos:]
                    break
                if data[pos : pos + 2] != b"\r\n":
                    raise ChunkedError("a chunk's data is not followed by CRLF")
                pos += 2
                state = SIZE
            elif state == SIZE:
                eol = data.find(b"\r\n", pos)
                if eol < 0:
                    if end - pos > MAX_SIZE_LINE:
                        raise ChunkedError("a chunk size line is too long")
                    self._pending = data[pos:]
                    break
                size = _chunk_size(data[pos:eol])
                pos = eol + 2
                if size:
                    self._remaining = size
                    state = DATA
                else:
                    state = TRAILER
            else:  # TRAILER: field lines up to an empty line
                eol = data.find(b"\r\n", pos)
                if eol < 0:
                    if end - pos > MAX_SIZE_LINE:
                        raise ChunkedError("a trailer line is too long")
                    self._pending = data[pos:]
                    break
                if eol == pos:
                    state = DONE
                    self.extra = end - eol - 2
                    break
                pos = eol + 2
        self._state = state
        if len(out) == 1:
            return out[0]
        return b"".join(out)


def _chunk_size(line: bytes) -> int:
    digits = line.split(b";", 1)[0].strip(b" \t")
    if not digits or len(digits) > 15 or not HEX_DIGITS.issuperset(digits):
        raise ChunkedError(f"bad chunk size line {line[:40]!r}")
    return int(digits, 16)
