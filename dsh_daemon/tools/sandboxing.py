"""One session's command sandbox: the rules a command runs under, computed from the session's
settings, roots, mode and widenings, and the `Sandbox` (docs/design.md "Sandbox") that applies them.

- The mode is the session's own choice (ACP's `sandbox` config option, durable in its
  `session/settings`) or else `tools.sandbox.mode`; in plan mode commands run `read-only` whatever
  either says.
- The rules are computed once and the sandbox rebuilt only when something they depend on changed
  (roots, mode, settings, a widening granted for the session), never per command.
- A widening the person granted "for the session" is a grant in the session's permission memory
  (`run_command:sandbox:{…}`, listed and revoked like every other grant); one granted "once" runs the
  command in a sandbox of its own, closed when the command has ended; one the person chose to keep
  ("Always (saved to config)") is also saved by the host (`save_widening`) into config.json, which
  every session of this daemon and every later daemon reads (`unconfined` never is).
- Nothing here widens anything on its own: `spawn` takes a widening only as the tool passes it, and
  the tool passes one only when the person approved it (tools/command.py).
- When a confined mode cannot be had (`SandboxUnavailable`), commands are refused, never run
  unconfined; the person can choose `full-access`.
- The commands' private temp directory (`$TMPDIR`) is removed by `aclose`, and also when a sandbox
  is dropped without it (a process ending on an error path, a test's tool kit): when the sandbox is
  collected, or at the interpreter's exit. Only a process killed outright leaves it behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import shutil
import sys
import tempfile
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dsh_daemon.sandbox.attach import AttachPoint
from dsh_daemon.sandbox.level import probe_level
from dsh_daemon.sandbox.policy import SandboxLevel, SandboxPolicy, SandboxUnavailable
from dsh_daemon.sandbox.session import Sandbox, SandboxedProcess
from dsh_daemon.tools import unconfined
from dsh_daemon.tools.config import SandboxMode, SandboxSettings, check_domain
from dsh_daemon.tools.errors import InvalidArgumentsError
from dsh_daemon.tools.workspace import Workspace

# The fork server is Linux's (SCM_CREDENTIALS, namespaces): elsewhere only full-access runs, through
# the same interface (`unconfined`), and confined modes are refused.
ON_LINUX = sys.platform.startswith("linux")

logger = logging.getLogger(__name__)

SESSION_SCOPE = "run_command:sandbox:"  # a widening granted for the session
UNCONFINED_SCOPE = "run_command:unconfined:"  # one exact command allowed unconfined for the session
# Test-only: forces the layers the sandbox may use ("landlock-only", "none"). Read from the daemon's
# own environment (a command can never set it); documented in README as for tests only.
LAYERS_VARIABLE = "DSH_SANDBOX_LAYERS"
Layers = Literal["auto", "landlock-only", "none"]


@dataclass(frozen=True, slots=True)
class Widening:
    """What the model asks the person to widen for one command (`run_command`'s `escalate`)."""

    reason: str
    writable: tuple[str, ...] = ()
    network: tuple[str, ...] = ()
    unconfined: bool = False

    @classmethod
    def parse(cls, raw: Any, workspace: Workspace) -> Widening:
        if not isinstance(raw, Mapping):
            raise InvalidArgumentsError(
                "'escalate' must be an object {reason, writable?, network?, unconfined?}"
            )
        unknown = set(raw) - {"reason", "writable", "network", "unconfined"}
        if unknown:
            raise InvalidArgumentsError(
                f"'escalate' takes reason, writable, network, unconfined; not {sorted(unknown)}"
            )
        reason = raw.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidArgumentsError("'escalate.reason' must say why (a non-empty string)")
        writable = _string_list(raw.get("writable"), "escalate.writable")
        paths = []
        for path in writable:
            if "\0" in path:
                raise InvalidArgumentsError("'escalate.writable' paths must not contain NUL characters")
            joined = path if os.path.isabs(path) else os.path.join(workspace.cwd, path)
            paths.append(os.path.realpath(joined))
        network = [d.lower() for d in _string_list(raw.get("network"), "escalate.network")]
        for domain in network:
            if not check_domain(domain):
                raise InvalidArgumentsError(f"'escalate.network': {domain!r} is not a domain name")
        unconfined = raw.get("unconfined", False)
        if unconfined is None:
            unconfined = False
        if not isinstance(unconfined, bool):
            raise InvalidArgumentsError("'escalate.unconfined' must be true or false")
        if not (paths or network or unconfined):
            raise InvalidArgumentsError(
                "'escalate' must ask for something: writable paths, network domains or unconfined"
            )
        return cls(reason.strip(), tuple(sorted(set(paths))), tuple(sorted(set(network))), unconfined)

    def to_json(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "writable": list(self.writable),
            "network": list(self.network),
            "unconfined": self.unconfined,
        }

    def scope(self, command: str) -> str:
        """What an allow-always answer covers: the widening for the session's commands, or (unconfined)
        this exact command run unconfined."""
        if self.unconfined:
            return f"{UNCONFINED_SCOPE}{command}"
        return SESSION_SCOPE + json.dumps({"network": list(self.network), "writable": list(self.writable)})

    def describe(self) -> str:
        parts = [f"writable: {', '.join(self.writable)}"] if self.writable else []
        if self.network:
            parts.append(f"network: {', '.join(self.network)}")
        if self.unconfined:
            parts.append("unconfined (no sandbox at all)")
        return "; ".join(parts)


def _string_list(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InvalidArgumentsError(f"'{where}' must be a list of non-empty strings")
    return list(value)


def session_widenings(grants: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The (writable paths, network domains) of the widenings granted for the session."""
    writable: set[str] = set()
    network: set[str] = set()
    for scope in grants:
        if not scope.startswith(SESSION_SCOPE):
            continue
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            data = json.loads(scope[len(SESSION_SCOPE) :])
            writable.update(p for p in data.get("writable", ()) if isinstance(p, str))
            network.update(d for d in data.get("network", ()) if isinstance(d, str))
    return tuple(sorted(writable)), tuple(sorted(network))


def layers_for_tests(env: Mapping[str, str]) -> Layers:
    value = env.get(LAYERS_VARIABLE, "auto")
    return value if value in ("landlock-only", "none") else "auto"  # type: ignore[return-value]


class CommandSandbox:
    """The sandbox of one session's commands (see the module's note)."""

    def __init__(
        self,
        workspace: Workspace,
        settings: SandboxSettings,
        *,
        layers: Layers | None = None,
    ) -> None:
        self.workspace = workspace
        self.settings = settings
        self.layers: Layers = layers if layers is not None else layers_for_tests(os.environ)
        # Wired by the host once the session exists (defaults: a bare session with no memory).
        self.session_mode: Callable[[], str] = lambda: "ask"
        self.session_choice: Callable[[], SandboxMode | None] = lambda: None  # None: the configuration's
        self.grants: Callable[[], Iterable[str]] = tuple
        self.on_status: Callable[[Mapping[str, Any]], None] = lambda _status: None
        self.on_widened: Callable[[Mapping[str, Any]], None] = lambda _widening: None
        # Saves a widening to the person's configuration (None: saved; else why not). The host wires
        # it; a bare session has no configuration to save to.
        self.save_widening: Callable[[Widening], Awaitable[str | None]] = _no_configuration
        # Words for the person about the sandbox, kept in the session (the host wires a notice).
        self.on_notice: Callable[[str], None] = lambda _text: None
        self.dsh_home: Path | None = None  # the daemon's state, masked for confined commands (host sets)
        self._sandbox: Sandbox | unconfined.Sandbox | None = None
        self._proxy: Any = None
        self._level: SandboxLevel | None = None
        self._temp_dir: Path | None = None
        self._temp_removal: weakref.finalize[Any, Any] | None = None  # removes `_temp_dir` (see above)
        self._lock = asyncio.Lock()
        self._denied_domains: list[str] = []
        self._reported: Mapping[str, Any] | None = None
        self._attach: AttachPoint | None = None
        self._closed = False

    # ---- what the rules are ------------------------------------------------------------------------

    @property
    def chosen_mode(self) -> SandboxMode:
        """The mode set for the session: its own choice, else the configured one."""
        return self.session_choice() or self.settings.mode

    @property
    def mode(self) -> SandboxMode:
        """The mode commands run in now: plan mode runs them read-only."""
        return "read-only" if self.session_mode() == "plan" else self.chosen_mode

    @property
    def confined(self) -> bool:
        """Whether a command run now would be confined (not whether the machine can confine it)."""
        return self.mode != "full-access"

    def level(self) -> SandboxLevel:
        """What this machine gives (probed once per process; may fork a short-lived probe); once the
        session's sandbox started, what it really reached (layer 1 may have failed at its start)."""
        if self._sandbox is not None:
            return self._sandbox.level
        if self._level is None:
            self._level = probe_level() if ON_LINUX else unconfined.probe_level()
        return self._level

    def status(self) -> dict[str, Any]:
        """`sandbox/status`: the mode, the level reached and why (protocol.md "Sandbox")."""
        level = self.level()
        writable, network = self._widened()
        mode = self.mode
        available, described, reasons = level.confined, level.describe(), list(level.reasons)
        if self.layers == "none":  # the test-only knob: no layer may be used
            why = f"confinement switched off ({LAYERS_VARIABLE}=none, for tests only)"
            available, described, reasons = False, f"unconfined; {why}", [*reasons, why]
        return {
            "mode": mode,
            "configuredMode": self.chosen_mode,
            "level": described,
            "confined": mode != "full-access" and available,
            "available": available,
            "reasons": reasons,
            "network": list(network),
            "writable": list(writable),
        }

    def announce(self) -> None:
        """Tell the host the status when it differs from the last one told (nothing before the level
        was probed: the host probes it off the event loop, then announces)."""
        if self._level is None and self._sandbox is None:
            return
        try:
            status = self.status()
        except Exception:  # a probe that failed must not break the session
            logger.exception("the sandbox status could not be computed")
            return
        if status != self._reported:
            self._reported = status
            self.on_status(status)

    def _widened(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        writable, network = session_widenings(self.grants())
        return (
            tuple(sorted({*self.settings.writable, *writable})),
            tuple(sorted({*self.settings.network_allow, *network})),
        )

    def policy(self, widening: Widening | None = None) -> SandboxPolicy:
        writable, network = self._widened()
        mode: SandboxMode = self.mode
        if widening is not None:
            writable = tuple(sorted({*writable, *widening.writable}))
            network = tuple(sorted({*network, *widening.network}))
            if widening.unconfined:
                mode = "full-access"
        return SandboxPolicy(
            mode=mode,
            roots=tuple(self.workspace.roots),
            temp_dir=self._temp(),
            writable=tuple(Path(p) for p in writable),
            network_allow=network,
            layers=self.layers,
            dsh_home=self.dsh_home,
        )

    def _temp(self) -> Path:
        if self._temp_dir is None:
            self._temp_dir = Path(tempfile.mkdtemp(prefix="dsh-sandbox-"))
            self._temp_removal = weakref.finalize(self, shutil.rmtree, self._temp_dir, True)
        return self._temp_dir

    def reconfigure(self, settings: SandboxSettings) -> None:
        """New `tools.sandbox` settings: the next command runs under them (the rules rebuilt then)."""
        self.settings = settings
        self.announce()

    # ---- running -------------------------------------------------------------------------------------

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        stdin: int,
        stdout: int,
        stderr: int,
        widening: Widening | None = None,
    ) -> tuple[SandboxedProcess | unconfined.SandboxedProcess, Callable[[], Awaitable[None]]]:
        """The command started under the session's rules (with `widening`, which the person approved,
        on top), and what to await once it has ended (a widened-once sandbox closed).
        `SandboxUnavailable` when a confined mode cannot be had. `env` is already without the
        daemon's secrets (tools/environment.py); confined, the sandbox's spawn sets the proxy's
        variables and TMPDIR and drops credential-like names once more."""
        if self._closed:
            raise SandboxUnavailable("the session's sandbox is closed")
        policy = self.policy(widening)
        if widening is not None and policy != self.policy():
            once, proxy = await self._start(policy)

            async def close_once() -> None:
                if proxy is not None:
                    with contextlib.suppress(Exception):
                        await proxy.aclose()
                await once.aclose()

            try:
                proc = await once.spawn(
                    argv, cwd=cwd, env=env,
                    stdin=stdin, stdout=stdout, stderr=stderr, keep_leftovers=True,
                )  # fmt: skip
            except BaseException:
                await close_once()
                raise
            return proc, close_once
        async with self._lock:
            sandbox = self._sandbox
            if sandbox is None:
                sandbox, self._proxy = await self._start(policy)
                self._sandbox = sandbox
                self.announce()
            elif sandbox.policy != policy:
                await self._update(sandbox, policy)  # roots, mode or a widening changed: rebuilt once
                self.announce()
            self._denied_domains.clear()
            proc = await sandbox.spawn(
                argv, cwd=cwd, env=env,
                stdin=stdin, stdout=stdout, stderr=stderr, keep_leftovers=True,
            )  # fmt: skip
        return proc, self._after_command

    async def _after_command(self) -> None:
        """A protected name (`.git`, `.dsh`) that appeared at a root is protected from now on (the
        rules rebuilt), and the person is told: what was written in it before is not undone."""
        check = getattr(self._sandbox, "protect_appeared", None)
        if check is None:
            return
        try:
            appeared: list[str] = await check()
        except Exception:  # the next command's spawn tries again
            logger.exception("the sandbox could not protect what appeared")
            return
        if appeared:
            self.on_notice(
                f"{', '.join(appeared)} appeared in the workspace (made by a command or by you) while "
                "commands could write there. It is protected from now on, but what was put in it "
                "before was not checked: look at its hooks and config before you run git there."
            )

    async def spawn_server(
        self,
        argv: Sequence[str],
        *,
        mode: SandboxMode,
        cwd: Path,
        env: Mapping[str, str],
        own_env: Mapping[str, str],
        stdin: int,
        stdout: int,
        stderr: int,
    ) -> tuple[SandboxedProcess | unconfined.SandboxedProcess, Callable[[], Awaitable[None]]]:
        """A long-lived process of the session (an MCP server configured `sandbox`) confined by the
        session's rules in `mode`, in a sandbox of its own (so the commands' rules can change without
        touching it), and what to await to end it (everything it started killed). `own_env`: the
        process's own configured variables, kept whatever their names. `SandboxUnavailable` when the
        confinement cannot be had: the caller refuses to start it (never unconfined)."""
        if self._closed:
            raise SandboxUnavailable("the session's sandbox is closed")
        if mode == "full-access":
            raise ValueError("spawn_server confines: an unconfined process is started by its caller")
        policy = dataclasses.replace(self.policy(), mode=mode)
        if self.layers == "none":  # the test-only knob: no layer may be used
            raise SandboxUnavailable(f"confinement switched off ({LAYERS_VARIABLE}=none, for tests only)")
        sandbox, proxy = await self._start(policy)

        async def close() -> None:
            if proxy is not None:
                with contextlib.suppress(Exception):
                    await proxy.aclose()
            await sandbox.aclose()

        try:
            proc = await sandbox.spawn(
                argv, cwd=cwd, env=env, own_env=own_env,
                stdin=stdin, stdout=stdout, stderr=stderr, keep_leftovers=True,
            )  # fmt: skip
        except BaseException:
            await close()
            raise
        failed = getattr(proc, "setup_error", None)
        if failed is not None:
            await close()
            raise SandboxUnavailable(f"its confinement failed: {failed}")
        return proc, close

    async def _start(self, policy: SandboxPolicy) -> tuple[Sandbox | unconfined.Sandbox, Any]:
        """A sandbox for `policy`, and the egress proxy serving its proxy socket (None: no network)."""
        if not ON_LINUX:
            return await unconfined.Sandbox.start(policy), None
        if self._level is None:
            self._level = await asyncio.to_thread(probe_level)
        sandbox = await Sandbox.start(policy, self._level)
        if policy.mode == "full-access":
            return sandbox, None
        try:
            return sandbox, await self._start_proxy(sandbox, policy)
        except BaseException:
            await sandbox.aclose()
            raise

    async def _start_proxy(self, sandbox: Sandbox | unconfined.Sandbox, policy: SandboxPolicy) -> Any:
        sock = sandbox.proxy_socket()
        if sock is None:
            return None
        try:
            from dsh_daemon.sandbox.proxy import EgressProxy
        except ImportError:  # pragma: no cover - no proxy built: the socket stays unserved (no network)
            return None
        return await EgressProxy.start(sock, policy.network_allow, on_denied=self._denied_domains.append)

    async def _update(self, sandbox: Sandbox | unconfined.Sandbox, policy: SandboxPolicy) -> None:
        """New rules for the session's sandbox; its proxy follows (a change to or from full-access
        brings a new fork server, and so a new proxy socket)."""
        socket_before = sandbox.proxy_socket()
        await sandbox.update(policy)
        if sandbox.proxy_socket() is socket_before and self._proxy is not None:
            await self._proxy.update(policy.network_allow)
            return
        proxy, self._proxy = self._proxy, None
        if proxy is not None:
            with contextlib.suppress(Exception):
                await proxy.aclose()
        if policy.mode != "full-access":
            self._proxy = await self._start_proxy(sandbox, policy)

    def attach_point(self) -> AttachPoint | None:
        """The session's attach socket (issue 41.4: a client's terminal as a confined command's stdio),
        opened at first use in DSH_HOME's run dir, which confined commands cannot reach; None off
        Linux (SO_PEERCRED) or once the sandbox is closed."""
        if not ON_LINUX or self._closed:
            return None
        if self._attach is None:
            self._attach = AttachPoint.open(self.policy().dsh_home_dir() / "run")
        return self._attach

    def denied_domains(self) -> list[str]:
        """Domains the proxy refused since the last command started (its denial note names them)."""
        return list(dict.fromkeys(self._denied_domains))

    async def aclose(self) -> None:
        """Everything the session's commands started is killed; the private temp directory removed."""
        self._closed = True
        attach, self._attach = self._attach, None
        if attach is not None:
            await attach.aclose()
        sandbox, self._sandbox = self._sandbox, None
        proxy, self._proxy = self._proxy, None
        if proxy is not None:
            with contextlib.suppress(Exception):
                await proxy.aclose()
        if sandbox is not None:
            await sandbox.aclose()
        if self._temp_removal is not None:
            await asyncio.to_thread(self._temp_removal)  # rmtree, once (a finalizer runs at most once)


def machine_level() -> tuple[str, bool]:
    """What this machine gives confined commands, in words, and whether it confines at all (for
    `dsh-daemon config`; the test-only layers knob included)."""
    level = probe_level() if ON_LINUX else unconfined.probe_level()
    if layers_for_tests(os.environ) == "none":
        return f"unconfined; confinement switched off ({LAYERS_VARIABLE}=none, for tests only)", False
    return level.describe(), level.confined


async def _nothing() -> None:
    return None


async def _no_configuration(_widening: Widening) -> str | None:
    return "this session has no configuration file to save to"


def unavailable_message(level_text: str, mode: str) -> str:
    return (
        f"this command was not run: the session's commands run in {mode} mode, and no confinement can be "
        f"had on this machine ({level_text}). Commands are never run unconfined unless the person "
        "chooses it: they can set tools.sandbox to full-access (then commands ask before they run), "
        "or fix what keeps the sandbox from working (README: Sandbox)."
    )


__all__ = [
    "CommandSandbox",
    "SandboxUnavailable",
    "SandboxedProcess",
    "Widening",
]
