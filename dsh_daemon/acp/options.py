"""ACP mode's configuration, parsed once at `initialize` into frozen values.

ACP has no `initializationOptions`; the same keys (provider keys flat or under `provider`,
`permissionTimeoutS`, `tools`, `agent`, `mcpServers`) may come in `initialize`'s `_meta.dsh`, over
`$DSH_HOME/config.json`, the environment and the command-line flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsh_daemon.acp.errors import invalid_params
from dsh_daemon.host.options import DaemonOptions, OptionsError
from dsh_daemon.host.options import parse_options as parse_any

AcpOptions = DaemonOptions  # the same configuration as the LSP server's (host/options.py)


def parse_options(state_dir: Path, env: Mapping[str, str], flags: Mapping[str, Any], raw: Any) -> AcpOptions:
    """Every source merged and checked; a bad value is `invalid_params` naming the key."""
    try:
        return parse_any(state_dir, env, flags, raw, what="_meta.dsh")
    except OptionsError as exc:
        raise invalid_params(str(exc)) from exc
