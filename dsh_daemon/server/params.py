"""The params of the dsh methods, decoded: JSON in, the declared types out (`model/methods.py`), and
clear `invalid_params` errors naming the field (`dsh/send: 'message.content' is required`). The
declarations are imported when the first `dsh/*` request comes (cold start: `initialize` first).

Structure is the codec's (`model/codec.py`); what a type cannot say is checked here: a message a
client may send (lossless JSON, no tool calls or results, not sourced as a tool or the model), at most
20 pieces of context on a send, a selection with its range.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from dsh_daemon.host.errors import internal_error, invalid_params, shown

if TYPE_CHECKING:
    from dsh_daemon.model.messages import UserMessage
    from dsh_daemon.model.methods import Method
    from dsh_daemon.model.wire import ContextRef, OutgoingMessage

logger = logging.getLogger(__name__)

# Set (by the test suites): every result is checked against its declared type before it is sent,
# and one that does not fit is answered `internal_error` (a declaration and the code disagree).
CHECK_RESULTS = os.environ.get("DSH_WIRE_CHECK") == "1"
MODEL_ONLY_BLOCKS = frozenset({"tool-call", "tool-result"})
CLIENT_SOURCE_KINDS_REFUSED = frozenset({"tool", "model", "hook"})  # only the daemon makes these
MAX_ATTACHED_CONTEXT = 20  # context items on one send


def _method(name: str) -> Method:
    from dsh_daemon.model.methods import METHODS

    return METHODS[name]


def decode(name: str, raw: Any) -> Any:
    """`raw` params as method `name`'s params type (absent params: `{}`)."""
    from dsh_daemon.model.codec import WireValueError, structure

    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise invalid_params(f"{name}: params must be an object")
    try:
        return structure(raw, _method(name).params)
    except WireValueError as exc:
        raise invalid_params(f"{name}: {shown(str(exc), 500)}") from None


_PLAIN_SESSION_NEW = frozenset({"cwd", "mcpServers", "title"})


def plain_session_new(raw: Any) -> tuple[str | None, Mapping[str, Any] | None] | None:
    """`dsh/session/new`'s `cwd` and `mcpServers` as `decode` would give them, read without the
    declarations, when no `title` is given and each is of its declared type (or absent): what a first
    session request is answered with before the declarations are loaded (`server/app.py`). None
    otherwise, and for any other field, so that a field later declared for `SessionNewParams` is never
    dropped here: `decode` judges those params, so a bad one is refused as it always was."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping) or not _PLAIN_SESSION_NEW.issuperset(raw) or raw.get("title") is not None:
        return None
    cwd, servers = raw.get("cwd"), raw.get("mcpServers")
    if not (cwd is None or isinstance(cwd, str)) or not (servers is None or isinstance(servers, Mapping)):
        return None
    return cwd, servers


def typed(name: str, handler: Callable[..., Any]) -> Callable[..., Any]:
    """A pygls handler for method `name`: its params decoded first, its result sent as declared."""
    if inspect.isgeneratorfunction(handler):

        @functools.wraps(handler)
        def generator(ls: Any, raw: Any) -> Any:
            result = yield from handler(ls, decode(name, raw))
            return encode(name, result)

        return generator

    if inspect.iscoroutinefunction(handler):

        @functools.wraps(handler)
        async def coroutine(ls: Any, raw: Any) -> Any:
            return encode(name, await handler(ls, decode(name, raw)))

        return coroutine

    @functools.wraps(handler)
    def plain(ls: Any, raw: Any) -> Any:
        return encode(name, handler(ls, decode(name, raw)))

    return plain


def encode(name: str, result: Any) -> Any:
    """A handler's result as JSON: a declared value encoded, JSON built elsewhere (a transcript page,
    an inbox) as it is."""
    from dsh_daemon.model.codec import WireValueError, structure, unstructure

    out = unstructure(result) if dataclasses.is_dataclass(result) else result
    declared = _method(name).result
    if CHECK_RESULTS and declared is not None:
        try:
            structure(out, declared)
        except WireValueError as exc:
            raise internal_error(f"{name}: the result does not fit its declaration: {exc}") from None
    return out


def client_message(message: OutgoingMessage, method: str, key: str = "message") -> UserMessage:
    """The message a client sends, validated whole before anything is queued."""
    from dsh_daemon.model.messages import InvalidMessageError, UserMessage  # not before `initialize`

    content = message.content if isinstance(message.content, str) else list(message.content)
    try:
        built = UserMessage.create(content, message.source, id=message.id)
    except InvalidMessageError as exc:
        raise invalid_params(f"{method}: {shown(str(exc), 500)}") from exc
    except (TypeError, ValueError) as exc:
        raise invalid_params(f"{method}: invalid message: {shown(str(exc), 500)}") from exc
    for block in built.content:
        if block.type in MODEL_ONLY_BLOCKS:
            # Tool calls and results come from the model and the tools; a client-made one would be an
            # orphan the provider refuses, on every later request of the session.
            raise invalid_params(f"{method}: a client message cannot contain a {block.type!r} block")
    if built.source.get("kind") in CLIENT_SOURCE_KINDS_REFUSED:
        raise invalid_params(f"{method}: a client message cannot have source kind {built.source['kind']!r}")
    return built


def context_refs(
    refs: tuple[ContextRef, ...] | None, method: str, *, where: str = "context"
) -> tuple[ContextRef, ...] | None:
    """The editor context of a request, checked beyond its type (None: absent)."""
    if refs is None:
        return None
    if len(refs) > MAX_ATTACHED_CONTEXT:
        raise invalid_params(f"{method}: '{where}' holds more than {MAX_ATTACHED_CONTEXT} items")
    for index, ref in enumerate(refs):
        if ref.kind == "selection" and ref.range is None:
            at = f"{where}[{index}].range" if where else "range"
            raise invalid_params(f"{method}: '{at}' is required for a selection")
        if (ref.kind == "gitDiff") != (ref.diff is not None):
            at = f"{where}[{index}].diff" if where else "diff"
            raise invalid_params(f"{method}: '{at}' is given with kind 'gitDiff', and only with it")
        if ref.kind == "gitDiff" and not ref.uri.startswith("file:"):
            at = f"{where}[{index}].uri" if where else "uri"
            raise invalid_params(f"{method}: '{at}' of a gitDiff names the work tree's folder (a file: URI)")
        if (ref.kind == "terminal") != (ref.terminal is not None):
            at = f"{where}[{index}].terminal" if where else "terminal"
            raise invalid_params(
                f"{method}: '{at}' ({{name, command, output, cwd?, exitCode?, truncated?}}) is given "
                "with kind 'terminal', and only with it"
            )
    return refs


def json_of(value: Any) -> Any:
    """A declared value (a range, diagnostics) back as the JSON the editor-context code reads."""
    from dsh_daemon.model.codec import unstructure

    return None if value is None else unstructure(value)
