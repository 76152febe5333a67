"""The fork server's promises: no fd of the daemon or the server reaches a command; a confined command
has no capability, no_new_privs and a seccomp filter; a step that fails refuses the command (126)
instead of running it; a command's tree (setsid included) is killed on request, when the command
exits (unless kept) and when the sandbox closes; the server imports only the standard library."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_daemon.sandbox import Sandbox
from dsh_daemon.sandbox.level import server_argv
from tests.sandbox.conftest import command_env, needs_layer0, needs_layer1, policy_for, run
from tests.sandbox.scene import Scene

pytestmark = needs_layer0
LAYERS = [pytest.param("auto", marks=needs_layer1, id="layers01"), pytest.param("landlock-only", id="layer0")]
HEARTBEAT = "while :; do date +%s%N > {beat}; sleep 0.05; done"


def _beat(beat: Path) -> str:
    try:
        return beat.read_text()
    except FileNotFoundError:
        return ""


async def _stops_beating(beat: Path) -> bool:
    """True when the heartbeat file has stopped changing (its writer is dead)."""
    await asyncio.sleep(0.4)
    before = _beat(beat)
    await asyncio.sleep(0.5)
    return _beat(beat) == before


async def _beating(beat: Path) -> None:
    for _ in range(100):
        if _beat(beat):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the heartbeat never started")


@pytest.mark.parametrize("layers", LAYERS)
async def test_no_fd_leaks_into_a_command(scene: Scene, layers: str, started: list[Sandbox]) -> None:
    leaked = os.open(os.devnull, os.O_RDONLY)  # inheritable on purpose: must not reach the command
    os.set_inheritable(leaked, True)
    try:
        sandbox = await Sandbox.start(policy_for(scene, "workspace-write", layers))
        started.append(sandbox)
        script = (
            f"{sys.executable} -c 'import os; print(sorted(int(f) for f in os.listdir(\"/proc/self/fd\")))'"
        )
        status, output = await run(sandbox, script, cwd=scene.ws, env=command_env(scene))
    finally:
        os.close(leaked)
    assert (status, output) == (0, "[0, 1, 2, 3]\n")  # 3: listdir's own


@pytest.mark.parametrize("layers", LAYERS)
async def test_a_confined_command_has_no_privileges(
    scene: Scene, layers: str, started: list[Sandbox]
) -> None:
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", layers))
    started.append(sandbox)
    status, output = await run(
        sandbox, "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status",
        cwd=scene.ws, env=command_env(scene),
    )  # fmt: skip
    fields = dict(line.split(":\t") for line in output.splitlines())
    assert status == 0
    assert {k: v for k, v in fields.items() if k.startswith("Cap")} == dict.fromkeys(
        ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"), "0000000000000000"
    )
    assert (fields["NoNewPrivs"], fields["Seccomp"]) == ("1", "2")


@pytest.mark.parametrize("layers", LAYERS)
async def test_a_failed_setup_step_refuses_the_command(
    scene: Scene, layers: str, started: list[Sandbox]
) -> None:
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", layers))
    started.append(sandbox)
    marker = scene.ws / "src" / "ran"
    process_status, output = await run(
        sandbox, f"touch {marker}", cwd=scene.base / "no-such-dir", env=command_env(scene)
    )
    assert process_status == 126 and "cannot confine the command, it was not run" in output
    assert not marker.exists()
    missing, output = await run(sandbox, "exec /no/such/program", cwd=scene.ws, env=command_env(scene))
    assert missing == 127


@pytest.mark.parametrize("layers", LAYERS)
async def test_kill_tree_kills_setsid_descendants(scene: Scene, layers: str, started: list[Sandbox]) -> None:
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", layers))
    started.append(sandbox)
    beat = scene.ws / "src" / "beat"
    script = f"setsid sh -c '{HEARTBEAT.format(beat=beat)}' >/dev/null 2>&1 & sleep 600"
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        process = await sandbox.spawn(
            ["sh", "-c", script],
            cwd=scene.ws,
            env=command_env(scene),
            stdin=devnull,
            stdout=devnull,
            stderr=devnull,
        )
    finally:
        os.close(devnull)
    assert process.pid > 0
    await _beating(beat)
    process.kill_tree(signal.SIGKILL)
    assert await asyncio.wait_for(process.wait(), 10) == -signal.SIGKILL
    assert await _stops_beating(beat)


@pytest.mark.parametrize("layers", LAYERS)
async def test_what_a_command_leaves_running_is_killed_when_it_exits(
    scene: Scene, layers: str, started: list[Sandbox]
) -> None:
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", layers))
    started.append(sandbox)
    beat = scene.ws / "src" / "beat"
    script = f"({HEARTBEAT.format(beat=beat)}) >/dev/null 2>&1 & while [ ! -s {beat} ]; do sleep 0.02; done"
    status, _ = await run(sandbox, script, cwd=scene.ws, env=command_env(scene))
    assert status == 0
    assert await _stops_beating(beat)


@pytest.mark.parametrize("layers", LAYERS)
async def test_aclose_kills_kept_background_trees(scene: Scene, layers: str) -> None:
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", layers))
    beat = scene.ws / "src" / "beat"
    try:
        status, _ = await run(
            sandbox, f"setsid sh -c '{HEARTBEAT.format(beat=beat)}' >/dev/null 2>&1 &",
            cwd=scene.ws, env=command_env(scene), keep_leftovers=True,
        )  # fmt: skip
        assert status == 0
        await _beating(beat)
        assert not await _stops_beating(beat)  # kept: still running after the command returned
    finally:
        await sandbox.aclose()
    assert await _stops_beating(beat)


@pytest.mark.parametrize("layers", LAYERS)
async def test_closing_a_kept_command_while_its_end_is_awaited_leaves_no_failed_task(
    scene: Scene, layers: str, started: list[Sandbox]
) -> None:
    """close() while the kept tree's end-of-file is being awaited (a run_command cancelled, a session
    closing): the waiting task ends quietly, not with "Invalid file descriptor: -1" left unretrieved."""
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", layers))
    started.append(sandbox)
    beat = scene.ws / "src" / "beat"
    loop = asyncio.get_running_loop()
    failures: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, context: failures.append(context))
    try:
        null = os.open(os.devnull, os.O_RDWR)
        try:
            process = await sandbox.spawn(
                ["sh", "-c", f"setsid sh -c '{HEARTBEAT.format(beat=beat)}' >/dev/null 2>&1 &"],
                cwd=scene.ws, env=command_env(scene), stdin=null, stdout=null, stderr=null, keep_leftovers=True,
            )  # fmt: skip
        finally:
            os.close(null)
        assert await process.wait() == 0
        await _beating(beat)
        waiting = process._eof  # the task awaiting the kept tree's end
        assert waiting is not None and not waiting.done()
        process.close()
        await asyncio.gather(waiting, return_exceptions=True)
        assert waiting.cancelled(), waiting
        assert await _stops_beating(beat)
    finally:
        loop.set_exception_handler(None)
    assert failures == []


@pytest.mark.parametrize("layers", LAYERS)
async def test_statuses_are_reported_as_subprocess_does(
    scene: Scene, layers: str, started: list[Sandbox]
) -> None:
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", layers))
    started.append(sandbox)
    env = command_env(scene)
    assert (await run(sandbox, "exit 3", cwd=scene.ws, env=env))[0] == 3
    assert (await run(sandbox, "kill -TERM $$", cwd=scene.ws, env=env))[0] == -signal.SIGTERM


@pytest.mark.parametrize("layers", LAYERS)
async def test_update_rebuilds_the_rules_once(scene: Scene, layers: str, started: list[Sandbox]) -> None:
    """A new root becomes writable, the old one read-only, for commands started after update()."""
    policy = policy_for(scene, "workspace-write", layers)
    sandbox = await Sandbox.start(policy)
    started.append(sandbox)
    other = scene.base / "other"
    (other / "sub").mkdir(parents=True)
    env = command_env(scene)
    assert (await run(sandbox, f"echo x > {other}/sub/f", cwd=scene.ws, env=env))[0] != 0
    await sandbox.update(policy.__class__(**{**policy.__dict__, "roots": (other,)}))
    assert (await run(sandbox, f"echo x > {other}/sub/f", cwd=scene.ws, env=env))[0] == 0
    assert (await run(sandbox, f"echo x > {scene.ws}/src/file.txt", cwd=scene.ws, env=env))[0] != 0
    await sandbox.update(policy.__class__(**{**policy.__dict__, "mode": "full-access"}))
    assert (await run(sandbox, f"echo x > {scene.outside}/target.txt", cwd=scene.ws, env=env))[0] == 0


def test_the_fork_server_imports_only_the_standard_library() -> None:
    argv = server_argv()
    code = argv[4].replace("sys.exit(main())", "") + "print('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run([*argv[:4], code, argv[5]], capture_output=True, text=True, check=True, env={})
    modules = set(done.stdout.split())
    ours = {m for m in modules if m.startswith("dsh_daemon")}
    assert ours == {
        "dsh_daemon", "dsh_daemon.sandbox", "dsh_daemon.sandbox.forkserver",
        "dsh_daemon.sandbox.kernel", "dsh_daemon.sandbox.landlock", "dsh_daemon.sandbox.seccomp",
    }  # fmt: skip
    outside = {m.split(".")[0] for m in modules - ours} - set(sys.stdlib_module_names) - {"__main__"}
    assert outside == set() and "asyncio" not in modules


DAEMON = """
import asyncio, os, sys
from pathlib import Path
from dsh_daemon.sandbox import Sandbox, SandboxPolicy
ws, temp, home, dsh, beat, layers = sys.argv[1:]
async def main():
    sandbox = await Sandbox.start(SandboxPolicy("workspace-write", (Path(ws),), Path(temp), layers=layers, home=Path(home), dsh_home=Path(dsh)))
    null = os.open(os.devnull, os.O_RDWR)
    script = "setsid sh -c 'while :; do date +%s%N > " + beat + "; sleep 0.05; done' >/dev/null 2>&1 &"
    process = await sandbox.spawn(["sh", "-c", script], cwd=Path(ws), env={"PATH": os.environ["PATH"]}, stdin=null, stdout=null, stderr=null, keep_leftovers=True)
    await process.wait()
    print("started", flush=True)
    await asyncio.sleep(600)
asyncio.run(main())
"""


@pytest.mark.parametrize("layers", LAYERS)
async def test_nothing_outlives_a_daemon_killed_outright(scene: Scene, layers: str) -> None:
    """The daemon dies with SIGKILL (no aclose): the fork server sees its control socket close and
    kills every command's tree, kept background children included."""
    beat = scene.ws / "src" / "beat"
    args = [str(p) for p in (scene.ws, scene.temp, scene.home, scene.dsh_home, beat)]
    daemon = await asyncio.create_subprocess_exec(
        sys.executable, "-c", DAEMON, *args, layers, stdout=subprocess.PIPE
    )
    assert daemon.stdout is not None
    assert await asyncio.wait_for(daemon.stdout.readline(), 30) == b"started\n"
    await _beating(beat)
    daemon.kill()
    await daemon.wait()
    assert await _stops_beating(beat)


@pytest.mark.parametrize("layers", LAYERS)
async def test_a_burst_of_concurrent_commands_all_run(
    scene: Scene, layers: str, started: list[Sandbox]
) -> None:
    """More requests at once than the control socket's buffer holds (large environments): each
    waits its turn instead of failing."""
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", layers))
    started.append(sandbox)
    env = {**command_env(scene), "FILLER": "x" * 32_000}
    results = await asyncio.gather(*(run(sandbox, f"echo {i}", cwd=scene.ws, env=env) for i in range(40)))
    assert results == [(0, f"{i}\n") for i in range(40)]


@pytest.mark.parametrize("layers", LAYERS)
async def test_finished_commands_hold_no_fd_and_waits_can_overlap(
    scene: Scene, layers: str, started: list[Sandbox]
) -> None:
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", layers))
    started.append(sandbox)
    env = command_env(scene)
    await run(sandbox, "true", cwd=scene.ws, env=env)  # the first spare pair is in place
    before = len(os.listdir("/proc/self/fd"))
    for i in range(30):
        assert (await run(sandbox, "true", cwd=scene.ws, env=env, keep_leftovers=i % 2 == 0))[0] == 0
    for _ in range(50):  # a kept tree's socket closes when its shepherd ends, just after
        if len(os.listdir("/proc/self/fd")) <= before + 2:
            break
        await asyncio.sleep(0.05)
    assert len(os.listdir("/proc/self/fd")) <= before + 2  # a spare pair may be in flight
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        process = await sandbox.spawn(["sh", "-c", "sleep 0.2; exit 7"], cwd=scene.ws, env=env, stdin=devnull, stdout=devnull, stderr=devnull)  # fmt: skip
    finally:
        os.close(devnull)
    assert await asyncio.wait_for(asyncio.gather(process.wait(), process.wait(), process.wait()), 10) == [
        7,
        7,
        7,
    ]


def _tree(pid: int) -> list[int]:
    """`pid`'s descendants (from /proc), parents before their children."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop(0)
        for task in os.listdir(f"/proc/{parent}/task"):
            with open(f"/proc/{parent}/task/{task}/children") as f:
                children = [int(c) for c in f.read().split()]
            found += children
            todo += children
    return found


def _status_fields(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


@pytest.mark.parametrize("layers", LAYERS)
async def test_a_spare_child_is_confined_before_its_command_comes(
    scene: Scene, layers: str, started: list[Sandbox]
) -> None:
    """Issue 41: the confinement is applied by the spare child while it waits, off the command's path
    (no_new_privs, seccomp, every capability gone); its shepherd, which must signal the tree, is not."""
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", layers))
    started.append(sandbox)
    await run(sandbox, "true", cwd=scene.ws, env=command_env(scene))
    server = sandbox._server
    for _ in range(200):
        leaves = [pid for pid in _tree(server.process.pid) if not _tree(pid)]
        if server.spares and leaves and _status_fields(leaves[0])["Seccomp"] == "2":
            break
        await asyncio.sleep(0.02)
    assert len(server.spares) == 1
    (child,) = leaves  # the server's only leaf: the spare's command child (the shepherd is its parent)
    fields = _status_fields(child)
    assert (fields["NoNewPrivs"], fields["Seccomp"], fields["CapEff"], fields["CapBnd"]) == (
        "1",
        "2",
        "0000000000000000",
        "0000000000000000",
    )
    assert _status_fields(int(fields["PPid"]))["Seccomp"] == "0"  # the shepherd


async def test_the_next_spare_is_forked_when_the_command_exits_not_while_it_starts(
    scene: Scene, started: list[Sandbox], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41: a command's spawn does not make the server fork the next spare pair at once (two forks
    competing with the command as it starts): that comes when it exits (or after SPARE_DELAY, here
    made long). A second command meanwhile still gets a pair at once."""
    from dsh_daemon.sandbox import session as sandbox_session

    monkeypatch.setattr(sandbox_session, "SPARE_DELAY", 600.0)
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", "landlock-only"))
    started.append(sandbox)
    env = command_env(scene)
    await run(sandbox, "true", cwd=scene.ws, env=env)
    server = sandbox._server
    for _ in range(200):
        if server.spares:
            break
        await asyncio.sleep(0.02)
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        first = await sandbox.spawn(["sleep", "60"], cwd=scene.ws, env=env, stdin=devnull, stdout=devnull, stderr=devnull)  # fmt: skip
        await asyncio.sleep(0.2)
        assert (server.spares, server.requested) == ([], 0)  # none asked for while it runs
        assert (await run(sandbox, "exit 3", cwd=scene.ws, env=env))[0] == 3  # asks for its own
    finally:
        os.close(devnull)
    for _ in range(200):
        if server.spares:
            break
        await asyncio.sleep(0.02)
    assert len(server.spares) == 1  # that one exited: the next pair is in place
    first.kill_tree(signal.SIGKILL)
    assert await asyncio.wait_for(first.wait(), 10) == -signal.SIGKILL


@pytest.mark.parametrize("layers", LAYERS)
async def test_a_commands_pid_is_known_at_hand_over_and_is_the_command_itself(
    scene: Scene, layers: str, started: list[Sandbox]
) -> None:
    """Issue 41: the pid comes with the prepared child's ready message (SCM_CREDENTIALS, in the daemon's
    PID namespace), so spawn waits for nothing from the command; it is the process that runs it."""
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", layers))
    started.append(sandbox)
    mark = scene.ws / "src" / "pid"
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        process = await sandbox.spawn(["sh", "-c", f"echo $$ > {mark}; exec sleep 60"], cwd=scene.ws, env=command_env(scene), stdin=devnull, stdout=devnull, stderr=devnull)  # fmt: skip
    finally:
        os.close(devnull)
    for _ in range(200):
        if mark.exists() and mark.read_text().endswith("\n"):
            break
        await asyncio.sleep(0.02)
    inner = int(mark.read_text())
    nspids = _status_fields(process.pid)["NSpid"].split()
    assert (int(nspids[0]), int(nspids[-1])) == (process.pid, inner)
    process.kill_tree(signal.SIGKILL)
    assert await asyncio.wait_for(process.wait(), 10) == -signal.SIGKILL
