"""Typed tool failures. A tool raises one of these; `base.ToolBase` turns it into an error result whose
text the model reads and whose `code` clients and tests can match on."""

from __future__ import annotations


class ToolError(Exception):
    code: str = "TOOL_ERROR"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class InvalidArgumentsError(ToolError):
    code = "INVALID_ARGUMENTS"


class OutsideWorkspaceError(ToolError):
    """A path that resolves (symlinks included) outside every workspace root."""

    code = "OUTSIDE_WORKSPACE"


class FileToolError(ToolError):
    """Not found, a directory where a file was expected, binary content, too large, ..."""


class EditConflictError(ToolError):
    """The file changed between computing an edit and applying it."""

    code = "EDIT_CONFLICT"
