"""How much of a Steps model's step is the StepsNet macro's own work (our code), and how much its blocks' (timm's)?

    .venv/bin/python benchmarks/stepsnet_macro_share.py [--models steps_deit_small steps_swin_tiny steps_resnet50]
        [--batch-size 8] [--rounds 5] [--threads 1]

The macro (models/stepsnet.py, ``StepsNet.forward_intermediates``) adds nothing to a Steps model but data
movement: one split of its input into the step slices, one concatenation per step boundary (the previous output,
then the next raw slice), the copy a block makes of the first, strided slice, and in backward the split's
concatenation of the slices' gradients. This script records the input of every StepsNet module of a model (a
forward pre-hook on one real step) and replays exactly that data movement on tensors of those shapes -- the split,
``.contiguous()`` of the first slice, the step concatenations, and in training their backward -- in interleaved
rounds with the whole model's step, each timed in the process's CPU time (``time.process_time``; a loaded machine's
waiting is left out). Printed per model and mode: the model's step, the macro's replay, and the macro's share of
the step. A share of a few per cent says that the Steps models' distance from their baselines (docs/benchmarks.md,
"Issue 55") is their blocks' shapes, not how the macro is implemented.
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
from models.stepsnet import StepsNet  # noqa: E402

MODELS = ("steps_deit_small", "steps_swin_tiny", "steps_resnet50")


def macro_inputs(model: torch.nn.Module, batch: int) -> list[tuple[StepsNet, torch.Size]]:
    """Every StepsNet module of ``model`` with the shape of the input it receives (one eval forward)."""
    seen, hooks = [], []
    for module in model.modules():
        if isinstance(module, StepsNet):
            hooks.append(module.register_forward_pre_hook(lambda m, args: seen.append((m, args[0].shape))))
    try:
        with torch.no_grad():
            model.eval()(torch.randn(batch, 3, 224, 224))
    finally:
        for hook in hooks:
            hook.remove()
    return seen


def replay(macros: list[tuple[StepsNet, torch.Size]], train: bool):
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if args.batch_size < 1 or args.rounds < 1 or args.threads < 1:
        parser.error("--batch-size, --rounds and --threads must be at least 1")
    unknown = [name for name in args.models if name not in timm.list_models("steps_*")]
    if unknown:
        parser.error(f"not a registered Steps model: {', '.join(unknown)}; see `depthbench models --family stepsnet`")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    for name in args.models:
        model = timm.create_model(name)
        macros = macro_inputs(model, args.batch_size)
        x = torch.randn(args.batch_size, 3, 224, 224)
        target = torch.randint(0, 1000, (args.batch_size,))
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)

        def infer():
            with torch.no_grad():
                model.eval()(x)

        def train():
            model.train()
            torch.nn.functional.cross_entropy(model(x), target).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        for mode, step, macro in (("infer", infer, replay(macros, False)), ("train", train, replay(macros, True))):
            times = {"model": [], "macro": []}
            step(), macro()  # warm-up
            for r in range(args.rounds):
                for label, fn in (("model", step), ("macro", macro))[:: 1 if r % 2 == 0 else -1]:
                    start = time.process_time()
                    fn()
                    times[label].append(time.process_time() - start)
            model_s, macro_s = statistics.median(times["model"]), statistics.median(times["macro"])
            print(
                f"{name:18s} {mode}: step {model_s:.3f} s, the macro's data movement {1e3 * macro_s:.1f} ms "
                f"({100 * macro_s / model_s:.1f} % of the step; {len(macros)} StepsNet modules, batch "
                f"{args.batch_size}, {args.threads} thread(s), process CPU time, {args.rounds} rounds)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
