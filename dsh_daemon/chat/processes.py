"""The session's background processes in the terminal chat: a line when one starts or ends, `/ps`
(the list; `/ps N` its newest output), `/kill N` (stop it). N is the number `/ps` shows, or the
process id (`p1`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsh_daemon.chat.render import clip, sanitize

if TYPE_CHECKING:
    from dsh_daemon.chat.core import Chat

USAGE_PS = "/ps [N] — the session's background processes; with N, its newest output"
USAGE_KILL = "/kill N — stop background process N (and everything it started)"
OUTPUT_CHARS = 20_000


def state(process: dict[str, Any]) -> str:
    if process.get("running"):
        return "running"
    how = "exited"
    if process.get("exitCode") is not None:
        how += f" ({process['exitCode']})"
    elif process.get("signal") is not None:
        how += f" (signal {process['signal']})"
    if process.get("stoppedBy"):
        how += f", stopped by {process['stoppedBy']}"
    return how


def event_line(kind: str, data: dict[str, Any]) -> str:
    """The scrollback's line for a live `process/started` or `process/exited`."""
    pid = data.get("processId", "?")
    if kind == "process/started":
        return f"  ⏵ {pid} {data.get('name', '')} runs in the background (/ps, /kill {pid})"
    return f"  ⏹ {pid} {state({'running': False, **data})}"


async def _list(chat: Chat) -> list[dict[str, Any]]:
    result = await chat.rpc.request("dsh/process/list", {"sessionId": chat.session_id})
    return list(result.get("processes", []))


def _pick(processes: list[dict[str, Any]], arg: str) -> dict[str, Any] | None:
    if arg.isdigit() and 1 <= int(arg) <= len(processes):
        return processes[int(arg) - 1]
    return next((p for p in processes if p.get("processId") == arg), None)


async def ps(chat: Chat, arg: str) -> None:
    if not chat.session_id:
        chat.note("[no background processes]")
        return
    processes = await _list(chat)
    if not arg:
        if not processes:
            chat.note("[no background processes]")
        for number, process in enumerate(processes, 1):
            line = f"{number}  {process['processId']}  {state(process)}  {process.get('name', '')}"
            chat.view.print("  " + clip(line, chat.view.width - 2))
        return
    picked = _pick(processes, arg)
    if picked is None:
        chat.error(f"[no background process {arg}; /ps lists them]")
        return
    process = picked
    params = {"sessionId": chat.session_id, "processId": process["processId"], "maxChars": OUTPUT_CHARS}
    output = await chat.rpc.request("dsh/process/output", params)
    chat.note(f"[{process['processId']} {state(process)}: {process.get('command', '')}]")
    if output.get("truncated"):
        chat.note(f"[only its last {OUTPUT_CHARS:,} characters]")
    for line in sanitize(output.get("text", "")).splitlines() or ["(no output)"]:
        chat.view.print(line)


async def kill(chat: Chat, arg: str) -> None:
    if not arg:
        chat.error(f"[{USAGE_KILL}]")
        return
    process = _pick(await _list(chat), arg) if chat.session_id else None
    if process is None:
        chat.error(f"[no background process {arg}; /ps lists them]")
        return
    result = await chat.rpc.request(
        "dsh/process/stop", {"sessionId": chat.session_id, "processId": process["processId"]}
    )
    if result.get("stopped"):
        chat.note(f"[{process['processId']} stopped]")
    else:
        chat.note(f"[{process['processId']} had ended already]")
