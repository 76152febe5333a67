"""The service's settings file (JSON)."""

import json
from dataclasses import dataclass
from pathlib import Path


class SettingsError(ValueError):
    pass


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8080


def load_settings(path: Path) -> Settings:
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise SettingsError(f"{path}: not JSON ({exc.msg})") from exc
    if not isinstance(raw, dict):
        raise SettingsError(f"{path}: expected an object")
    unknown = set(raw) - {"host", "port"}
    if unknown:
        raise SettingsError(f"{path}: unknown keys {sorted(unknown)}")
    host = raw.get("host", Settings.host)
    if not isinstance(host, str) or not host:
        raise SettingsError(f"{path}: host must be a non-empty string")
    port = raw.get("port", Settings.port)
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise SettingsError(f"{path}: port must be an integer from 1 to 65535")
    return Settings(host=host, port=port)
