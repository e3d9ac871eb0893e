#!/usr/bin/env bash
# The GPU check on a bare GPU machine (docs/preflight.md): install the carried wheels, then run the GPU check's tests
# (the `device` marker: tests/devices.py) with pytest, their report into OUT.
#
#   tools/gpu_check.sh [OUT] [--device cpu] [pytest options]   # e.g. tools/gpu_check.sh $OUT   (default OUT: gpu-check)
#
# On CUDA (the default) the CUDA variants at the papers' sizes, within pytest-timeout's limits: each test's from
# tests/devices.py and 360 s for the session (no test starts after it), so the run ends within 8 minutes; the tests
# marked `alone` are left out: run the compiled step timings with
#   tools/gpu_check.sh OUT -m "device(kind='cuda', alone=True)" -k "not swattention" --session-timeout 590
# and, where TransNeXt's swattention extension is built, its kernels with -k swattention instead
# `--device cpu`: the CPU variants at tiny sizes (what CI runs), here or anywhere. Later pytest options win (-m, -k).
#
# Wheels in .whl/ (tools/gpu_wheels.sh made them here: pytest, mmengine, DeepSpeed and what they need) are installed
# with no index into a folder of their own that comes first on PYTHONPATH; the machine's own packages stay as they
# are. OUT gets report.json, report.md, bench.csv, preflight.json, preflight.txt and log.txt (pytest's output).
# The exit code is pytest's: 0 when every selected test passed or was skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${1:-gpu-check}
shift || true
DEVICE=cuda
if [[ "${1:-}" == "--device" ]]; then DEVICE=${2:?--device cpu or cuda}; shift 2; fi
case "$DEVICE" in
    cuda) LIMIT=(--session-timeout 360) ;;
    cpu) LIMIT=() ;;
    *) echo "gpu_check.sh: --device cpu or cuda, not $DEVICE" >&2; exit 2 ;;
esac
if compgen -G ".whl/*.whl" >/dev/null; then
    SITE=${DEPTHBENCH_WHEEL_SITE:-/tmp/depthbench-site}
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
        || { echo "gpu_check.sh: installing .whl/*.whl failed; the tests that need them will say so" >&2; }
    export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
# the GPU check's tests: its own file, and the engine's preempt/resume tests that also run on the device
"$PYTHON" -m pytest -p no:cacheprovider -p no:randomly -p no:xdist -rs "${LIMIT[@]}" --gpu-check-out "$OUT" \
    -m "device(kind='$DEVICE') and not device(alone=True)" \
    tests/tools/test_gpu_check.py tests/harness/engine/test_train.py tests/harness/engine/test_engine_options.py "$@" 2>&1 | tee "$OUT/log.txt"
exit "${PIPESTATUS[0]}"
