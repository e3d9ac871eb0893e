#!/usr/bin/env bash
# The GPU check on a bare GPU machine (docs/preflight.md): install the carried wheels, then run tools/gpu_check.py.
#
#   tools/gpu_check.sh [OUT] [gpu_check.py options]      # e.g. tools/gpu_check.sh $OUT   (default folder: gpu-check)
#
# Wheels in .whl/ (tools/gpu_wheels.sh made them here: mmengine, DeepSpeed and what they need) are installed with no
# index into a folder of their own that comes first on PYTHONPATH; the machine's own packages stay as they are.
# Its exit code is the check's: 0 when no part failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${1:-gpu-check}
shift || true
if compgen -G ".whl/*.whl" >/dev/null; then
    SITE=${DEPTHBENCH_WHEEL_SITE:-/tmp/depthbench-site}
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
        || { echo "gpu_check.sh: installing .whl/*.whl failed; the parts that need them will say so" >&2; }
    export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
exec "$PYTHON" tools/gpu_check.py --out "$OUT" "$@"
