"""Writing a sandbox widening the person chose to keep ("Always (saved to config)") into
`$DSH_HOME/config.json`: `tools.sandbox.writable` and `tools.sandbox.network.allow`.

- The file's other keys, unknown ones included, stay as they are (their order too); only the two
  lists grow, by the entries they did not hold yet.
- A file that cannot be read as a JSON object, or whose `tools.sandbox` cannot take the widening
  (a list that is not a list, a mistake the daemon would leave the whole section out for), is never
  overwritten: `ConfigSaveError` says why, and the caller
  keeps the grant for the session only.
- The write is atomic (a temporary file beside it, fsynced, renamed over it; the directory fsynced):
  a crash leaves the old file or the new one, never half of one. The new file keeps the old one's
  permission bits (it may hold an API key); a new file is created readable by its owner only.
- Writers serialise on an advisory lock of the state directory (`flock`), so two daemons saving at
  once each add their entries to what the other wrote.
- `unconfined` is never written: nothing here takes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from dsh_daemon.model.configfile import CONFIG_FILE
from dsh_daemon.tools.config import SandboxSettings, ToolConfigError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: one daemon per state directory is assumed
    fcntl = None  # type: ignore[assignment]


class ConfigSaveError(Exception):
    """config.json was not changed; the message says why, naming the file (and the key)."""


def save_sandbox_widening(state_dir: Path, writable: Sequence[str], network: Sequence[str]) -> Path:
    """Add `writable` paths and `network` domains to config.json's `tools.sandbox` (creating the file
    or the keys when absent); returns the file's path. `ConfigSaveError` when it was not changed."""
    path = Path(state_dir) / CONFIG_FILE
    try:
        Path(state_dir).mkdir(parents=True, exist_ok=True)
        with _locked(Path(state_dir)):
            data, mode = _read(path)
            _widen(data, path, list(writable), list(network))
            _write_atomically(path, data, mode)
    except OSError as exc:
        raise ConfigSaveError(f"{path}: cannot be written: {exc.strerror or exc}") from exc
    return path


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _read(path: Path) -> tuple[dict[str, Any], int | None]:
    """The file's object (a new one when there is no file) and its permission bits (None: new)."""
    try:
        raw = path.read_bytes()
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return {}, None
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError as exc:
        raise ConfigSaveError(f"{path}: not valid JSON ({exc}); the file was left as it is") from exc
    if not isinstance(data, dict):
        raise ConfigSaveError(f"{path}: does not hold a JSON object; the file was left as it is")
    return data, mode


def _widen(data: dict[str, Any], path: Path, writable: list[str], network: list[str]) -> None:
    tools = data.setdefault("tools", {})
    if not isinstance(tools, dict):
        raise ConfigSaveError(f"{path}: tools is not an object; the file was left as it is")
    sandbox = tools.get("sandbox")
    if sandbox is None:
        sandbox = tools["sandbox"] = {}
    elif isinstance(sandbox, str):  # a bare string is the mode
        sandbox = tools["sandbox"] = {"mode": sandbox}
    if not isinstance(sandbox, dict):
        raise ConfigSaveError(f"{path}: tools.sandbox is not an object; the file was left as it is")
    if writable:
        _extend(sandbox, "writable", writable, path, "tools.sandbox.writable")
    if network:
        section = sandbox.get("network")
        if section is None:
            section = sandbox["network"] = {}
        if not isinstance(section, dict):
            raise ConfigSaveError(
                f"{path}: tools.sandbox.network is not an object; the file was left as it is"
            )
        _extend(section, "allow", network, path, "tools.sandbox.network.allow")
    try:  # a section the daemon would leave out when it reads the file would not keep the widening
        SandboxSettings.parse(sandbox)
    except ToolConfigError as exc:
        raise ConfigSaveError(f"{path}: {exc}; the file was left as it is") from exc


def _extend(section: dict[str, Any], key: str, entries: list[str], path: Path, where: str) -> None:
    current = section.get(key)
    if current is None:
        current = section[key] = []
    if not isinstance(current, list):
        raise ConfigSaveError(f"{path}: {where} is not a list; the file was left as it is")
    current.extend(entry for entry in dict.fromkeys(entries) if entry not in current)


def _write_atomically(path: Path, data: dict[str, Any], mode: int | None) -> None:
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o600 if mode is None else mode)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    with contextlib.suppress(OSError):  # the rename itself on disk (not every system can fsync a dir)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
