#!/usr/bin/env bash
# Kept for old callers: runs equinox's own suite through compat/run_suite.py.
#   compat/run_equinox_suite.sh [--subset] [--jit] [TEST_FILE...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
case "$python" in /*) ;; *) python="$root/$python" ;; esac
exec "$python" "$root/compat/run_suite.py" equinox "$@"
