#!/usr/bin/env bash
# The GPU check on a bare GPU machine (docs/preflight.md): install the carried wheels, then run one call of the GPU
# check's tests (the `device` marker: tests/devices.py) with pytest, their rows and report into OUT.
#
#   tools/gpu_check.sh OUT --call 1      # the goals' numbers: the training steps of the equal-FLOPs pairs and
#                                        # TransNeXt-T/Swin-T eager, DeiT-S through the engine eager and compiled,
#                                        # then the pairs compiled with CUDA graphs
#   tools/gpu_check.sh OUT --call 2      # the rest: the device pipeline in a training epoch, host syncs on both
#                                        # engines, preflight, the engine's preempt/resume on the device, compiled
#                                        # models, bench, models and TransNeXt against float64
#   tools/gpu_check.sh OUT --device cpu  # every CPU variant at tiny sizes (what CI runs), here or anywhere
#   tools/gpu_check.sh OUT --call 2 --device-left SECONDS   # call 2's tests' budget cut to fit the device time left
#
# The GPU machine gives 15 minutes in all, start-up included. Call 1's tests get a budget of 380 s and call 2's 320 s
# (each test's time limit is cut to what is left, less the 200 s call 1 keeps for the compiled pairs, none starts
# with under 20 s of that, the engine's compiled step under 60 s): with the machine's start (~30 s), each call's
# wheels install and pytest start (~15 s) and the pause between them, the two, made back to back (the machine stays
# warm 30 s), hold it ~13 minutes; the 29 Nov 2026 GPU session sized them (docs/preflight.md). Call 2 takes
# --device-left, the device time call 1's reply says is left (its lease's budget_left_s: a slow start, say), and cuts
# its budget to fit. Later pytest options win (-m, -k, --gpu-check-budget).
# TransNeXt's swattention kernels, where that extension is built:
# tools/gpu_check.sh OUT -m "device(kind='cuda', alone=True)" -k swattention.
#
# Wheels in .whl/ (tools/gpu_wheels.sh made them here: pytest, timm, mmengine, DeepSpeed and what they need) are
# installed with no index into a folder of their own that comes first on PYTHONPATH; the machine's own packages stay
# as they are. OUT gets rows.jsonl (every measurement, appended and flushed as it is made), report.json and report.md
# (at the end), the files some parts write (bench.csv, preflight.json/txt) and log.txt (pytest's output).
# The exit code is pytest's: 0 when every selected test passed or was skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
USAGE="usage: tools/gpu_check.sh OUT --call 1|2 [--device-left SECONDS], or OUT --device cpu"
OUT=${1:?$USAGE}
shift
DEVICE=cuda CALL= DEVICE_LEFT=
while [[ "${1:-}" =~ ^--(device|call|device-left)$ ]]; do
    case "$1" in
        --device) DEVICE=${2:?--device cpu or cuda}; shift ;;
        --call) CALL=${2:?--call 1 or 2}; shift ;;
        --device-left) DEVICE_LEFT=${2:?--device-left SECONDS: the budget_left_s call 1 left}; shift ;;
    esac
    shift
done
# a call's seconds outside its tests' budget, which the device tool's timeout_s holds besides it (tests/devices.py:
# CALL_START_S, CALL_END_S), and the least any test starts with (MIN_START_S)
CALL_START_S=15 CALL_END_S=25 MIN_START_S=20
# device time a call spends outside its command: the transfers (~10 s) and the pause before the call (at most 30 s:
# the machine stays warm 30 s after a call; later, call 2 would need a fresh start)
DEVICE_MARGIN_S=40
case "$DEVICE:$CALL" in
    cuda:1|cuda:2) SELECT=(-m "device(kind='cuda', call=$CALL) and not device(alone=True)")
                   BUDGETS=([1]=380 [2]=320)
                   BUDGET=${BUDGETS[$CALL]}
                   export DS_ACCELERATOR=cuda ;;
    cpu:) SELECT=(-m "device(kind='cpu')") LIMIT=() ;;
    *) echo "gpu_check.sh: give --call 1 or --call 2 on CUDA, or --device cpu" \
            "(not --device $DEVICE${CALL:+ --call $CALL})" >&2
       exit 2 ;;
esac
if [[ -n $DEVICE_LEFT ]]; then  # the device time call 1's reply said was left: the tests' budget cut to fit it
    if [[ -z $CALL || ! $DEVICE_LEFT =~ ^[0-9]+(\.[0-9]*)?$ ]]; then
        echo "gpu_check.sh: --device-left $DEVICE_LEFT${CALL:+ with --call $CALL}: give it a CUDA call (--call 1|2)" \
             "and the budget_left_s of the last call's reply, in seconds" >&2
        exit 2
    fi
    FITS=$(( ${DEVICE_LEFT%%.*} - DEVICE_MARGIN_S - CALL_START_S - CALL_END_S ))
    if (( FITS < MIN_START_S )); then
        echo "gpu_check.sh: --device-left $DEVICE_LEFT: too little device time left for call $CALL: $FITS s for" \
             "its tests (less $DEVICE_MARGIN_S s for transfers and the pause before the call, $CALL_START_S s" \
             "before and $CALL_END_S s after them)," \
             "under the $MIN_START_S s a test needs to start; give_back() and run call $CALL in a later session" >&2
        exit 2
    fi
    (( FITS < BUDGET )) && BUDGET=$FITS
fi
if [[ $DEVICE == cuda ]]; then
    LIMIT=(--gpu-check-budget "$BUDGET")
    echo "gpu_check.sh: call $CALL: the tests' budget $BUDGET s;" \
         "the device tool's timeout_s=$(( CALL_START_S + BUDGET + CALL_END_S ))"
fi
if compgen -G ".whl/*.whl" >/dev/null; then
    SITE=${DEPTHBENCH_WHEEL_SITE:-/tmp/depthbench-site}
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
        || { echo "gpu_check.sh: installing .whl/*.whl failed; the tests that need them will say so" >&2; }
    export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
# the GPU check's tests: its own file, and the engine's preempt/resume tests that also run on the device
# (tests/devices.py, GPU_CHECK_FILES)
"$PYTHON" -m pytest -p no:cacheprovider -p no:randomly -p no:xdist -rs "${LIMIT[@]}" --gpu-check-out "$OUT" \
    "${SELECT[@]}" tests/tools/test_gpu_check.py tests/harness/engine/test_runner.py \
    tests/harness/commands/test_train.py "$@" 2>&1 | tee "$OUT/log.txt"
exit "${PIPESTATUS[0]}"
