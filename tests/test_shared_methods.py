"""The wire's frozen value classes share one `__eq__`, `__hash__`, `__repr__`, `__setattr__` and
`__delattr__` (model/sharedmethods.py; issue 40: the ones `dataclasses` compiles for each class were
about 0.5 MiB of a one-session LSP daemon's RSS), and behave as the generated ones did."""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import Any

import pytest

from dsh_daemon.model import methods, payloads, wire
from dsh_daemon.model.sharedmethods import share_generated_methods

SHARED = ("__eq__", "__hash__", "__repr__", "__setattr__", "__delattr__")


def _frozen_classes(module: ModuleType) -> list[type]:
    return [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and value.__module__ == module.__name__
        and dataclasses.is_dataclass(value)
        and value.__dataclass_params__.frozen  # type: ignore[attr-defined]
        # (one that extends another dataclass keeps its own: its base's setattr must run)
        and not any(dataclasses.is_dataclass(base) for base in value.__mro__[1:])
    ]


@pytest.mark.parametrize("module", [wire, payloads, methods], ids=lambda m: m.__name__)
def test_no_frozen_wire_class_keeps_a_compiled_method(module: ModuleType) -> None:
    classes = _frozen_classes(module)
    assert len(classes) > 40
    compiled = [
        f"{cls.__name__}.{name}"
        for cls in classes
        for name in SHARED
        if getattr(cls.__dict__.get(name), "__code__", None) is not None
        and cls.__dict__[name].__code__.co_filename == "<string>"
    ]
    assert compiled == []


def _twin(cls: type) -> type:
    """The same fields in a class `dataclasses` made, its compiled methods kept."""
    fields = [
        (f.name, Any, dataclasses.field(default=f.default, compare=f.compare, repr=f.repr, hash=f.hash))
        for f in dataclasses.fields(cls)
    ]
    twin = dataclasses.make_dataclass(cls.__name__, fields, frozen=True)
    twin.__qualname__ = cls.__qualname__
    return twin


SAMPLES: list[tuple[type, dict[str, Any], dict[str, Any]]] = [
    (wire.Position, {"line": 1, "character": 2}, {"line": 1, "character": 3}),
    (payloads.TurnEnded, {"turn": 3, "reason": {"kind": "completed"}}, {"turn": 4, "reason": {"kind": "x"}}),
    (methods.SessionParams, {"session_id": "s1"}, {"session_id": "s2"}),
    (
        wire.SessionSummary,
        {"session_id": "a", "title": None, "cwd": "/w", "created_at": 1, "updated_at": 2,
         "status": "idle", "pending": 0},
        {"session_id": "a", "title": "t", "cwd": "/w", "created_at": 1, "updated_at": 2,
         "status": "idle", "pending": 0},
    ),
]  # fmt: skip


@pytest.mark.parametrize("cls, values, other", SAMPLES, ids=lambda v: getattr(v, "__name__", ""))
def test_shared_methods_behave_as_the_generated_ones(
    cls: type, values: dict[str, Any], other: dict[str, Any]
) -> None:
    twin = _twin(cls)
    ours, theirs = cls(**values), twin(**values)
    assert repr(ours) == repr(theirs)
    assert ours == cls(**values) and not ours != cls(**values)
    assert ours != cls(**other) and (ours == cls(**other)) == (theirs == twin(**other))
    assert ours != theirs  # another class, even with the same fields
    if all(isinstance(v, (int, str, type(None))) for v in values.values()):
        assert hash(ours) == hash(theirs) == hash(cls(**values))
    for attempt in (lambda v: setattr(v, "turn", 9), lambda v: delattr(v, next(iter(values)))):
        with pytest.raises(dataclasses.FrozenInstanceError) as ours_error:
            attempt(ours)
        with pytest.raises(dataclasses.FrozenInstanceError) as theirs_error:
            attempt(theirs)
        assert str(ours_error.value) == str(theirs_error.value)


def test_an_instance_inside_its_own_repr_is_dots() -> None:
    @dataclasses.dataclass(frozen=True)
    class Box:
        items: list[Any]

    share_generated_methods({"__name__": __name__, "Box": Box})
    box = Box([])
    box.items.append(box)
    assert repr(box) == f"{Box.__qualname__}(items=[...])"
