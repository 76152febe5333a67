"""Landlock through ctypes: the ABI probe, a ruleset built from plain rules, and restrict_self.

Imported by the fork server, so only the standard library's os, ctypes and struct. The ruleset is
built once per session (`build_ruleset`) and applied in each command's child just before exec
(`restrict_self`): the per-command cost is one syscall.
"""

from __future__ import annotations

import ctypes
import os
import struct

SYS_CREATE_RULESET = 444
SYS_ADD_RULE = 445
SYS_RESTRICT_SELF = 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
RULE_NET_PORT = 2

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5

NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1

SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR
# Everything a command needs to change files beneath a directory; device nodes are never made.
WRITE = (
    WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_SYM
    | REFER
    | TRUNCATE
)
DEVICE_WRITE = WRITE_FILE | TRUNCATE | IOCTL_DEV

_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long


class LandlockError(OSError):
    """A Landlock syscall failed; the message names the step."""


def _fail(step: str) -> LandlockError:
    err = ctypes.get_errno()
    return LandlockError(err, f"landlock {step}: {os.strerror(err)}")


def abi_version() -> int | str:
    """The kernel's Landlock ABI, or why there is none (the errno text)."""
    version = _syscall(
        ctypes.c_long(SYS_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION)
    )
    if version < 0:
        err = ctypes.get_errno()
        if err == 38:  # ENOSYS
            return "the kernel has no Landlock (ENOSYS)"
        if err == 95:  # EOPNOTSUPP
            return "Landlock is built in but disabled at boot (EOPNOTSUPP: add landlock to lsm=)"
        return f"Landlock refused: {os.strerror(err)}"
    return int(version)


def handled_fs(abi: int) -> int:
    """The filesystem rights this ABI knows: every one of them is handled (denied unless granted)."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def build_ruleset(
    abi: int, paths: list[tuple[str, int]], connect_ports: list[int] | None, *, scoped: bool
) -> int:
    """A ruleset fd (O_CLOEXEC) granting `paths` (path, rights) beneath them; `connect_ports` not None
    handles TCP (bind refused everywhere, connect only to those ports; ABI ≥ 4); `scoped` refuses
    signals and abstract Unix sockets outside the domain (ABI ≥ 6). A path that does not exist is
    skipped; any other failure raises."""
    fs = handled_fs(abi)
    net = NET_BIND_TCP | NET_CONNECT_TCP if connect_ports is not None and abi >= 4 else 0
    scope = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if scoped and abi >= 6 else 0
    attr = struct.pack("=QQQ", fs, net, scope)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    buf = ctypes.create_string_buffer(attr, 24)
    fd = int(_syscall(ctypes.c_long(SYS_CREATE_RULESET), buf, ctypes.c_size_t(size), ctypes.c_uint32(0)))
    if fd < 0:
        raise _fail("create_ruleset")
    try:
        for path, rights in paths:
            try:
                parent = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                allowed = rights & fs
                if not os.path.isdir(f"/proc/self/fd/{parent}"):
                    # A file takes only the rights that apply to files (EINVAL otherwise).
                    allowed &= EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
                rule = ctypes.create_string_buffer(struct.pack("=Qi", allowed, parent), 12)
                if _add_rule(fd, RULE_PATH_BENEATH, rule) < 0:
                    raise _fail(f"add_rule {path}")
            finally:
                os.close(parent)
        for port in connect_ports or () if net else ():
            rule = ctypes.create_string_buffer(struct.pack("=QQ", NET_CONNECT_TCP, port), 16)
            if _add_rule(fd, RULE_NET_PORT, rule) < 0:
                raise _fail(f"add_rule port {port}")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _add_rule(fd: int, kind: int, rule: ctypes.Array[ctypes.c_char]) -> int:
    return int(
        _syscall(ctypes.c_long(SYS_ADD_RULE), ctypes.c_int(fd), ctypes.c_int(kind), rule, ctypes.c_uint32(0))
    )


def restrict_self(ruleset_fd: int) -> None:
    """Enforce the ruleset on this thread (and what it execs). Needs no_new_privs or CAP_SYS_ADMIN."""
    if _syscall(ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(ruleset_fd), ctypes.c_uint32(0)) < 0:
        raise _fail("restrict_self")
