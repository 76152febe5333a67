"""The seccomp filter of a confined command, as a classic BPF program packed with struct.

Imported by the fork server (os, ctypes, struct only). The program is packed once per session
(`filter_program`) and installed in each command's child just before exec (`install`). x86-64 only:
another architecture gets no layer 0 (the syscall numbers below are x86-64's).

What it refuses, with EPERM (the command sees an ordinary error, never a crash):
- tracing and reading other processes: ptrace, process_vm_readv/writev, kcmp, pidfd_getfd;
- io_uring (its operations bypass the checks below), bpf, perf_event_open, userfaultfd, keyrings;
- mount and namespace changes: mount, umount2, pivot_root, the new mount API, unshare, setns, clone
  with a CLONE_NEW* flag (clone3 answers ENOSYS so libc falls back to clone, whose flags are visible);
- sockets other than TCP over IPv4/IPv6 and netlink: no AF_UNIX socket (socketpair stays allowed),
  no UDP (so no DNS: names resolve in the proxy), no raw, packet or vsock sockets;
- the terminal injection ioctl TIOCSTI; kernel module and kexec calls, reboot, swapon/off.
The x32 ABI's syscall numbers (bit 30) are refused, and any architecture but x86-64 kills the process.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000

RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000
EPERM = 1
ENOSYS = 38

# x86-64 syscall numbers.
SOCKET = 41
CLONE = 56
IOCTL = 16
CLONE3 = 435
DENIED = {
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "pidfd_getfd": 438,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "bpf": 321,
    "perf_event_open": 298,
    "userfaultfd": 323,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "unshare": 272,
    "setns": 308,
    "chroot": 161,
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "kexec_load": 246,
    "kexec_file_load": 320,
    "reboot": 169,
    "swapon": 167,
    "swapoff": 168,
    "open_by_handle_at": 304,
    "lookup_dcookie": 212,
    "acct": 163,
    "quotactl": 179,
}
CLONE_NEW_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16
SOCK_STREAM = 1
SOCK_TYPE_MASK = 0xF
TIOCSTI = 0x5412

# struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6] (little-endian: low word first)
OFF_NR, OFF_ARCH = 0, 4


def _arg_low(index: int) -> int:
    return 16 + 8 * index


# BPF opcodes
LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JGE = 0x35
JSET = 0x45
AND = 0x54  # BPF_ALU | BPF_AND | BPF_K
RET = 0x06


def _program() -> list[tuple[int, int, int, int]]:
    """The filter, assembled with labels: each entry is (code, jt, jf, k); a jump's jt/jf may be a
    label (a str) resolved to a relative offset at the end."""
    code: list[tuple[int, object, object, int]] = []
    labels: dict[str, int] = {}

    def op(c: int, k: int = 0, jt: object = 0, jf: object = 0) -> None:
        code.append((c, jt, jf, k))

    def label(name: str) -> None:
        labels[name] = len(code)

    op(LD_ABS, OFF_ARCH)
    op(JEQ, AUDIT_ARCH_X86_64, 0, "kill")
    op(LD_ABS, OFF_NR)
    op(JGE, X32_SYSCALL_BIT, "deny", 0)
    for number in DENIED.values():
        op(JEQ, number, "deny", 0)
    op(JEQ, CLONE3, "nosys", 0)
    op(JEQ, CLONE, "clone", 0)
    op(JEQ, SOCKET, "socket", 0)
    op(JEQ, IOCTL, "ioctl", 0)
    op(RET, RET_ALLOW)
    label("clone")
    op(LD_ABS, _arg_low(0))
    op(JSET, CLONE_NEW_FLAGS, "deny", "allow")
    label("socket")
    op(LD_ABS, _arg_low(0))
    op(JEQ, AF_NETLINK, "allow", 0)
    op(JEQ, AF_INET, "inet", 0)
    op(JEQ, AF_INET6, "inet", "deny")
    label("inet")
    op(LD_ABS, _arg_low(1))
    op(AND, SOCK_TYPE_MASK)
    op(JEQ, SOCK_STREAM, "allow", "deny")
    label("ioctl")
    op(LD_ABS, _arg_low(1))
    op(JEQ, TIOCSTI, "deny", "allow")
    label("allow")
    op(RET, RET_ALLOW)
    label("deny")
    op(RET, RET_ERRNO | EPERM)
    label("nosys")
    op(RET, RET_ERRNO | ENOSYS)
    label("kill")
    op(RET, RET_KILL_PROCESS)

    def offset(at: int, target: object) -> int:
        if isinstance(target, str):
            distance = labels[target] - at - 1
            assert 0 <= distance < 256, target
            return distance
        assert isinstance(target, int)
        return target

    return [(c, offset(i, jt), offset(i, jf), k) for i, (c, jt, jf, k) in enumerate(code)]


def filter_program() -> bytes:
    """The packed `struct sock_filter[]`, built once."""
    return b"".join(struct.pack("=HBBI", c, jt, jf, k) for c, jt, jf, k in _program())


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_libc = ctypes.CDLL(None, use_errno=True)
_prctl = _libc.prctl
_prctl.restype = ctypes.c_int
PR_GET_SECCOMP = 21
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


class SeccompError(OSError):
    """Installing the filter failed."""


def available() -> str | None:
    """None when a filter can be installed here, else why not."""
    if platform.machine() != "x86_64":
        return f"seccomp filter is written for x86-64, this is {platform.machine()}"
    # A NULL program answers EFAULT where filters are supported, EINVAL where not.
    rc = _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, None, 0, 0)
    err = ctypes.get_errno()
    if rc == 0 or err != 14:
        return f"seccomp filters unavailable: {os.strerror(err) if rc else 'unexpected success'}"
    return None


def install(program: bytes) -> None:
    """Install the filter on this thread (no_new_privs must be set first)."""
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    if _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise SeccompError(err, f"seccomp: {os.strerror(err)}")
