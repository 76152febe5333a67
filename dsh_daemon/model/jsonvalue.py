"""Lossless, deep-frozen JSON values.

Every durable value (message content, sources, event data) goes through `freeze_json` at the moment it
is created, so a value that would not survive a JSON round trip unchanged (NaN, -0.0, a tuple key, a
set, a cycle, a bytes object...) is rejected *before* anything is logged or queued.

Frozen objects are `FrozenDict` (a `dict` subclass that refuses mutation, so `json.dumps` and `==`
keep working) and frozen arrays are tuples.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping

from dsh_daemon.model.errors import ModelError

TYPE_CHECKING = False  # `typing` is not imported at run time: `dsh-daemon sessions` loads this module
if TYPE_CHECKING:
    from typing import Any, NoReturn, TypeAlias

JsonValue: TypeAlias = "bool | int | float | str | tuple[JsonValue, ...] | FrozenDict | None"


class NotJsonError(ModelError):
    """A value that is not lossless JSON."""


class FrozenDict(dict[str, "Any"]):
    """A JSON object that cannot be changed after creation."""

    __slots__ = ()

    def _refuse(self, *_: object, **__: object) -> NoReturn:
        raise TypeError("FrozenDict is immutable")

    __setitem__ = _refuse
    __delitem__ = _refuse
    clear = _refuse
    pop = _refuse
    popitem = _refuse
    setdefault = _refuse
    update = _refuse
    __ior__ = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(dumps(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))


_MAX_DEPTH = 200


def freeze_json(value: object, *, path: str = "$") -> Any:
    """Return a deep-frozen copy of `value`, or raise `NotJsonError` naming the offending path."""
    return _freeze(value, path, 0, set())


def freeze_flat_objects(items: Iterable[Mapping[str, Any]], *, path: str = "$") -> tuple[Any, ...]:
    """`freeze_json` of a list of flat objects (members strings, ints or null: streamed deltas), an
    object already frozen kept as it is; anything else goes the general way, with its errors. A chunk
    event holds hundreds of deltas, and the general walk (a path string per member) cost more than
    all else the log does with them (issue 40)."""
    out: list[Any] = []
    for index, item in enumerate(items):
        kind = type(item)
        if kind is FrozenDict or kind is dict:
            for key, value in item.items():
                if type(key) is not str:
                    break
                if type(value) is str:
                    if not value.isascii():
                        try:
                            value.encode("utf-8")
                        except UnicodeEncodeError:
                            break
                elif type(value) is not int and value is not None:
                    break
            else:
                out.append(item if kind is FrozenDict else FrozenDict(item))
                continue
        out.append(_freeze(item, f"{path}[{index}]", 1, set()))
    return tuple(out)


def _freeze(value: object, path: str, depth: int, seen: set[int]) -> Any:
    if depth > _MAX_DEPTH:
        raise NotJsonError(f"{path}: nested deeper than {_MAX_DEPTH} levels")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise NotJsonError(f"{path}: a lone surrogate cannot be stored as UTF-8 ({exc.reason})") from None
        return value
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise NotJsonError(f"{path}: {value!r} is not representable in JSON")
        if value == 0.0 and math.copysign(1.0, value) < 0:
            raise NotJsonError(f"{path}: -0.0 does not survive a JSON round trip")
        return value
    if isinstance(value, Mapping):
        if id(value) in seen:
            raise NotJsonError(f"{path}: cycle")
        seen.add(id(value))
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotJsonError(f"{path}: object key {key!r} is not a string")
            out[key] = _freeze(item, f"{path}.{key}", depth + 1, seen)
        seen.discard(id(value))
        return FrozenDict(out)
    if isinstance(value, list | tuple):
        if id(value) in seen:
            raise NotJsonError(f"{path}: cycle")
        seen.add(id(value))
        items = tuple(_freeze(item, f"{path}[{i}]", depth + 1, seen) for i, item in enumerate(value))
        seen.discard(id(value))
        return items
    raise NotJsonError(f"{path}: {type(value).__name__} is not a JSON value")


def dumps(value: object) -> str:
    """Compact, key-ordered JSON: the one serialisation used for storage and byte comparisons."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True, allow_nan=False)


def _tuples(value: Any) -> Any:
    if type(value) is not list:
        return value
    for item in value:
        if type(item) is list:  # rare: arrays of arrays
            return tuple([_tuples(v) for v in value])
    return tuple(value)


def _frozen_object(obj: dict[str, Any]) -> FrozenDict:
    # Objects arrive bottom-up from the C decoder, so only arrays still need converting here.
    return FrozenDict({k: (_tuples(v) if type(v) is list else v) for k, v in obj.items()})


def loads(text: str) -> Any:
    """Parse JSON text that this program wrote (already validated) into a frozen value, fast."""
    return _tuples(_DECODER.decode(text))


_DECODER = json.JSONDecoder(object_hook=_frozen_object)


def thaw(value: object) -> Any:
    """A plain, mutable copy (dicts and lists) of a frozen value, for code that must build on it."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [thaw(v) for v in value]
    return value
