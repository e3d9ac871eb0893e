#!/usr/bin/env bash
# Applies ruff's safe fixes for the rules chosen in pyproject.toml ([tool.ruff]) to the whole tree, then lists what
# is left for a person (tests/test_lint.py fails until it is none). Run once after merging branches, from the
# repository root: bash tools/ruff_fix.sh. `ruff format` is not applied (pyproject.toml says why); FORMAT=1 applies
# it too.
set -euo pipefail
cd "$(dirname "$0")/.."
RUFF=${RUFF:-.venv/bin/ruff}
"$RUFF" check --fix . || true
if [[ "${FORMAT:-0}" == 1 ]]; then
    "$RUFF" format .
fi
echo "ruff_fix: left for a person:"
"$RUFF" check --statistics . && echo "ruff_fix: none"
