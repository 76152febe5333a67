"""The other kernel calls the confinement needs, through ctypes: no_new_privs, dropping every
capability, the child subreaper, unshare, mount, and bringing the loopback interface up.

Imported by the fork server (os, ctypes, struct, socket, fcntl only)."""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct

_libc = ctypes.CDLL(None, use_errno=True)
_libc.prctl.restype = ctypes.c_int
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.unshare.argtypes = [ctypes.c_int]

PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_CHILD_SUBREAPER = 36
# NOROOT, NO_SETUID_FIXUP, KEEP_CAPS off, NO_CAP_AMBIENT_RAISE: each with its lock.
SECUREBITS_LOCKED_DOWN = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
SYS_CAPSET = 126
CAP_VERSION_3 = 0x20080522

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18


class KernelError(OSError):
    """A setup call failed; the message names it."""


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise KernelError(err, f"{what}: {os.strerror(err)}")


def no_new_privs() -> None:
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")


def has_capabilities() -> bool:
    """Whether this process holds any capability (permitted, effective or ambient). The fork server
    asks once; its commands' children have the same credentials."""
    with open("/proc/self/status", "rb") as f:
        for line in f:
            if line.startswith((b"CapEff:", b"CapPrm:", b"CapAmb:")) and int(line.split()[1], 16):
                return True
    return False


def drop_capabilities() -> None:
    """A confined root is not root: lock the securebits, empty the bounding and ambient sets, then
    the permitted, effective and inheritable sets (capset with empty sets: it fails or they are
    empty). Called only where has_capabilities(); without any, no_new_privs keeps exec from
    granting one (setuid and file capabilities are ignored)."""
    _check(_libc.prctl(PR_SET_SECUREBITS, SECUREBITS_LOCKED_DOWN, 0, 0, 0), "prctl(SET_SECUREBITS)")
    cap = 0
    while _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    if ctypes.get_errno() != 22 or cap == 0:  # EINVAL past the last capability
        _check(-1, f"prctl(CAPBSET_DROP {cap})")
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "prctl(CAP_AMBIENT_CLEAR_ALL)")
    header = ctypes.create_string_buffer(struct.pack("=Ii", CAP_VERSION_3, 0), 8)
    data = ctypes.create_string_buffer(24)
    _check(_libc.syscall(SYS_CAPSET, header, data), "capset")


def set_child_subreaper() -> None:
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(SET_CHILD_SUBREAPER)")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _libc.mount(
            source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
            data.encode() if data else None,
        ),
        f"mount {target}",
    )  # fmt: skip


def pin(path: str) -> None:
    """Bind `path` over itself, writable as before and with the mounts beneath it: a mount point
    cannot be renamed or removed from inside the namespace (EBUSY), so it cannot be moved aside and
    replaced by a copy without its read-only binds."""
    mount(path, path, None, MS_BIND | MS_REC)


def bind_read_only(path: str) -> None:
    """Bind `path` over itself, then remount that bind read-only (what it already had kept)."""
    mount(path, path, None, MS_BIND | MS_REC)
    flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV
    try:
        mount("none", path, None, flags)
    except KernelError:
        # A bind inside a mount with noexec (say) must keep that flag to be remounted.
        mount("none", path, None, flags | MS_NOEXEC)


SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1


def loopback_up() -> None:
    """`ip link set lo up` in this network namespace."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH14s", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b""))


def write_id_maps(uid: int, gid: int) -> None:
    """Map the real ids to themselves in the new user namespace (root stays 0, a user stays itself)."""
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")
