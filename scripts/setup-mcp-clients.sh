#!/usr/bin/env bash
# Installs the official MCP clients that tests/it/mcp_clients.rs drives: the TypeScript SDKs
# (tests/mcp-clients/package-lock.json, npm ci) and the Python SDK (requirements.txt, every
# package pinned, into tests/mcp-clients/.venv). Does nothing for a side already installed from
# the current lock or requirements file, so runs after the first are offline. Exits non-zero
# when either side cannot be installed: the tests then skip themselves (and fail under CI=true).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../tests/mcp-clients"
log() { echo "setup-mcp-clients: $*" >&2; }
failed=0

# npm ci writes node_modules/.package-lock.json last; it is newer than the lock file it installed.
if [ -f node_modules/.package-lock.json ] && [ node_modules/.package-lock.json -nt package-lock.json ]; then
  :
elif ! command -v npm >/dev/null; then
  log "npm not found"
  failed=1
# --prefer-offline: npm's cache answers when it can.
elif ! npm ci --no-audit --no-fund --prefer-offline >&2; then
  log "npm ci failed"
  failed=1
fi

# The venv remembers the requirements it was made from.
if [ -x .venv/bin/python ] && cmp -s requirements.txt .venv/requirements.txt; then
  :
elif ! { python3 -m venv --clear .venv >&2 &&
  .venv/bin/pip install --quiet --disable-pip-version-check -r requirements.txt >&2; }; then
  log "could not install requirements.txt into tests/mcp-clients/.venv (needs python3 with venv)"
  failed=1
else
  cp requirements.txt .venv/requirements.txt
fi
exit "$failed"
