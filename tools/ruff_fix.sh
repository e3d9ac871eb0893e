#!/usr/bin/env bash
# Formats the whole tree with ruff and applies ruff's safe fixes for the rules chosen in pyproject.toml
# ([tool.ruff]), then lists what is left for a person (tests/test_lint.py fails until it is none). From the
# repository root: bash tools/ruff_fix.sh (or make lint-fix).
set -euo pipefail
cd "$(dirname "$0")/.."
RUFF=${RUFF:-.venv/bin/ruff}
"$RUFF" format .
"$RUFF" check --fix . || true
echo "ruff_fix: left for a person:"
"$RUFF" check --statistics . && echo "ruff_fix: none"
