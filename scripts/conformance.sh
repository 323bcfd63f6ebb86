#!/usr/bin/env bash
# Runs Honcho's TypeScript SDK test suite, unchanged, against this server.
#
#   scripts/conformance.sh SDK_DIR        (make conformance HONCHO_SDK=SDK_DIR)
#
# SDK_DIR is the sdks/typescript folder of Honcho's repository (its src/ and __tests__/; the npm
# tarball of @honcho-ai/sdk ships neither). The README, "Honcho REST API", says how to get it.
# The folder is copied, never changed. bun comes from the npm registry into
# ~/.cache/honcho-graphql/bun; the SDK's dependencies are installed in the copy.
#
# A fresh database is made from DATABASE_URL's server (or the one scripts/setup-postgres.sh
# starts), the server is started on it (auth off, MiniLM embedder), each test file runs alone,
# and a line per file says how many tests passed and failed. Logs stay in the work folder.
#
# The chat tests need an LLM. CONFORMANCE_LLM=stub starts scripts/llm-stub.ts (an
# OpenAI-compatible stand-in, on CONFORMANCE_LLM_PORT) and points the server at it; otherwise the
# server gets whatever HONCHO_LLM* the caller exported (none: chat answers 503).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sdk="${1:-${HONCHO_SDK:-}}"
if [ -z "$sdk" ] || [ ! -d "$sdk/__tests__" ] || [ ! -d "$sdk/src" ]; then
  echo "usage: make conformance HONCHO_SDK=<honcho>/sdks/typescript (a folder with src/ and __tests__/)" >&2
  exit 2
fi
sdk="$(cd "$sdk" && pwd)"
port="${CONFORMANCE_PORT:-18599}"
work="$(mktemp -d "${TMPDIR:-/tmp}/honcho-conformance.XXXXXX")"
log() { echo "conformance: $*" >&2; }

bun_dir="$HOME/.cache/honcho-graphql/bun"
if [ ! -x "$bun_dir/node_modules/.bin/bun" ]; then
  mkdir -p "$bun_dir"
  (cd "$bun_dir" && npm install --no-audit --no-fund --prefer-offline bun@1 >&2)
fi
bun="$bun_dir/node_modules/.bin/bun"

cp -a "$sdk/." "$work/sdk"
(cd "$work/sdk" && "$bun" install >"$work/install.log" 2>&1) || {
  log "bun install failed; see $work/install.log"
  exit 1
}

if [ -z "${DATABASE_URL:-}" ]; then
  DATABASE_URL="$("$root/scripts/setup-postgres.sh")/postgres"
fi
server_url="${DATABASE_URL%/*}"
if [ "${CONFORMANCE_LLM:-}" = stub ]; then
  llm_port="${CONFORMANCE_LLM_PORT:-$((port + 1))}"
  "$bun" "$root/scripts/llm-stub.ts" "$llm_port" >"$work/llm-stub.log" 2>&1 &
  stub_pid=$!
  export HONCHO_LLM=openai HONCHO_LLM_BASE_URL="http://127.0.0.1:$llm_port/v1" HONCHO_LLM_MODEL=stub
fi
db="honcho_conformance_$$"
psql "$server_url/postgres" -Xqc "create database $db"
cleanup() {
  [ -n "${server_pid:-}" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  [ -n "${stub_pid:-}" ] && kill "$stub_pid" 2>/dev/null
  psql "$server_url/postgres" -Xqc "drop database if exists $db with (force)" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# A dev build: the suite checks behaviour, not speed (the embedder is optimised in dev builds too).
cargo build --bin honcho-graphql >&2
DATABASE_URL="$server_url/$db" HONCHO_LISTEN="127.0.0.1:$port" \
  HONCHO_MODEL_DIR="${HONCHO_MODEL_DIR:-$root/.data/models/all-MiniLM-L6-v2}" \
  "${CARGO_TARGET_DIR:-$root/target}/debug/honcho-graphql" serve >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 120); do
  curl -fs "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  sleep 0.5
done
curl -fs "http://127.0.0.1:$port/health" >/dev/null || {
  log "the server did not start; see $work/server.log"
  exit 1
}

total_pass=0
total_fail=0
for file in "$work"/sdk/__tests__/*.test.ts; do
  name="$(basename "$file")"
  out="$work/${name%.test.ts}.log"
  (cd "$work/sdk" && HONCHO_TEST_URL="http://127.0.0.1:$port" HONCHO_TEST_API_KEY="conformance" \
    timeout 600 "$bun" test "__tests__/$name" >"$out" 2>&1) || true
  pass=$(grep -Eo '^ *[0-9]+ pass' "$out" | grep -Eo '[0-9]+' | tail -1 || true)
  fail=$(grep -Eo '^ *[0-9]+ fail' "$out" | grep -Eo '[0-9]+' | tail -1 || true)
  pass=${pass:-0}
  fail=${fail:-0}
  total_pass=$((total_pass + pass))
  total_fail=$((total_fail + fail))
  printf '%-28s %4d passed, %4d failed\n' "$name" "$pass" "$fail"
done
echo "conformance: $total_pass passed, $total_fail failed (logs in $work)"
