"""The `dsh/event` notification, framed and written directly.

Events are most of what the daemon sends (one per streamed delta), and their params are already
JSON values (frozen dicts and tuples): encoding them once with `json.dumps` and writing the frame
skips pygls' per-message conversion (message-type lookup, cattrs unstructuring, a `default=` hook
called for every value), which cost more than the rest of a delta's path. Frames go through the
protocol's own writer, so they interleave with pygls' replies in exactly the order they were made.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from pygls.protocol import JsonRPCProtocol

logger = logging.getLogger(__name__)

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def send_event(protocol: JsonRPCProtocol, params: Mapping[str, Any]) -> None:
    """Write one `dsh/event` notification; falls back to pygls for anything unusual."""
    writer = protocol.writer
    if writer is None:
        return
    try:
        body = _ENCODER.encode({"jsonrpc": "2.0", "method": "dsh/event", "params": params}).encode("utf-8")
    except (TypeError, ValueError):  # not plain JSON after all (or a lone surrogate): the slow, safe way
        protocol.notify("dsh/event", params)
        return
    writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
