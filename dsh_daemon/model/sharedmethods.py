"""One `__eq__`, `__hash__`, `__repr__`, `__setattr__` and `__delattr__` for the wire's many frozen
dataclasses, in place of the five that `dataclasses` compiles for each (issue 40: about 7.7 KiB a
class; for the wire's 200-odd declarations, 0.5 MiB of a one-session LSP daemon's RSS).

`share_generated_methods(namespace)` replaces, on each frozen dataclass a module defines (called at
the module's end with its globals) whose bases are plain classes that leave attribute setting to
`object`, the methods `dataclasses` generated (compiled from text, so their code comes
from `<string>`) by shared ones that do the same from the class's fields: equality compares the
`compare` fields of two instances of the same class, the hash is that of the hashed fields, the repr
is `Name(field=value, ...)` over the `repr` fields (`...` for an instance inside its own repr), and
setting or deleting an attribute of an instance raises `FrozenInstanceError`. A method a class
defines itself is kept. It runs as each module is imported, so the modules imported after it reuse
the memory it frees (called once the session machinery was loaded, it freed as much, but the holes
stayed resident: 0.13 MiB of RSS instead of 0.7). What differs: a class that subclasses a shared one
without being a dataclass itself cannot set attributes of its own on its instances either (none
does)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any

_GENERATED = ("__eq__", "__hash__", "__repr__", "__setattr__", "__delattr__")


class _Shape:
    """What the shared methods read of one class: its compared, hashed and shown fields."""

    __slots__ = ("compared", "hashed", "shown")

    def __init__(self, cls: type) -> None:
        fields = dataclasses.fields(cls)
        self.compared = _getter([f.name for f in fields if f.compare])
        self.hashed = _getter([f.name for f in fields if f.hash or (f.hash is None and f.compare)])
        self.shown = tuple(f.name for f in fields if f.repr)


def _getter(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda value: (one(value),)
    if not names:
        return lambda value: ()
    return attrgetter(*names)


_shapes: dict[type, _Shape] = {}


def _shape(cls: type) -> _Shape:
    shape = _shapes.get(cls)
    if shape is None:
        shape = _shapes[cls] = _Shape(cls)
    return shape


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        compared = _shape(self.__class__).compared
        return compared(self) == compared(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(_shape(self.__class__).hashed(self))


_in_repr = threading.local()


def _repr(self: Any) -> str:
    showing: set[int] = _in_repr.__dict__.setdefault("ids", set())
    if id(self) in showing:
        return "..."
    showing.add(id(self))
    try:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _shape(self.__class__).shown)
    finally:
        showing.discard(id(self))
    return f"{self.__class__.__qualname__}({fields})"


def _setattr(self: Any, name: str, value: Any) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


_SHARED = {
    "__eq__": _eq,
    "__hash__": _hash,
    "__repr__": _repr,
    "__setattr__": _setattr,
    "__delattr__": _delattr,
}


def share_generated_methods(namespace: Mapping[str, Any]) -> int:
    """Replace the generated methods of the frozen dataclasses defined in the module whose globals
    are `namespace` by the shared ones; how many classes changed."""
    module = namespace.get("__name__")
    return sum(
        1
        for value in list(namespace.values())
        if isinstance(value, type) and value.__module__ == module and _share(value)
    )


def _share(cls: type) -> bool:
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or not all(map(_plain, cls.__mro__[1:])):
        return False
    shared = False
    for name in _GENERATED:
        method = cls.__dict__.get(name)
        code = getattr(getattr(method, "__wrapped__", method), "__code__", None)
        if code is not None and code.co_filename == "<string>":
            setattr(cls, name, _SHARED[name])
            shared = True
    return shared


def _plain(base: type) -> bool:
    """A base the generated `__setattr__` would reach `object`'s through: not a dataclass, and not
    one with attribute setting of its own."""
    if base is object:
        return True
    return not hasattr(base, "__dataclass_fields__") and not (
        {"__setattr__", "__delattr__"} & base.__dict__.keys()
    )
