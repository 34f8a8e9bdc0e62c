#!/usr/bin/env bash
# Builds the documentation site with `mkdocs build --strict` (broken links, missing
# pages and unresolved API references fail) into a temporary directory.
# Needs no network at build time; installs the `docs` extra into .venv if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
# mkdocs-material prints a notice about its end of life on every `mkdocs` run
# unless this is set (the README says so too); the build has no other output.
export JAX_PLATFORMS=cpu NO_MKDOCS_2_WARNING=1

if [ ! -x .venv/bin/mkdocs ]; then
    .venv/bin/pip install -e '.[docs]'
fi
site="$(mktemp -d)"
trap 'rm -rf "$site"' EXIT
.venv/bin/mkdocs build --strict --site-dir "$site"
echo "docs: strict build passed"
