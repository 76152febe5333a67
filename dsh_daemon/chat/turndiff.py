"""`/diff`, `/undo-hunk N`, `/keep [N]` (daemons with the `turnDiff` flag, protocol.md §15 "A turn's
diff"): the last turn's changed files and their hunks, numbered across the files (#1, #2, …) in the
order `/diff` lists them; a binary file (or one whose contents are gone) is one number as a whole.
The numbers name the turn `/diff` showed last, so a turn that ran since does not move them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsh_daemon.chat.render import CYAN, DIM, YELLOW, diff_lines
from dsh_daemon.chat.rewind import shown_path

if TYPE_CHECKING:
    from dsh_daemon.chat.core import Chat

USAGE_DIFF = "the files the last turn changed, each hunk numbered (for /undo-hunk and /keep)"
USAGE_UNDO_HUNK = "/undo-hunk N — take back hunk #N of /diff (your own later edits stay)"
USAGE_KEEP = "/keep [N] — mark hunk #N reviewed (alone: every hunk /diff shows)"
MARKS = {"kept": "✓ kept", "undone": "↶ undone"}


@dataclass(frozen=True)
class Numbered:
    number: int
    path: str
    hunk: int | None  # None: the file as a whole


class TurnReview:
    def __init__(self, chat: Chat) -> None:
        self.chat = chat
        self.turn: int | None = None  # the turn /diff showed last
        self.numbered: list[Numbered] = []

    async def _fetch(self, turn: int | None) -> dict[str, Any]:
        params: dict[str, Any] = {"sessionId": self.chat.session_id}
        if turn is not None:
            params["turn"] = turn
        result: dict[str, Any] = await self.chat.rpc.request("dsh/turn/diff", params)
        self.turn = result.get("turn")
        self.numbered = []
        for file in result["files"]:
            if file["hunks"]:
                for hunk in file["hunks"]:
                    self.numbered.append(Numbered(len(self.numbered) + 1, file["path"], hunk["index"]))
            else:
                self.numbered.append(Numbered(len(self.numbered) + 1, file["path"], None))
        return result

    async def diff(self, _: str) -> None:
        chat = self.chat
        if not chat.session_id:
            chat.note("[no turn yet]")
            return
        result = await self._fetch(None)
        if result["turn"] is None or not result["files"]:
            chat.note(f"[turn {result['turn']} changed no file]" if result["turn"] else "[no turn yet]")
            return
        files = result["files"]
        added = sum(f["added"] for f in files)
        removed = sum(f["removed"] for f in files)
        running = "" if result["final"] else ", so far"
        chat.note(f"[turn {result['turn']}: {len(files)} file(s) changed (+{added} −{removed}){running}]")
        number = 0
        for file in files:
            name = shown_path(chat, file["path"])
            status = "" if file["status"] == "modified" else f" ({file['status']})"
            chat.view.print(chat.paint(CYAN, f"  {name}{status} +{file['added']} −{file['removed']}"))
            if not file["hunks"]:
                number += 1
                why = file.get("unavailable") or "binary"
                mark = MARKS.get(file.get("state") or "", "")
                chat.view.print(f"  #{number} the whole file ({why}) {mark}".rstrip())
                continue
            for hunk in file["hunks"]:
                number += 1
                mark = MARKS.get(hunk["state"], "")
                chat.view.print(chat.paint(YELLOW, f"  #{number} {mark}".rstrip()))
                for line in diff_lines(hunk["diff"], chat.view.color):
                    chat.view.print(f"    {line}")
        chat.note("[/undo-hunk N takes one back, /keep [N] marks them reviewed]")

    async def _pick(self, arg: str, usage: str) -> Numbered | None:
        chat = self.chat
        head = arg.strip().removeprefix("#")
        if not head.isdigit():
            chat.error(f"[{usage}]")
            return None
        if self.turn is None and chat.session_id:
            await self._fetch(None)
        number = int(head)
        if not 1 <= number <= len(self.numbered):
            chat.error(f"[no hunk #{number}; /diff lists them]")
            return None
        return self.numbered[number - 1]

    async def undo_hunk(self, arg: str) -> None:
        chat = self.chat
        picked = await self._pick(arg, USAGE_UNDO_HUNK)
        if picked is None or self.turn is None:
            return
        params: dict[str, Any] = {"sessionId": chat.session_id, "turn": self.turn, "path": picked.path}
        if picked.hunk is not None:
            params["hunks"] = [picked.hunk]
        result = await chat.rpc.request("dsh/turn/undo", params)
        name = shown_path(chat, picked.path)
        for conflict in result.get("conflicts") or []:
            chat.error(f"[#{picked.number} of {name} not undone: {conflict['reason']}]")
        if result.get("undone") or result.get("wholeFile"):
            chat.note(f"[undid #{picked.number} of {name}; the model hears of it before its next step]")

    async def keep(self, arg: str) -> None:
        chat = self.chat
        if not chat.session_id:
            chat.note("[no turn yet]")
            return
        if arg.strip():
            picked = await self._pick(arg, USAGE_KEEP)
            chosen = [] if picked is None else [picked]
        else:
            await self._fetch(self.turn)
            chosen = list(self.numbered)
        if self.turn is None or not chosen:
            if not arg.strip():
                chat.note("[nothing to keep]")
            return
        by_path: dict[str, list[int] | None] = {}
        for item in chosen:
            if item.hunk is None:
                by_path[item.path] = None
            else:
                hunks = by_path.setdefault(item.path, [])
                if hunks is not None:
                    hunks.append(item.hunk)
        kept = 0
        for path, hunks in by_path.items():
            params: dict[str, Any] = {"sessionId": chat.session_id, "turn": self.turn, "path": path}
            if hunks is not None:
                params["hunks"] = hunks
            result = await chat.rpc.request("dsh/turn/keep", params)
            kept += len(result.get("kept") or []) or (1 if hunks is None else 0)
        chat.note(f"[kept {kept} hunk(s) of turn {self.turn}]")


def show_event(chat: Chat, data: dict[str, Any]) -> None:
    """A live `turn/diff`: one line at the turn's end when it changed files. A keep or undo sends the
    turn's (final) diff again: kept as the latest, not told again."""
    files = data.get("files") or []
    previous, chat.turn_diff = chat.turn_diff, data
    if not data.get("final") or not files:
        return
    if previous is not None and previous.get("final") and previous.get("turn") == data.get("turn"):
        return
    added = sum(int(f.get("added", 0)) for f in files)
    removed = sum(int(f.get("removed", 0)) for f in files)
    names = ", ".join(shown_path(chat, f["path"]) for f in files[:4]) + (" …" if len(files) > 4 else "")
    chat.view.print(
        chat.paint(
            DIM, f"  ± {len(files)} file(s) changed (+{added} −{removed}): {names} — /diff reviews them"
        )
    )
