"""What a confined command can still do: write its workspace and temp dir, run git (a commit in a
worktree too), python and pytest, npm test, reach the proxy's socket, and in layer 1 serve other commands of
its session on its own loopback. Where layer 0 alone refuses something by design, the test says so."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import sys
import threading

import pytest

from dsh_daemon.sandbox import Sandbox
from tests.sandbox.conftest import command_env, needs_layer0, needs_layer1, policy_for, run
from tests.sandbox.scene import Scene, git

pytestmark = needs_layer0
LAYERS = [pytest.param("auto", marks=needs_layer1, id="layers01"), pytest.param("landlock-only", id="layer0")]


@pytest.mark.parametrize("layers", LAYERS)
async def test_workspace_and_temp_dir_are_writable(scene: Scene, layers: str, started: list[Sandbox]) -> None:
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", layers))
    started.append(sandbox)
    script = 'echo new > src/file.txt && mkdir -p src/deep/er && echo x > src/deep/er/y && echo t > "$TMPDIR/t" && cat "$TMPDIR/t"'
    status, output = await run(sandbox, script, cwd=scene.ws, env=command_env(scene))
    assert (status, output) == (0, "t\n")
    assert (scene.ws / "src" / "file.txt").read_text() == "new\n"
    assert (scene.ws / "src" / "deep" / "er" / "y").exists()
    top_status, _ = await run(sandbox, "echo top > new-top-level.txt", cwd=scene.ws, env=command_env(scene))
    # Layer 0 alone cannot grant new entries in a root without covering .git/hooks and .dsh.
    assert (top_status == 0) == sandbox.layer1
    assert (scene.ws / "new-top-level.txt").exists() == sandbox.layer1


@pytest.mark.parametrize("layers", LAYERS)
async def test_read_only_reads_and_writes_only_its_temp_dir(
    scene: Scene, layers: str, started: list[Sandbox]
) -> None:
    sandbox = await Sandbox.start(policy_for(scene, "read-only", layers))
    started.append(sandbox)
    status, output = await run(
        sandbox, 'cat src/file.txt && echo t > "$TMPDIR/t"', cwd=scene.ws, env=command_env(scene)
    )
    assert (status, output) == (0, "ORIGINAL\n")
    assert list(scene.temp.iterdir()) == [scene.temp / "t"] or sandbox.layer1


@needs_layer1
async def test_git_init_add_commit_work_in_layer_1(scene: Scene, started: list[Sandbox]) -> None:
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", "auto"))
    started.append(sandbox)
    script = (
        "echo change >> src/file.txt && git add -A && git commit -qm inside && "
        "mkdir fresh && cd fresh && git init -q && echo a > a && git add a && git commit -qm first && echo ok"
    )
    status, output = await run(sandbox, script, cwd=scene.ws, env=command_env(scene))
    assert (status, output.splitlines()[-1]) == (0, "ok"), output  # after git's hint on the inert hook
    assert "inside" in git(scene.ws, "log", "--format=%s")
    assert (scene.ws / ".git" / "hooks" / "pre-commit").read_text() == "ORIGINAL\n"


@pytest.mark.parametrize("layers", LAYERS)
async def test_a_commit_in_a_worktree_works(scene: Scene, layers: str, started: list[Sandbox]) -> None:
    """Protecting all of .git would break this: the worktree's commit writes the main repository's
    objects, refs and its own index under .git/worktrees."""
    tree = scene.base / "tree"
    git(scene.ws, "worktree", "add", "-q", "-b", "feature", str(tree))
    policy = policy_for(scene, "workspace-write", layers)
    sandbox = await Sandbox.start(policy.__class__(**{**policy.__dict__, "roots": (tree,)}))
    started.append(sandbox)
    script = "echo more >> src/file.txt && git add -A && git commit -qm 'in the worktree' && git log --format=%s -1"
    status, output = await run(sandbox, script, cwd=tree, env=command_env(scene))
    assert (status, output.splitlines()[-1]) == (0, "in the worktree"), output
    assert "in the worktree" in git(scene.ws, "log", "feature", "--format=%s")
    hooks_escape, _ = await run(
        sandbox, f"echo x > {scene.ws}/.git/hooks/pre-commit", cwd=tree, env=command_env(scene)
    )
    assert hooks_escape != 0 and (scene.ws / ".git" / "hooks" / "pre-commit").read_text() == "ORIGINAL\n"


async def test_layer_0_alone_refuses_a_commit_in_the_main_checkout(
    scene: Scene, started: list[Sandbox]
) -> None:
    """By design (docs/design.md, Sandbox): .git itself gets no right to make entries in layer 0, so
    index.lock cannot be created; layer 1 or a widening allows it."""
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", "landlock-only"))
    started.append(sandbox)
    status, output = await run(
        sandbox, "git add -A && git commit -qm x", cwd=scene.ws, env=command_env(scene)
    )
    assert status != 0 and "index.lock" in output


@pytest.mark.parametrize("layers", LAYERS)
async def test_python_and_pytest_run(scene: Scene, layers: str, started: list[Sandbox]) -> None:
    (scene.ws / "src" / "test_sample.py").write_text("def test_sum():\n    assert sum([1, 2]) == 3\n")
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", layers))
    started.append(sandbox)
    script = f"{sys.executable} -m pytest -q -p no:cacheprovider src/test_sample.py"
    status, output = await run(sandbox, script, cwd=scene.ws, env=command_env(scene))
    assert status == 0 and "1 passed" in output, output


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
@pytest.mark.parametrize("layers", LAYERS)
async def test_npm_test_runs(scene: Scene, layers: str, started: list[Sandbox]) -> None:
    """A Node project's `npm test` in the workspace (its HOME is outside the roots: npm's own log
    and cache writes there are refused, and must not fail the run)."""
    app = scene.ws / "src" / "app"
    app.mkdir()
    package = {"name": "app", "version": "1.0.0", "scripts": {"test": "node test.js"}}
    (app / "package.json").write_text(json.dumps(package))
    (app / "test.js").write_text(
        "const assert = require('assert');\nassert.strictEqual(1 + 2, 3);\nconsole.log('1 passing');\n"
    )
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", layers))
    started.append(sandbox)
    status, output = await run(sandbox, "npm test", cwd=app, env=command_env(scene))
    assert status == 0 and "1 passing" in output, output
    broken, _ = await run(sandbox, "sed -i 's/3)/4)/' test.js && npm test", cwd=app, env=command_env(scene))
    assert broken != 0  # the run above passed on its merits


@pytest.mark.parametrize("layers", LAYERS)
async def test_the_proxy_socket_is_reachable(scene: Scene, layers: str, started: list[Sandbox]) -> None:
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", layers))
    started.append(sandbox)
    proxy = sandbox.proxy_socket()
    assert proxy is not None and sandbox.proxy_port == proxy.getsockname()[1]
    accepted: list[bytes] = []

    def serve(listener: socket.socket) -> None:
        conn, _ = listener.accept()
        with conn:
            accepted.append(conn.recv(100))
            conn.sendall(b"pong")

    threading.Thread(target=serve, args=(proxy,), daemon=True).start()
    script = (
        f'{sys.executable} -c \'import os, socket; u = os.environ["HTTPS_PROXY"].rsplit(":", 1); '
        's = socket.create_connection(("127.0.0.1", int(u[1])), 5); s.sendall(b"ping"); print(s.recv(4).decode())\''
    )
    status, output = await run(sandbox, script, cwd=scene.ws, env=command_env(scene))
    assert (status, output, accepted) == (0, "pong\n", [b"ping"])


@needs_layer1
async def test_commands_of_one_session_reach_each_other_on_their_loopback(
    scene: Scene, started: list[Sandbox]
) -> None:
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", "auto"))
    started.append(sandbox)
    server = (
        f'{sys.executable} -c \'import socket; s = socket.socket(); s.bind(("127.0.0.1", 8765)); s.listen(); '
        'open("src/listening", "w").close(); c, _ = s.accept(); c.sendall(b"hello")\''
    )
    env = command_env(scene)
    background = asyncio.ensure_future(run(sandbox, server, cwd=scene.ws, env=env))
    for _ in range(100):
        if (scene.ws / "src" / "listening").exists():
            break
        await asyncio.sleep(0.05)
    client = f"{sys.executable} -c 'import socket; print(socket.create_connection((\"127.0.0.1\", 8765)).recv(5).decode())'"
    status, output = await run(sandbox, client, cwd=scene.ws, env=env)
    assert (status, output) == (0, "hello\n")
    assert (await background)[0] == 0


@needs_layer1
async def test_an_http_client_reaches_a_server_of_its_session_directly_despite_the_proxy(
    scene: Scene, started: list[Sandbox]
) -> None:
    """Layer 1: the session's loopback is its own, so NO_PROXY names it and an HTTP client that reads
    the proxy variables (urllib here, as curl and requests do) reaches the session's dev server
    directly instead of asking the proxy, which refuses loopback."""
    sandbox = await Sandbox.start(policy_for(scene, "workspace-write", "auto"))
    started.append(sandbox)
    (scene.ws / "src" / "page.txt").write_text("served\n")
    server = (
        f"{sys.executable} -c 'import http.server, functools; "
        'h = functools.partial(http.server.SimpleHTTPRequestHandler, directory="src"); '
        's = http.server.HTTPServer(("127.0.0.1", 8766), h); open("src/listening", "w").close(); '
        "s.handle_request()'"
    )
    env = command_env(scene)
    background = asyncio.ensure_future(run(sandbox, server, cwd=scene.ws, env=env))
    for _ in range(100):
        if (scene.ws / "src" / "listening").exists():
            break
        await asyncio.sleep(0.05)
    client = (
        f'{sys.executable} -c \'import os, urllib.request; assert os.environ["HTTP_PROXY"]; '
        'print(urllib.request.urlopen("http://127.0.0.1:8766/page.txt", timeout=10).read().decode(), end="")\''
    )
    status, output = await run(sandbox, client, cwd=scene.ws, env=env)
    assert (status, output) == (0, "served\n")
    assert (await background)[0] == 0
