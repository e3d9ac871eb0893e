"""How long ``depthbench results`` takes to aggregate many run directories (goal: 10,000 in under 5 s).

    .venv/bin/python benchmarks/results_aggregate.py [--runs 10000] [--epochs 30] [--repeats 3]

Generates ``--runs`` run directories in a temporary folder, shaped like ``depthbench train`` writes them: a
meta.json, a resolved config.py of ~40 lines, and a metrics.jsonl with one eval + one epoch record per epoch and
three training-step records per epoch (``--epochs`` 30: ~150 lines, ~20 KB a run, ~200 MB in all); every fifth
run also has 21 ``depthbench eval`` records (eval_suite: robustness sets, 7 input sizes x 2 pool modes). Models
and configs are drawn from the real table rows of all five papers; a tenth of the runs are running/failed/preempted.

Timed (best of ``--repeats``, files in the page cache as after a first ``depthbench results``; wall and CPU
time, with the load average — on a shared machine the CPU time is the figure that does not depend on others):
``collect`` (find the run dirs, read meta/config/metrics into one DataFrame) and ``join`` (match the runs to the
rows of every table of the five papers, mean ± std per setting). The architecture audit is not part of it: it
is cached per code version (results/audit.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from results import compare, paper_tables, runs  # noqa: E402

CONFIG = """auto_scale_lr = None
aug = dict(
    auto_augment='rand-m9-mstd0.5-inc1',
    color_jitter=0.4,
    crop_padding=4,
    cutmix=1.0,
    hflip=0.5,
    mixup=0.8,
    pipeline='imagenet',
    reprob=0.25,
    smoothing=0.1)
batch_size = 1024
ckpt = dict(best_metric='top1', interval_minutes=30, interval_steps=0)
clip_grad = None
data = dict(
    crop_pct=0.875,
    input_size=224,
    root='/data/imagenet',
    type='imagefolder',
    workers=8)
deterministic = False
ema = dict(decay=0.99996, enable=False, warmup=False)
engine = 'accelerate'
epochs = {epochs}
eval_interval = 1
experiment = '{experiment}'
grad_accum = 1
log_interval = 10
model = dict(drop_path_rate=0.1, name='{model}', pretrained=None)
optim = dict(
    lr=0.0005,
    lr_base_batch=512,
    opt='adamw',
    weight_decay=0.05)
precision = 'bf16'
sched = dict(min_lr=1e-05, sched='cosine', warmup_epochs=5, warmup_lr=1e-06)
seed = {seed}
"""


def generate(root: Path, n: int, epochs: int) -> None:
    rows = [
        r
        for p in paper_tables.available_papers()
        for t in paper_tables.load_paper(p)
        for r in t.rows
        if r.model and not r.reason
    ]
    rng = random.Random(0)
    for i in range(n):
        row = rng.choice(rows)
        experiment = Path(row.config).stem if row.config else f"{row.model}_sweep"
        run = root / experiment / f"20261101-{i:06d}"
        run.mkdir(parents=True)
        status = "done" if i % 10 else rng.choice(["running", "failed", "preempted"])
        (run / "meta.json").write_text(
            json.dumps(
                {
                    "experiment": experiment,
                    "run_id": run.name,
                    "status": status,
                    "start": f"2026-11-01T00:00:{i}",
                    "engine": "accelerate",
                    "world_size": 8,
                    "git_commit": "0" * 40,
                    "config_file": row.config,
                    "command": f"depthbench train {row.config} seed={i % 3}",
                    "packages": {"torch": "2.14.1"},
                },
                indent=1,
            )
        )
        (run / "config.py").write_text(CONFIG.format(epochs=epochs, experiment=experiment, model=row.model, seed=i % 3))
        lines, step = [], 0
        for epoch in range(epochs):
            for _ in range(3):
                step += 10
                lines.append(
                    json.dumps(
                        {
                            "kind": "train",
                            "epoch": epoch,
                            "global_step": step,
                            "loss": 2.0,
                            "lr": 1e-3,
                            "grad_norm": 1.0,
                            "images_per_s": 900.0,
                            "step_time": 0.1,
                            "peak_mem_mb": 4000.0,
                            "eta_s": 100.0,
                        }
                    )
                )
            lines.append(
                json.dumps(
                    {
                        "kind": "epoch",
                        "epoch": epoch,
                        "global_step": step,
                        "train_loss": 2.0,
                        "images_per_s": 900.0,
                        "epoch_time_s": 100.0,
                        "train_time_s": 100.0 * epoch,
                    }
                )
            )
            lines.append(
                json.dumps(
                    {
                        "kind": "eval",
                        "epoch": epoch,
                        "global_step": step,
                        "top1": 70 + rng.random(),
                        "top5": 90.0,
                        "loss": 1.0,
                        "images": 50000,
                    }
                )
            )
        if i % 5 == 0:  # what depthbench eval appends (harness/commands/eval.py)
            evals = [
                ("imagenet-c", 224, None, "mCE"),
                ("imagenet-a", 224, None, "top1"),
                ("imagenet-r", 224, None, "top1"),
                ("imagenet-sketch", 224, None, "top1"),
                ("imagenet-v2", 224, None, "top1"),
                ("val", 224, "normal", "top5"),
                ("val", 224, "linear", "top5"),
            ]
            evals += [
                ("val", size, mode, "top1")
                for size in (224, 256, 320, 384, 480, 512, 640)
                for mode in ("normal", "linear")
            ][:14]
            lines += [
                json.dumps(
                    {
                        "kind": "eval_suite",
                        "dataset": d,
                        "protocol": d,
                        "model": row.model,
                        "input_size": size,
                        "pool_mode": mode,
                        "analysis": "none",
                        "model_overrides": {},
                        "checkpoint": str(run / "best.pth"),
                        "ema": False,
                        "metric": metric,
                        "value": 50 + rng.random(),
                        "images": 50000,
                    }
                )
                for d, size, mode, metric in evals
            ]
        (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")


def cpu_time() -> float:
    """CPU seconds of this process and its finished children. The collection's pool workers are children of
    multiprocessing's forkserver, not of this process, so only the one-process figure is the whole CPU time."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10000)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    tables = [t for p in paper_tables.available_papers() for t in paper_tables.load_paper(p)]
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        generate(Path(tmp), args.runs, args.epochs)
        size = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file())
        print(f"generated {args.runs} run directories ({size / 2**20:.0f} MiB) in {time.perf_counter() - t0:.1f} s")
        for workers in (None, 1):  # as depthbench results runs it (a process per CPU), then in one process
            best = None
            for _ in range(args.repeats):
                t0, c0 = time.perf_counter(), cpu_time()
                frame, problems = runs.collect([tmp], workers=workers)
                t1 = time.perf_counter()
                index = compare.RunIndex(frame)
                views = [compare.view_table(t, index) for t in tables]
                t2, c2 = time.perf_counter(), cpu_time()
                if best is None or t2 - t0 < best[0]:
                    best = (t2 - t0, t1 - t0, t2 - t1, c2 - c0)
            filled = sum(
                1 for v in views for line in v.lines for c in line.cells.values() if c.kind == "result" and c.n
            )
            assert len(frame) == args.runs, (len(frame), problems.summary())
            load = os.getloadavg()[0]
            parallel = workers != 1 and args.runs >= runs.PARALLEL_MIN_RUNS  # as runs.read_runs decides
            how = f"{min(os.cpu_count() or 1, 8)} processes" if parallel else "1 process"
            cpu = "CPU of the forkserver's workers not counted" if parallel else f"{best[3]:.2f} s CPU"
            print(
                f"{how}: collect {best[1]:.2f} s + join {best[2]:.2f} s = {best[0]:.2f} s wall ({cpu}) for "
                f"{len(frame)} runs ({filled} result cells filled, {len(problems)} problems); "
                f"{os.cpu_count()} CPUs, load average {load:.1f}"
            )


if __name__ == "__main__":
    main()
