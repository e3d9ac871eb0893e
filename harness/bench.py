"""``depthbench bench``: throughput and peak memory of registered models (forward or train step).

Timm-benchmark style: warm-up iterations, then timed iterations on random inputs, fp32 unless ``--amp``.
Peak memory is ``torch.cuda.max_memory_allocated`` on GPU; on CPU it is the peak resident-set growth of the
process from before the first step (sampled every 2 ms), i.e. activations, gradients, optimizer state and
workspaces, not the weights. Measure one model per process for CPU memory you want to compare.
Numbers for the README come from this command; tests never assert timings.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from contextlib import nullcontext

import torch
from torch import nn


class _PeakRSS:
    """Peak RSS growth of this process while the context is active (CPU memory of a run)."""

    def __init__(self, interval: float = 0.002):
        import psutil

        self.proc, self.interval, self.peak, self._stop = psutil.Process(), interval, 0, threading.Event()

    def __enter__(self):
        self.base = self.proc.memory_info().rss
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss - self.base)
            time.sleep(self.interval)

    def __exit__(self, *exc):
        self._stop.set()
        self.thread.join()


def measure(model: nn.Module, input_size=224, batch_size: int = 32, mode: str = "infer", warmup: int = 3,
            iters: int = 10, device: str = "cpu", amp_dtype: torch.dtype | None = None,
            inputs: tuple | None = None) -> dict:
    """Images (samples) per second, ms per step and peak memory of ``mode`` ∈ {infer, train}."""
    from harness.flops import example_inputs

    if mode not in ("infer", "train"):
        raise ValueError(f"mode must be 'infer' or 'train', not {mode!r}")
    model = model.to(device)
    inputs = tuple(t.to(device) for t in (inputs or example_inputs(model, input_size, batch_size)))
    autocast = torch.autocast(device_type=torch.device(device).type, dtype=amp_dtype) if amp_dtype else nullcontext()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4) if mode == "train" else None
    model.train(mode == "train")
    cuda = torch.device(device).type == "cuda"

    def step():
        if mode == "infer":
            with torch.inference_mode(), autocast:
                model(*inputs)
        else:
            with autocast:
                out = model(*inputs)
                loss = (out if torch.is_tensor(out) else out[0]).float().mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    if cuda:
        torch.cuda.reset_peak_memory_stats()
    # CPU: sample from before the first step — once warmed up, the allocator reuses freed memory and the
    # process stops growing, so a peak taken over the timed loop alone reads ~0.
    memory = nullcontext() if cuda else _PeakRSS()
    with memory:
        for _ in range(warmup):
            step()
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(iters):
            step()
        if cuda:
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() if cuda else memory.peak
    return {"mode": mode, "batch_size": batch_size, "samples_per_s": batch_size * iters / elapsed,
            "step_ms": 1000 * elapsed / iters, "peak_mem_mb": peak / 2**20, "device": device,
            "threads": torch.get_num_threads()}


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("bench", help="throughput and peak memory of models (inference or training step)")
    p.add_argument("models", nargs="+", help="registered model names")
    p.add_argument("--mode", choices=["infer", "train"], default="infer")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--input-size", type=int, nargs="+", default=None,
                   help="side or H W (default: the model's default input size)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--amp", choices=["bf16", "fp16"], help="autocast dtype (default fp32)")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=main)


def main(args) -> int:
    from harness.flops import UnknownModelError, build_model
    from harness.model_list import default_input_size

    if args.threads:
        torch.set_num_threads(args.threads)
    amp = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.amp)
    results = []
    for name in args.models:
        try:
            model = build_model(name, device="cpu")
        except UnknownModelError as e:
            print(f"depthbench bench: error: {e}", file=sys.stderr)
            return 2
        size = tuple(args.input_size) if args.input_size else default_input_size(name)
        result = {"model": name, "input_size": list(size),
                  **measure(model, size, args.batch_size, args.mode, args.warmup, args.iters, args.device, amp)}
        results.append(result)
        if not args.json:
            print(f"{name:<36} {args.mode:<5} batch {args.batch_size:<4} {result['samples_per_s']:9.1f} samples/s "
                  f"{result['step_ms']:9.1f} ms/step  peak {result['peak_mem_mb']:8.0f} MiB  ({args.device}, "
                  f"{result['threads']} threads)", flush=True)
        del model
    if args.json:
        print(json.dumps(results, indent=1))
    return 0
