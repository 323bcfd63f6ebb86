#!/usr/bin/env bash
# Installs Honcho's Python SDK (honcho-ai, pinned) from PyPI into tests/python/.venv for the
# quick-start test. Does nothing when it is installed already. Exits non-zero when it cannot
# install: the test then skips itself (and fails under CI=true).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../tests/python"
version="2.7.0"
if [ -x .venv/bin/python ] && .venv/bin/python -c "import honcho, sys; from importlib.metadata import version; sys.exit(version('honcho-ai') != '$version')" 2>/dev/null; then
  exit 0
fi
python3 -m venv .venv >&2
.venv/bin/pip install --quiet "honcho-ai==$version" >&2
