"""Hidden checks: the script copies names with spaces (and other odd characters) and counts right."""

import subprocess
from pathlib import Path

NAMES = ["plain.txt", "my notes.txt", "two  spaces.txt", "star*.txt", "-dash.txt"]


def backup(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "scripts/backup.sh", str(folder)], capture_output=True, text=True)


def test_odd_names(tmp_path: Path) -> None:
    folder = tmp_path / "my docs"
    folder.mkdir()
    for name in NAMES:
        (folder / name).write_text(f"content of {name}\n")
    (folder / "image.png").write_bytes(b"\x89PNG")
    done = backup(folder)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "backed up 5 files"
    copied = sorted(p.name for p in (folder / "backup").iterdir())
    assert copied == sorted(f"{name}.bak" for name in NAMES)
    for name in NAMES:
        assert (folder / "backup" / f"{name}.bak").read_text() == f"content of {name}\n"


def test_an_empty_folder(tmp_path: Path) -> None:
    done = backup(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "backed up 0 files"
