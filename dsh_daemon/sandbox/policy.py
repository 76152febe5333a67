"""What a session's commands may do (`SandboxPolicy`), what this machine gives (`SandboxLevel`), and
the refusal when a confined mode cannot be had (`SandboxUnavailable`). Plain values."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

SandboxMode = Literal["read-only", "workspace-write", "full-access"]
SandboxLayers = Literal["auto", "landlock-only", "none"]
MODES: tuple[SandboxMode, ...] = ("read-only", "workspace-write", "full-access")

# Beneath the home directory: masked (unreadable) for every confined command.
HOME_SECRETS = (".ssh", ".aws", ".gnupg", ".netrc", ".config/gh", ".docker/config.json")
# Beneath each workspace root (and each git dir): kept read-only even where the root is writable,
# because what is there runs later outside the sandbox (hooks, a config's aliases and filters) or
# changes the daemon's own rules.
PROTECTED_IN_ROOT = (".dsh",)
PROTECTED_IN_GIT_DIR = ("hooks", "config", "config.worktree")


class SandboxUnavailable(Exception):
    """A confined mode was asked for and no confinement can be had here: the command is refused
    (never run unconfined); the message says which layer is missing and why."""


@dataclass(frozen=True)
class SandboxPolicy:
    mode: SandboxMode
    roots: tuple[Path, ...]
    temp_dir: Path
    writable: tuple[Path, ...] = ()  # widenings and opt-in caches
    network_allow: tuple[str, ...] = ()  # domains reachable through the proxy
    layers: SandboxLayers = "auto"  # tests force layer 0 alone, or none
    # Whose secrets are masked: the home directory and the daemon's own state (DSH_HOME). None: the
    # process's own ($HOME, $DSH_HOME or the user data dir). Tests pass directories in a temp dir.
    home: Path | None = None
    dsh_home: Path | None = None

    @property
    def confined(self) -> bool:
        return self.mode != "full-access"

    def home_dir(self) -> Path:
        return self.home if self.home is not None else Path(os.path.expanduser("~"))

    def dsh_home_dir(self) -> Path:
        if self.dsh_home is not None:
            return self.dsh_home
        if os.environ.get("DSH_HOME"):
            return Path(os.environ["DSH_HOME"])
        data = os.environ.get("XDG_DATA_HOME") or str(self.home_dir() / ".local" / "share")
        return Path(data) / "dsh-daemon"

    def secret_paths(self) -> tuple[Path, ...]:
        """Every path a confined command must not read, whether it exists or not."""
        home = self.home_dir()
        return (*(home / name for name in HOME_SECRETS), self.dsh_home_dir())


@dataclass(frozen=True)
class SandboxLevel:
    """What this machine gives, probed once per process (`probe_level`)."""

    landlock_abi: int | None
    seccomp: bool
    namespaces: bool
    reasons: tuple[str, ...] = ()  # why a layer is missing, one line each

    @property
    def confined(self) -> bool:
        """Layer 0 (Landlock + seccomp) can be had: the floor of every confined mode."""
        return self.landlock_abi is not None and self.seccomp

    def describe(self) -> str:
        """One line: what is had, then what is missing and why."""
        parts = []
        if self.landlock_abi is not None:
            parts.append(f"Landlock {self.landlock_abi}")
        if self.seccomp:
            parts.append("seccomp")
        if self.namespaces:
            parts.append("namespaces")
        had = " + ".join(parts) if parts else "unconfined"
        if not self.confined:
            had = f"unconfined (only full-access can run commands; had: {' + '.join(parts) or 'nothing'})"
        return "; ".join([had, *self.reasons])

    def json(self) -> dict[str, object]:
        return {
            "landlockAbi": self.landlock_abi,
            "seccomp": self.seccomp,
            "namespaces": self.namespaces,
            "confined": self.confined,
            "reasons": list(self.reasons),
            "description": self.describe(),
        }
