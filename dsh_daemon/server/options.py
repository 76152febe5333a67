"""`initializationOptions` (and `workspace/didChangeConfiguration` settings) for the LSP server: the
shared parser (`host/options.py`), its errors as `-32602` in the reply, where the editor shows them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsh_daemon.host.options import DaemonOptions, OptionsError
from dsh_daemon.host.options import parse_options as parse_any
from dsh_daemon.server import errors


def parse_options(
    state_dir: Path, env: Mapping[str, str], flags: Mapping[str, Any], raw: Any
) -> DaemonOptions:
    try:
        return parse_any(state_dir, env, flags, raw, what="initializationOptions")
    except OptionsError as exc:
        raise errors.invalid_params(str(exc)) from exc


__all__ = ["DaemonOptions", "parse_options"]
