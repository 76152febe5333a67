import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parent.parent / "wordcount.py"


def run(*args: str) -> str:
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=True)
    return done.stdout


def test_counts_lines(tmp_path: Path) -> None:
    sample = tmp_path / "sample.txt"
    sample.write_text("one two\nthree\n\nfour five six\n")
    assert run(str(sample)) == "4\n"
