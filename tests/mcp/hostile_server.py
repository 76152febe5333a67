"""A hand-written stdio MCP server that misbehaves on purpose (issue 18 items 4 and 5), byte for byte
(no SDK: the point is to send what an SDK never would).

It answers `initialize`, `tools/list` (tools `big`, `garbage`, `sleep`, `deep`, `echo`, `shaped`)
and `tools/call`:
- `big {size, idLast?}`: a result whose text is `size` bytes, written in 1 MiB pieces; with `idLast`
  the `id` member comes last (as the TypeScript SDK writes responses);
- `shaped {size}`: a tool with an output schema: `big`'s result with `structuredContent`;
- `garbage {lines}`: `lines` lines that are not JSON-RPC on stdout, then the answer;
- `deep {depth}`: a line nested `depth` levels deep, then the answer;
- `sleep {}`: never answers; a `notifications/cancelled` for it is written to `$HOSTILE_LOG`;
- `echo {text}`: answers at once.
`HOSTILE_STDERR` (bytes): written to stderr at start, in lines. `HOSTILE_FLOOD` (lines): garbage
lines on stdout right after `initialized`, forever in batches until stdin closes when "forever".
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

OUT = sys.stdout.buffer
LOCK = threading.Lock()
TOOLS = [
    {"name": name, "description": f"hostile {name}", "inputSchema": {"type": "object", "properties": {}}}
    for name in ("big", "garbage", "sleep", "deep", "echo")
]
SHAPE = {"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]}
TOOLS.append({**TOOLS[0], "name": "shaped", "description": "hostile shaped", "outputSchema": SHAPE})


def write(data: bytes) -> None:
    with LOCK:
        OUT.write(data)
        OUT.flush()


def send(message: dict[str, Any]) -> None:
    write(json.dumps(message).encode() + b"\n")


def note(text: str) -> None:
    path = os.environ.get("HOSTILE_LOG")
    if path:
        with open(path, "a") as handle:
            handle.write(text + "\n")


def big(msg_id: Any, size: int, id_last: bool, structured: bool = False) -> None:
    head = b'{"jsonrpc":"2.0",' + (b"" if id_last else b'"id":%s,' % json.dumps(msg_id).encode())
    head += b'"result":{"content":[{"type":"text","text":"'
    shaped = b',"structuredContent":{"size":%d}' % size if structured else b""
    tail = b'"}],"isError":false' + shaped + b"}"
    tail += (b',"id":%s' % json.dumps(msg_id).encode() if id_last else b"") + b"}\n"
    with LOCK:
        OUT.write(head)
        piece = (b"0123456789abcdef" * 65536)[: 1 << 20]
        left = size
        while left > 0:
            OUT.write(piece[: min(left, len(piece))])
            left -= len(piece)
        OUT.write(tail)
        OUT.flush()


def call(msg_id: Any, name: str, args: dict[str, Any]) -> None:
    if name in ("big", "shaped"):
        big(msg_id, int(args.get("size", 1000)), bool(args.get("idLast")), name == "shaped")
        return
    if name == "garbage":
        write(b"".join(b"this is not json-rpc %d\n" % i for i in range(int(args.get("lines", 10)))))
    elif name == "deep":
        depth = int(args.get("depth", 10000))
        write(
            b'{"jsonrpc":"2.0","method":"notifications/message","params":{"x":'
            + b"[" * depth
            + b"]" * depth
            + b"}}\n"
        )
    elif name == "sleep":
        note(f"sleeping {msg_id}")
        return
    text = json.dumps(args.get("text", "done"))
    send(
        {"jsonrpc": "2.0", "id": msg_id, "result": {"content": [{"type": "text", "text": json.loads(text)}]}}
    )


def main() -> None:
    stderr = int(os.environ.get("HOSTILE_STDERR", "0"))
    if stderr:
        line = b"a chatty server writes this line to stderr again and again\n"
        sys.stderr.buffer.write(line * (stderr // len(line)) + b"the last stderr line\n")
        sys.stderr.buffer.flush()
    for raw in sys.stdin.buffer:
        message = json.loads(raw)
        method, msg_id = message.get("method"), message.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": msg_id, "result": {
                "protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"}}})  # fmt: skip
        elif method == "notifications/initialized":
            flood = os.environ.get("HOSTILE_FLOOD")
            if flood:
                write(b"".join(b"garbage line %d\n" % i for i in range(int(flood))))
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": msg_id, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            params = message["params"]
            call(msg_id, params["name"], params.get("arguments") or {})
        elif method == "notifications/cancelled":
            note(f"cancelled {message['params'].get('requestId')}: {message['params'].get('reason')}")
        elif msg_id is not None:
            send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": "no"}})


if __name__ == "__main__":
    main()
