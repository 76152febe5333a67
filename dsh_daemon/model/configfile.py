"""`$DSH_HOME/config.json`, read once per change for every section that lives in it (`provider`,
`agent`, `mcpServers`): one reader, one wording of its errors, no re-reading the file per section."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsh_daemon.model.errors import ModelError

CONFIG_FILE = "config.json"

_cache: dict[str, tuple[tuple[int, int, int], Mapping[str, Any]]] = {}


class ConfigFileError(ModelError):
    """config.json exists but cannot be read as a JSON object; the message names the file."""


def read_config_file(state_dir: str | os.PathLike[str]) -> Mapping[str, Any]:
    """The file's top-level object ({} when there is no file)."""
    path = Path(state_dir) / CONFIG_FILE
    try:
        stat = path.stat()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigFileError(f"{path}: cannot read: {exc.strerror}") from exc
    # The inode too: a file replaced by a rename (a saved widening) within the clock's grain is new.
    key = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
    cached = _cache.get(str(path))
    if cached is not None and cached[0] == key:
        return cached[1]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigFileError(f"{path}: cannot read: {exc.strerror}") from exc
    except ValueError as exc:
        raise ConfigFileError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(data, Mapping):
        raise ConfigFileError(f"{path}: must hold a JSON object")
    _cache[str(path)] = (key, data)
    return data
