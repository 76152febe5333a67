"""Wire values as frozen dataclasses: one cattrs converter turns JSON into them and back.

The wire's declarations (`model/wire.py`, `model/payloads.py`, `model/methods.py`) are plain frozen
dataclasses with snake_case fields; on the wire every name is camelCase (`session_id` ↔ `sessionId`).
Rules the converter keeps, for every declared type:
- Strict JSON types: a string is a `str`, an integer an `int` that is not a `bool`, a number an `int`
  or a `float` (never a `bool`), a boolean a `bool`; nothing is coerced.
- A field with a default may be left out or given as `null`: it takes its default. A field without
  one is required (`X | None` without a default is required and may be `null`).
- Unstructuring leaves out a field whose value is `None` when its default is `None`.
- Members JSON does not define for a type are ignored.
- `JsonObject` / `JsonValue` fields pass through untouched (frozen JSON stays frozen); annotating one
  with `SchemaAs(T)` gives the schema a shape for it without structuring it.
- Unions are tried in their declared order; the first member that fits wins.
A value that does not fit raises `WireValueError` naming the field (`prompt[0].text`, `range.start`)
and saying what it must be.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, NewType, TypeAlias, TypeVar, get_args, get_origin

import cattrs
from cattrs.errors import ClassValidationError, IterableValidationError, IterableValidationNote
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from dsh_daemon.model.errors import ModelError
from dsh_daemon.model.uris import uri_problem as uri_problem  # where the wire's URIs are checked

T = TypeVar("T")

JsonObject: TypeAlias = Mapping[str, Any]  # a JSON object kept as it came (frozen when stored)
JsonValue: TypeAlias = Any  # any JSON value
NonEmptyStr = NewType("NonEmptyStr", str)
UriStr = NewType("UriStr", str)  # a non-empty string that splits as a URI (`uri_problem`)
PositiveInt = NewType("PositiveInt", int)  # ≥ 1
NonNegativeInt = NewType("NonNegativeInt", int)  # ≥ 0


@dataclass(frozen=True)
class SchemaAs:
    """`Annotated[JsonObject, SchemaAs(Shape)]`: passed through as JSON, described by `Shape`."""

    shape: Any


@dataclass(frozen=True)
class Doc:
    """`Annotated[T, Doc("…")]`: a description for the schema."""

    text: str


class WireValueError(ModelError):
    """A JSON value that is not what its declaration says; `path` names the field ("" for the whole)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"'{path}' {problem}" if path else problem)
        self.path = path
        self.problem = problem


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _strict(kind: type, problem: str) -> Callable[[Any, Any], Any]:
    def hook(value: Any, _: Any) -> Any:
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise ValueError(problem)
        return value

    return hook


def _number(value: Any, _: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError("must be a number")
    return value


def _non_empty(value: Any, _: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("must be a non-empty string")
    return value


def _uri(value: Any, _: Any) -> str:
    text = _non_empty(value, _)
    problem = uri_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return text


def _at_least(minimum: int) -> Callable[[Any, Any], int]:
    problem = "must be a positive integer" if minimum == 1 else "must be a non-negative integer"

    def hook(value: Any, _: Any) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise ValueError(problem)
        return value

    return hook


def _json_object(value: Any, _: Any) -> Any:
    if not isinstance(value, Mapping):
        raise ValueError("must be an object")
    return value


def _describe(kind: Any) -> str:
    """How a type reads in an error: `a string`, `one of "all", "none"`, …"""
    kind = _unannotated(kind)
    origin: Any = get_origin(kind)
    if origin is typing.Literal:
        return "one of " + ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in get_args(kind))
    if kind in (str, NonEmptyStr, UriStr):
        return "a string"
    if kind is int or kind in (PositiveInt, NonNegativeInt):
        return "an integer"
    if kind is bool:
        return "a boolean"
    if kind is float:
        return "a number"
    if origin in (list, tuple) or kind in (list, tuple):
        return "an array"
    if dataclasses.is_dataclass(kind) or kind is JsonObject or origin is Mapping:
        return "an object"
    if kind is type(None):
        return "null"
    return getattr(kind, "__name__", str(kind))


def _origin(kind: Any) -> Any:
    return get_origin(kind)


def _unannotated(kind: Any) -> Any:
    while get_origin(kind) is Annotated:
        kind = get_args(kind)[0]
    return kind


def is_union(kind: Any) -> bool:
    return get_origin(kind) in (typing.Union, types.UnionType)


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(
        detailed_validation=True,
        forbid_extra_keys=False,
        unstruct_collection_overrides={tuple: list, Sequence: list},  # JSON arrays are lists
    )
    converter.register_structure_hook(str, _strict(str, "must be a string"))
    converter.register_structure_hook(bool, _strict(bool, "must be a boolean"))
    converter.register_structure_hook(int, _strict(int, "must be an integer"))
    converter.register_structure_hook(float, _number)
    converter.register_structure_hook(NonEmptyStr, _non_empty)
    converter.register_structure_hook(UriStr, _uri)
    converter.register_structure_hook(PositiveInt, _at_least(1))
    converter.register_structure_hook(NonNegativeInt, _at_least(0))
    converter.register_structure_hook_func(lambda t: _unannotated(t) is JsonObject, _json_object)
    converter.register_structure_hook_func(lambda t: t is Any, lambda value, _: value)
    converter.register_unstructure_hook_func(lambda t: _unannotated(t) is JsonObject, lambda value: value)

    def literal(kind: Any) -> Callable[[Any, Any], Any]:
        choices = get_args(kind)
        problem = f"must be {_describe(kind)}"

        def structure(value: Any, _: Any) -> Any:
            # `True == 1`: a literal 1 must not accept `true`, nor "1" a number
            if not any(value == c and type(value) is type(c) for c in choices):
                raise ValueError(problem)
            return value

        return structure

    converter.register_structure_hook_factory(lambda t: _origin(t) is typing.Literal, literal)

    def annotated(kind: Any) -> Callable[[Any, Any], Any]:
        inner = get_args(kind)[0]
        return lambda value, _: converter.structure(value, inner)

    converter.register_structure_hook_factory(lambda t: _origin(t) is Annotated, annotated)

    def union(kind: Any) -> Callable[[Any, Any], Any]:
        members = get_args(kind)
        others = [m for m in members if m is not type(None)]

        def structure(value: Any, _: Any) -> Any:
            if value is None and type(None) in members:
                return None
            if len(others) == 1:  # `X | None`: X's own error, naming the field inside it
                return converter.structure(value, others[0])
            for member in members:
                if member is type(None):
                    continue
                try:
                    return converter.structure(value, member)
                except (ValueError, TypeError, KeyError, ClassValidationError, IterableValidationError):
                    continue
            raise ValueError("must be " + " or ".join(_describe(m) for m in members))

        return structure

    converter.register_structure_hook_factory(is_union, union)

    def sequence(kind: Any) -> Callable[[Any, Any], Any]:
        item = (get_args(kind) or (Any,))[0]

        def structure(value: Any, _: Any) -> Any:
            if not isinstance(value, list | tuple):  # a JSON array: not an object, not a string
                raise ValueError("must be an array")
            out, failures = [], []
            for index, element in enumerate(value):
                try:
                    out.append(converter.structure(element, item))
                except Exception as exc:
                    exc.add_note(IterableValidationNote(f"Structuring {kind} @ index {index}", index, item))
                    failures.append(exc)
            if failures:
                raise IterableValidationError(f"While structuring {kind}", failures, kind)
            return tuple(out)

        return structure

    converter.register_structure_hook_factory(lambda t: _origin(t) in (tuple, list), sequence)

    def structure_dataclass(cls: Any) -> Callable[[Any, Any], Any]:
        fields = dataclasses.fields(cls)
        renames: Any = {f.name: override(rename=camel(f.name)) for f in fields}
        generated = make_dict_structure_fn(cls, converter, **renames)
        defaulted = frozenset(
            camel(f.name)
            for f in fields
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        )

        def structure(value: Any, kind: Any) -> Any:
            if not isinstance(value, Mapping):
                raise ValueError("must be an object")
            if defaulted and any(value.get(key, 0) is None for key in defaulted):
                # `null` for a field with a default means "not given"
                value = {k: v for k, v in value.items() if not (v is None and k in defaulted)}
            return generated(value, kind)

        return structure

    def unstructure_dataclass(cls: Any) -> Callable[[Any], Any]:
        overrides: Any = {
            f.name: override(rename=camel(f.name), omit_if_default=f.default is None)
            for f in dataclasses.fields(cls)
        }
        return make_dict_unstructure_fn(cls, converter, **overrides)

    converter.register_structure_hook_factory(dataclasses.is_dataclass, structure_dataclass)
    converter.register_unstructure_hook_factory(dataclasses.is_dataclass, unstructure_dataclass)
    return converter


CONVERTER = _make_converter()


def structure(value: Any, kind: type[T]) -> T:
    """`value` (JSON) as `kind`; `WireValueError` naming the first field that does not fit."""
    try:
        result: T = CONVERTER.structure(value, kind)
    except (ClassValidationError, IterableValidationError) as exc:
        path, leaf = _first_failure(exc, "")
        raise WireValueError(path, _problem(leaf)) from None
    except (ValueError, TypeError, KeyError) as exc:
        raise WireValueError("", _problem(exc)) from None
    return result


def unstructure(value: Any) -> Any:
    """A declared value as JSON (dicts and lists; `None` defaults left out)."""
    return CONVERTER.unstructure(value)


def _first_failure(exc: BaseException, path: str) -> tuple[str, BaseException]:
    if isinstance(exc, ClassValidationError | IterableValidationError):
        for sub in exc.exceptions:
            for note in getattr(sub, "__notes__", ()):
                name, index = getattr(note, "name", None), getattr(note, "index", None)
                if isinstance(name, str):
                    return _first_failure(sub, f"{path}.{camel(name)}" if path else camel(name))
                if index is not None:
                    return _first_failure(sub, f"{path}[{index}]")
            return _first_failure(sub, path)
    return path, exc


def _problem(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return "is required"
    text = str(exc)
    if text.startswith("must "):
        return text
    return f"is invalid ({text})"
