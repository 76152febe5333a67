"""The session host (dsh_daemon/host/sessions.py) in-process, where the end-to-end tests cannot look:
what a read-only attach builds, and the one cleanup path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pygls.lsp.server import LanguageServer

from dsh_daemon.host.options import parse_options
from dsh_daemon.host.port import Workspace
from dsh_daemon.server.frontend import LspFrontEnd


class Counting(LspFrontEnd):
    """An LSP front end that counts the sessions it is asked to wire, and the ones it is told are gone."""

    def __init__(self, *args: Any) -> None:
        self.wired: list[str] = []
        self.closed: list[tuple[str, bool]] = []
        super().__init__(*args)

    def document_source(self, session_id: str, workspace: Workspace) -> Any:
        self.wired.append(session_id)
        return super().document_source(session_id, workspace)

    def session_closed(self, session_id: str, *, deleted: bool) -> None:
        self.closed.append((session_id, deleted))
        super().session_closed(session_id, deleted=deleted)


def front_end(state: Path, work: Path) -> Counting:
    options = parse_options(state, {}, {}, {"thinking": False}, what="initializationOptions")
    return Counting(LanguageServer("t", "0"), state, options, [str(work)], None)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "work").mkdir()
    return tmp_path / "work"


async def test_a_read_only_attach_wires_no_tools(tmp_path: Path, work: Path) -> None:
    """Tools (and MCP servers) are built once the lease is ours: a session driven elsewhere is read
    from the store, and nothing is started for it."""
    state = tmp_path / "state"
    first, second = front_end(state, work), front_end(state, work)
    try:
        sid = first.host.create(str(work)).session_id
        attached = second.host.attach(sid, -1)
        assert attached.holder is not None  # read-only: the first drives it
        assert second.wired == [] and second.host.sessions == {}
        await first.host.close_session(sid)  # the first lets go: the second may drive it now
        second.host.session(sid)
        assert second.wired == [sid]
    finally:
        await first.close()
        await second.close()


async def test_every_way_out_goes_through_one_cleanup(tmp_path: Path, work: Path) -> None:
    state = tmp_path / "state"
    host_end = front_end(state, work)
    host = host_end.host
    try:
        closed_here = host.create(str(work)).session_id
        await host.close_session(closed_here)
        deleted = host.create(str(work)).session_id
        host.delete(deleted)
        detached = host.create(str(work)).session_id
        host.detach(detached)  # idle: released at once
        assert host_end.closed == [(closed_here, False), (deleted, True), (detached, False)]
        assert host.sessions == {}
    finally:
        await host_end.close()
