"""The sessions row's status is written without its own disk flush (issue 40.4: it was a second flush
on the event loop at every turn end) and still survives the daemon's crash: the commit is in the WAL
the moment it returns. The store's rule for everything else stays `synchronous=FULL`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from dsh_daemon.session.store import SessionStore

CHILD = """
import os, signal, sys
from pathlib import Path
from dsh_daemon.session.store import SessionStore
store = SessionStore(Path(sys.argv[1]))
store.update_session("s", status="running", pending=3, flush=False)
os.kill(os.getpid(), signal.SIGKILL)  # no close, no checkpoint: a crash right after the commit
"""


def test_an_unflushed_status_survives_a_crash_of_the_writer(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.create_session("s", title=None, cwd=None)
    store.close()
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], env=dict(os.environ), check=False)
    assert done.returncode == -signal.SIGKILL
    again = SessionStore(tmp_path)
    info = again.session_info("s")
    assert (info.status, info.pending) == ("running", 3)
    again.close()


def test_the_store_flushes_again_after_an_unflushed_write(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.create_session("s", title=None, cwd=None)
    full = store.db.execute("PRAGMA synchronous").fetchone()[0]
    store.update_session("s", status="idle", flush=False)
    assert store.db.execute("PRAGMA synchronous").fetchone()[0] == full == 2  # FULL
    store.close()
