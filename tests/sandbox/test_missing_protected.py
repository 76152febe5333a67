"""Protected paths that do not exist when a session's rules are computed (issue 41's leftover): a git
dir without `hooks` or `config` gets empty ones bound read-only (create-and-mask, layer 1; layer 0's
rules never grant making them); a `.git` or `.dsh` made at a root later is protected from then on,
for commands still running too, and reported (`protect_appeared`)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from dsh_daemon.sandbox import Sandbox
from dsh_daemon.tools.config import SandboxSettings
from dsh_daemon.tools.sandboxing import CommandSandbox
from dsh_daemon.tools.workspace import Workspace
from tests.sandbox.conftest import command_env, needs_layer0, needs_layer1, policy_for, run
from tests.sandbox.scene import Scene, git

pytestmark = needs_layer0
LAYERS = [pytest.param("auto", marks=needs_layer1, id="layers01"), pytest.param("landlock-only", id="layer0")]
PLANT = "mkdir -p {ws}/.git/hooks; echo PWNED > {ws}/.git/hooks/pre-commit; echo '[core] fsmonitor = x' >> {ws}/.git/config"


@pytest.mark.parametrize("layers", LAYERS)
async def test_a_repo_without_hooks_or_config_cannot_be_given_them(
    scene: Scene, layers: str, started: list[Sandbox]
) -> None:
    shutil.rmtree(scene.ws / ".git" / "hooks")
    (scene.ws / ".git" / "config").unlink()
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", layers))
    started.append(sandbox)
    _status, output = await run(sandbox, scene.render(PLANT), cwd=scene.ws, env=command_env(scene))
    assert not (scene.ws / ".git" / "hooks" / "pre-commit").exists(), output
    config = scene.ws / ".git" / "config"
    assert not config.exists() or "fsmonitor" not in config.read_text(), output
    if layers == "auto":  # created empty to be bound read-only: git reads them as it reads none
        assert list((scene.ws / ".git" / "hooks").iterdir()) == [] and config.read_text() == ""
    # The repository still works for the command, and for the person.
    status, output = await run(
        sandbox, "echo more >> src/file.txt && git add -A && git commit -qm more && git log --oneline | wc -l",
        cwd=scene.ws, env=command_env(scene),
    )  # fmt: skip
    if layers == "auto":  # layer 0 alone refuses a commit in a main checkout (index.lock): documented
        assert status == 0 and output.strip() == "2", output
    assert "init" in git(scene.ws, "log", "--oneline")


@pytest.mark.parametrize("layers", LAYERS)
async def test_a_git_dir_made_later_is_protected_from_then_on_for_running_commands_too(
    scene: Scene, layers: str, started: list[Sandbox], tmp_path: Path
) -> None:
    shutil.rmtree(scene.ws / ".git")
    shutil.rmtree(scene.ws / ".dsh")
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", layers))
    started.append(sandbox)
    env = command_env(scene)
    # A command makes the repository (layer 1: the root is writable; layer 0 refuses new entries).
    status, output = await run(sandbox, "git init -q . && mkdir .dsh && echo made", cwd=scene.ws, env=env)
    if layers == "landlock-only":
        assert status != 0 and not (scene.ws / ".git").exists(), output
        assert await sandbox.protect_appeared() == []
        return
    assert status == 0 and "made" in output
    # A background writer that keeps trying to plant a hook, started before the protection.
    writer = "while true; do echo PWNED > {ws}/.git/hooks/post-merge 2>/dev/null && rm -f {ws}/.git/hooks/post-merge; sleep 0.02; done"
    bg, _ = await run(
        sandbox, f"({scene.render(writer)}) >/dev/null 2>&1 &", cwd=scene.ws, env=env, keep_leftovers=True
    )
    assert bg == 0
    appeared = await sandbox.protect_appeared()
    assert sorted(appeared) == sorted([str(scene.ws / ".git"), str(scene.ws / ".dsh")])
    assert await sandbox.protect_appeared() == []  # told once
    await asyncio.sleep(0.2)
    # From now on nothing can write the hooks, the config or .dsh, nor move .git aside: the running
    # writer is refused too (the binds are in its mount namespace).
    _status, output = await run(
        sandbox, scene.render(PLANT) + "; mv .git .git-old; echo x > .dsh/c", cwd=scene.ws, env=env
    )
    for _ in range(10):
        assert not (scene.ws / ".git" / "hooks" / "post-merge").exists()
        await asyncio.sleep(0.03)
    assert not (scene.ws / ".git" / "hooks" / "pre-commit").exists(), output
    assert "fsmonitor" not in (scene.ws / ".git" / "config").read_text()
    assert (scene.ws / ".git").is_dir() and not (scene.ws / ".git-old").exists()
    assert not (scene.ws / ".dsh" / "c").exists()


async def test_the_session_tells_the_person_what_appeared(scene: Scene) -> None:
    """The commands' sandbox checks after each command and says it as a session notice."""
    shutil.rmtree(scene.ws / ".git")
    workspace = Workspace([str(scene.ws)])
    sandbox = CommandSandbox(workspace, SandboxSettings(), layers="auto")
    sandbox.dsh_home = scene.dsh_home
    notices: list[str] = []
    sandbox.on_notice = notices.append
    try:
        for script in ("echo first", "echo second"):
            proc, finish = await sandbox.spawn(
                ["sh", "-c", script], cwd=scene.ws, env=command_env(scene), stdin=0, stdout=2, stderr=2
            )
            await proc.wait()
            await finish()
            assert notices == []
        scene.ws.joinpath(".git").mkdir()  # the person runs `git init` meanwhile, say
        proc, finish = await sandbox.spawn(
            ["true"], cwd=scene.ws, env=command_env(scene), stdin=0, stdout=2, stderr=2
        )
        await proc.wait()
        await finish()
        (notice,) = notices
        assert str(scene.ws / ".git") in notice and "protected from now on" in notice
    finally:
        await sandbox.aclose()
