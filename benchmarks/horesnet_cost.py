"""Relative time and memory of HO-ResNet's schemes at equal depth and parameters (paper Table 2), on CPU.

    .venv/bin/python benchmarks/horesnet_cost.py [--depth 58] [--batch-size 8] [--repeats 3] [--json FILE]

What it measures, for Euler, Midpoint, RK4 (blend and y = x + k4), Verner fixed and Verner with learnable h:
- time: ms per training step (forward, backward, SGD step) and per inference forward, each the minimum over
  ``--repeats`` runs of ``harness.measure.bench.measure`` (schemes interleaved, so load drifts hit all of them), and
  the process CPU time per step, which other processes on a shared machine barely change (with one thread);
- memory, three ways: ``measure``'s peak RSS growth of one training step and one inference forward, taken in a
  fresh process per model with ``MALLOC_MMAP_THRESHOLD_=65536`` (glibc then returns every freed activation to
  the OS, so RSS follows live memory instead of the allocator's high-water mark); the peak of live
  activations during an inference forward (every tensor an aten op returns, tracked until freed); and the
  activations autograd saves for backward in a training forward. The last two are deterministic.
Ratios are against Euler. Beside them: the paper's Table 2 (memory 1 / 1 / 1.5 (1) / 7, time 1 / 1 / 1 /
1.15-1.2; conditions not given) and the spec's CPU reference (§7 C6: train-step time 1 / 1.03 / 1.07 / 1.08 /
1.22 / 1.43 at ResNet-58, batch 8, 2 threads; C7: inference live peak 1 / 1.33 / 1.67 / - / 3.33 of an
implementation that keeps every k). Our block frees each k_j once no later stage reads it and accumulates
the output as it goes, so its RK4 memory is lower than that naive reference.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import weakref
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import timm  # noqa: E402

import models  # noqa: E402,F401  (registers the horesnet models)
from harness.measure.bench import measure  # noqa: E402
from harness.engine.models import build_model  # noqa: E402

# label -> (registered suffix, kwargs, paper Table 2 memory, paper time, spec C6 time, spec C7 live memory)
SCHEMES = {
    "Euler": ("euler", {}, "1x", "1x", 1.00, 1.00),
    "Midpoint": ("midpoint", {}, "1x", "1x", 1.03, 1.33),
    "RK4": ("rk4", {}, "1.5x", "1x", 1.07, 1.67),
    "RK4 (x+k4)": ("rk4", {"rk4_output": "k4_only"}, "1x", "-", 1.08, None),
    "Verner": ("verner", {}, "7x", "1.15-1.2x", 1.22, 3.33),
    "Verner ada": ("verner_ada", {}, "-", "-", 1.43, None),
}


class LiveActivationPeak(TorchDispatchMode):
    """Peak bytes of the storages that aten ops return, alive at the same time (weights and inputs excluded)."""

    def __init__(self):
        super().__init__()
        self.storages: dict[int, list[int]] = {}  # data_ptr -> [nbytes, live tensors]
        self.current = self.peak = 0

    def _release(self, ptr: int):
        entry = self.storages.get(ptr)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.current -= entry[0]
            del self.storages[ptr]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                storage = t.untyped_storage()
                ptr = storage.data_ptr()
                if ptr == 0:
                    continue
                entry = self.storages.setdefault(ptr, [storage.nbytes(), 0])
                if entry[1] == 0:
                    self.current += entry[0]
                    self.peak = max(self.peak, self.current)
                entry[1] += 1
                weakref.finalize(t, self._release, ptr)
        return out


def live_inference_peak(model: torch.nn.Module, x: torch.Tensor) -> int:
    model.eval()
    tracker = LiveActivationPeak()
    with torch.no_grad(), tracker:
        model(x)
    return tracker.peak


def saved_for_backward(model: torch.nn.Module, x: torch.Tensor) -> int:
    """Bytes of the distinct non-parameter storages autograd keeps for backward after one training forward."""
    model.train()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)
    del out
    return sum(saved.values())


def rss_probe(name: str, kwargs: dict, batch_size: int, threads: int) -> dict:
    """``measure``'s peak RSS growth (MiB) for one train step and one inference forward, in a fresh process."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    cmd = [
        sys.executable,
        __file__,
        "--rss-probe",
        name,
        json.dumps(kwargs),
        "--batch-size",
        str(batch_size),
        "--threads",
        str(threads),
    ]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _rss_probe_main(name: str, kwargs: dict, batch_size: int) -> int:
    model = build_model(name, device="cpu", **kwargs)
    result = {
        mode: measure(model, (3, 32, 32), batch_size, mode, warmup=1, iters=1)["peak_mem_mb"]
        for mode in ("infer", "train")
    }
    print(json.dumps(result))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--depth", type=int, default=58, help="ResNet-L of every scheme (n_F must suit all; 58 does)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3, help="timing repeats; the minimum is reported")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps before each timed run")
    p.add_argument("--iters", type=int, default=2, help="timed steps per run")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--rss-probe", nargs=2, metavar=("MODEL", "KWARGS_JSON"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.rss_probe:
        return _rss_probe_main(args.rss_probe[0], json.loads(args.rss_probe[1]), args.batch_size)
    size = (3, 32, 32)
    missing = sorted(
        {
            f"horesnet{args.depth}_{suffix}"
            for suffix, *_ in SCHEMES.values()
            if not timm.is_model(f"horesnet{args.depth}_{suffix}")
        }
    )
    if missing:
        p.error(f"--depth {args.depth}: {', '.join(missing)} not registered; every scheme exists at depth 58")
    load_before = os.getloadavg()
    print(
        f"HO-ResNet-{args.depth} on CPU, batch {args.batch_size}, {args.threads} threads, input {size}; "
        f"load average {load_before[0]:.2f} / {load_before[1]:.2f} / {load_before[2]:.2f} "
        f"on {os.cpu_count()} cores",
        flush=True,
    )

    rows = {}
    for label, (suffix, kwargs, *_) in SCHEMES.items():
        torch.manual_seed(0)
        model = build_model(f"horesnet{args.depth}_{suffix}", device="cpu", **kwargs)
        x = torch.randn(args.batch_size, *size)
        name = f"horesnet{args.depth}_{suffix}"
        rss = rss_probe(name, kwargs, args.batch_size, args.threads)
        rows[label] = {
            "model": name,
            "kwargs": kwargs,
            "rss_infer_mib": rss["infer"],
            "rss_train_mib": rss["train"],
            "live_infer_mib": live_inference_peak(model, x) / 2**20,
            "saved_train_mib": saved_for_backward(model, x) / 2**20,
            "train_ms": [],
            "infer_ms": [],
            "train_cpu_ms": [],
            "infer_cpu_ms": [],
        }
        print(
            f"  {label:<11} peak RSS growth train {rss['train']:7.1f} MiB, infer {rss['infer']:6.1f} MiB; "
            f"live inference peak {rows[label]['live_infer_mib']:6.1f} MiB; "
            f"saved for backward {rows[label]['saved_train_mib']:7.1f} MiB",
            flush=True,
        )

    for repeat in range(args.repeats):
        for label, (suffix, kwargs, *_) in SCHEMES.items():
            torch.manual_seed(0)
            model = build_model(rows[label]["model"], device="cpu", **kwargs)
            for mode in ("train", "infer"):
                measure(model, size, args.batch_size, mode, warmup=args.warmup, iters=1)  # warm-up, not recorded
                cpu = time.process_time()
                r = measure(model, size, args.batch_size, mode, warmup=0, iters=args.iters)
                rows[label][f"{mode}_ms"].append(r["step_ms"])
                rows[label][f"{mode}_cpu_ms"].append(1000 * (time.process_time() - cpu) / args.iters)
            print(
                f"  repeat {repeat + 1}/{args.repeats} {label:<11} train {rows[label]['train_ms'][-1]:8.1f} ms "
                f"(CPU {rows[label]['train_cpu_ms'][-1]:8.1f})  infer {rows[label]['infer_ms'][-1]:8.1f} ms "
                f"(CPU {rows[label]['infer_cpu_ms'][-1]:8.1f})",
                flush=True,
            )
            del model

    base = rows["Euler"]
    load_after = os.getloadavg()
    print(f"\nload average after: {load_after[0]:.2f} / {load_after[1]:.2f} / {load_after[2]:.2f}\n")
    header = (
        "scheme",
        "train ms",
        "x",
        "CPU x",
        "infer ms",
        "x",
        "CPU x",
        "paper time",
        "spec C6",
        "RSS train",
        "x",
        "RSS infer",
        "x",
        "live infer",
        "x",
        "paper mem",
        "spec C7",
        "saved",
        "x",
    )
    lines = [header]
    for label, (suffix, kwargs, paper_mem, paper_time, spec_time, spec_mem) in SCHEMES.items():
        r = rows[label]
        train, infer = min(r["train_ms"]), min(r["infer_ms"])
        r.update(
            train_ms_min=train,
            infer_ms_min=infer,
            train_x=train / min(base["train_ms"]),
            infer_x=infer / min(base["infer_ms"]),
            train_cpu_x=min(r["train_cpu_ms"]) / min(base["train_cpu_ms"]),
            infer_cpu_x=min(r["infer_cpu_ms"]) / min(base["infer_cpu_ms"]),
            rss_train_x=r["rss_train_mib"] / base["rss_train_mib"],
            rss_infer_x=r["rss_infer_mib"] / base["rss_infer_mib"],
            live_x=r["live_infer_mib"] / base["live_infer_mib"],
            saved_x=r["saved_train_mib"] / base["saved_train_mib"],
        )
        lines.append(
            (
                label,
                f"{train:.0f}",
                f"{r['train_x']:.2f}",
                f"{r['train_cpu_x']:.2f}",
                f"{infer:.0f}",
                f"{r['infer_x']:.2f}",
                f"{r['infer_cpu_x']:.2f}",
                paper_time,
                f"{spec_time:.2f}",
                f"{r['rss_train_mib']:.0f}",
                f"{r['rss_train_x']:.2f}",
                f"{r['rss_infer_mib']:.1f}",
                f"{r['rss_infer_x']:.2f}",
                f"{r['live_infer_mib']:.1f}",
                f"{r['live_x']:.2f}",
                paper_mem,
                "-" if spec_mem is None else f"{spec_mem:.2f}",
                f"{r['saved_train_mib']:.0f}",
                f"{r['saved_x']:.2f}",
            )
        )
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(str(v).rjust(w) if i else str(v).ljust(w) for i, (v, w) in enumerate(zip(line, widths))))
    print(
        "\ntimes: wall-clock ms per step, min over repeats (CPU x: ratio of process CPU time per step, robust to"
        " other load when --threads 1); memory in MiB; x = ratio to Euler. RSS = measure()'s peak RSS growth;"
        " live infer = peak of live activations in an inference forward; saved = activations kept for backward."
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "depth": args.depth,
                    "batch_size": args.batch_size,
                    "threads": args.threads,
                    "load_before": load_before,
                    "load_after": load_after,
                    "rows": rows,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
