#!/usr/bin/env bash
# Installs the official TypeScript ACP SDK (npm @agentclientprotocol/sdk, pinned in
# tests/acp/ts/package-lock.json) for tests/acp/test_ts_sdk.py: a scripted session of the SDK's
# client against `dsh-daemon acp`, every agent message checked against the SDK's zod schemas.
# Idempotent: skipped when the lock file's packages are already installed.
set -euo pipefail
cd "$(dirname "$0")/../tests/acp/ts"
lock_hash=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat node_modules/.dsh-lock-hash 2>/dev/null || true)" != "$lock_hash" ]; then
  npm ci --no-audit --no-fund
  echo "$lock_hash" > node_modules/.dsh-lock-hash
fi
