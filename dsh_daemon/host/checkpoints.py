"""A session's checkpoints as its tools record them (the `Checkpointer` of `tools/checkpoints.py`):
an edit's before content into the session store, a git snapshot of the work tree around each
command. A failure to keep a checkpoint never fails the tool call: it is logged, and a later rewind
says what it cannot restore."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from dsh_daemon.agent.tools import ToolCall
from dsh_daemon.host import gitsnap
from dsh_daemon.session.checkpoints import CheckpointStore, content_hash
from dsh_daemon.tools.edits import ComputedEdit
from dsh_daemon.tools.workspace import Workspace

logger = logging.getLogger(__name__)

_UNKNOWN = Path("")


class SessionCheckpoints:
    def __init__(self, store: CheckpointStore, session_id: str, workspace: Workspace) -> None:
        self.store = store
        self.session_id = session_id
        self.workspace = workspace
        self._root: Path | None = _UNKNOWN  # the cwd's git work tree, found at the first command

    def edit_applied(self, call: ToolCall, edit: ComputedEdit) -> None:
        try:
            recorded = self.store.record_file(
                self.session_id,
                turn=call.turn,
                step=call.step,
                call_id=call.call_id,
                kind="edit",
                path=str(edit.path),
                before=None if edit.created else edit.before_text.encode("utf-8"),
                after_hash=content_hash(edit.after_text.encode("utf-8")),
                after=edit.after_text.encode("utf-8"),
            )
        except Exception:
            logger.exception("session %s: could not keep a checkpoint of %s", self.session_id, edit.path)
            return
        for dropped in recorded.dropped:
            logger.info(
                "session %s: checkpoint of %s (turn %d) dropped: over the %d-byte budget",
                self.session_id,
                dropped.path,
                dropped.turn,
                self.store.max_bytes,
            )

    @asynccontextmanager
    async def command(self, call: ToolCall) -> AsyncIterator[None]:
        root = await self._work_tree()
        before = None if root is None else await self._snapshot(root)
        try:
            yield
        finally:
            after = None if before is None or root is None else await self._snapshot(root)
            try:
                self.store.record_command(
                    self.session_id,
                    turn=call.turn,
                    step=call.step,
                    call_id=call.call_id,
                    root=None if root is None else str(root),
                    tree_before=before,
                    tree_after=after,
                )
            except Exception:
                logger.exception("session %s: could not record a command checkpoint", self.session_id)

    async def _work_tree(self) -> Path | None:
        if self._root is _UNKNOWN:
            self._root = await asyncio.to_thread(gitsnap.work_tree_root, self.workspace.cwd)
        return self._root

    async def _snapshot(self, root: Path) -> str | None:
        try:
            return await asyncio.to_thread(gitsnap.snapshot, root)
        except gitsnap.GitError as exc:
            logger.warning("session %s: no snapshot of %s: %s", self.session_id, root, exc)
            return None


class ParentCheckpoints(SessionCheckpoints):
    """A subagent's checkpoints, kept as its parent's (host/children.py): every edit and command of
    the child is recorded in the parent's session under the parent's `run_subagent` call, so rewinding
    or forking the parent treats the child's changes as the parent's own."""

    def __init__(
        self, store: CheckpointStore, parent_call: ToolCall, parent_id: str, workspace: Workspace
    ) -> None:
        super().__init__(store, parent_id, workspace)
        self.parent_call = parent_call

    def edit_applied(self, call: ToolCall, edit: ComputedEdit) -> None:
        super().edit_applied(self.parent_call, edit)

    @asynccontextmanager
    async def command(self, call: ToolCall) -> AsyncIterator[None]:
        async with super().command(self.parent_call):
            yield
