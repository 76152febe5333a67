"""A `session/prompt`'s content blocks as messages: the text as the person's prompt, and each
`resource` / `resource_link` block as an `editor`-sourced message that travels with it.

Zed names a selection with a fragment, `file:///p/app.py#L10:25` (lines 10 to 25, 1-based): that
becomes `contextKind: "selection"` with the LSP range of those lines. An embedded resource carries its
text; a `file:` resource link is read now, inside the session's workspace only, through the tools'
one safe reader (regular files, non-blocking, capped), so a prompt's context is what the file held
when the person pressed Enter. A linked directory is attached as its listing; a path outside the
workspace is attached as a reference naming it (not read: the agent's tools meet the confinement).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from dsh_daemon.host.editor_context import (
    context_path,
    directory_message,
    editor_source,
    file_message,
    read_context_file,
    reference_message,
    selection_message,
)
from dsh_daemon.host.errors import WireError, invalid_params, shown
from dsh_daemon.host.port import Workspace
from dsh_daemon.model.codec import uri_problem
from dsh_daemon.model.messages import InvalidMessageError, UserMessage

_LINES = re.compile(r"^L(\d+)(?:[:\-]L?(\d+))?$", re.ASCII)  # `#L٣` is no line number
MAX_LINE_DIGITS = 9  # a line number past 999,999,999 names no line of any file


@dataclass(frozen=True)
class PromptParts:
    """A prompt as the agent takes it: the message and the editor messages entered just before it."""

    message: UserMessage
    attachments: tuple[UserMessage, ...]


@dataclass(frozen=True)
class LineSpan:
    first: int  # 1-based, inclusive
    last: int

    def lsp_range(self) -> dict[str, Any]:
        """Whole lines: from the start of `first` to the start of the line after `last`."""
        return {"start": {"line": self.first - 1, "character": 0}, "end": {"line": self.last, "character": 0}}


class LineSpanError(ValueError):
    """A `#L…` fragment whose line numbers are past any file's (a client's mistake)."""


def split_uri(uri: str) -> tuple[str, LineSpan | None]:
    """`file:///p#L10:25` -> (`file:///p`, lines 10-25); a fragment that is not a line span is kept.
    Raises `LineSpanError` for line numbers of more than `MAX_LINE_DIGITS` digits."""
    base, _, fragment = uri.partition("#")
    match = _LINES.match(fragment) if fragment else None
    if match is None:
        return uri, None
    if any(len(group or "") > MAX_LINE_DIGITS for group in match.groups()):
        raise LineSpanError(f"the line numbers in {shown(uri)} are out of range")
    first = int(match.group(1))
    last = int(match.group(2) or first)
    if first < 1 or last < 1:
        return uri, None
    return base, LineSpan(min(first, last), max(first, last))


def fs_path(uri: str) -> str | None:
    """The local path of a `file:` URI (None for other schemes)."""
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    return unquote(parts.path)


def _lines(text: str, span: LineSpan) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(lines[span.first - 1 : span.last])


def editor_message(uri: str, text: str, *, span: LineSpan | None, whole_file: bool) -> UserMessage:
    """`whole_file`: `text` is the file (a selection is cut from it), else it is the selection itself.
    Worded as the LSP server words editor context (host/editor_context.py)."""
    path = fs_path(uri) or uri
    if span is None:
        return file_message(uri, path, text, editor_source(uri, "file"))
    source = editor_source(uri, "selection", rng=span.lsp_range())
    selected = _lines(text, span) if whole_file else text
    return selection_message(path, selected, span.first, span.last, source)


def _split(uri: str, where: str) -> tuple[str, LineSpan | None]:
    problem = uri_problem(uri)
    if problem is not None:
        raise invalid_params(f"'{where}' {shown(uri)} {problem}")
    try:
        return split_uri(uri)
    except LineSpanError as exc:
        raise invalid_params(f"'{where}': {exc}") from None


def _block_message(block: Mapping[str, Any], index: int, workspace: Workspace, field: str) -> UserMessage:
    kind = block.get("type")
    if kind == "resource":
        resource = block.get("resource")
        if not isinstance(resource, Mapping) or not isinstance(resource.get("uri"), str):
            raise invalid_params(f"{field}[{index}]: a resource needs 'resource.uri'")
        text = resource.get("text")
        if not isinstance(text, str):
            raise invalid_params(f"{field}[{index}]: only text resources are supported (no 'blob')")
        base, span = _split(resource["uri"], f"{field}[{index}].resource.uri")
        return editor_message(base, text, span=span, whole_file=False)
    uri = block.get("uri")
    if not isinstance(uri, str) or not uri:
        raise invalid_params(f"{field}[{index}]: a resource_link needs a 'uri'")
    base, span = _split(uri, f"{field}[{index}].uri")
    if fs_path(base) is None:
        name = block.get("name") if isinstance(block.get("name"), str) else base
        return UserMessage.create(
            f"Linked resource {name}: {base}", {"kind": "editor", "uri": base, "contextKind": "file"}
        )
    return _link_message(base, span, workspace)


def _link_message(uri: str, span: LineSpan | None, workspace: Workspace) -> UserMessage:
    """A `file:` link: a file inside the workspace read now, a directory as its listing, and a path
    outside the workspace named as a reference (its read is the agent's, through the tools)."""
    path = fs_path(uri)
    assert path is not None
    try:
        real = context_path(workspace, path, uri)
    except WireError as exc:
        if exc.kind != "outside_workspace":
            raise
        return reference_message(workspace, path, uri)
    if real.is_dir():
        return directory_message(workspace, real, uri)
    text = read_context_file(workspace, real, uri).text
    return editor_message(uri, text, span=span, whole_file=True)


def prompt_parts(blocks: Any, workspace: Workspace, *, field: str = "prompt") -> PromptParts:
    """Text blocks form the message (in order); resource blocks become its attachments (in order)."""
    if not isinstance(blocks, Sequence) or isinstance(blocks, str) or not blocks:
        raise invalid_params(f"'{field}' must be a non-empty array of content blocks")
    texts: list[dict[str, Any]] = []
    attachments: list[UserMessage] = []
    for index, block in enumerate(blocks):
        if not isinstance(block, Mapping):
            raise invalid_params(f"{field}[{index}] must be an object")
        kind = block.get("type")
        if kind == "text":
            if not isinstance(block.get("text"), str):
                raise invalid_params(f"{field}[{index}]: 'text' must be a string")
            texts.append({"type": "text", "text": block["text"]})
        elif kind in ("resource", "resource_link"):
            attachments.append(_block_message(block, index, workspace, field))
        elif kind in ("image", "audio"):
            # Never dropped silently: the model would answer a prompt the person did not send.
            raise invalid_params(
                f"{field}[{index}]: the model takes text only (promptCapabilities.{kind} is false), so "
                f"this {kind} cannot be sent: nothing was sent. Describe it in words, or attach the file "
                "it came from as a resource"
            )
        else:
            raise invalid_params(
                f"{field}[{index}]: content blocks of type {shown(repr(kind))} are not supported"
            )
    if not texts:
        texts = [{"type": "text", "text": "(see the attached context)"}]
    try:
        message = UserMessage.create(texts)
    except InvalidMessageError as exc:
        raise invalid_params(f"{field}: {exc}") from exc
    return PromptParts(message, tuple(attachments))


def resource_block(source: Mapping[str, Any], text: str) -> dict[str, Any]:
    """An editor message shown back to an ACP client (session/load): an embedded text resource."""
    uri = str(source.get("uri") or "")
    rng = source.get("range")
    if isinstance(rng, Mapping) and uri:
        try:
            first = int(rng["start"]["line"]) + 1
            end = rng["end"]
            last = int(end["line"]) + (0 if int(end["character"]) == 0 and int(end["line"]) >= first else 1)
            uri = f"{uri}#L{first}:{max(first, last)}"
        except (KeyError, TypeError, ValueError):
            pass
    return {
        "type": "resource",
        "resource": {"uri": uri or "dsh:context", "text": text, "mimeType": "text/plain"},
    }


def path_of(uri: str) -> Path | None:
    path = fs_path(uri)
    return Path(path) if path else None
