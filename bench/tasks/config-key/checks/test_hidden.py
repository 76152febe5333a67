"""Hidden checks: timeout_s is read, defaulted and validated; the other keys still work; tests were added."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from settings import Settings, SettingsError, load_settings


def write(tmp_path: Path, value: object) -> Path:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(value))
    return path


def test_default_and_value(tmp_path: Path) -> None:
    assert load_settings(write(tmp_path, {})).timeout_s == 30.0
    loaded = load_settings(write(tmp_path, {"timeout_s": 5}))
    assert loaded.timeout_s == 5.0 and isinstance(loaded.timeout_s, float)
    assert load_settings(write(tmp_path, {"timeout_s": 0.25, "port": 81})) == Settings(
        port=81, timeout_s=0.25
    )


@pytest.mark.parametrize("bad", [0, -1, "30", True, None, [1]])
def test_bad_timeouts(tmp_path: Path, bad: object) -> None:
    with pytest.raises(SettingsError, match="timeout_s"):
        load_settings(write(tmp_path, {"timeout_s": bad}))


def test_other_keys_unchanged(tmp_path: Path) -> None:
    for bad in ({"port": 0}, {"host": ""}, {"colour": "red"}):
        with pytest.raises(SettingsError):
            load_settings(write(tmp_path, bad))


def test_tests_were_added() -> None:
    assert "timeout_s" in Path("tests/test_settings.py").read_text()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-2000:]
