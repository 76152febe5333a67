"""The chat's JSON-RPC pipe against a real daemon process: stopping it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from dsh_daemon.chat.rpc import RpcError, RpcPipe


async def test_a_daemon_that_refused_initialize_still_exits_when_told(tmp_path: Path) -> None:
    """`shutdown` is refused before `initialize` succeeded; `exit` must still be sent, or the daemon
    waits for it until the client kills it (which made every `exec` with a bad option take 10 s)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "dsh_daemon", "--state-dir", str(tmp_path / "state"),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    rpc = RpcPipe(proc)
    reader = asyncio.ensure_future(rpc.read_forever())
    try:
        bad = {"tools": {"sandbox": {"mode": "nowhere"}}}
        with pytest.raises(RpcError, match=r"tools\.sandbox\.mode"):
            await rpc.request(
                "initialize",
                {"processId": None, "rootUri": None, "capabilities": {}, "initializationOptions": bad},
            )
        assert await rpc.stop_daemon(grace_s=60) is True  # it ended on its own, not killed
        assert proc.returncode is not None
    finally:
        reader.cancel()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
