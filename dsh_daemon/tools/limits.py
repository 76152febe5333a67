"""Size and time limits of the tools. Every cap exists so one call cannot flood the model's context,
the client or the daemon's memory; each is overridable through the `limits` config mapping.

The caps as the model meets them are listed in protocol.md §12: each tool's own cap first (read_file
pages with `offset`, listings and searches say how to narrow, run_command keeps head and tail), then
`result_max_chars` over every result (agent/budget.py: head and tail kept, the middle elided with a
marker saying how many characters and lines and how to read more)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ToolLimits:
    read_default_lines: int = 2000
    read_max_chars: int = 60_000  # result text of one read_file
    read_line_chars: int = 2000  # longer lines are cut (minified files)
    whole_file_bytes: int = 8 * 1024 * 1024  # read/hash/edit whole files up to this; stream larger reads
    list_max_entries: int = 1000
    find_max_results: int = 500
    grep_max_matches: int = 200
    grep_line_chars: int = 300
    grep_file_bytes: int = 8 * 1024 * 1024  # the Python fallback skips larger files
    grep_timeout_s: float = 60.0  # a search stops here (a huge file or tree), keeping what it found
    command_timeout_s: float = 120.0
    command_max_timeout_s: float = 600.0
    command_output_chars: int = 30_000  # result text: head and tail kept, the middle dropped
    command_stream_chars: int = 1_000_000  # live tool/output; past it the client gets one notice
    command_kill_grace_s: float = 2.0  # SIGTERM -> SIGKILL
    command_drain_grace_s: float = 1.0  # after the shell exits, leftovers holding the pipe are killed
    process_max_running: int = 8  # background processes of one session running at once
    process_first_output_s: float = 1.0  # run_command background: how long it waits for first output
    process_read_chars: int = 16_000  # one process_read's text: the newest unread output
    process_buffer_chars: int = 1_000_000  # a process's newest output kept in memory for process_read
    process_log_bytes: int = 256 * 1024  # its output file keeps the newest this to twice this
    tracked_files: int = 256  # files remembered for the "changed since you read it" notice
    result_max_chars: int = 64_000  # any tool's result text: head and tail kept, the middle elided
    checkpoint_bytes: int = 256 * 1024 * 1024  # a session's stored checkpoint contents; oldest dropped
    editor_request_timeout_s: float = 10.0  # a save, diagnostics or language-feature request to the editor
    diagnostics_settle_s: float = 1.0  # after an edit, before asking the editor for its diagnostics

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> ToolLimits:
        if not config:
            return cls()
        known = {f.name: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, value in config.items():
            if key not in known:
                raise ValueError(f"unknown tool limit {key!r} (known: {', '.join(sorted(known))})")
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"tool limit {key!r} must be a positive number")
            values[key] = value if known[key].type == "float" else int(value)
        return cls(**values)
