"""The red team as a table: each probe is a shell snippet a confined command runs, and what counts as
an escape. The snippets name the scene's places as `{ws}`, `{outside}`, `{home}`, `{dsh_home}`,
`{tcp_port}`… (`Scene.render`), so another suite can send the same commands through `run_command`
and judge them with the same checks (`escaped(scene, output)`: output is stdout and stderr).

A probe whose attempt is refused prints whatever the refusal says; only the check decides. Probes
marked `late` start something that acts after the command has returned (background, setsid,
double fork): their check runs after `settle` seconds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tests.sandbox.scene import ORIGINAL, Scene

Check = Callable[[Scene, str], bool]
BOTH = ("workspace-write", "read-only")


@dataclass(frozen=True)
class Probe:
    name: str
    script: str
    escaped: Check
    modes: tuple[str, ...] = BOTH
    settle: float = 0.0


def changed(template: str) -> Check:
    """The file (as rendered) no longer holds its original text, or is gone."""

    def check(scene: Scene, _output: str) -> bool:
        path = scene.render(template)
        try:
            with open(path) as f:
                return f.read() != ORIGINAL
        except OSError:
            return True

    return check


def exists(template: str) -> Check:
    def check(scene: Scene, _output: str) -> bool:
        import os

        return os.path.lexists(scene.render(template))

    return check


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def contains(template: str, text: str) -> Check:
    return lambda scene, _output: text in _read(scene.render(template))


def missing(template: str) -> Check:
    import os

    return lambda scene, _output: not os.path.lexists(scene.render(template))


def holds_secret(template: str) -> Check:
    return lambda scene, _output: any(t in _read(scene.render(template)) for t in scene.secret_tokens())


def leaked(scene: Scene, output: str) -> bool:
    return any(token in output for token in scene.secret_tokens())


def printed(marker: str) -> Check:
    return lambda _scene, output: marker in output


def reached(kind: str) -> Check:
    return lambda scene, _output: kind in scene.listeners.hits


def victim_hit(scene: Scene, _output: str) -> bool:
    return scene.victim.poll() is not None


def any_of(*checks: Check) -> Check:
    return lambda scene, output: any(c(scene, output) for c in checks)


PY = "{python} -c"
TCP_CONNECT = (
    PY + ' \'import socket; s=socket.create_connection(("127.0.0.1", {tcp_port}), 2); print("ESCAPED")\''
)
LATE = 0.3  # how long a late probe's child waits before it acts
SETTLE = 1.5

TABLE: tuple[Probe, ...] = (
    # Reads of every masked path
    *(
        Probe(f"read ~/{name}", f"cat {{home}}/{name}", leaked)
        for name in (
            ".ssh/id_rsa",
            ".aws/credentials",
            ".gnupg/private-keys.key",
            ".netrc",
            ".config/gh/hosts.yml",
            ".docker/config.json",
        )
    ),
    Probe("read DSH_HOME's store", "cat {dsh_home}/sessions.db", leaked),
    Probe("list ~/.ssh", "ls -la {home}/.ssh", printed("id_rsa")),
    Probe("grep the home dir for secrets", "grep -r SECRET {home} {dsh_home}", leaked),
    Probe("read ~/.ssh through a symlink", "ln -s {home}/.ssh/id_rsa {temp}/l; cat {temp}/l", leaked),
    Probe("read ~/.ssh through a hard link", "ln {home}/.ssh/id_rsa {temp}/h; cat {temp}/h", leaked),
    Probe("read ~/.ssh through /proc/self/root", "cat /proc/self/root{home}/.ssh/id_rsa", leaked),
    Probe("read the API key in env", "env; cat /proc/self/environ", leaked),
    Probe(
        "read the daemon's environ",
        "cat /proc/{daemon_pid}/environ /proc/1/environ | tr '\\0' '\\n'",
        any_of(leaked, printed("PATH=")),
    ),
    # Writes outside the roots
    Probe("write outside by path", "echo PWNED > {outside}/target.txt", changed("{outside}/target.txt")),
    Probe("create outside by path", "echo PWNED > {outside}/new.txt", exists("{outside}/new.txt")),
    Probe("mkdir outside", "mkdir {outside}/newdir", exists("{outside}/newdir")),
    Probe(
        "write outside through ..",
        "cd {ws}/src && echo PWNED > ../../outside/target.txt",
        changed("{outside}/target.txt"),
    ),
    Probe(
        "write outside through a symlink made in the workspace",
        "ln -s {outside}/target.txt {ws}/src/link; echo PWNED > {ws}/src/link",
        changed("{outside}/target.txt"),
    ),
    Probe(
        "create outside through a symlinked dir",
        "ln -s {outside} {ws}/src/outdir; echo PWNED > {ws}/src/outdir/new2.txt",
        exists("{outside}/new2.txt"),
    ),
    Probe(
        "write outside through a hard link",
        "ln {outside}/target.txt {ws}/src/hardlink; echo PWNED > {ws}/src/hardlink",
        changed("{outside}/target.txt"),
    ),
    Probe(
        "write outside through /proc/self/root",
        "echo PWNED > /proc/self/root{outside}/target.txt",
        changed("{outside}/target.txt"),
    ),
    Probe(
        "write outside through /proc/self/cwd",
        "cd {outside} && echo PWNED > /proc/self/cwd/target.txt",
        changed("{outside}/target.txt"),
    ),
    Probe(
        "rename a temp file over a file outside",
        "echo PWNED > {temp}/x; mv -f {temp}/x {outside}/target.txt",
        changed("{outside}/target.txt"),
    ),
    Probe(
        "truncate a file outside",
        PY + " 'import os; os.truncate(\"{outside}/target.txt\", 0)'",
        changed("{outside}/target.txt"),
    ),
    Probe("delete a file outside", "rm -f {outside}/target.txt", changed("{outside}/target.txt")),
    Probe("append to ~/.bashrc", "echo PWNED >> {home}/.bashrc", changed("{home}/.bashrc")),
    Probe(
        "write DSH_HOME's store",
        "echo PWNED > {dsh_home}/sessions.db",
        contains("{dsh_home}/sessions.db", "PWNED"),
    ),
    Probe("create in DSH_HOME", "touch {dsh_home}/new.db", exists("{dsh_home}/new.db")),
    # Inside the workspace: what runs code later or changes the daemon's rules
    Probe(
        "overwrite .git/hooks/pre-commit",
        "echo PWNED > {ws}/.git/hooks/pre-commit",
        changed("{ws}/.git/hooks/pre-commit"),
    ),
    Probe(
        "create a new hook",
        "echo PWNED > {ws}/.git/hooks/post-checkout",
        exists("{ws}/.git/hooks/post-checkout"),
    ),
    Probe(
        "rename a file over .git/hooks/pre-commit",
        "echo PWNED > {ws}/src/h; mv -f {ws}/src/h {ws}/.git/hooks/pre-commit",
        changed("{ws}/.git/hooks/pre-commit"),
    ),
    Probe(
        "move .git/hooks aside and make a new one",
        "mv {ws}/.git/hooks {ws}/.git/hooks.old && mkdir {ws}/.git/hooks && echo PWNED > {ws}/.git/hooks/pre-commit",
        any_of(changed("{ws}/.git/hooks/pre-commit"), exists("{ws}/.git/hooks.old")),
    ),
    Probe(
        "git config core.hooksPath",
        "git -C {ws} config core.hooksPath {outside}",
        contains("{ws}/.git/config", "hooksPath"),
    ),
    Probe(
        "append to .git/config",
        "echo '[core] fsmonitor = touch /tmp/pwned' >> {ws}/.git/config",
        contains("{ws}/.git/config", "fsmonitor"),
    ),
    Probe(
        "rename a file over .git/config",
        "cp {ws}/.git/config {ws}/src/c; echo PWNED >> {ws}/src/c; mv -f {ws}/src/c {ws}/.git/config",
        contains("{ws}/.git/config", "PWNED"),
    ),
    Probe("delete .git/config", "rm -f {ws}/.git/config", missing("{ws}/.git/config")),
    Probe(
        "move .git aside and put a copy with a hook in its place",
        "mv {ws}/.git {ws}/.git-old && cp -a {ws}/.git-old {ws}/.git && echo PWNED > {ws}/.git/hooks/pre-commit",
        any_of(changed("{ws}/.git/hooks/pre-commit"), exists("{ws}/.git-old")),
    ),
    Probe(
        "move .dsh aside and make a new one",
        "mv {ws}/.dsh {ws}/.dsh-old && mkdir {ws}/.dsh && echo PWNED > {ws}/.dsh/config.json",
        any_of(changed("{ws}/.dsh/config.json"), exists("{ws}/.dsh-old")),
    ),
    Probe(
        "overwrite the project's .dsh config",
        "echo PWNED > {ws}/.dsh/config.json",
        changed("{ws}/.dsh/config.json"),
    ),
    Probe("add to the project's .dsh", "echo PWNED > {ws}/.dsh/extra.json", exists("{ws}/.dsh/extra.json")),
    Probe(
        "write the workspace in read-only mode",
        "echo PWNED > {ws}/src/file.txt",
        changed("{ws}/src/file.txt"),
        modes=("read-only",),
    ),
    # Network: loopback services that are not the proxy, DNS, other socket kinds
    Probe("TCP to a loopback listener", TCP_CONNECT, any_of(reached("tcp"), printed("ESCAPED"))),
    Probe(
        "TCP through bash's /dev/tcp",
        "bash -c 'exec 3<>/dev/tcp/127.0.0.1/{tcp_port} && echo ESCAPED'",
        any_of(reached("tcp"), printed("ESCAPED")),
    ),
    Probe(
        "UDP to a loopback listener",
        PY
        + ' \'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"x", ("127.0.0.1", {udp_port})); print("SENT")\'',
        reached("udp"),
    ),
    Probe(
        "DNS query to a resolver on loopback",
        PY
        + ' \'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(bytes.fromhex("abcd01000001000000000000076578616d706c6503636f6d0000010001"), ("127.0.0.1", {udp_port}))\'',
        reached("udp"),
    ),
    Probe(
        "Unix socket by path",
        PY
        + ' \'import socket; s=socket.socket(socket.AF_UNIX); s.connect("{unix_path}"); print("ESCAPED")\'',
        any_of(reached("unix"), printed("ESCAPED")),
    ),
    Probe(
        "abstract Unix socket",
        PY
        + ' \'import socket; s=socket.socket(socket.AF_UNIX); s.connect("\\0{abstract}"); print("ESCAPED")\'',
        any_of(reached("abstract"), printed("ESCAPED")),
    ),
    Probe(
        "raw socket",
        PY + " 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1); print(\"ESCAPED\")'",
        printed("ESCAPED"),
    ),
    Probe(
        "packet socket",
        PY + " 'import socket; socket.socket(17, socket.SOCK_RAW, 0); print(\"ESCAPED\")'",
        printed("ESCAPED"),
    ),
    # Processes: the daemon (this test process) and a bystander
    Probe(
        "ptrace the daemon",
        PY
        + ' \'import ctypes; l=ctypes.CDLL(None); print("ESCAPED" if l.ptrace(0x4206, {daemon_pid}, 0, 0) == 0 else "refused")\'',
        printed("ESCAPED"),
    ),
    Probe(
        "read the daemon's memory",
        PY + ' \'open("/proc/{daemon_pid}/mem", "rb"); print("ESCAPED")\'',
        printed("ESCAPED"),
    ),
    Probe(
        "process_vm_readv the daemon",
        PY
        + ' \'import ctypes; l=ctypes.CDLL(None, use_errno=True); b=ctypes.create_string_buffer(8); io=(ctypes.c_void_p*2)(ctypes.addressof(b), 8); r=(ctypes.c_void_p*2)(0x400000, 8); n=l.process_vm_readv({daemon_pid}, io, 1, r, 1, 0); print("ESCAPED" if n > 0 or ctypes.get_errno() == 14 else "refused")\'',
        printed("ESCAPED"),
    ),
    Probe("signal the daemon", "kill -0 {daemon_pid} && echo ESCAPED", printed("ESCAPED")),
    Probe("kill a process outside", "kill -KILL {victim_pid}", victim_hit),
    Probe(
        "io_uring",
        PY
        + ' \'import ctypes; l=ctypes.CDLL(None); p=ctypes.create_string_buffer(120); print("ESCAPED" if l.syscall(425, 4, p) >= 0 else "refused")\'',
        printed("ESCAPED"),
    ),
    Probe("a new user namespace", "unshare -Ur true && echo ESCAPED", printed("ESCAPED")),
    Probe(
        "remount a protected path", "mount -o remount,rw {ws}/.git/hooks && echo ESCAPED", printed("ESCAPED")
    ),
    # After the command returns: background, setsid, double fork, nohup
    Probe(
        "a backgrounded child writes outside later",
        f"(sleep {LATE}; echo PWNED > {{outside}}/late-bg) >/dev/null 2>&1 &",
        exists("{outside}/late-bg"),
        settle=SETTLE,
    ),
    Probe(
        "a setsid child writes outside later",
        f"setsid sh -c 'sleep {LATE}; echo PWNED > {{outside}}/late-setsid' >/dev/null 2>&1 &",
        exists("{outside}/late-setsid"),
        settle=SETTLE,
    ),
    Probe(
        "a double-forked child writes outside later",
        PY
        + f' \'import os, time; os._exit(0) if os.fork() else os.setsid(); os._exit(0) if os.fork() else time.sleep({LATE}); open("{{outside}}/late-fork", "w").write("PWNED")\' >/dev/null 2>&1 &',
        exists("{outside}/late-fork"),
        settle=SETTLE,
    ),
    Probe(
        "a nohup child copies a secret into the workspace later",
        f"nohup sh -c 'sleep {LATE}; cat {{home}}/.ssh/id_rsa > {{temp}}/leak; cat {{home}}/.ssh/id_rsa > {{ws}}/src/leak' >/dev/null 2>&1 &",
        any_of(holds_secret("{ws}/src/leak"), holds_secret("{temp}/leak")),
        settle=SETTLE,
    ),
    Probe(
        "a background child connects to a loopback listener later",
        f"(sleep {LATE}; " + TCP_CONNECT + ") >/dev/null 2>&1 &",
        reached("tcp"),
        settle=SETTLE,
    ),
    Probe(
        "a background child signals a process outside later",
        f"(sleep {LATE}; kill -KILL {{victim_pid}}) >/dev/null 2>&1 &",
        victim_hit,
        settle=SETTLE,
    ),
)
