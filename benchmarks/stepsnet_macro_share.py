"""How much of a Steps model's step is the StepsNet macro's own work (our code), and how much its blocks' (timm's)?

    .venv/bin/python benchmarks/stepsnet_macro_share.py [--models steps_deit_small steps_swin_tiny steps_resnet50]
        [--batch-size 8] [--rounds 9] [--fused-attention] [--copy-first-slice]

A Steps model is timm's own residual blocks (ViT's ``Block``, Swin's ``SwinTransformerBlock``, ResNet's
``Bottleneck``) at the paper's narrower step widths, run by the StepsNet macro (models/stepsnet.py,
``StepsNet.forward_intermediates``), which adds nothing but data movement: one split of its input into the step
slices, one concatenation per step boundary (the previous output, then the next raw slice), the copy a block makes
of the first, strided slice, and in backward the split's concatenation of the slices' gradients. For each Steps
model and its equal-FLOPs baseline (``stepsnet:equal-flops`` in harness/measure/presets.py) this script times, in
interleaved rounds:

- ``step``: the model's whole step (inference: a forward; training: forward, backward and an SGD step);
- ``rest``: the same step of a copy of the model whose residual blocks that keep their input's shape are
  ``nn.Identity`` (:func:`without_blocks`): stem, downsampling (and ResNet's stride-2 first blocks, the same in
  both models), head, loss, optimizer, and in the Steps model the macro as it runs in the model. ``step - rest`` is
  then the time of those blocks in the model;
- ``blocks alone``: the same blocks run one after the other on fresh contiguous inputs of the shapes they receive in
  the model (training: all forwards, then one backward), a cross-check of ``step - rest`` outside the model's
  memory and layout;
- ``macro``: the macro's data movement alone at the shapes it receives -- the split, ``.contiguous()`` of the first
  slice, the step concatenations, and in training their backward.

Each is timed in the process's CPU time (``time.process_time``, one thread: it counts every thread's time, and a
loaded machine's waiting is left out). Printed per pair and mode: the medians of each, and per-round ratios as
median [q25-q75] over the rounds: the pair measured; the blocks' time in the model and alone, Steps / baseline;
what the Steps model spends outside its blocks beyond its baseline, ``(Steps rest - baseline rest) / Steps step``
(the most our code could cost it); and the pair its blocks in the model predict if that were zero,
``baseline step / (Steps step - Steps rest + baseline rest)``.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import timm  # noqa: E402
from timm.layers import set_fused_attn  # noqa: E402

import models  # noqa: E402,F401
from harness.measure.bench import CLOCKS, run_interleaved  # noqa: E402
from harness.measure.presets import PRESETS  # noqa: E402
from models.stepsnet import StepsNet, residual_blocks, stepsnet_modules  # noqa: E402

BASELINE = {pair.candidate: pair.baseline for pair in PRESETS["stepsnet:equal-flops"][1]}


def recorded_shapes(model: torch.nn.Module, modules: list[torch.nn.Module], batch: int) -> list[tuple]:
    """(module, its input's shape, its output's shape) for each call of one of ``modules`` in one eval forward of
    ``model``, in call order."""
    seen = []
    hooks = [m.register_forward_hook(lambda m, args, out: seen.append((m, args[0].shape, out.shape))) for m in modules]
    try:
        with torch.no_grad():
            model.eval()(torch.randn(batch, 3, 224, 224))
    finally:
        for hook in hooks:
            hook.remove()
    return seen


def shape_preserving_blocks(model: torch.nn.Module, batch: int) -> list[tuple[torch.nn.Module, torch.Size]]:
    """(block, shape of its input) for each residual block of ``model`` whose output has its input's shape (all but
    ResNet's first block of a stage), in forward order."""
    return [
        (m, shape_in)
        for m, shape_in, shape_out in recorded_shapes(model, residual_blocks(model), batch)
        if shape_in == shape_out
    ]


def without_blocks(model: torch.nn.Module, blocks: list[torch.nn.Module]) -> torch.nn.Module:
    """A copy of ``model`` in which each of ``blocks`` (modules of ``model``) is ``nn.Identity``."""
    names = {module: name for name, module in model.named_modules()}
    stripped = copy.deepcopy(model)
    for block in blocks:
        parent, _, child = names[block].rpartition(".")
        setattr(stripped.get_submodule(parent), child, torch.nn.Identity())
    return stripped


def steps_copying_first_slice(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of the Steps ``model`` whose blocks that receive the split's first, strided slice (each StepsNet's
    first block) get a contiguous copy of it instead (a forward pre-hook)."""
    copied = copy.deepcopy(model)
    for net in stepsnet_modules(copied):
        if len(net.steps[0]):  # an empty first step hands its slice on inside the next step's concatenation
            net.steps[0][0].register_forward_pre_hook(lambda m, args: (args[0].contiguous(), *args[1:]))
    return copied


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
    """A function doing the macros' data movement once (forward, and backward when ``train``) on fresh inputs; it
    returns what the blocks would receive: the first slice, then each step's concatenation."""
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
        return produced

    return run


def spread(values: list[float]) -> str:
    """``median [q25-q75]`` of per-round ratios (the median alone for fewer than two rounds)."""
    if len(values) < 2:
        return f"{statistics.median(values):.3f}"
    q25, _, q75 = statistics.quantiles(values, n=4)
    return f"{statistics.median(values):.3f} [{q25:.3f}-{q75:.3f}]"


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


def pair_ratios(t: dict) -> dict:
    """One round's ratios from its times ``t`` (seconds, keyed "baseline step", "steps rest", ...): the pair measured,
    the blocks' time in the model and alone (Steps / baseline), the Steps model's time outside its blocks beyond its
    baseline's as a share of its step, and the pair its blocks predict if that share were zero."""
    in_model = {role: t[f"{role} step"] - t[f"{role} rest"] for role in ("baseline", "steps")}
    return {
        "measured": t["baseline step"] / t["steps step"],
        "blocks in the model": in_model["steps"] / in_model["baseline"],
        "blocks alone": t["steps blocks alone"] / t["baseline blocks alone"],
        "outside the blocks, beyond the baseline (share of the Steps step)": (t["steps rest"] - t["baseline rest"])
        / t["steps step"],
        "predicted by the blocks": t["baseline step"] / (in_model["steps"] + t["baseline rest"]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(BASELINE))
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--fused-attention",
        action="store_true",
        help="both models built with timm's experimental fused attention (Swin's windows through "
        "F.scaled_dot_product_attention; timm's default leaves them on the explicit softmax path)",
    )
    parser.add_argument(
        "--copy-first-slice",
        action="store_true",
        help="also time the Steps model with the split's strided first slice copied contiguous before the block "
        "that receives it: does the strided slice slow that block by more than the copy costs?",
    )
    args = parser.parse_args()
    if args.batch_size < 1 or args.rounds < 1:
        parser.error("--batch-size and --rounds must be at least 1")
    unknown = [name for name in args.models if name not in BASELINE]
    if unknown:
        parser.error(f"not a Steps model of an equal-FLOPs pair: {', '.join(unknown)}; one of {', '.join(BASELINE)}")
    torch.set_num_threads(1)  # process CPU time counts every thread's: one thread keeps it the step's time
    if args.fused_attention:
        set_fused_attn(True, experimental=True)
    torch.manual_seed(0)
    for name in args.models:
        nets = {"baseline": timm.create_model(BASELINE[name]), "steps": timm.create_model(name)}
        blocks = {role: shape_preserving_blocks(net, args.batch_size) for role, net in nets.items()}
        stripped = {role: without_blocks(net, [block for block, _ in blocks[role]]) for role, net in nets.items()}
        macros = [
            (m, shape)
            for m, shape, _ in recorded_shapes(nets["steps"], stepsnet_modules(nets["steps"]), args.batch_size)
        ]
        steps = {role: step_functions(net, args.batch_size) for role, net in nets.items()}
        rests = {role: step_functions(net, args.batch_size) for role, net in stripped.items()}
        if args.copy_first_slice:
            copied = steps_copying_first_slice(nets["steps"])
            steps["steps, first slice copied"] = step_functions(copied, args.batch_size)
        for mode in ("infer", "train"):
            train = mode == "train"
            jobs = {}
            for role in ("baseline", "steps"):
                jobs[f"{role} step"] = steps[role][mode]
                jobs[f"{role} rest"] = rests[role][mode]
                jobs[f"{role} blocks alone"] = replay_blocks(blocks[role], train)
            jobs["steps macro"] = replay_macro(macros, train)
            if args.copy_first_slice:
                jobs["steps step, first slice copied"] = steps["steps, first slice copied"][mode]
            times = run_interleaved(jobs, warmup=1, repeats=args.rounds, clock=CLOCKS["cpu"])
            s = {label: statistics.median(t) for label, t in times.items()}
            ratios = [pair_ratios({label: t[r] for label, t in times.items()}) for r in range(args.rounds)]
            print(
                f"{name} / {BASELINE[name]}, {mode} (batch {args.batch_size}, one thread, process CPU time, "
                f"{'fused attention, ' if args.fused_attention else ''}"
                f"{args.rounds} rounds; seconds: medians; ratios: per round, median [q25-q75]):",
                flush=True,
            )
            for role in ("baseline", "steps"):
                print(
                    f"  {role + ':':9s} step {s[role + ' step']:.3f} s, rest {s[role + ' rest']:.3f} s "
                    f"({len(blocks[role])} blocks as nn.Identity), blocks alone {s[role + ' blocks alone']:.3f} s",
                    flush=True,
                )
            print(
                f"  the macro's data movement alone {1e3 * s['steps macro']:.1f} ms "
                f"({100 * s['steps macro'] / s['steps step']:.1f} % of the Steps step; {len(macros)} StepsNet modules)",
                flush=True,
            )
            for key in ratios[0]:
                print(f"  {key}: {spread([r[key] for r in ratios])}", flush=True)
            if args.copy_first_slice:
                copied_ratio = [a / b for a, b in zip(times["steps step, first slice copied"], times["steps step"])]
                print(f"  Steps step with the first slice copied / as split: {spread(copied_ratio)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
