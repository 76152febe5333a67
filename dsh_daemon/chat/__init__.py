"""`dsh-daemon chat`: a terminal client that talks to the daemon exactly like an editor does.

It spawns `python -m dsh_daemon` over stdio and speaks the dsh/* protocol (`rpc`). `core` turns the
session's events into what a person reads and asks permission questions; `commands` runs typed lines
and slash commands (the queue: /wake /drop /edit /clear; /attach; /sessions /resume); `status` is the
status line. At a terminal the view is `tui` (prompt_toolkit: a fixed input line below the scrolling
output, markdown by rich once a message completes); piped, it is `plain` (text as it streams). With a
prompt argument and no terminal it runs that prompt (plus any piped lines) and exits when idle.
"""

from dsh_daemon.chat.app import run_chat

__all__ = ["run_chat"]
