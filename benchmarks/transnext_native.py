"""TransNeXt against the official code's native PyTorch implementation (Table 10's "native" side), on CPU.

    .venv/bin/python benchmarks/transnext_native.py --official PATH/transnext_native.py \
        [--model transnext_tiny] [--mode infer|train|both] [--batch-size 8] [--rounds 6] [--threads 2] [--clock cpu] \
        [--chunk-bytes 0]

``--official`` is the official repository's single-file native model (github.com/DaiShiResearch/TransNeXt,
``classification/transnext_native.py``, commit ff68810; its later releases split it into ``transnext.py`` +
``attention_native.py``): not vendored here (its licence and code stay with it), loaded from where the user
checked it out. Both models get the same weights (ours are saved under the official names, so the official
model loads them with ``strict=True``) and the logits are compared before timing, so the two run the same network.
Timing is ``depthbench bench``'s: warm-up, then interleaved rounds (A B, then B A) of ``harness.measure.bench``'s
``ModelStep``; printed: each model's median ms per step and the per-round speed-up of ours (median, spread),
with the load average. ``--chunk-bytes 0`` runs ours on the whole batch at once (models/transnext.py
``CPU_CHUNK_BYTES``: on the CPU ours computes its widest maps a few images at a time; the official code does not).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import timm  # noqa: E402

import models  # noqa: E402,F401
from models import transnext  # noqa: E402
from harness.measure.bench import CLOCKS, ModelStep, run_interleaved, step_peak_mib  # noqa: E402

# the official factories' names are ours too: build ours first, the official module's registration then only
# overwrites the name in timm's registry inside this process
OFFICIAL_FACTORIES = ("transnext_micro", "transnext_tiny", "transnext_small", "transnext_base")


def load_official(path: Path, name: str, size: int) -> torch.nn.Module:
    spec = importlib.util.spec_from_file_location("official_transnext_native", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # timm's register_model looks its module up there
    with warnings.catch_warnings():  # timm's deprecated import paths and the registry overwrite
        warnings.simplefilter("ignore")
        spec.loader.exec_module(module)
    return getattr(module, name)(img_size=size, pretrain_size=224)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--official", type=Path, required=True, help="the official transnext_native.py")
    parser.add_argument("--model", default="transnext_tiny", choices=OFFICIAL_FACTORIES)
    parser.add_argument("--mode", default="both", choices=("infer", "train", "both"))
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--clock", default="wall", choices=tuple(CLOCKS), help="wall time, or the process's CPU time (under load)"
    )
    parser.add_argument(
        "--chunk-bytes",
        type=int,
        default=transnext.CPU_CHUNK_BYTES,
        help="ours: each chunk's widest map in bytes (default %(default)s; 0: the whole batch at once)",
    )
    args = parser.parse_args()
    if args.chunk_bytes < 0:
        parser.error(f"--chunk-bytes {args.chunk_bytes}: give 0 (whole batch) or a positive number of bytes")
    transnext.CPU_CHUNK_BYTES = args.chunk_bytes
    if not args.official.is_file():
        parser.error(
            f"--official {args.official}: no such file; point it at the official repository's "
            f"classification/transnext_native.py"
        )
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    ours = timm.create_model(args.model, img_size=args.size)
    official = load_official(args.official, args.model, args.size)
    official.load_state_dict(ours.state_dict(), strict=True)
    with torch.inference_mode():
        x = torch.randn(2, 3, args.size, args.size)
        diff = (ours.eval()(x) - official.eval()(x)).abs().max().item()
    print(f"{args.model} at {args.size}^2: max |logit difference| ours vs official {diff:.2e}")
    for mode in ("infer", "train") if args.mode == "both" else (args.mode,):
        steps = {
            "official": ModelStep(official, (3, args.size, args.size), args.batch_size, mode),
            "ours": ModelStep(ours, (3, args.size, args.size), args.batch_size, mode),
        }
        times = run_interleaved(steps, warmup=1, iters=1, repeats=args.rounds, clock=CLOCKS[args.clock])
        speedups = sorted(o / s for o, s in zip(times["official"], times["ours"]))
        median = statistics.median(speedups)
        mib = {label: step_peak_mib(step) for label, step in steps.items()}
        for label, seconds in times.items():
            print(
                f"  {mode} {label:8s} ms per step (batch {args.batch_size}): "
                f"{', '.join(f'{1e3 * s:.0f}' for s in seconds)}; allocated per step {mib[label]:.0f} MiB"
            )
        print(
            f"  {mode}: ours {median:.2f}x the official native [{speedups[0]:.2f}-{speedups[-1]:.2f}] over "
            f"{len(speedups)} rounds, {args.threads} threads, {args.clock} clock, chunks of {args.chunk_bytes} bytes, "
            f"load average {os.getloadavg()[0]:.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
