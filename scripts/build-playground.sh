#!/usr/bin/env bash
# Build the browser playground (playground/dist) with npm. The Makefile decides whether it is stale;
# this script only makes sure npm exists and runs the build reproducibly.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO/playground"
export DEBIAN_FRONTEND=noninteractive
log() { echo "build-playground: $*" >&2; }

if ! command -v npm >/dev/null; then
  [ "$(id -u)" = 0 ] || { log "ERROR: npm missing; install Node.js and npm"; exit 1; }
  log "npm missing; installing nodejs and npm from apt"
  apt-get update -q && apt-get install -y -q --no-install-recommends nodejs npm
fi

# npm ci installs exactly the lock file; without one (early days) fall back to npm install.
if [ -f package-lock.json ]; then npm ci --no-audit --no-fund --prefer-offline; else npm install --no-audit --no-fund; fi
npm run build
[ -f dist/index.html ] || { log "ERROR: npm run build produced no dist/index.html"; exit 1; }
# Bundlers may keep an unchanged file's old mtime; make compares against it.
touch dist/index.html
