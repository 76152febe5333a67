"""The base of the agent core's errors (a refused send or edit, a turn that cannot run)."""

from __future__ import annotations


class AgentError(Exception):
    """Something the agent core refuses or cannot do; subclasses say what."""


class StepError(AgentError, RuntimeError):
    """A step that cannot run as configured (no model, no provider, a hook returning nonsense)."""
