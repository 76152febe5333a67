"""`dsh-daemon chat`: a terminal client that talks to the daemon exactly like an editor does.

It spawns `python -m dsh_daemon` over stdio and speaks the dsh/* protocol (`rpc`). `core` turns the
session's events into what a person reads (the reducer: `Chat.on_notification`) and asks permission
questions (`permission`: the menu and the rules that keep typed text from answering it); `status`
keeps the status line and the totals, `queue` the numbered queue, `cards` the tool cards; `commands`
runs typed lines and slash commands (`sessions` names sessions, `shell` runs `!cmd`). At a terminal
the view is `tui` (prompt_toolkit: a fixed input line below the scrolling output, markdown by rich
once a message completes, code blocks left exact); piped, it is `plain` (answers on stdout, the rest
on stderr). `render` holds the text helpers. `headless` runs `dsh-daemon exec` (one prompt to its
end, no person); `exec_args` holds its light argument definitions.

Nothing is imported here: building the command line parser imports `exec_args`, and must not pay
for the chat client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh_daemon.chat.app import run_chat as run_chat

__all__ = ["run_chat"]


def __getattr__(name: str) -> Any:
    if name == "run_chat":
        from dsh_daemon.chat.app import run_chat

        return run_chat
    raise AttributeError(name)
