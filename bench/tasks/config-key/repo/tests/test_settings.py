import json
from pathlib import Path

import pytest

from settings import Settings, SettingsError, load_settings


def write(tmp_path: Path, value: object) -> Path:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(value))
    return path


def test_defaults(tmp_path: Path) -> None:
    assert load_settings(write(tmp_path, {})) == Settings()


def test_values(tmp_path: Path) -> None:
    assert load_settings(write(tmp_path, {"host": "0.0.0.0", "port": 9000})) == Settings("0.0.0.0", 9000)


@pytest.mark.parametrize("bad", [{"port": 0}, {"port": "80"}, {"host": ""}, {"colour": "red"}, []])
def test_bad(tmp_path: Path, bad: object) -> None:
    with pytest.raises(SettingsError):
        load_settings(write(tmp_path, bad))
