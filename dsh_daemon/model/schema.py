"""A JSON Schema (draft 2020-12) of the whole dsh wire, made from its declarations.

`wire_schema()` is what `dsh-daemon schema` prints: every declared type under `$defs` (camelCase
properties, `required` for the fields without a default), `DshEvent` (one `dsh/event` params object
per event type, `data` its payload), and two sections a validator ignores but a client author reads:
`x-methods` (each method's params and result, client → daemon and daemon → client) and `x-events`
(each event type, durable or live, and its payload).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Annotated, Any, get_args, get_origin, get_type_hints

from dsh_daemon.model import events as ev
from dsh_daemon.model import wire
from dsh_daemon.model.codec import (
    JsonObject,
    NonEmptyStr,
    NonNegativeInt,
    PositiveInt,
    SchemaAs,
    UriStr,
    camel,
    is_union,
)
from dsh_daemon.model.methods import (
    DAEMON_METHODS,
    METHODS,
    DshCapabilities,
    DshClientCapabilities,
    Method,
)
from dsh_daemon.model.payloads import PAYLOADS, TOOL_RESULT_META

SCHEMA_URI = "https://json-schema.org/draft/2020-12/schema"
PROTOCOL_VERSION = 1


class _Builder:
    def __init__(self) -> None:
        self.defs: dict[str, Any] = {}

    def ref(self, cls: type) -> dict[str, Any]:
        name = cls.__name__
        if name not in self.defs:
            self.defs[name] = {}  # placeholder: recursive types refer to it while it is built
            self.defs[name] = self._object(cls)
        return {"$ref": f"#/$defs/{name}"}

    def _object(self, cls: type) -> dict[str, Any]:
        hints = get_type_hints(cls, include_extras=True)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for field in dataclasses.fields(cls):
            key = camel(field.name)
            properties[key] = self.of(hints[field.name])
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                required.append(key)
        out: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            out["required"] = required
        doc = (cls.__doc__ or "").strip()
        if doc and not doc.startswith(f"{cls.__name__}("):  # not dataclass's generated signature
            out["description"] = " ".join(doc.split())
        return out

    def of(self, kind: Any) -> dict[str, Any]:
        origin = get_origin(kind)
        if origin is Annotated:
            inner, *extras = get_args(kind)
            for extra in extras:
                if isinstance(extra, SchemaAs):
                    shape = extra.shape
                    return self.of(getattr(wire, shape) if isinstance(shape, str) else shape)
            return self.of(inner)
        if is_union(kind):
            members = [m for m in get_args(kind) if m is not type(None)]
            options = [self.of(m) for m in members]
            if len(members) < len(get_args(kind)):
                options.append({"type": "null"})
            return options[0] if len(options) == 1 else {"anyOf": options}
        if origin is typing.Literal:
            values = list(get_args(kind))
            return {"const": values[0]} if len(values) == 1 else {"enum": values}
        if origin in (tuple, list):
            args = [a for a in get_args(kind) if a is not Ellipsis]
            return {"type": "array", "items": self.of(args[0])} if args else {"type": "array"}
        if kind is JsonObject or origin in (dict, typing.Mapping) or kind is dict:
            return {"type": "object"}
        if dataclasses.is_dataclass(kind) and isinstance(kind, type):
            return self.ref(kind)
        simple: dict[Any, dict[str, Any]] = {
            str: {"type": "string"},
            NonEmptyStr: {"type": "string", "minLength": 1},
            UriStr: {"type": "string", "minLength": 1},
            int: {"type": "integer"},
            PositiveInt: {"type": "integer", "minimum": 1},
            NonNegativeInt: {"type": "integer", "minimum": 0},
            float: {"type": "number"},
            bool: {"type": "boolean"},
            type(None): {"type": "null"},
        }
        if kind in simple:
            return dict(simple[kind])
        if kind is Any or isinstance(kind, types.GenericAlias):
            return {}
        raise TypeError(f"no schema for {kind!r}")


def _method(builder: _Builder, method: Method, direction: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "direction": direction,
        "kind": "notification" if method.is_notification else "request",
        "summary": method.summary,
        "params": builder.of(method.params),
    }
    if method.result is not None:
        out["result"] = builder.of(method.result)
    return out


def wire_schema() -> dict[str, Any]:
    builder = _Builder()
    methods = {name: _method(builder, m, "client → daemon") for name, m in METHODS.items()}
    methods.update({name: _method(builder, m, "daemon → client") for name, m in DAEMON_METHODS.items()})
    events: dict[str, Any] = {}
    envelopes = []
    for event_type in sorted(PAYLOADS):
        data = builder.of(PAYLOADS[event_type])
        durable = event_type in ev.DURABLE_TYPES
        events[event_type] = {"durable": durable, "data": data}
        envelope = {
            "type": "object",
            "properties": {
                "sessionId": {"type": "string"},
                "type": {"const": event_type},
                "data": data,
                **({"seq": {"type": "integer", "minimum": 0}} if durable else {}),
            },
            "required": ["sessionId", "type", "data", *(["seq"] if durable else [])],
        }
        envelopes.append(envelope)
    for extra in (
        DshCapabilities,
        DshClientCapabilities,
        wire.EditMeta,
        wire.LanguageToolMeta,
    ):  # shapes named in protocol.md, carried as JSON
        builder.ref(extra)
    tool_meta = {name: builder.ref(shape) for name, shape in sorted(TOOL_RESULT_META.items())}
    defs = dict(sorted(builder.defs.items()))
    defs["DshEvent"] = {
        "description": "dsh/event params: one of the event types below (a client keeps, and does not "
        "interpret, an event type it does not know).",
        "oneOf": envelopes,
    }
    return {
        "$schema": SCHEMA_URI,
        "$id": f"https://dsh-daemon.invalid/protocol/{PROTOCOL_VERSION}/schema.json",
        "title": f"dsh-daemon wire, protocol version {PROTOCOL_VERSION} (protocol.md)",
        "$defs": defs,
        "x-methods": methods,
        "x-events": events,
        "x-toolResultMeta": tool_meta,  # a tool/result's `meta`, by tool name
    }
