#!/bin/bash
# The changed test files' CPU on main's code (BASE) and on this branch (HEAD), each file alone in one pytest
# process, interleaved, under file_cpu.py (which also counts the orphaned ranks and forks that `time` misses):
#   benchmarks/results/cpu-2026-11-28-suite-sharing/measure.sh [BASE [FILES...]]   (from the repository root)
# BASE defaults to a0e5948 (main when this branch started). Prints and appends to OUT/cpu.log.
set -u
repo=$(pwd); here=$(cd "$(dirname "$0")" && pwd)
base=${1:-a0e5948}; shift || true
files=("$@"); [ ${#files[@]} -gt 0 ] || files=(tests/harness/engine/test_train.py
  tests/downstream/test_trust_downstream.py tests/harness/core/test_trust.py tests/harness/tasks/test_shards.py)
out=$(mktemp -d /tmp/suite-sharing-XXXX); mkdir -p "$out/before" "$out/after"
git -C "$repo" archive "$base" | tar -x -C "$out/before"; git -C "$repo" archive HEAD | tar -x -C "$out/after"
for tree in before after; do ln -s "$(readlink -f "$repo/.venv")" "$out/$tree/.venv"; done
for f in "${files[@]}"; do
  for tree in before after; do
    (cd "$out/$tree" && OMP_NUM_THREADS=1 PYTHONPATH="$out/$tree" FILE_CPU_LOG="$out/cpu.log" \
      .venv/bin/python "$here/file_cpu.py" "$tree $f" -- .venv/bin/python -m pytest -q -p no:randomly \
      -p no:cacheprovider "$f" > "$out/$tree-$(basename "$f" .py).log" 2>&1)
  done
done
cat "$out/cpu.log"
