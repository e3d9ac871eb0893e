#!/usr/bin/env bash
# The papers' speed claims on this machine: every `depthbench bench --pairs` preset, interleaved, on CPU -- eager
# and compiled (torch.compile) -- plus the engine options' own comparisons (issue 27).
#
#     bash benchmarks/paper_claims.sh [OUTDIR] [GROUP...]      # default OUTDIR benchmarks/results/<host>-<date>
#     COMPILE=eager bash benchmarks/paper_claims.sh ...         # eager | compiled | both (default both)
#
# Writes OUTDIR/<group>.csv (timm's benchmark columns + spread, MFU, peak memory) and <group>_pairs.csv (ratios
# beside the papers' claims) and a log; the compiled run of a group writes <group>_compiled.csv (every model
# compiled, so the pairs compare compiled against compiled). One intra-op thread, pinned: on a shared machine one
# thread per process keeps the interleaved ratios steady (docs/benchmarks.md). Each group is a separate run; a
# failing group is reported and the others still run.
# Paper GROUPs: equal-flops transnext horesnet sret mfu64 pool-mode depth accuracy (default: the first five).
# Engine-option GROUPs (each model against itself with one option, interleaved; run once, not per COMPILE):
# engine-compile engine-ckpt engine-optim engine-bf16 engine-channels-last, or engine (all five).
set -u
cd "$(dirname "$0")/.."
OUT=${1:-benchmarks/results/$(hostname)-$(date -u +%F)}
shift || true
GROUPS_TO_RUN=
for group in ${*:-equal-flops transnext horesnet sret mfu64}; do
    [ "$group" = engine ] && group="engine-compile engine-ckpt engine-optim engine-bf16 engine-channels-last"
    GROUPS_TO_RUN="$GROUPS_TO_RUN $group"
done
COMPILE=${COMPILE:-both}
case $COMPILE in eager|compiled|both) ;; *) echo "COMPILE=$COMPILE: use eager, compiled or both" >&2; exit 2 ;; esac
mkdir -p "$OUT"
BENCH=(.venv/bin/depthbench bench --threads "${THREADS:-1}")
B8=(--batch-size 8 --repeats 5 --iters 1 --warmup 1)
# the models of issue 27's engine measurements (HO-ResNet: the CIFAR ResNet-58 with RK4 blocks, at 32 px)
DEIT_S=deit_small_patch16_224; SWIN_T=swin_tiny_patch4_window7_224
ENGINE_MODELS=($DEIT_S $SWIN_T resnet50 steps_deit_small transnext_tiny SReT_S horesnet58_rk4)
status=0
run() {  # name, then bench arguments
    local name=$1; shift
    echo "== $name: depthbench bench $* ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$OUT/log.txt"
    "${BENCH[@]}" "$@" --out "$OUT/$name.csv" 2>&1 | grep --line-buffered -v "WARNING\|real_accelerator" | tee -a "$OUT/log.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "== $name FAILED" | tee -a "$OUT/log.txt"; status=1; }
}
paper() {  # name, then bench arguments: eager and/or compiled
    local name=$1; shift
    [ "$COMPILE" = compiled ] || run "$name" "$@"
    [ "$COMPILE" = eager ] || run "${name}_compiled" "$@" --compile
}
for group in $GROUPS_TO_RUN; do
    case $group in
        equal-flops) paper stepsnet_equal_flops --pairs stepsnet:equal-flops --mode both "${B8[@]}" ;;
        transnext)   paper transnext_competitors --pairs transnext:competitors --mode both "${B8[@]}" ;;
        horesnet)    paper horesnet_schemes --pairs horesnet:schemes --mode both "${B8[@]}" ;;
        sret)        paper sret_slicing --pairs sret:slicing --mode both "${B8[@]}" ;;
        mfu64)       paper mfu_batch64 $DEIT_S steps_deit_small $SWIN_T steps_swin_tiny resnet50 steps_resnet50 \
                         transnext_tiny SReT_S --batch-size 64 --repeats 2 --iters 1 --warmup 1 --no-memory ;;
        pool-mode)   paper transnext_pool_mode --pairs transnext:pool-mode --batch-size 4 --repeats 3 --iters 1 --warmup 1 ;;
        depth)       paper stepsnet_depth --pairs stepsnet:depth --batch-size 8 --repeats 3 --iters 1 --warmup 1 ;;
        accuracy)    paper stepsnet_equal_accuracy --pairs stepsnet:equal-accuracy --mode both "${B8[@]}" ;;
        # one process per model: a model whose compilation fails costs only its own row
        engine-compile) for m in "${ENGINE_MODELS[@]}"; do
                            run "engine_compile_$m" "$m" --mode train "${B8[@]}" --no-memory --compare compile; done ;;
        engine-ckpt) run engine_grad_checkpointing $DEIT_S $SWIN_T resnet50 steps_deit_small horesnet58_rk4 \
                         --mode train "${B8[@]}" --compare grad-checkpointing ;;
        engine-optim) run engine_optimizer $DEIT_S resnet50 --mode train "${B8[@]}" --no-memory --compare fused foreach ;;
        engine-bf16) run engine_bf16 $DEIT_S $SWIN_T resnet50 --mode both "${B8[@]}" --no-memory --compare bf16 ;;
        engine-channels-last) run engine_channels_last resnet50 transnext_tiny horesnet58_rk4 \
                         --mode train "${B8[@]}" --no-memory --compare channels-last ;;
        *) echo "unknown group $group" >&2; status=2 ;;
    esac
done
exit $status
