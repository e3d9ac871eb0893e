"""How much of a Steps model's step is the StepsNet macro's own work (our code), and how much its blocks' (timm's)?

    .venv/bin/python benchmarks/stepsnet_macro_share.py [--models steps_deit_small steps_swin_tiny steps_resnet50]
        [--batch-size 8] [--rounds 5] [--threads 1]

A Steps model is timm's own residual blocks (ViT's ``Block``, Swin's ``SwinTransformerBlock``, ResNet's
``Bottleneck``) at the paper's narrower step widths, run by the StepsNet macro (models/stepsnet.py,
``StepsNet.forward_intermediates``), which adds nothing but data movement: one split of its input into the step
slices, one concatenation per step boundary (the previous output, then the next raw slice), the copy a block makes
of the first, strided slice, and in backward the split's concatenation of the slices' gradients. For each Steps
model and its equal-FLOPs baseline (``stepsnet:equal-flops`` in harness/measure/presets.py) this script records the
input of every residual block and every StepsNet module (forward pre-hooks on one real step) and times, in
interleaved rounds, each model's whole step beside

- ``blocks``: the model's residual blocks alone, one after the other on fresh contiguous inputs of the recorded
  shapes (in training all forwards, then one backward, as in the model);
- ``macro``: the macro's data movement alone at the recorded shapes -- the split, ``.contiguous()`` of the first
  slice, the step concatenations, and in training their backward.

Each is timed in the process's CPU time (``time.process_time``; a loaded machine's waiting is left out). Printed per
pair and mode: the medians of the steps, the blocks, the macro and the rest (stem, patch merging, head, loss,
optimizer), and the ratios below computed in each round, as median [q25-q75] over the rounds. The
blocks predict the pair's ratio if the Steps model's rest cost what the baseline's does:
``predicted = baseline step / (Steps blocks + baseline rest)``; ``measured / predicted`` below 1 is time the Steps
model spends outside timm's blocks beyond its baseline's -- the part our code could be the handicap in.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import timm  # noqa: E402

import models  # noqa: E402,F401
from harness.measure.presets import PRESETS  # noqa: E402
from models.stepsnet import StepsNet, residual_blocks  # noqa: E402

BASELINE = {pair.candidate: pair.baseline for pair in PRESETS["stepsnet:equal-flops"][1]}


def recorded_inputs(model: torch.nn.Module, modules: list[torch.nn.Module], batch: int) -> list[tuple]:
    """(module, shape of its input) for each of ``modules`` as it runs in one eval forward of ``model``."""
    seen = []
    hooks = [m.register_forward_pre_hook(lambda m, args: seen.append((m, args[0].shape))) for m in modules]
    try:
        with torch.no_grad():
            model.eval()(torch.randn(batch, 3, 224, 224))
    finally:
        for hook in hooks:
            hook.remove()
    return seen


def replay_blocks(blocks: list[tuple[torch.nn.Module, torch.Size]], train: bool):
    """A function running the blocks once, each on a fresh input of its recorded shape (and backward when ``train``)."""
    inputs = [torch.randn(shape, requires_grad=train) for _, shape in blocks]
    params = [p for block, _ in blocks for p in block.parameters()]
    grads = []

    def run():
        if not train:
            with torch.no_grad():
                for (block, _), x in zip(blocks, inputs):
                    block(x)
            return
        outputs = [block(x) for (block, _), x in zip(blocks, inputs)]
        if not grads:
            grads.extend(torch.ones_like(y) for y in outputs)
        torch.autograd.backward(outputs, grads)
        for t in inputs + params:
            t.grad = None

    return run


def replay_macro(macros: list[tuple[StepsNet, torch.Size]], train: bool):
    """A function doing the macros' data movement once (forward, and backward when ``train``) on fresh inputs."""
    inputs = []
    for net, shape in macros:
        d = net.channel_dim % len(shape)
        x = torch.randn(shape, requires_grad=train)
        # each step's output as the blocks would hand it on: contiguous, at that step's width
        outputs = []
        for i, (lo, hi) in enumerate(net._slices):
            out_shape = list(shape)
            out_shape[d] = hi
            outputs.append(torch.randn(out_shape, requires_grad=train) if hi > lo else None)
        inputs.append((net, d, x, outputs))

    grads = []  # the gradients backward hands to the macro's outputs, made once (their making is not its work)

    def run():
        produced = []
        for net, d, x, outputs in inputs:
            pieces = torch.split(x, net._split_sizes, dim=d)
            first = pieces[0].contiguous()  # a block's copy of the strided first slice (LayerNorm, conv)
            produced.append(first)
            for i, (lo, hi) in enumerate(net._slices):
                if i > 0 and hi > lo:
                    y = outputs[i - 1] if outputs[i - 1] is not None else first
                    produced.append(torch.cat([y, pieces[i]], dim=d))
        if train:
            if not grads:
                grads.extend(torch.ones_like(t) for t in produced)
            torch.autograd.backward(produced, grads)
            for _, _, x, outputs in inputs:
                x.grad = None
                for y in outputs:
                    if y is not None:
                        y.grad = None

    return run


def spread(values: list[float]) -> str:
    """``median [q25-q75]`` of per-round ratios (the median alone for fewer than two rounds)."""
    if len(values) < 2:
        return f"{statistics.median(values):.3f}x"
    q25, _, q75 = statistics.quantiles(values, n=4)
    return f"{statistics.median(values):.3f}x [{q25:.3f}-{q75:.3f}]"


def step_functions(model: torch.nn.Module, batch: int) -> dict:
    """{"infer": ..., "train": ...}: one inference forward, and one SGD training step, on a fixed batch."""
    x = torch.randn(batch, 3, 224, 224)
    target = torch.randint(0, 1000, (batch,))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)

    def infer():
        with torch.no_grad():
            model.eval()(x)

    def train():
        model.train()
        torch.nn.functional.cross_entropy(model(x), target).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return {"infer": infer, "train": train}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(BASELINE))
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if args.batch_size < 1 or args.rounds < 1 or args.threads < 1:
        parser.error("--batch-size, --rounds and --threads must be at least 1")
    unknown = [name for name in args.models if name not in BASELINE]
    if unknown:
        parser.error(f"not a Steps model of an equal-FLOPs pair: {', '.join(unknown)}; one of {', '.join(BASELINE)}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    for name in args.models:
        nets = {"baseline": timm.create_model(BASELINE[name]), "steps": timm.create_model(name)}
        blocks = {role: recorded_inputs(net, residual_blocks(net), args.batch_size) for role, net in nets.items()}
        macros = recorded_inputs(
            nets["steps"], [m for m in nets["steps"].modules() if isinstance(m, StepsNet)], args.batch_size
        )
        steps = {role: step_functions(net, args.batch_size) for role, net in nets.items()}
        for mode in ("infer", "train"):
            train = mode == "train"
            jobs = {
                "baseline step": steps["baseline"][mode],
                "baseline blocks": replay_blocks(blocks["baseline"], train),
                "steps step": steps["steps"][mode],
                "steps blocks": replay_blocks(blocks["steps"], train),
                "steps macro": replay_macro(macros, train),
            }
            times = {label: [] for label in jobs}
            for fn in jobs.values():  # warm-up
                fn()
            for r in range(args.rounds):
                for label, fn in list(jobs.items())[:: 1 if r % 2 == 0 else -1]:
                    start = time.process_time()
                    fn()
                    times[label].append(time.process_time() - start)
            s = {label: statistics.median(t) for label, t in times.items()}
            rounds = [{label: t[r] for label, t in times.items()} for r in range(args.rounds)]
            blocks_ratio = [t["steps blocks"] / t["baseline blocks"] for t in rounds]
            predicted = [
                t["baseline step"] / (t["steps blocks"] + t["baseline step"] - t["baseline blocks"]) for t in rounds
            ]
            measured = [t["baseline step"] / t["steps step"] for t in rounds]
            print(
                f"{name} / {BASELINE[name]}, {mode} (batch {args.batch_size}, {args.threads} thread(s), process CPU "
                f"time, {args.rounds} rounds; seconds: medians; ratios: per round, median [q25-q75]):\n"
                f"  baseline: step {s['baseline step']:.3f} s = blocks {s['baseline blocks']:.3f} s "
                f"+ rest {s['baseline step'] - s['baseline blocks']:.3f} s\n"
                f"  steps:    step {s['steps step']:.3f} s = blocks {s['steps blocks']:.3f} s "
                f"+ rest {s['steps step'] - s['steps blocks']:.3f} s (of which the macro's data movement "
                f"{1e3 * s['steps macro']:.1f} ms, {100 * s['steps macro'] / s['steps step']:.1f} % of the step; "
                f"{len(macros)} StepsNet modules)\n"
                f"  blocks alone, steps / baseline time: {spread(blocks_ratio)}\n"
                f"  pair predicted by the blocks: {spread(predicted)}; measured: {spread(measured)}; "
                f"measured / predicted: {spread([m / p for m, p in zip(measured, predicted)])}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
