"""The red team's table (tests/sandbox/probes.py) sent through `run_command` by a scripted model over the
real wire, in both confined modes, with both layers and with layer 0 alone: 0 escapes. The daemon's
own home, store (DSH_HOME, holding a secret the person typed), API key and pid are the scene's."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.sandbox.level import probe_level
from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.sandbox.probes import TABLE, Probe
from tests.sandbox.scene import API_KEY_NAME, Scene
from tests.server.harness import start_daemon, stop_daemon, text_reply, tool_call_stream
from tests.server.test_sandbox_wire import text

pytestmark = [
    pytest.mark.skipif(not probe_level().confined, reason=probe_level().describe()),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only"),
]
MATRIX = [
    pytest.param(
        "workspace-write",
        "auto",
        marks=pytest.mark.skipif(not probe_level().namespaces, reason=probe_level().describe()),
        id="workspace-write-layers01",
    ),
    pytest.param("workspace-write", "landlock-only", id="workspace-write-layer0"),
    pytest.param(
        "read-only",
        "auto",
        marks=pytest.mark.skipif(not probe_level().namespaces, reason=probe_level().describe()),
        id="read-only-layers01",
    ),
    pytest.param("read-only", "landlock-only", id="read-only-layer0"),
]


@pytest.mark.parametrize(("mode", "layers"), MATRIX)
async def test_no_probe_escapes_through_run_command(
    tmp_path: Path, fake: FakeDeepSeek, mode: str, layers: str
) -> None:
    scene = Scene.build(tmp_path / "scene")
    # The daemon's store is the scene's DSH_HOME: its real database, holding the token a prompt carries.
    (scene.dsh_home / "sessions.db").unlink()
    probes: list[Probe] = [p for p in TABLE if mode in p.modes]
    assert len(probes) >= 40
    env = {"HOME": str(scene.home), API_KEY_NAME: scene.api_key, "DSH_SANDBOX_LAYERS": layers}
    options: dict[str, Any] = {"thinking": False, "tools": {"sandbox": mode}}
    d = await start_daemon(scene.dsh_home, fake, root=scene.ws, init_options=options, env=env)
    try:
        server = d.client._server
        assert server is not None
        scene.values["daemon_pid"] = server.pid
        sid = await d.new_session(cwd=str(scene.ws))
        replies = [
            Reply.stream(tool_call_stream([(f"p{i}", "run_command", {"command": scene.render(p.script)})]))
            for i, p in enumerate(probes)
        ]
        fake.script(*replies, text_reply("done"))
        prompt = f"run the probes; remember {scene.tokens['dsh-home']}"
        done = len(d.of(sid, "turn/end"))
        await d.request("dsh/followup", {"sessionId": sid, "message": {"content": prompt}})
        await d.wait_idle_turn(sid, done + 1)
        results = d.of(sid, "tool/result")
        assert len(results) == len(probes)
        assert d.permission_requests == []  # confined: nobody was asked
        # Late probes act after their command returned; then every probe is judged on what it printed
        # and on the scene as it is now (the listeners' hits accumulate: a hit fails its probes).
        await asyncio.sleep(max((p.settle for p in probes), default=0) + 0.1)
        escapes: dict[str, str] = {}
        for probe, result in zip(probes, results, strict=True):
            output = text(result["data"]["message"])
            if probe.escaped(scene, output):
                escapes[probe.name] = output[-300:]
        assert escapes == {}, f"{len(escapes)} of {len(probes)} probes escaped in {mode}/{layers}: {escapes}"
        status = d.of(sid, "sandbox/status")[-1]["data"]
        assert status["confined"] is True and status["mode"] == mode
        assert ("namespaces" in status["level"].split(";")[0]) == (layers == "auto")
    finally:
        await stop_daemon(d)
        scene.close()
