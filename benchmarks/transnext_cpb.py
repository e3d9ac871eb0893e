"""TransNeXt's log-CPB MLP per training step: the custom op (models/transnext.py ``cpb_mlp``) against the plain
autograd MLP it replaced (``cpb_fc2(ReLU(cpb_fc1(table)))``), forward + backward of all blocks of a model.

    .venv/bin/python benchmarks/transnext_cpb.py [--model transnext_tiny] [--size 224] [--rounds 8] [--threads 1]

The MLP runs once per block and training step whatever the batch size, so its cost is a fixed part of a step.
Interleaved rounds (A B, then B A); prints both per-round times and their ratio (median, spread).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import timm  # noqa: E402

import models  # noqa: E402,F401
from models.transnext import cpb_mlp, stage_size  # noqa: E402


def one_step(model, size: int, kind: str) -> None:
    for i, depth in enumerate(model.depths):
        attn = getattr(model, f"block{i + 1}")[0].attn  # every block of a stage has the same grid
        geometry = model.geometry(i, stage_size((size, size), i, model.patch_size), torch.device("cpu"))
        table = geometry.bias_table.float()
        for _ in range(depth):
            if kind == "autograd MLP":
                out = attn.cpb_fc2(attn.cpb_act(attn.cpb_fc1(table)))
            else:
                grid = table.view(*geometry.bias_table_shape, 2)
                out = cpb_mlp(
                    grid[:, 0, 0],
                    grid[0, :, 1],
                    attn.cpb_fc1.weight,
                    attn.cpb_fc1.bias,
                    attn.cpb_fc2.weight,
                    attn.cpb_fc2.bias,
                )
            out.sum().backward()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="transnext_tiny")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = timm.create_model(args.model)
    kinds = ["autograd MLP", "cpb_mlp op"]
    for kind in kinds:
        one_step(model, args.size, kind)
    times = {kind: [] for kind in kinds}
    for r in range(args.rounds):
        for kind in kinds if r % 2 == 0 else kinds[::-1]:
            start = time.perf_counter()
            one_step(model, args.size, kind)
            times[kind].append(time.perf_counter() - start)
    for kind, seconds in times.items():
        print(
            f"{kind:13s} ms per step: median {1e3 * statistics.median(seconds):.0f} "
            f"(rounds: {', '.join(f'{1e3 * s:.0f}' for s in seconds)})"
        )
    ratios = sorted(a / b for a, b in zip(times["autograd MLP"], times["cpb_mlp op"]))
    print(
        f"speed-up of the op: {statistics.median(ratios):.2f}x [{ratios[len(ratios) // 4]:.2f}-"
        f"{ratios[3 * len(ratios) // 4]:.2f}], load average {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
