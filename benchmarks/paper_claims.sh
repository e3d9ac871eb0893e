#!/usr/bin/env bash
# The papers' speed claims on this machine: every `depthbench bench --pairs` preset, interleaved, on CPU.
#
#     bash benchmarks/paper_claims.sh [OUTDIR] [GROUP...]      # default OUTDIR benchmarks/results/<host>-<date>
#
# Writes OUTDIR/<group>.csv (timm's benchmark columns + spread, MFU, peak memory) and <group>_pairs.csv (ratios
# beside the papers' claims) and a log. One intra-op thread, pinned: on a shared machine one thread per process
# keeps the interleaved ratios steady (docs/benchmarks.md). Each group is a separate run; a failing group is
# reported and the others still run. GROUPs: equal-flops transnext horesnet sret mfu64 pool-mode depth accuracy.
set -u
cd "$(dirname "$0")/.."
OUT=${1:-benchmarks/results/$(hostname)-$(date -u +%F)}
shift || true
GROUPS_TO_RUN=${*:-equal-flops transnext horesnet sret mfu64}
mkdir -p "$OUT"
BENCH=(.venv/bin/depthbench bench --threads "${THREADS:-1}")
B8=(--batch-size 8 --repeats 5 --iters 1 --warmup 1)
status=0
run() {  # name, then bench arguments
    local name=$1; shift
    echo "== $name: depthbench bench $* ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$OUT/log.txt"
    "${BENCH[@]}" "$@" --out "$OUT/$name.csv" 2>&1 | grep --line-buffered -v "WARNING\|real_accelerator" | tee -a "$OUT/log.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "== $name FAILED" | tee -a "$OUT/log.txt"; status=1; }
}
for group in $GROUPS_TO_RUN; do
    case $group in
        equal-flops) run stepsnet_equal_flops --pairs stepsnet:equal-flops --mode both "${B8[@]}" ;;
        transnext)   run transnext_competitors --pairs transnext:competitors --mode both "${B8[@]}" ;;
        horesnet)    run horesnet_schemes --pairs horesnet:schemes --mode both "${B8[@]}" ;;
        sret)        run sret_slicing --pairs sret:slicing --mode both "${B8[@]}" ;;
        mfu64)       run mfu_batch64 deit_small_patch16_224 steps_deit_small swin_tiny_patch4_window7_224 \
                         steps_swin_tiny resnet50 steps_resnet50 transnext_tiny SReT_S \
                         --batch-size 64 --repeats 2 --iters 1 --warmup 1 --no-memory ;;
        pool-mode)   run transnext_pool_mode --pairs transnext:pool-mode --batch-size 4 --repeats 3 --iters 1 --warmup 1 ;;
        depth)       run stepsnet_depth --pairs stepsnet:depth --batch-size 8 --repeats 3 --iters 1 --warmup 1 ;;
        accuracy)    run stepsnet_equal_accuracy --pairs stepsnet:equal-accuracy --mode both "${B8[@]}" ;;
        *) echo "unknown group $group" >&2; status=2 ;;
    esac
done
exit $status
