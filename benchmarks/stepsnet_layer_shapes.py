"""Steps-DeiT-S against DeiT-S, layer kind by layer kind: is the gap in the narrower GEMMs, in the attention cores,
or in the per-token element-wise work?

    .venv/bin/python benchmarks/stepsnet_layer_shapes.py [--mode infer|train] [--batch-size 8] [--rounds 5]

Each model is rewritten as three stacks of the exact operations its blocks run, on random inputs of the blocks'
shapes (batch × 197 tokens; DeiT-S: 12 blocks at 384 channels, 6 heads; Steps-DeiT-S: [192, 3]×12, [272, 4]×6,
[384, 6]×6, models/stepsnet.py):

- ``gemm``: per block the four linear layers (qkv w→3w, proj w→w, fc1 w→4w, fc2 4w→w);
- ``attention``: per block the attention core (``F.scaled_dot_product_attention`` over heads × 197 × head_dim);
- ``elementwise``: per block two LayerNorms, the GELU over 4w channels and two residual adds.

The stacks of the two models run in interleaved rounds (A B, B A, ...) and each stack is timed in the process's
CPU time (``time.process_time``, one thread: a loaded machine's waiting is left out). Printed: seconds per stack,
the Steps/DeiT time ratio per stack (median over rounds), and each stack's FLOPs ratio. No model code is involved:
if the GEMM stack alone already runs slower per FLOP, the gap is the shapes', not the implementation's.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

DEIT_S = ((384, 6, 12),)
STEPS_DEIT_S = ((192, 3, 12), (272, 4, 6), (384, 6, 6))
TOKENS = 197


def blocks(steps):
    for width, heads, depth in steps:
        for _ in range(depth):
            yield width, heads


def make_stacks(steps, batch: int, train: bool):
    """{kind: (callable running the stack once, multiply-accumulates of its GEMMs or attention products)}."""
    rows = batch * TOKENS
    gemms, cores, elementwise = [], [], []
    macs = {"gemm": 0, "attention": 0, "elementwise": 0}
    for width, heads in blocks(steps):
        for c_in, c_out in ((width, 3 * width), (width, width), (width, 4 * width), (4 * width, width)):
            x = torch.randn(rows, c_in, requires_grad=train)
            gemms.append((x, torch.randn(c_out, c_in, requires_grad=train), torch.zeros(c_out, requires_grad=train)))
            macs["gemm"] += rows * c_in * c_out
        q, k, v = (torch.randn(batch, heads, TOKENS, width // heads, requires_grad=train) for _ in range(3))
        cores.append((q, k, v))
        macs["attention"] += 2 * batch * heads * TOKENS * TOKENS * (width // heads)
        elementwise.append(
            (
                torch.randn(rows, width, requires_grad=train),
                torch.randn(rows, 4 * width, requires_grad=train),
                torch.ones(width, requires_grad=train),
                torch.zeros(width, requires_grad=train),
            )
        )

    def finish(outputs):
        if train:
            torch.autograd.backward(outputs, [torch.ones_like(o) for o in outputs])

    def run_gemm():
        finish([F.linear(x, w, b) for x, w, b in gemms])

    def run_attention():
        finish([F.scaled_dot_product_attention(q, k, v) for q, k, v in cores])

    def run_elementwise():
        outs = []
        for x, hidden, weight, bias in elementwise:
            y = F.layer_norm(x, x.shape[-1:], weight, bias)
            y = x + F.layer_norm(y, y.shape[-1:], weight, bias)
            outs += [y + x, F.gelu(hidden)]
        finish(outs)

    return {"gemm": run_gemm, "attention": run_attention, "elementwise": run_elementwise}, macs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["infer", "train"], default="infer")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    train = args.mode == "train"
    stacks, macs = {}, {}
    for name, steps in (("DeiT-S", DEIT_S), ("Steps-DeiT-S", STEPS_DEIT_S)):
        stacks[name], macs[name] = make_stacks(steps, args.batch_size, train)
    times = {(name, kind): [] for name in stacks for kind in stacks[name]}
    context = torch.enable_grad if train else torch.inference_mode
    with context():
        for name in stacks:  # warm-up
            for run in stacks[name].values():
                run()
        for round_index in range(args.rounds):
            order = list(stacks) if round_index % 2 == 0 else list(stacks)[::-1]
            for name in order:
                for kind, run in stacks[name].items():
                    start = time.process_time()
                    run()
                    times[name, kind].append(time.process_time() - start)
    print(f"{args.mode}, batch {args.batch_size}, 1 thread, {args.rounds} interleaved rounds, process CPU time")
    print(f"{'stack':<12} {'DeiT-S s':>9} {'Steps s':>9} {'time ratio':>10} {'MAC ratio':>9} {'per-MAC speed':>13}")
    for kind in stacks["DeiT-S"]:
        base, cand = times["DeiT-S", kind], times["Steps-DeiT-S", kind]
        ratio = statistics.median(c / b for b, c in zip(base, cand))
        line = f"{kind:<12} {statistics.median(base):9.3f} {statistics.median(cand):9.3f} {ratio:10.3f}"
        if macs["DeiT-S"][kind]:  # the element-wise stack has no multiply-accumulates
            mac_ratio = macs["Steps-DeiT-S"][kind] / macs["DeiT-S"][kind]
            line += f" {mac_ratio:9.3f} {mac_ratio / ratio:13.3f}"
        print(line)
    total = [sum(times["DeiT-S", k][i] for k in stacks["DeiT-S"]) for i in range(args.rounds)]
    total_steps = [sum(times["Steps-DeiT-S", k][i] for k in stacks["DeiT-S"]) for i in range(args.rounds)]
    ratio = statistics.median(c / b for b, c in zip(total, total_steps))
    print(f"{'all three':<12} {statistics.median(total):9.3f} {statistics.median(total_steps):9.3f} {ratio:10.3f}")


if __name__ == "__main__":
    main()
