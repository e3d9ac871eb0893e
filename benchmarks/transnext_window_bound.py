"""How far a faster window branch could take TransNeXt's training step against Swin-T's, on CPU (issue 55).

    .venv/bin/python benchmarks/transnext_window_bound.py [--batch-size 8] [--rounds 5] [--threads 2]

Five training steps in interleaved rounds (``harness.measure.bench``'s ``ModelStep`` and ``run_interleaved``):
Swin-T; TransNeXt-Tiny as it runs on the CPU (its window branch and ConvGLU's tail in the compiled kernels,
models/csrc/transnext_window.cpp and transnext_convglu.cpp); the same with the branch in PyTorch ops
(``transnext.CPU_WINDOW_KERNEL = False``); the same with ConvGLU's tail in PyTorch ops (``CPU_CONVGLU_KERNEL =
False``); and TransNeXt-Tiny with the branch (the window logits, the softmax over window and pooled logits, both weighted
sums, and their backward) replaced by a stand-in that returns v and passes the gradient through -- every other
operation of the step runs as it is. The step without the branch is what an infinitely fast window kernel would
leave, so TransNeXt ÷ Swin-T measured that way is the most any window kernel could reach. Printed beside it:

- the branch's time budget for a throughput goal (``--goal``, TransNeXt ÷ Swin-T): the step time the goal allows
  minus the step without the branch;
- the bytes a fused kernel would still have to move (each tensor the branch takes in or gives back, read or
  written once, forward and backward, summed over the blocks of one step), and that traffic's time at the
  streaming bandwidth measured here (``torch.add`` over warm buffers of the stage-1 map's size): a floor under
  any kernel's time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import timm  # noqa: E402

import models  # noqa: E402,F401
from models import transnext  # noqa: E402
from harness.measure.bench import ModelStep, run_interleaved  # noqa: E402

FLOAT_BYTES = 4


class _NoWindowBranch(torch.autograd.Function):
    """The branch's signature at (almost) no cost: x = v, and the gradient goes to v only. Records the shapes the
    real branch would have taken, for the traffic count."""

    calls: list = []

    @staticmethod
    def forward(ctx, q, k, v, bias_local, logits_pool, v_pool, pos, height, width, window):
        _NoWindowBranch.calls.append((tuple(q.shape), tuple(logits_pool.shape), pos is not None, window))
        ctx.shapes = [None if t is None else t.shape for t in (q, k, v, bias_local, logits_pool, v_pool, pos)]
        return v.clone()

    @staticmethod
    def backward(ctx, grad):
        grads = [None if s is None else grad.new_zeros(s) for s in ctx.shapes]
        grads[2] = grad
        return (*grads, None, None, None)


@contextmanager
def window_branch_free():
    real, kernel = transnext._WindowAttention, transnext.CPU_WINDOW_KERNEL
    transnext._WindowAttention, transnext.CPU_WINDOW_KERNEL = _NoWindowBranch, False  # the ops' branch is replaced
    try:
        yield
    finally:
        transnext._WindowAttention, transnext.CPU_WINDOW_KERNEL = real, kernel


def branch_bytes(calls) -> int:
    """Bytes one step's window branches take in and give back, each tensor once (see the module's docstring)."""
    total = 0
    for (b, heads, d, n), (_, _, _, pool), has_pos, window in calls:
        taps = window * window
        groups = b * heads
        qkv_map = groups * d * n  # one of q, k, v, x and their gradients
        softmax = groups * n * (taps + pool)  # saved for backward; its gradient has the same size
        logits_pool = groups * n * pool
        pos = groups * taps * n if has_pos else 0
        forward = 3 * qkv_map + logits_pool + pos + qkv_map + softmax  # q, k, v, pooled logits, pos -> x, softmax
        backward = qkv_map + 3 * qkv_map + softmax + pos + 3 * qkv_map + softmax + pos  # -> dq, dk, dv, dlogits, dpos
        total += FLOAT_BYTES * (forward + backward)
    return total


def streaming_gb_per_s(elements: int, rounds: int = 15) -> float:
    """``c = a + b`` over warm buffers: bytes read and written per second (median of ``rounds``)."""
    a, b, c = torch.randn(elements), torch.randn(elements), torch.empty(elements)
    torch.add(a, b, out=c)
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        torch.add(a, b, out=c)
        seconds.append(time.perf_counter() - start)
    return 3 * FLOAT_BYTES * elements / statistics.median(seconds) / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--goal", type=float, default=0.67, help="TransNeXt-Tiny ÷ Swin-T training throughput")
    args = parser.parse_args()
    if args.batch_size < 1 or args.rounds < 1 or args.threads < 1 or not 0 < args.goal:
        parser.error("--batch-size, --rounds and --threads must be at least 1, and --goal above 0")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    shape = (3, 224, 224)
    swin = ModelStep(timm.create_model("swin_tiny_patch4_window7_224"), shape, args.batch_size, "train")
    real = ModelStep(timm.create_model("transnext_tiny"), shape, args.batch_size, "train")
    ops = ModelStep(timm.create_model("transnext_tiny"), shape, args.batch_size, "train")
    glu_ops = ModelStep(timm.create_model("transnext_tiny"), shape, args.batch_size, "train")
    free = ModelStep(timm.create_model("transnext_tiny"), shape, args.batch_size, "train")

    def without(kernel: str, step):
        def run():
            setattr(transnext, kernel, False)
            try:
                step()
            finally:
                setattr(transnext, kernel, True)

        return run

    def free_step():
        with window_branch_free():
            free()

    steps = {
        "swin_t": swin,
        "transnext_t": real,
        "transnext_t_pytorch_ops": without("CPU_WINDOW_KERNEL", ops),
        "transnext_t_convglu_ops": without("CPU_CONVGLU_KERNEL", glu_ops),
    }
    times = run_interleaved(
        {**steps, "transnext_t_no_window_branch": free_step}, warmup=1, iters=1, repeats=args.rounds
    )
    median = {label: statistics.median(seconds) for label, seconds in times.items()}
    for label, seconds in times.items():
        print(f"{label:30s} s per training step (batch {args.batch_size}): {', '.join(f'{s:.3f}' for s in seconds)}")

    def ratio(label: str) -> float:  # Swin-T's step time ÷ this one's, per round: throughput ratio
        return statistics.median(s / t for s, t in zip(times["swin_t"], times[label]))

    free_s = median["transnext_t_no_window_branch"]
    budget = median["swin_t"] / args.goal - free_s
    print(
        f"TransNeXt-T ÷ Swin-T throughput: {ratio('transnext_t'):.3f}x (kernels), "
        f"{ratio('transnext_t_pytorch_ops'):.3f}x (the window branch in PyTorch ops), "
        f"{ratio('transnext_t_convglu_ops'):.3f}x (ConvGLU's tail in PyTorch ops); without the window branch "
        f"{ratio('transnext_t_no_window_branch'):.3f}x (the most any window kernel reaches). The goal {args.goal}x "
        f"leaves the branch {budget:.3f} s"
    )
    for label in ("transnext_t", "transnext_t_pytorch_ops"):
        branch = median[label] - free_s
        print(f"  the branch, {label}: {branch:.3f} s of {median[label]:.3f} s ({100 * branch / median[label]:.0f} %)")
    calls = _NoWindowBranch.calls[-len(_NoWindowBranch.calls) // (args.rounds + 1) :]  # one step's blocks
    traffic = branch_bytes(calls)
    (b, heads, d, n), *_ = calls[0]
    bandwidth = streaming_gb_per_s(b * heads * d * n)
    print(
        f"A fused branch moves at least {traffic / 1e9:.2f} GB per step ({len(calls)} blocks); at {bandwidth:.0f} GB/s "
        f"(warm streaming, stage-1 map size) that is {traffic / 1e9 / bandwidth:.3f} s. "
        f"{args.threads} threads, load average {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
