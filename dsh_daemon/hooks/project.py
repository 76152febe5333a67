"""A project's hooks (`<folder>/.dsh/config.json`, its `hooks`) and the person's trust in them.

A project's config comes with the code (a clone, a pull), so its hooks are commands someone else
wrote: they run only once the person trusted them (`dsh/project/trust {root}`). The trust is
remembered per folder in `$DSH_HOME/trusted-projects.json`, bound to the digest of the hooks the
person trusted: when the project's hooks change, they wait for the person again (`hooks/untrusted`).
The rest of the project's config.json is not read (its hooks are all this build takes from it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_daemon.model.configfile import ConfigFileError, read_config_file
from dsh_daemon.model.hooks import HookSettings, parse_hooks_leniently

PROJECT_DIR = ".dsh"
TRUST_FILE = "trusted-projects.json"


@dataclass(frozen=True)
class ProjectHooks:
    """The hooks a project's config holds: the folder, the file, the usable hooks, their digest, and
    what was left out (each naming the file and the entry)."""

    root: Path
    path: Path
    settings: HookSettings
    digest: str
    problems: tuple[str, ...] = ()


def project_root(folder: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(folder))


def read_project_hooks(folder: str | os.PathLike[str]) -> ProjectHooks | None:
    """The project's hooks (None: no `.dsh/config.json`, or no `hooks` in it). A file that cannot be
    read is a `ProjectHooks` with no hooks and the problem, so the person hears of it."""
    root = project_root(folder)
    directory = root / PROJECT_DIR
    path = directory / "config.json"
    try:
        data = read_config_file(directory)
    except ConfigFileError as exc:
        return ProjectHooks(root, path, HookSettings(), "", (str(exc),))
    raw = data.get("hooks")
    if raw is None:
        return None
    settings, problems = parse_hooks_leniently(raw, f"{path}: hooks", origin="project")
    return ProjectHooks(root, path, settings, digest(raw), tuple(problems))


def digest(raw: Any) -> str:
    """The hooks' identity: what they are, not how the file spells them (whitespace, key order)."""
    text = json.dumps(raw, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


class ProjectTrust:
    """The folders whose hooks the person trusted (and which hooks), in `$DSH_HOME`."""

    _lock = threading.Lock()  # one daemon's sessions may trust from several threads' requests

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.path = Path(state_dir) / TRUST_FILE

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # none, or unreadable: nothing is trusted (never the other way round)
        projects = data.get("projects") if isinstance(data, Mapping) else None
        return dict(projects) if isinstance(projects, Mapping) else {}

    def trusted(self, project: ProjectHooks) -> bool:
        entry = self._read().get(str(project.root))
        return isinstance(entry, Mapping) and bool(project.digest) and entry.get("digest") == project.digest

    def known(self, root: Path) -> bool:
        """Whether the person trusted other hooks of this folder before (they have changed since)."""
        return str(root) in self._read()

    def trust_durably(self, project: ProjectHooks) -> None:
        """Record the trust (on disk, fsynced, when this returns)."""
        with self._lock:
            projects = self._read()
            projects[str(project.root)] = {"digest": project.digest}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=f".{TRUST_FILE}.", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    json.dump({"projects": projects}, out, indent=1, sort_keys=True)
                    out.flush()
                    os.fsync(out.fileno())
                os.chmod(temp, 0o600)
                os.replace(temp, self.path)
                directory = os.open(self.path.parent, os.O_RDONLY)
                try:
                    os.fsync(directory)  # the rename itself on disk: the trust survives a crash
                finally:
                    os.close(directory)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
