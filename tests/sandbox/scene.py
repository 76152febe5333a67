"""A scene for escape attempts, all inside one temp dir: a workspace (a git repo with a hook, its
config and a project `.dsh/`), a directory outside the roots, a fake home with every masked secret, a
fake DSH_HOME, the private temp dir, listeners on 127.0.0.1 (TCP, UDP), on a Unix path and an
abstract Unix name that are NOT the proxy, and a victim process to signal. Each secret holds a token
that must never appear in a confined command's output."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

SECRET_FILES = (
    ".ssh/id_rsa",
    ".aws/credentials",
    ".gnupg/private-keys.key",
    ".netrc",
    ".config/gh/hosts.yml",
    ".docker/config.json",
)
ORIGINAL = "ORIGINAL\n"
API_KEY_NAME = "DEEPSEEK_API_KEY"


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


@dataclass
class Listeners:
    """Loopback services a confined command must not reach; each records who reached it."""

    hits: list[str] = field(default_factory=list)
    sockets: list[socket.socket] = field(default_factory=list)

    def start(self, unix_path: Path, abstract: str) -> dict[str, object]:
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(16)
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("127.0.0.1", 0))
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.bind(str(unix_path))
        unix.listen(16)
        abstract_sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        abstract_sock.bind("\0" + abstract)
        abstract_sock.listen(16)
        self.sockets = [tcp, udp, unix, abstract_sock]
        for name, sock in (("tcp", tcp), ("unix", unix), ("abstract", abstract_sock)):
            threading.Thread(target=self._accept, args=(name, sock), daemon=True).start()
        threading.Thread(target=self._datagrams, args=(udp,), daemon=True).start()
        return {"tcp_port": tcp.getsockname()[1], "udp_port": udp.getsockname()[1]}

    def _accept(self, name: str, sock: socket.socket) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            self.hits.append(name)
            conn.close()

    def _datagrams(self, sock: socket.socket) -> None:
        while True:
            try:
                sock.recvfrom(4096)
            except OSError:
                return
            self.hits.append("udp")

    def close(self) -> None:
        for sock in self.sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


@dataclass
class Scene:
    base: Path
    ws: Path
    outside: Path
    home: Path
    dsh_home: Path
    temp: Path
    tokens: dict[str, str]
    api_key: str
    listeners: Listeners
    victim: subprocess.Popen[bytes]
    values: dict[str, object]

    @classmethod
    def build(cls, base: Path) -> Scene:
        ws, outside, home, dsh_home, temp = (base / n for n in ("ws", "outside", "home", "dsh-home", "tmp"))
        for d in (ws / "src", outside, home, dsh_home, temp):
            d.mkdir(parents=True)
        (ws / "src" / "file.txt").write_text(ORIGINAL)
        git(ws, "init", "-q", "-b", "main")
        git(ws, "add", "-A")
        git(ws, "commit", "-qm", "init")
        (ws / ".git" / "hooks" / "pre-commit").write_text(ORIGINAL)
        (ws / ".dsh").mkdir()
        (ws / ".dsh" / "config.json").write_text(ORIGINAL)
        (outside / "target.txt").write_text(ORIGINAL)
        (home / ".bashrc").write_text(ORIGINAL)
        tokens: dict[str, str] = {}
        for name in SECRET_FILES:
            token = f"SECRET-{secrets.token_hex(8)}"
            (home / name).parent.mkdir(parents=True, exist_ok=True)
            (home / name).write_text(token + "\n")
            tokens[name] = token
        tokens["dsh-home"] = f"SECRET-{secrets.token_hex(8)}"
        (dsh_home / "sessions.db").write_text(tokens["dsh-home"] + "\n")
        listeners = Listeners()
        abstract = f"dsh-probe-{secrets.token_hex(6)}"
        ports = listeners.start(base / "host.sock", abstract)
        victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        api_key = f"sk-SECRET-{secrets.token_hex(8)}"
        values: dict[str, object] = {
            "ws": ws,
            "outside": outside,
            "home": home,
            "dsh_home": dsh_home,
            "unix_path": base / "host.sock",
            "abstract": abstract,
            "daemon_pid": os.getpid(),
            "victim_pid": victim.pid,
            "python": sys.executable,
            "temp": temp,
            **ports,
        }
        return cls(base, ws, outside, home, dsh_home, temp, tokens, api_key, listeners, victim, values)

    def render(self, script: str) -> str:
        return script.format(**self.values)

    def secret_tokens(self) -> list[str]:
        return [*self.tokens.values(), self.api_key]

    def close(self) -> None:
        self.listeners.close()
        self.victim.kill()
        self.victim.wait()
