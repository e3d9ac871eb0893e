"""SReT-S inference with ``fuse_for_inference()`` against the unfused model and DeiT-S: matmul-peak fraction (MFU).

    .venv/bin/python benchmarks/sret_fusion.py [--batch-size 64] [--threads 1] [--repeats 3] [--out CSV]
    .venv/bin/python benchmarks/sret_fusion.py --profile [--batch-size 64]     # per-op self time, one step each

``depthbench bench`` builds models by name, and a fused model is not a registered name, so this script runs the
bench's own pieces (harness/measure/bench.py: ``ModelStep``, ``MatmulPeak``, ``run_interleaved``, ``summarise``)
on the models: the same interleaved rounds (A B C, then C B A), the fp32 matmul peak measured in the same rounds,
MFU per round then the median. MACs are counted once per model with ``harness.measure.flops`` (the fused model is
given the unfused model's MACs: folding removes only element-wise work). Issue 27 part 3's target: SReT-S
inference at >= 0.7 of the matmul peak at batch 64.
"""

from __future__ import annotations

import argparse
import copy
import csv
import os
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile as torch_profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.measure.bench import (  # noqa: E402
    PEAK_LABEL,
    MatmulPeak,
    ModelStep,
    Participant,
    build,
    machine,
    pin_threads,
    ratios,
    run_interleaved,
    summarise,
)
from harness.measure.flops import count_flops, example_inputs  # noqa: E402
from models.sret import use_inference_linears  # noqa: E402

BASELINE, MODEL, FUSED = "deit_small_patch16_224", "SReT_S", "SReT_S fused"
BASELINE_ONEDNN = "deit_small_patch16_224 oneDNN linears"


def models(onednn_baseline: bool = False) -> dict[str, torch.nn.Module]:
    """DeiT-S, SReT-S and SReT-S fused; with ``onednn_baseline`` also DeiT-S with the fused model's linear layers
    (``models.sret.use_inference_linears``), to separate what the GEMM backend gives from what folding gives."""
    participants = {BASELINE: Participant(BASELINE), MODEL: Participant(MODEL)}
    built = {label: build(p, device="cpu") for label, p in participants.items()}
    built[FUSED] = copy.deepcopy(built[MODEL]).fuse_for_inference()
    if onednn_baseline:
        built[BASELINE_ONEDNN] = use_inference_linears(copy.deepcopy(built[BASELINE]).eval())
    return built


def profile(built: dict, batch_size: int) -> None:
    for label, model in built.items():
        step = ModelStep(model, (3, 224, 224), batch_size, "infer")
        step()
        with torch_profile(activities=[ProfilerActivity.CPU], record_shapes=False) as prof:
            step()
        print(f"## {label}: infer, batch {batch_size}, self CPU time per op (ms)")
        for event in sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:14]:
            print(f"  {event.key:50s} {event.self_cpu_time_total / 1e3:9.1f}  x{event.count}")
        print(f"  total {sum(e.self_cpu_time_total for e in prof.key_averages()) / 1e3:.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="per-op self time of one step of each model")
    parser.add_argument(
        "--onednn-baseline",
        action="store_true",
        help="also DeiT-S with oneDNN linear layers (what the GEMM backend alone gives)",
    )
    parser.add_argument("--out", help="append the rows to this CSV")
    args = parser.parse_args()
    threads, cores = pin_threads(args.threads, "cpu")
    built = models(args.onednn_baseline)
    if args.profile:
        profile(built, args.batch_size)
        return 0
    x = example_inputs(built[MODEL], (3, 224, 224))
    with torch.no_grad():  # the fused model computes the same function (up to rounding)
        ref, out = built[MODEL].eval()(*x), built[FUSED](*x)
        print(f"fused vs unfused: max |diff| {(out - ref).abs().max():.2e} (max |logit| {ref.abs().max():.2f})")
    # the fused model has the unfused model's MACs (folding removes element-wise work only); counted on the
    # unfused one, whose ops the counter knows (oneDNN's fused linear is not an op it counts)
    unfused = {FUSED: MODEL, BASELINE_ONEDNN: BASELINE}
    macs = {
        label: count_flops(built[unfused.get(label, label)], inputs=example_inputs(built[label], (3, 224, 224))).total
        for label in built
    }
    info = machine("cpu", threads, cores)
    steps = {label: ModelStep(model, (3, 224, 224), args.batch_size, "infer") for label, model in built.items()}
    probe = MatmulPeak(2048)
    steps[PEAK_LABEL] = probe
    print(
        f"batch {args.batch_size}, {threads} thread(s) on cores {cores}, load average {info['load_avg_1m']}, "
        f"{args.repeats} interleaved rounds",
        flush=True,
    )
    times = run_interleaved(steps, warmup=args.warmup, iters=1, repeats=args.repeats)
    labels = {label: Participant(unfused.get(label, label), label=label) for label in built}
    rows = summarise(times, labels, macs, args.batch_size, "infer", times[PEAK_LABEL], probe.flops)
    peak = sorted(probe.flops / s / 1e9 for s in times[PEAK_LABEL])
    print(
        f"matmul peak {peak[len(peak) // 2]:.1f} GFLOP/s fp32 (rounds: {', '.join(f'{p:.1f}' for p in peak)}); "
        f"load average at the end {os.getloadavg()[0]:.2f}"
    )
    for label, row in rows.items():
        print(
            f"{label:24s} {macs[label] / 1e9:.3f} GMACs  {row['infer_samples_per_sec']:7.2f} samples/s "
            f"[{row['infer_samples_per_sec_q25']:.2f}-{row['infer_samples_per_sec_q75']:.2f}]  "
            f"MFU {row['infer_mfu']:.3f}"
        )
    for base, cand in (
        (MODEL, FUSED),
        (BASELINE, MODEL),
        (BASELINE, FUSED),
        (BASELINE, BASELINE_ONEDNN),
        (BASELINE_ONEDNN, FUSED),
    ):
        if cand not in times:
            continue
        r = ratios(times, base, cand)
        print(
            f"{cand} / {base}: throughput {r['median']:.3f}x [{r['q25']:.3f}-{r['q75']:.3f}, "
            f"min {r['min']:.3f}, max {r['max']:.3f}]"
        )
    if args.out:
        path = Path(args.out)
        fresh = not path.exists()
        with path.open("a", newline="") as fh:
            fields = ["label", "infer_gmacs", *next(iter(rows.values())), *info]
            writer = csv.DictWriter(fh, fieldnames=fields)
            if fresh:
                writer.writeheader()
            for label, row in rows.items():
                writer.writerow({"label": label, "infer_gmacs": round(macs[label] / 1e9, 3), **row, **info})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
