"""`/undo`, `/rewind`, `/fork` (daemons with the `rewind` flag, protocol.md §15), and how the chat
shows a rewind's events: what was restored, what was cut, what a crash left."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from dsh_daemon.chat.render import YELLOW
from dsh_daemon.chat.rpc import RpcError

if TYPE_CHECKING:
    from dsh_daemon.chat.core import Chat

USAGE_REWIND = "/rewind N [files|conversation] [force] — back to before turn N (both, by default)"
USAGE_FORK = "/fork N [TEXT] — a new session with turns 1…N, then TEXT as its prompt"


def shown_path(chat: Chat, path: str) -> str:
    try:
        relative = os.path.relpath(path, chat.cwd)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


def files_text(chat: Chat, paths: list[str], limit: int = 6) -> str:
    names = [shown_path(chat, p) for p in paths[:limit]]
    more = f" and {len(paths) - limit} more" if len(paths) > limit else ""
    return ", ".join(names) + more


def show_event(chat: Chat, kind: str, data: dict[str, Any]) -> None:
    """A rewind's durable events, live or replayed."""
    if kind == "conversation/cut":
        chat.note(
            f"── rewound to before turn {data['beforeTurn']}: the turns since stay on screen, "
            "out of the model's history ──"
        )
        return
    phase = data.get("phase")
    restored, deleted = list(data.get("restored") or []), list(data.get("deleted") or [])
    if phase == "done":
        parts = []
        if restored:
            parts.append(f"restored {files_text(chat, restored)}")
        if deleted:
            parts.append(f"deleted {files_text(chat, deleted)}")
        chat.note(f"[rewind to before turn {data['beforeTurn']}: {'; '.join(parts) or 'no file changed'}]")
        for failed in data.get("failed") or []:
            chat.error(f"  not written: {shown_path(chat, failed.get('path') or '?')}: {failed['reason']}")
    elif phase == "interrupted":
        untouched = list(data.get("untouched") or [])
        chat.error(
            f"[a rewind to before turn {data['beforeTurn']} was interrupted (the daemon stopped): "
            f"restored {files_text(chat, restored + deleted) or 'nothing'}; not restored "
            f"{files_text(chat, untouched) or 'nothing'}. /rewind {data['beforeTurn']} finishes it]"
        )


async def latest_turn(chat: Chat) -> int | None:
    page = await chat.rpc.request("dsh/session/transcript", {"sessionId": chat.session_id, "limit": 1})
    turns = page.get("turns") or []
    return int(turns[0]["turn"]) if turns else None


async def checkpoints(chat: Chat) -> dict[int, dict[str, Any]]:
    result = await chat.rpc.request("dsh/session/checkpoints", {"sessionId": chat.session_id})
    return {int(t["turn"]): t for t in result["turns"]}


def report(chat: Chat, result: dict[str, Any], retry: str) -> None:
    """What the rewind's reply adds to its events: conflicts (nothing was done) and what it could not
    restore."""
    conflicts = result.get("conflicts") or []
    if conflicts:
        chat.error(f"[nothing rewound: {len(conflicts)} file(s) changed since the agent changed them]")
        for conflict in conflicts:
            chat.view.print(chat.paint(YELLOW, f"  {shown_path(chat, conflict.get('path') or '?')}"))
        chat.note(f"[{retry} force overwrites them]")
    for problem in result.get("notRestorable") or []:
        where = f"{shown_path(chat, problem['path'])}: " if problem.get("path") else ""
        turn = f" (turn {problem['turn']})" if problem.get("turn") else ""
        chat.error(f"  not restored{turn}: {where}{problem['reason']}")
    wrote = result.get("restored") or result.get("deleted")
    if result.get("wroteNoFile"):
        chat.error("[no file was written: the files still hold what the agent's changes left]")
    elif not conflicts and not wrote and "cutSeq" not in result:
        chat.note("[no file to restore]")


def _busy(chat: Chat) -> bool:
    if chat.status.state == "running":
        chat.error("[a turn is running: Esc (or /cancel) first, then rewind]")
        return True
    if not chat.session_id:
        chat.note("[nothing to rewind yet]")
        return True
    return False


async def undo(chat: Chat, arg: str) -> None:
    """The last turn's file changes, taken back (the conversation stays)."""
    if _busy(chat):
        return
    last = await latest_turn(chat)
    changed = (await checkpoints(chat)).get(last or 0)
    if last is None or changed is None:
        chat.note("[the last turn changed no file: nothing to undo]")
        return
    force = arg.strip() == "force"
    params = {"sessionId": chat.session_id, "beforeTurn": last, "conversation": False, "force": force}
    try:
        result = await chat.rpc.request("dsh/session/rewind", params)
    except RpcError as exc:
        chat.error(f"[{exc}]")
        return
    report(chat, result, "/undo")


async def rewind(chat: Chat, arg: str) -> None:
    if _busy(chat):
        return
    words = arg.split()
    if not words and chat.view.interactive:
        words = await pick_rewind(chat)
        if not words:
            return
    elif not words:
        await list_turns(chat)
        chat.note(f"[{USAGE_REWIND}]")
        return
    if not words[0].lstrip("#").isdigit() or not set(words[1:]) <= {"files", "conversation", "force"}:
        chat.error(f"[{USAGE_REWIND}]")
        return
    turn = int(words[0].lstrip("#"))
    files = "conversation" not in words[1:] or "files" in words[1:]
    conversation = "files" not in words[1:] or "conversation" in words[1:]
    params = {
        "sessionId": chat.session_id,
        "beforeTurn": turn,
        "files": files,
        "conversation": conversation,
        "force": "force" in words,
    }
    try:
        result = await chat.rpc.request("dsh/session/rewind", params)
    except RpcError as exc:
        chat.error(f"[{exc}]")
        return
    report(chat, result, f"/rewind {' '.join(w for w in words if w != 'force')}")


REWIND_WHAT: tuple[tuple[str, list[str]], ...] = (
    ("files and conversation", []),
    ("files only (the conversation stays)", ["files"]),
    ("conversation only (the files stay as they are)", ["conversation"]),
)


async def pick_rewind(chat: Chat) -> list[str]:
    """The rewind picker (`/rewind` alone, or Esc Esc on an idle prompt), as Claude Code's checkpoint
    menu: the session's prompts newest first, each with the files its checkpoint restores, then what
    to put back. The words of the `/rewind` it amounts to, or [] when the person left it."""
    page = await chat.rpc.request("dsh/session/transcript", {"sessionId": chat.session_id, "limit": 50})
    changed = await checkpoints(chat)
    turns = [t for t in page.get("turns") or [] if "end" in t]  # newest first, as the page comes
    if not turns:
        chat.note("[no finished turn to rewind to yet]")
        return []
    labels = []
    for turn in turns:
        files = changed.get(int(turn["turn"]), {}).get("files") or []
        paths = [f["path"] for f in files]
        restores = f"restores {files_text(chat, paths, 3)}" if files else "no file changes"
        labels.append(f"#{turn['turn']} {' '.join(_prompt_of(turn).split())[:50]} — {restores}")
    choice = await chat.view.pick("rewind to before which prompt? (type to filter)", labels)
    if choice is None:
        return []
    number = str(turns[choice]["turn"])
    what = await chat.view.pick(f"rewind to before #{number}: put back", [w for w, _ in REWIND_WHAT])
    if what is None:
        return []
    return [number, *REWIND_WHAT[what][1]]


def _prompt_of(turn: dict[str, Any]) -> str:
    return next(
        (
            str(i.get("text", ""))
            for i in turn.get("items", ())
            if i.get("type") == "message" and (i.get("source") or {}).get("kind") == "user"
        ),
        "",
    )


async def list_turns(chat: Chat) -> None:
    """The recent turns by number, each with its prompt and the files it changed."""
    page = await chat.rpc.request("dsh/session/transcript", {"sessionId": chat.session_id, "limit": 10})
    changed = await checkpoints(chat)
    for turn in reversed(page.get("turns") or []):
        prompt = next(
            (
                i.get("text", "")
                for i in turn.get("items", ())
                if i.get("type") == "message" and (i.get("source") or {}).get("kind") == "user"
            ),
            "",
        )
        files = changed.get(int(turn["turn"]), {}).get("files") or []
        touched = f" — {files_text(chat, [f['path'] for f in files], 3)}" if files else ""
        chat.view.print(f"  {turn['turn']:>3}. {' '.join(prompt.split())[:60]}{touched}")


async def fork(chat: Chat, arg: str) -> None:
    head, _, text = arg.strip().partition(" ")
    if not head.lstrip("#").isdigit():
        chat.error(f"[{USAGE_FORK}]")
        return
    if not chat.session_id:
        chat.note("[nothing to fork yet]")
        return
    params: dict[str, Any] = {"sessionId": chat.session_id, "atTurn": int(head.lstrip("#"))}
    if text.strip():
        params["message"] = {"content": text.strip()}
    try:
        result = await chat.rpc.request("dsh/session/fork", params)
    except RpcError as exc:
        chat.error(f"[{exc}]")
        return
    chat.note(f"[forked at turn {params['atTurn']}: now in session {result['sessionId']}]")
    await chat.attach(result["sessionId"])
