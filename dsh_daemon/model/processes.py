"""A session's background processes, folded from its log: each `process/started` with its
`process/exited`, if any, in start order. Every reader of events uses this one fold (the daemon for a
session it does not drive, the terminal chat); the daemon that drives the session also knows them
live (`tools/processes.py`), and writes the `process/exited` this fold reads.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from dsh_daemon.model import events as ev
from dsh_daemon.model.codec import WireValueError
from dsh_daemon.model.events import Event
from dsh_daemon.model.payloads import ProcessExited, ProcessStarted

PROCESS_EVENTS = frozenset({ev.PROCESS_STARTED, ev.PROCESS_EXITED})


@dataclass(frozen=True, slots=True)
class ProcessEntry:
    started: ProcessStarted
    exited: ProcessExited | None = None

    @property
    def running(self) -> bool:
        return self.exited is None

    def to_json(self) -> dict[str, object]:
        """`{processId, name, command, pid, confined, running, exitCode?, signal?, stoppedBy?, …}`
        (`dsh/process/list`)."""
        out: dict[str, object] = {**self.started.data(), "running": self.running}
        if self.exited is not None:
            out.update({k: v for k, v in self.exited.data().items() if k != "processId"})
        return out


class ProcessFold:
    """Feed events in log order; `entries` are the session's processes, oldest first."""

    def __init__(self) -> None:
        self._entries: dict[str, ProcessEntry] = {}

    def feed(self, event: Event) -> bool:
        """Whether the list changed."""
        try:
            if event.type == ev.PROCESS_STARTED:
                started = ProcessStarted.of(event)
                self._entries[started.process_id] = ProcessEntry(started)
                return True
            if event.type == ev.PROCESS_EXITED:
                exited = ProcessExited.of(event)
                entry = self._entries.get(exited.process_id)
                if entry is None or entry.exited is not None:
                    return False
                self._entries[exited.process_id] = replace(entry, exited=exited)
                return True
        except WireValueError:  # a malformed event is not a process; the rest of the log still counts
            return False
        return False

    @property
    def entries(self) -> list[ProcessEntry]:
        return list(self._entries.values())


def fold_processes(events: list[Event]) -> list[ProcessEntry]:
    fold = ProcessFold()
    for event in events:
        fold.feed(event)
    return fold.entries
