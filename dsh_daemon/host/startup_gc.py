"""The cyclic garbage collector, paused while a front end starts (issue 20).

Answering `initialize` imports lsprotocol (some 560 attrs classes), pygls, cattrs and the
configuration modules: some 90,000 objects the collector tracks, most of them living as long as the
process. The collector walks them over and over while they are made (about 120 passes before the
reply, one of them over everything: 10-15 % of the time from spawn to the reply, measured with
`gc.callbacks`). A bare pygls server pays that too; the daemon need not.

So `dsh-daemon` pauses the collector before those imports, and the front end resumes it once the
client's start-up frames are answered (the replies have left by then): one full collection frees
what the start left behind (attrs replaces each slotted class by a new one: some 16,000 objects, 8 MB,
in cycles), then what is still alive is frozen (`gc.freeze`: the modules, classes and functions of
the start live as long as the process, and no later pass walks them again) and collection goes on as
usual. One pass, in a moment the client is not waiting for, instead of a hundred before the reply.
The start-up frames are `initialize`, `initialized` and a first `dsh/session/new`, which an editor
sends in a row (the pass, 180-250 ms on a loaded 2-core machine, ran right after the first, and the
third waited for it):
the pass runs once the early session's machinery is built (`server/app.py: _build_front_end`), or
after the first other frame is answered (`server/transport.py: read_loop`).

Invariant: the collector is paused at most until a frame other than those has been answered or the
first session's machinery is built, whatever the first frame was. A client that sends nothing else
leaves it off, but then the daemon makes nothing a pass would free (the preload's modules live as
long as the process, and are frozen with the rest).
"""

from __future__ import annotations

import gc
import sys

_paused = False


def pause_collection() -> None:
    """Stop collecting cycles until `resume_collection` (nothing when the collector is already off)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def collection_paused() -> bool:
    """Whether `pause_collection` stopped the collector and it has not been resumed yet."""
    return _paused


def resume_collection() -> None:
    """Free the start's garbage, freeze what is left and collect again (nothing unless
    `pause_collection` paused the collector)."""
    global _paused
    if _paused:
        _paused = False
        gc.collect()
        gc.freeze()
        gc.enable()
        trim_heap()


def trim_heap() -> None:
    """Hand the C heap's free pages back to the kernel (glibc's `malloc_trim`; nothing elsewhere).

    The start's garbage (attrs' replaced classes, the generated-code cache's table, the preload's
    leftovers) is freed by the pass above, but glibc keeps the freed pages between live blocks
    resident: about 4 MiB of a one-session daemon's RSS (issue 40, 64 -> 60 MiB). One call, once."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    trim(0)
