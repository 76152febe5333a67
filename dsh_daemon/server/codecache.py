"""The bytecode of the methods attrs and cattrs generate, kept across starts (issue 20).

Importing lsprotocol builds some 560 attrs classes, and attrs writes each one's `__init__`, `__eq__`,
`__repr__`... as Python source and compiles it; pygls' converter then has cattrs do the same for its
structure hooks. Compiling that source is 44 % of the instructions a bare pygls server runs before
it answers `initialize` (callgrind), and the source is the same at every start. So, like Python's
own `__pycache__`, the daemon keeps the compiled code: `install` makes attrs' and cattrs' module-level
`compile` (the name they call) look the code up by everything that determines it (the source, the
file name, the mode and the compiler flags the call would have inherited) and compile only what is
missing; `save` writes what this start used once `initialize` is answered, and `uninstall` gives the
libraries back their builtin.

Invariants: a cached code object is exactly what `compile` returns for its key (the key is the whole
input; the file is per Python build, `sys.implementation.cache_tag`, as marshal's format is); a file
that cannot be read is ignored and rewritten; two daemons starting at once each write a file of
their own and rename it into place. Nothing else of the libraries changes: they still register their
linecache entries and run the code themselves. The file is code the daemon runs: it lives in the
person's own state directory, as their `__pycache__` directories live beside their sources.
"""

from __future__ import annotations
import __future__

import builtins
import logging
import marshal
import os
import sys
from pathlib import Path
from types import CodeType, ModuleType

logger = logging.getLogger(__name__)

# The modules whose `compile` calls are served from the cache (attrs' class builder, cattrs' hooks).
GENERATING_MODULES = ("attr._make", "cattrs.gen")

MISSES_WORTH_A_WRITE = 20  # the file is written again when at least 1 in 20 was compiled
_Key = tuple[str, str, str, int]
_installed: list[GeneratedCode] = []  # the cache this process's start uses (one: `install_for_start`)


class GeneratedCode:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._known: dict[_Key, CodeType] = _read(path)
        self._used: dict[_Key, CodeType] = {}
        self._missed = 0
        self._patched: list[ModuleType] = []

    @classmethod
    def install(cls, state_dir: Path) -> GeneratedCode:
        cache = cls(state_dir / "cache" / f"generated-code.{sys.implementation.cache_tag}.marshal")
        import importlib

        for name in GENERATING_MODULES:
            module = importlib.import_module(name)
            flags = _future_flags(module)

            def compile_cached(
                source: str, filename: str, mode: str, *rest: int, _flags: int = flags
            ) -> CodeType:
                return cache.compile(source, filename, mode, _flags, *rest)

            module.compile = compile_cached  # type: ignore[attr-defined]  # shadows the builtin there
            cache._patched.append(module)
        return cache

    def compile(self, source: str, filename: str, mode: str, inherited: int, *rest: int) -> CodeType:
        """What `compile(source, filename, mode)` called in a module with `inherited` future flags
        returns."""
        if rest or not isinstance(source, str):  # a call this cache was not made for: left alone
            code: CodeType = builtins.compile(source, filename, mode, *rest)
            return code
        key = (source, filename, mode, inherited)
        code_or_none = self._known.get(key)
        if code_or_none is None:
            self._missed += 1
            code_or_none = builtins.compile(source, filename, mode, inherited, True)
        self._used[key] = code_or_none
        return code_or_none

    @property
    def missed(self) -> int:
        return self._missed

    def uninstall(self) -> None:
        for module in self._patched:
            vars(module).pop("compile", None)
        self._patched.clear()

    def save(self) -> None:
        """Write what this start used, when a part of it had to be compiled (best effort: a cache).
        A few scripts differ at every start (a frozen class's `__hash__` holds a constant of the
        process's string hashing): those alone are not worth writing the file again."""
        if self._missed * MISSES_WORTH_A_WRITE < len(self._used):
            return
        temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary.write_bytes(marshal.dumps(self._used))
            os.replace(temporary, self.path)
        except (OSError, ValueError) as exc:
            logger.info("generated code not cached: %s", exc)
            temporary.unlink(missing_ok=True)


def install_for_start(state_dir: Path) -> None:
    """Serve attrs' and cattrs' compiles from the cache until `finish_start`."""
    _installed.append(GeneratedCode.install(state_dir))


def finish_start() -> None:
    """The start is answered: write what it compiled and hand `compile` back to the libraries."""
    while _installed:
        cache = _installed.pop()
        cache.uninstall()
        cache.save()


def _future_flags(module: ModuleType) -> int:
    """The compiler flags a `compile` call in `module` inherits: its `from __future__` imports."""
    flags = 0
    for name in __future__.all_feature_names:
        feature: __future__._Feature = getattr(__future__, name)
        if vars(module).get(name) is feature:
            flags |= feature.compiler_flag
    return flags


def _read(path: Path) -> dict[_Key, CodeType]:
    try:
        loaded = marshal.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, EOFError, TypeError) as exc:
        logger.info("generated-code cache %s unreadable, rebuilt: %s", path, exc)
        return {}
    if not isinstance(loaded, dict) or not all(
        isinstance(key, tuple) and isinstance(code, CodeType) for key, code in loaded.items()
    ):
        logger.info("generated-code cache %s is not one, rebuilt", path)
        return {}
    return loaded
