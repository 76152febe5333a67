"""Seqs a client saw are never reused for another event, though events are streamed before they are
stored (D7's write-behind, docs/design.md §6.6).

Durable events are published (sent to clients) the moment they are appended and written to disk up
to 100 ms later. Without more, a process killed in that window left the log ending before seqs its
clients had seen, and the next driver numbered new events from there: a client that saw seq 3 and
reattached with `afterSeq: 3` missed the new events and kept a title and a turn that never happened.

The invariant, and how it is kept:
- The store keeps a **seq ceiling** per session (`seq_reservations`): no seq at or above it has ever
  been sent to a client. The driver raises it in the same transaction as each append, to the next
  seq plus `RESERVE_SEQS` (`SessionLog`), and never publishes a seq at or above the ceiling it knows
  is durable without committing first (that commit raises the ceiling). Streaming stays instant: a
  commit happens anyway every 100 ms, so the reservation is only hit by a burst of more than
  `RESERVE_SEQS` events between two commits.
- A clean stop (the lease released after the last commit) lowers the ceiling to the log's end.
- A process taking the lease while a reservation is still open (the previous driver died, or lost
  its lease to a takeover) first fills every seq from the log's end through the ceiling with a
  `log/gap` event `{from, to}`, in the same transaction as taking the lease: seqs stay contiguous
  from 0, each possibly-seen seq now holds an event that says it never happened, and a client whose
  `afterSeq` is anywhere in the gap receives at least the last one (`to`, the old ceiling itself,
  which was never sent), then everything newer. Gap events are written `ignorable`, so older builds
  load them.
"""

from __future__ import annotations

from dsh_daemon.model.events import LOG_GAP

TYPE_CHECKING = False  # `typing` is not imported at run time: `dsh-daemon sessions` loads this module
if TYPE_CHECKING:
    from typing import Any

__all__ = ["LOG_GAP", "RESERVE_SEQS", "gap_data"]
RESERVE_SEQS = 64


def gap_data(first: int, last: int) -> dict[str, Any]:
    """The data of each `log/gap` event of one gap: the seqs it covers (`model/payloads.py: LogGap`;
    built by hand: the store, which `dsh-daemon sessions` loads alone, does not import the codec)."""
    return {"from": first, "to": last}
