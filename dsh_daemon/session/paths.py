"""Where sessions live, resolved without opening the store (the command line needs it before it
knows which mode it serves, and `initialize` must not wait for sqlite)."""

from __future__ import annotations

import os
from pathlib import Path


def default_state_dir() -> Path:
    """`DSH_HOME`, else the platform's user data dir."""
    env = os.environ.get("DSH_HOME")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_data_dir("dsh-daemon", appauthor=False))
