"""The rules computed once per session: layer 0's enumeration around the masked paths, and what a
symlink among the enumerated entries must not grant."""

from __future__ import annotations

from pathlib import Path

from dsh_daemon.sandbox import Sandbox, probe_level
from dsh_daemon.sandbox.rules import compute_rules, git_dirs, protected_paths
from tests.sandbox.conftest import command_env, needs_layer0, policy_for, run
from tests.sandbox.scene import Scene, git


@needs_layer0
def test_layer_0_grants_nothing_on_the_way_to_a_secret(scene: Scene) -> None:
    rules = compute_rules(policy_for(scene, "workspace-write", "landlock-only"), probe_level(), namespaces=False, proxy_port=9)  # fmt: skip
    granted = {path for path, _rights in rules["paths"]}
    for ancestor in (Path("/"), scene.base, scene.home, scene.home / ".ssh"):
        assert str(ancestor) not in granted
    assert str(scene.home / ".bashrc") in granted and str(scene.outside) in granted
    assert rules["connect_ports"] == [9]


@needs_layer0
async def test_a_symlink_to_an_ancestor_of_a_secret_grants_nothing(
    scene: Scene, started: list[Sandbox]
) -> None:
    """Regression: a rule on an enumerated symlink granted its target (pytest-current pointed at an
    ancestor of the fake home, and every secret beneath it was readable in layer 0)."""
    (scene.base / "shortcut").symlink_to(scene.base)
    policy = policy_for(scene, "read-only", "landlock-only")
    rules = compute_rules(policy, probe_level(), namespaces=False, proxy_port=None)
    assert str(scene.base / "shortcut") not in {path for path, _rights in rules["paths"]}
    sandbox = await Sandbox.start(policy)
    started.append(sandbox)
    _status, output = await run(
        sandbox, f"cat {scene.base}/shortcut/home/.ssh/id_rsa", cwd=scene.ws, env=command_env(scene)
    )
    assert scene.tokens[".ssh/id_rsa"] not in output


def test_a_worktree_names_its_own_and_its_common_git_dir(scene: Scene) -> None:
    tree = scene.base / "tree"
    git(scene.ws, "worktree", "add", "-q", "-b", "other", str(tree))
    assert git_dirs(tree) == [scene.ws / ".git" / "worktrees" / "tree", scene.ws / ".git"]
    protected = protected_paths((tree,))
    assert scene.ws / ".git" / "hooks" in protected and scene.ws / ".git" / "config" in protected
    assert tree / ".git" in protected
