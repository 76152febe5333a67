"""The local model's native libraries must not depend on the machine that built them (CI runs on any
x86-64 kind; a `-march=native` build on a Xeon with AVX-512 + AMX segfaulted in llama_decode there, and
pip's wheel cache can carry a build to another machine). scripts/setup-local-model.sh builds for a fixed
x86-64-v3 set: this checks the installed libraries hold no AVX-512 (zmm, k-mask) or AMX (tile)
instructions. Skips where llama-cpp-python or objdump is missing (CI has both)."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

# Operands only AVX-512 (zmm registers, opmask registers) or AMX (tile registers, tile instructions) use.
_BEYOND_V3 = re.compile(r"%zmm\d|%k[1-7]\b|%tmm\d|\b(?:tdpb\w+|tileloadd\w*|ldtilecfg)\b")


def _libraries() -> list[Path]:
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        pytest.skip("llama-cpp-python is not installed: run scripts/setup-local-model.sh")
    libs = sorted((Path(spec.origin).parent / "lib").glob("*.so"))
    assert libs, "llama-cpp-python is installed without its native libraries"
    return libs


def test_the_local_model_build_uses_no_instructions_beyond_x86_64_v3() -> None:
    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.skip("objdump (binutils) is not installed")
    for lib in _libraries():
        listing = subprocess.run(
            [objdump, "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True, check=True
        ).stdout
        found = [line.strip() for line in listing.splitlines() if "\t" in line and _BEYOND_V3.search(line)]
        assert not found, f"{lib.name} was built for this CPU ({len(found)} such instructions): {found[:3]}"
