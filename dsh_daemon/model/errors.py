"""The base of the value layer's errors: a value that is not what it must be (a message, a JSON value,
a stored splice or event). Each layer has one such base, so a front end maps whole families of
failures to wire errors in one place (`host/errors.py: wire_error`)."""

from __future__ import annotations


class ModelError(ValueError):
    """A value that cannot be what it claims to be."""
