"""A long session's state kept out of the cyclic garbage collector's walks (issue 40.4).

The derived state of a 100,000-event session (its history's messages, the snapshot codec's tables)
is millions of objects the collector tracks, and they live as long as the session is driven. The
collector's full pass (`gc` generation 2) walks all of them: 0.15-1.9 s with the event loop held,
falling wherever the allocations of the moment tip it (a turn end, a delta of another session),
with nothing to free among them. So once such state has been built (a session opened, a
derived-state snapshot encoded at a turn end) the daemon collects the young generations (a few
milliseconds at most: they are bounded by the thresholds) and freezes everything still alive
(`gc.freeze`, which costs nothing): later passes walk only what was made since.

What this guarantees: no full pass walks the state that existed at the last freeze. What it costs:
a frozen cycle is never freed by the collector, and a session's agent is one (its log, bus and
callbacks refer to each other), holding the whole state. So when a session that was driven at a
freeze closes, everything frozen goes back to the collector, one full pass frees the session, and
what is still alive is frozen again (`thaw_after_close`): that one pass is the stall the freezes
took away, once per such close, never at a turn end; a process shutting down skips it. A cycle that
became garbage before a freeze and outlives it is freed at the next such close, or never if none
comes; `bench/core_bench.py` prints what that amounted to. It is process-wide, so only the daemon's
own front ends turn it on (`keep_long_lived_state`, from the command line); a library user of the
host, the tests among them, keeps the collector as it is.
"""

from __future__ import annotations

import gc

_enabled = False


def keep_long_lived_state() -> None:
    """Turn on `freeze_long_lived` for this process (the daemon's front ends call it at start)."""
    global _enabled
    _enabled = True


def keeping_long_lived_state() -> bool:
    """Whether `keep_long_lived_state` turned it on."""
    return _enabled


def stop_keeping_long_lived_state() -> None:
    """Turn it off again and hand what was frozen back to the collector (tests, benchmarks)."""
    global _enabled
    _enabled = False
    gc.unfreeze()


def freeze_long_lived() -> bool:
    """Once a session's long-lived state has been built: collect the young generations and freeze
    what is left. Nothing (False) unless turned on, or while the collector is off (the start's pause,
    `host/startup_gc.py`, freezes on its own when it ends)."""
    if not _enabled or not gc.isenabled():
        return False
    gc.collect(1)
    gc.freeze()
    return True


def thaw_after_close() -> bool:
    """A session frozen with the rest has closed: hand everything back to the collector, free it
    (one full pass) and freeze what is still alive (False: nothing, as not turned on)."""
    if not _enabled:
        return False
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return True
