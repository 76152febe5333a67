"""The base of the host layer's errors (a session that cannot be opened, deleted or configured as
asked)."""

from __future__ import annotations


class HostError(Exception):
    """Something the session host refuses; subclasses say what."""
