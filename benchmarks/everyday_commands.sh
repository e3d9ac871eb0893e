#!/usr/bin/env bash
# Wall time of the everyday commands a new user runs first (issue 26 item 4, issue 24 item 3): `--help`, an argument
# error, `models`, `verify` of every paper and `results --status`, first with an empty measurement cache (cold: every
# model's parameters/FLOPs/layers measured) and then again (warm: read from measurements.json).
#
#     bash benchmarks/everyday_commands.sh [OUTDIR]      # default OUTDIR benchmarks/results/<host>-<date>-everyday
#
# The cold pass uses a cache folder of its own (DEPTHBENCH_CACHE=OUTDIR/cache, removed at the end), so the user's
# cache is neither read nor changed. One line per command in OUTDIR/times.txt: name, exit status, seconds, load.
# Absolute times: run it on an idle machine and say which (README quotes the numbers with the machine).
set -u
cd "$(dirname "$0")/.."
OUT=${1:-benchmarks/results/$(hostname)-$(date -u +%F)-everyday}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
DB=.venv/bin/depthbench
CACHE="$OUT/cache"
rm -rf "$CACHE"
mkdir -p "$CACHE"
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" | tee "$OUT/times.txt"
timed() {  # name, then the command's arguments; its output goes to OUTDIR/<name>.log
    local name=$1; shift
    local load start end rc
    load=$(cut -d' ' -f1 /proc/loadavg)
    start=$(date +%s.%N)
    DEPTHBENCH_CACHE=$CACHE "$@" > "$OUT/$name.log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    printf "%-24s rc=%-3s %8.2f s   load %s\n" "$name" "$rc" "$(echo "$end - $start" | bc)" "$load" | tee -a "$OUT/times.txt"
}
timed help               "$DB" --help
timed train-help         "$DB" train --help
timed argument-error     "$DB" train --no-such-option
timed models-cold        "$DB" models
timed models-warm        "$DB" models
timed models-steps-warm  "$DB" models 'steps_*'
rm -rf "${CACHE:?}"/*  # verify cold on its own, not after models filled the cache
timed verify-cold        "$DB" verify
timed verify-warm        "$DB" verify
timed results-status     "$DB" results --status
rm -rf "${CACHE:?}"/*
timed results-status-cold "$DB" results --status
rm -rf "$CACHE"
