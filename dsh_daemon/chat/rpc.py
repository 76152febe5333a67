"""A minimal JSON-RPC client over the daemon's stdio (LSP Content-Length framing)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any


class RpcError(RuntimeError):
    """A JSON-RPC error answer; `code` is the typed `data.code` when the daemon gave one."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class RpcPipe:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self.on_notification: Callable[[str, Any], None] = lambda method, params: None
        self.on_request: Callable[[str, Any], Awaitable[Any]] | None = None
        self.on_error: Callable[[BaseException], None] = lambda exc: None
        self._tasks: set[asyncio.Future[Any]] = set()
        self._answering: dict[Any, asyncio.Future[Any]] = {}  # server request id -> our answer

    def _write(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        body = json.dumps(message).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def request(self, method: str, params: Any = None) -> Any:
        msg_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[msg_id] = future
        self._write({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return await future

    def notify(self, method: str, params: Any = None) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    async def stop_daemon(self, grace_s: float = 10) -> bool:
        """`shutdown`, then `exit` whatever `shutdown` answered (a daemon that refused `initialize`
        answers it with an error, and still waits for `exit`), then the process's end; killed after
        `grace_s`. True when it ended on its own."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.request("shutdown"), grace_s)
        with contextlib.suppress(Exception):
            self.notify("exit")
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.proc.wait(), grace_s)
        if self.proc.returncode is not None:
            return True
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        return False

    async def read_forever(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        while True:
            length = None
            while True:
                line = await stdout.readline()
                if not line:
                    for future in self._waiting.values():
                        if not future.done():
                            future.set_exception(ConnectionError("the daemon exited"))
                    return
                if line in (b"\r\n", b"\n"):
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            if length is None:
                continue
            message = json.loads(await stdout.readexactly(length))
            if "method" in message and "id" in message:
                self._answering[message["id"]] = self.spawn(self._answer(message))
            elif message.get("method") == "$/cancelRequest":
                # The daemon withdrew its request (e.g. the turn was cancelled while a permission
                # question was open): stop asking; the answer is a RequestCancelled error.
                task = self._answering.get((message.get("params") or {}).get("id"))
                if task is not None:
                    task.cancel()
            elif "method" in message:
                try:
                    self.on_notification(message["method"], message.get("params"))
                except Exception as exc:  # a fault in showing one event must not end the connection
                    self.on_error(exc)
            else:
                future = self._waiting.pop(message.get("id"), None)  # type: ignore[arg-type]
                if future is not None and not future.done():
                    if "error" in message:
                        error = message["error"]
                        data = error.get("data") if isinstance(error.get("data"), dict) else {}
                        future.set_exception(RpcError(error.get("message", "error"), data.get("code")))
                    else:
                        future.set_result(message.get("result"))

    def spawn(self, coro: Any) -> asyncio.Future[Any]:
        task: asyncio.Future[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.on_error(task.exception())  # type: ignore[arg-type]

    async def _answer(self, message: dict[str, Any]) -> None:
        msg_id = message["id"]
        try:
            assert self.on_request is not None
            result = await self.on_request(message["method"], message.get("params"))
            self._write({"jsonrpc": "2.0", "id": msg_id, "result": result})
        except asyncio.CancelledError:
            self._write({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32800, "message": "cancelled"}})
        except Exception as exc:
            self._write({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32603, "message": str(exc)}})
        finally:
            self._answering.pop(msg_id, None)
