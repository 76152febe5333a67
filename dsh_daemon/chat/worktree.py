"""`/worktree` in the terminal chat, for a session started with `--worktree` (protocol.md §20):
alone it says where the session works and what it changed; `diff` prints the whole change from the
base; `apply` writes it into the person's work tree (all or nothing: conflicts are named); `keep`
commits it on its branch and removes the folder; `discard` removes folder and branch, once asked
twice (it throws work away)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsh_daemon.chat.render import sanitize
from dsh_daemon.chat.sessions import worktree_words

if TYPE_CHECKING:
    from dsh_daemon.chat.core import Chat

USAGE_WORKTREE = (
    "/worktree [diff|apply|keep|discard] — this session's own git worktree (dsh-daemon chat --worktree)"
)
DIFF_SHOWN_LINES = 400


class WorktreeCommand:
    def __init__(self, chat: Chat) -> None:
        self.chat = chat
        self._discard_asked: str | None = None  # the session whose discard was asked once

    async def run(self, arg: str) -> None:
        chat = self.chat
        action = arg.strip()
        if not chat.session_id:
            chat.note("[no session yet: its worktree is made with the first prompt]")
            return
        tree = await self._state()
        if tree is None:
            chat.note(
                "[this session works in your folder, not a worktree (dsh-daemon chat --worktree starts one)]"
            )
            return
        if action != "discard":
            self._discard_asked = None
        if action == "":
            chat.note(f"[{worktree_words(tree)} · {tree.get('path')} · from {tree.get('base')}]")
        elif action == "diff":
            await self._diff()
        elif action == "apply":
            await self._apply(tree)
        elif action == "keep":
            result = await chat.rpc.request("dsh/worktree/keep", {"sessionId": chat.session_id})
            chat.note(f"[kept on branch {result['branch']} ({result['commit'][:8]}); its folder is removed]")
        elif action == "discard":
            await self._discard(tree)
        else:
            chat.error(f"[{USAGE_WORKTREE}]")

    async def _state(self) -> dict[str, Any] | None:
        chat = self.chat
        sessions = (await chat.rpc.request("dsh/session/list", {}))["sessions"]
        mine = next((s for s in sessions if s["sessionId"] == chat.session_id), None)
        return None if mine is None else mine.get("worktree")

    async def _diff(self) -> None:
        chat = self.chat
        diff = await chat.rpc.request("dsh/worktree/diff", {"sessionId": chat.session_id})
        if not diff["files"]:
            chat.note(f"[no changes from {diff['base']} yet]")
            return
        for entry in diff["files"]:
            chat.view.print(
                f"  {entry['status']:<8} {sanitize(entry['path'])}  +{entry['added']} −{entry['removed']}"
            )
        lines = diff["patch"].splitlines()
        for line in lines[:DIFF_SHOWN_LINES]:
            chat.view.print(sanitize(line))
        if len(lines) > DIFF_SHOWN_LINES or diff.get("truncated"):
            chat.note(f"[more: git -C {diff['path']} diff {diff['baseCommit'][:12]}]")

    async def _apply(self, tree: dict[str, Any]) -> None:
        chat = self.chat
        result = await chat.rpc.request("dsh/worktree/apply", {"sessionId": chat.session_id})
        if result["applied"]:
            files = result.get("files") or []
            chat.note(f"[applied {len(files)} file(s) to {tree.get('repo')} as uncommitted changes]")
            return
        chat.error("[not applied: nothing was written; these conflict with your work tree]")
        for conflict in result.get("conflicts") or []:
            chat.view.print(f"  {sanitize(conflict['path'])}: {sanitize(conflict['reason'])}")

    async def _discard(self, tree: dict[str, Any]) -> None:
        chat = self.chat
        if self._discard_asked != chat.session_id:
            self._discard_asked = chat.session_id
            changed = tree.get("changedFiles")
            what = f" and its {changed} changed file(s)" if changed else ""
            chat.error(
                f"[this removes the worktree, branch {tree.get('branch')}{what}: say /worktree discard again]"
            )
            return
        self._discard_asked = None
        result = await chat.rpc.request("dsh/worktree/discard", {"sessionId": chat.session_id})
        chat.note(f"[discarded: the worktree and branch {result['branch']} are gone]")
