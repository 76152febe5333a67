"""A protected path beside thousands of entries: Landlock grants each sibling by name, so the fork
server's rules grow past the default socket send buffer (~208 KiB). They used to fail to send as
"Message too long" (seen with a crowded /tmp); they must reach the fork server, which confines."""

from __future__ import annotations

import os
from pathlib import Path

from dsh_daemon.sandbox import Sandbox, SandboxPolicy
from tests.sandbox.conftest import needs_layer0


@needs_layer0
async def test_rules_naming_thousands_of_entries_reach_the_fork_server(tmp_path: Path) -> None:
    for i in range(6000):
        os.mkdir(tmp_path / f"an-entry-beside-the-protected-home-{i:05d}")
    for name in ("home/.ssh", "ws", "temp", "dsh"):
        (tmp_path / name).mkdir(parents=True)
    policy = SandboxPolicy(
        mode="workspace-write",
        roots=(tmp_path / "ws",),
        temp_dir=tmp_path / "temp",
        layers="landlock-only",
        home=tmp_path / "home",
        dsh_home=tmp_path / "dsh",
    )
    sandbox = await Sandbox.start(policy)
    await sandbox.aclose()
