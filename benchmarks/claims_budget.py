"""What a full `depthbench claims` run costs on this CPU, before running it: each arm's training step timed in CPU
seconds (one thread, random batches of the arm's input size, the arm's model and optimizer), scaled to its epochs
and the design's seeds, and calibrated against a measured full run of the earlier claims.

    python benchmarks/claims_budget.py [--steps 6] [--cores 2]

CPU time (``time.process_time``), not wall time, so a machine busy with other work still gives the number an idle
one would (roughly: shared caches slow a busy machine's steps too). The step time leaves out data loading,
augmentation and evaluation; the calibration factor covers them: it is the measured CPU time of the earlier
claims' full run (26 Nov 2026, docs/claims.md: 60 runs, 6,858 s user + 404 s system) over this script's
estimate for the same arms, epochs and 3 seeds. The worst case assumes every claim runs to its last look; with
early stops it is less.
"""

from __future__ import annotations

import argparse
import time

import torch

from harness.core.config import load_config
from harness.engine.models import build_model, model_kwargs
from results import claims as cl
from results.claims import REPO

# the earlier claims (the recipes still in configs/claims/), 3 seeds each, whose full run was measured
EARLIER_ARMS = [
    "horesnet10-euler-w16_1xb64-4e_glyphs-16px",
    "horesnet10-midpoint-w16_1xb64-4e_glyphs-16px",
    "horesnet10-rk4-w16_1xb64-4e_glyphs-16px",
    "horesnet18-euler-w16_1xb64-5e_glyphs-16px",
    "horesnet18-rk4-w16_1xb64-5e_glyphs-16px",
    "resnet18-w16_1xb64-2e_glyphs",
    "steps-resnet18-w16_1xb64-2e_glyphs",
    "deit-w64-d4_1xb64-9e_glyphs-16px",
    "steps-deit-w64-d8_1xb64-9e_glyphs-16px",
    "deit-w64-d4_1xb64-4e_glyphs-16px",
    "scalenet-deit-w64-d4-2x_1xb64-3e_glyphs-16px",
    "scalenet-deit-w64-d4-2x_1xb64-3e_glyphs-16px",
    "sret-mini-loop1_1xb64-2e_glyphs-64px",
    "sret-mini-loop2_1xb64-2e_glyphs-64px",
    "sret-mini-loop2-sliced_1xb64-2e_glyphs-64px",
    "transnext-mini-aggregated_1xb64-2e_glyphs",
    "transnext-mini-pool-only_1xb64-2e_glyphs",
    "transnext-mini-window-only_1xb64-2e_glyphs",
    "transnext-mini-glu_1xb64-2e_glyphs",
    "transnext-mini-mlp_1xb64-2e_glyphs",
]
EARLIER_CPU_S = 6858 + 404
TRAIN_IMAGES, VAL_IMAGES = 21_200, 5_300


def step_cpu_seconds(config: str, steps: int) -> tuple[float, float, int, int]:
    """(CPU s per training step of 64 images, CPU s per evaluation batch of 64, epochs, batch) for a config."""
    cfg = load_config(REPO / "configs" / "claims" / f"{config}.py")
    torch.manual_seed(0)
    model = build_model(cfg.model.name, device="cpu", **model_kwargs(cfg))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch, size = int(cfg.batch_size), int(cfg.data.input_size)
    x, y = torch.randn(batch, 3, size, size), torch.randint(0, int(cfg.data.num_classes), (batch,))
    for _ in range(2):  # warm-up
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    start = time.process_time()
    for _ in range(steps):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    train = (time.process_time() - start) / steps
    model.eval()
    start = time.process_time()
    with torch.no_grad():
        for _ in range(steps):
            model(x)
    # ScaleNet's expanded model (model.grow) is built by the engine from the source's blocks; its step costs about
    # k times the unexpanded model's (k x the block applications; the rank-8 adapters are small)
    grow = (cfg.model.get("grow") or {}).get("k", 1)
    return train * grow, (time.process_time() - start) / steps * grow, int(cfg.epochs), batch


def run_cpu_seconds(config: str, steps: int, cache: dict) -> float:
    if config not in cache:
        train, evaluate, epochs, batch = step_cpu_seconds(config, steps)
        cache[config] = epochs * (TRAIN_IMAGES / batch * train + VAL_IMAGES / batch * evaluate)
    return cache[config]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6, help="timed steps per arm (default 6)")
    parser.add_argument("--cores", type=int, default=2, help="runs at a time (default 2: this machine)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    cache: dict = {}
    earlier = sum(3 * run_cpu_seconds(c, args.steps, cache) for c in EARLIER_ARMS)
    factor = EARLIER_CPU_S / earlier
    print(
        f"earlier claims: {earlier / 60:.0f} CPU-min of steps estimated, {EARLIER_CPU_S / 60:.0f} measured: "
        f"x{factor:.2f} for data, augmentation and start-up"
    )
    files = [cl.load_claims(p) for p in cl.available_claims()]
    worst = first = 0.0
    for f in files:
        seeds = {}
        for claim in f.claims:
            looks, _ = cl.plan_looks(claim, f.design)
            for arm in f.arms_of(claim):
                seeds[arm.name] = max(seeds.get(arm.name, (0, 0)), (looks[-1], looks[0]))
        for name, (last, first_look) in seeds.items():
            config = f.arms[name].config.rsplit("/", 1)[1][:-3]
            cost = run_cpu_seconds(config, args.steps, cache) * factor
            worst += last * cost
            first += first_look * cost
            print(f"  {f.paper}/{name}: {cost / 60:.1f} CPU-min per run, {last} seeds at most")
    print(
        f"full run, every claim to its last look: {worst / 60:.0f} CPU-min = {worst / 60 / args.cores:.0f} min "
        f"wall on {args.cores} cores; all stopping at the first look: {first / 60 / args.cores:.0f} min"
    )


if __name__ == "__main__":
    main()
