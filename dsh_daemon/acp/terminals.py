"""The client's terminals (issue 24.6): `run_command` through `terminal/create`, `terminal/output`,
`terminal/wait_for_exit`, `terminal/kill` and `terminal/release` when the client advertises
`clientCapabilities.terminal`.

Once the client has created the terminal, the tool call is updated with `{"type": "terminal",
"terminalId"}` content, so Zed embeds the live terminal in it (the translator keeps that content in
the call's later updates, which would otherwise replace it). The tool decides everything else (its
timeout, cancel, the result text): this module only speaks the wire.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dsh_daemon.acp.rpc import Connection
from dsh_daemon.acp.updates import Translator
from dsh_daemon.host.port import NoEditor, TerminalExit, TerminalOutput, Terminals, TerminalUnavailable

logger = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 30.0  # every terminal request but wait_for_exit (the tool's timeout bounds that)


def offers_terminal(client_capabilities: Any) -> bool:
    return isinstance(client_capabilities, Mapping) and client_capabilities.get("terminal") is True


def _exit(value: Any) -> TerminalExit:
    value = value if isinstance(value, Mapping) else {}
    code = value.get("exitCode")
    signal = value.get("signal")
    return TerminalExit(
        code if isinstance(code, int) and not isinstance(code, bool) else None,
        signal if isinstance(signal, str) else None,
    )


class ClientTerminal:
    """One command in the client's terminal (`Terminal`)."""

    def __init__(
        self,
        connection: Connection,
        session_id: str,
        terminal_id: str,
        abandoned: Callable[[], None] = lambda: None,
    ) -> None:
        self._connection = connection
        self._session_id = session_id
        self._terminal_id = terminal_id
        self._released = False
        self._abandoned = abandoned

    @property
    def terminal_id(self) -> str:
        return self._terminal_id

    async def _ask(self, method: str, limit_s: float | None = REQUEST_TIMEOUT_S) -> Any:
        params = {"sessionId": self._session_id, "terminalId": self._terminal_id}
        request_id, future = self._connection.send_request(method, params)
        try:
            return await asyncio.wait_for(asyncio.shield(future), limit_s)
        except TimeoutError:
            self._connection.cancel_outgoing(request_id)
            raise TerminalUnavailable(f"{method}: no answer in {limit_s} s") from None
        except asyncio.CancelledError:
            self._connection.cancel_outgoing(request_id)
            raise
        except Exception as exc:
            raise TerminalUnavailable(f"{method}: {exc}") from None

    async def output(self) -> TerminalOutput:
        result = await self._ask("terminal/output")
        result = result if isinstance(result, Mapping) else {}
        text = result.get("output")
        status = result.get("exitStatus")
        return TerminalOutput(
            text if isinstance(text, str) else "",
            result.get("truncated") is True,
            _exit(status) if isinstance(status, Mapping) else None,
        )

    async def wait_for_exit(self) -> TerminalExit:
        return _exit(await self._ask("terminal/wait_for_exit", None))

    async def kill(self) -> None:
        await self._ask("terminal/kill")

    async def release(self) -> None:
        if not self._released:
            self._released = True
            await self._ask("terminal/release")

    def abandon(self) -> None:
        self._abandoned()


class ClientTerminals:
    """A session's `Terminals` on the client."""

    def __init__(self, connection: Connection, session_id: str, translator: Translator) -> None:
        self._connection = connection
        self._session_id = session_id
        self._translator = translator

    async def create(
        self,
        call_id: str,
        command: str,
        args: Sequence[str],
        cwd: Path,
        env: Mapping[str, str],
        output_limit: int,
    ) -> ClientTerminal:
        params = {
            "sessionId": self._session_id,
            "command": command,
            "args": list(args),
            "env": [{"name": k, "value": v} for k, v in env.items()],
            "cwd": str(cwd),
            "outputByteLimit": output_limit,
        }
        request_id, future = self._connection.send_request("terminal/create", params)
        try:
            result = await asyncio.wait_for(asyncio.shield(future), REQUEST_TIMEOUT_S)
        except TimeoutError:
            self._connection.cancel_outgoing(request_id)
            raise TerminalUnavailable("terminal/create: no answer") from None
        except asyncio.CancelledError:
            self._connection.cancel_outgoing(request_id)
            raise
        except Exception as exc:
            raise TerminalUnavailable(f"terminal/create: {exc}") from None
        terminal_id = result.get("terminalId") if isinstance(result, Mapping) else None
        if not isinstance(terminal_id, str) or not terminal_id:
            raise TerminalUnavailable("terminal/create: the answer has no terminalId")
        logger.info(
            "session %s: call %s runs in the client's terminal %s", self._session_id, call_id, terminal_id
        )
        self._translator.terminal_started(call_id, terminal_id)
        abandoned = lambda: self._translator.terminal_abandoned(call_id)  # noqa: E731
        return ClientTerminal(self._connection, self._session_id, terminal_id, abandoned)


class AcpEditor(NoEditor):
    """What an ACP client does for the tools beyond files: its terminals, when it offers them (ACP has
    no diagnostics, language features or unsaved-buffer list)."""

    def __init__(self, terminals: Terminals | None) -> None:
        self.terminals = terminals
