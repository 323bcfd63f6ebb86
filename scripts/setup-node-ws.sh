#!/usr/bin/env bash
# Installs the npm clients tests/it runs under Node (graphql-ws, the graphql-http audit, urql),
# exactly the lock file, into tests/node-ws/node_modules. Does nothing when it is installed and the lock file
# has not changed since, so runs after the first are offline. Without npm, or when the install
# fails, it says so and exits 0: the test then skips itself.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../tests/node-ws"
log() { echo "setup-node-ws: $*" >&2; }
if ! command -v npm >/dev/null; then
  log "npm not found; the Node graphql-ws client test will be skipped"
  exit 0
fi
# npm ci writes node_modules/.package-lock.json last; it is newer than the lock file it installed.
if [ -f node_modules/.package-lock.json ] && [ node_modules/.package-lock.json -nt package-lock.json ]; then
  exit 0
fi
# --prefer-offline: npm's cache answers when it can, so a fresh clone installs without the network
# once this machine has installed it before. A failed install does not fail `make test`: the test
# says SKIPPED instead.
if ! npm ci --no-audit --no-fund --prefer-offline >&2; then
  log "WARNING: npm ci failed; the Node graphql-ws client test will be skipped"
fi
