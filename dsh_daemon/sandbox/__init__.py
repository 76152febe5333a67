"""Confinement of the commands the agent runs (issue 41; docs/design.md, "Sandbox").

Layer 0 (Landlock + seccomp, applied just before exec) and layer 1 (user, mount, PID and network
namespaces), both set up by a single-threaded fork server per session. Standard library only.

This package's `__init__` imports nothing: the fork server starts by importing three modules of it
and must not pay for asyncio. The public names load on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh_daemon.sandbox.level import probe_level
    from dsh_daemon.sandbox.policy import (
        SandboxLevel,
        SandboxMode,
        SandboxPolicy,
        SandboxUnavailable,
    )
    from dsh_daemon.sandbox.session import Sandbox, SandboxedProcess

__all__ = [
    "Sandbox",
    "SandboxLevel",
    "SandboxMode",
    "SandboxPolicy",
    "SandboxUnavailable",
    "SandboxedProcess",
    "probe_level",
]
_WHERE = {
    "Sandbox": "session",
    "SandboxedProcess": "session",
    "SandboxLevel": "policy",
    "SandboxMode": "policy",
    "SandboxPolicy": "policy",
    "SandboxUnavailable": "policy",
    "probe_level": "level",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f"dsh_daemon.sandbox.{_WHERE[name]}"), name)
    raise AttributeError(name)
