"""Saving a kept sandbox widening into config.json (host/config_save.py): the file's other keys
survive, shapes that cannot take the entries leave the file untouched, the write is atomic and keeps
the permission bits, and daemons saving at once both land."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_daemon.host.config_save import ConfigSaveError, save_sandbox_widening
from dsh_daemon.host.options import parse_options


def read(state: Path) -> dict[str, object]:
    return dict(json.loads((state / "config.json").read_text()))


def test_a_new_file_is_made_for_its_owner_only(tmp_path: Path) -> None:
    state = tmp_path / "state"
    save_sandbox_widening(state, ["/data/cache"], ["pypi.org"])
    assert read(state) == {
        "tools": {"sandbox": {"writable": ["/data/cache"], "network": {"allow": ["pypi.org"]}}}
    }
    assert stat.S_IMODE((state / "config.json").stat().st_mode) == 0o600
    # What the daemon reads back is the widening.
    options = parse_options(state, {}, {}, {}, what="options")
    assert options.tools.sandbox.writable == ("/data/cache",)
    assert options.tools.sandbox.network_allow == ("pypi.org",)
    assert options.file_problems == ()


def test_entries_are_added_once_and_a_bare_mode_is_kept(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"tools": {"sandbox": "read-only"}, "zzz": 1}))
    save_sandbox_widening(tmp_path, ["/a", "/b"], [])
    save_sandbox_widening(tmp_path, ["/b", "/c"], ["x.org"])
    saved = read(tmp_path)
    assert list(saved) == ["tools", "zzz"]  # the order of the keys too
    assert saved["tools"] == {
        "sandbox": {"mode": "read-only", "writable": ["/a", "/b", "/c"], "network": {"allow": ["x.org"]}}
    }


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"[1, 2]",
        b'{"tools": []}',
        b'{"tools": {"sandbox": 7}}',
        b'{"tools": {"sandbox": {"writable": "/one/path"}}}',
        b'{"tools": {"sandbox": {"network": ["pypi.org"]}}}',
        b'{"tools": {"sandbox": {"network": {"allow": "pypi.org"}}}}',
        b'{"tools": {"sandbox": {"writable": ["relative/path"]}}}',
        b'{"tools": {"sandbox": {"mode": "everything"}}}',
    ],
)
def test_a_file_that_cannot_take_the_widening_is_left_as_it_is(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "config.json").write_bytes(content)
    with pytest.raises(ConfigSaveError, match=r"config\.json"):
        save_sandbox_widening(tmp_path, ["/a"], ["pypi.org"])
    assert (tmp_path / "config.json").read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]  # no temp file left


SAVER = """
import sys
from pathlib import Path
from dsh_daemon.host.config_save import save_sandbox_widening
state, who = Path(sys.argv[1]), sys.argv[2]
for i in range(25):
    save_sandbox_widening(state, [f"/{who}/{i}"], [f"{who}{i}.example.org"])
"""


def test_daemons_saving_at_once_both_land(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model": "deepseek-chat"}))
    savers = [
        subprocess.Popen([sys.executable, "-c", SAVER, str(tmp_path), who], cwd=Path(__file__).parents[2])
        for who in ("a", "b")
    ]
    assert [p.wait(60) for p in savers] == [0, 0]
    saved = read(tmp_path)
    sandbox = saved["tools"]["sandbox"]  # type: ignore[index]
    assert sorted(sandbox["writable"]) == sorted(f"/{w}/{i}" for w in "ab" for i in range(25))
    assert len(sandbox["network"]["allow"]) == 50 and saved["model"] == "deepseek-chat"
