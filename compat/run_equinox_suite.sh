#!/usr/bin/env bash
# Run equinox's own test suite twice, with plain eqx.Module and with `equinox.Module`
# swapped for `arrayfield.ArrayModule`, and print every test whose outcome differs.
#
#   compat/run_equinox_suite.sh [--subset] [--jit] [TEST_FILE...]
#
# --jit swaps `equinox.filter_jit` for `arrayfield.filter_jit` instead (the plugin
# compat/swap_filter_jit.py), with its own list of expected differences,
# compat/expected_differences_jit.txt.
#
# The suite is data, not part of this repository: it is looked for in
# $EQUINOX_TESTS, else in ../shared/compat/equinox-v0.13.8 beside the repository
# (with the swap plugin `swap_module.py` in its parent folder). $PYTHON (default
# .venv/bin/python) needs arrayfield, equinox 0.13.8, pytest, beartype, optax, tqdm.
#
# --subset runs the files where a swap once made a difference, or (with --jit)
# those that exercise eqx.filter_jit most: what CI runs.
# Differences listed in compat/expected_differences.txt are reported with their
# reason; any other difference makes the script exit 1.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
suite="${EQUINOX_TESTS:-$root/../shared/compat/equinox-v0.13.8}"
python="${PYTHON:-$root/.venv/bin/python}"
case "$python" in /*) ;; *) python="$root/$python" ;; esac
if [ ! -d "$suite/tests" ]; then
  echo "equinox's test suite not found at $suite (set EQUINOX_TESTS): not run" >&2
  exit 0
fi
suite="$(cd "$suite" && pwd)"

subset=0
plugin=swap_module
expected="$root/compat/expected_differences.txt"
files=()
for arg in "$@"; do
  case "$arg" in
    --subset) subset=1 ;;
    --jit)
      plugin=swap_filter_jit
      expected="$root/compat/expected_differences_jit.txt"
      ;;
    *) files+=("$arg") ;;
  esac
done
if [ "${#files[@]}" -eq 0 ]; then
  if [ "$subset" -eq 1 ] && [ "$plugin" = swap_filter_jit ]; then
    # The files that call eqx.filter_jit most, and its error and callback tests.
    files=(tests/test_jit.py tests/test_errors.py tests/test_ad.py
           tests/test_noinline.py tests/test_debug.py tests/test_callback.py)
  elif [ "$subset" -eq 1 ]; then
    files=(tests/test_jit.py tests/test_vmap.py tests/test_pmap.py
           tests/test_module.py "tests/test_while_loop.py::-k unperturbed")
  else
    files=()
    for f in "$suite"/tests/test_*.py; do files+=("tests/$(basename "$f")"); done
  fi
fi

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
export JAX_PLATFORMS=cpu
export PYTHONPATH="$suite/..:$root/compat${PYTHONPATH:+:$PYTHONPATH}"
for mode in plain swapped; do
  swap=$([ "$mode" = swapped ] && echo 1 || echo 0)
  for spec in "${files[@]}"; do
    file="${spec%%::*}"
    extra=()
    [ "$spec" != "$file" ] && read -r -a extra <<< "${spec#*::}"
    name="$(basename "$file" .py)"
    echo "== $mode: $file ${extra[*]:-}"
    # One pytest process per file: some files leave JAX state behind.
    (cd "$suite" && ARRAYFIELD_SWAP=$swap "$python" -m pytest -p "$plugin" \
      -p no:cacheprovider -q --no-header -rN "$file" "${extra[@]}" \
      --junitxml="$out/$mode-$name.xml" >"$out/$mode-$name.log" 2>&1) || true
    grep -h "^\[swap_filter_jit\] programs" "$out/$mode-$name.log" || true
    tail -n 1 "$out/$mode-$name.log"
  done
done
"$python" "$root/compat/compare_outcomes.py" "$out" "$expected"
