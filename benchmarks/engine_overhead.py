"""Training-step throughput of the engine vs. a bare PyTorch loop: same model, data, batch, optimizer, CPU.

    .venv/bin/python benchmarks/engine_overhead.py [--model resnet18] [--input-size 64] [--batch-size 32]
                                                   [--steps 20] [--rounds 5] [--threads N]

The engine side is ``harness.engine.loop.train_one_epoch`` exactly as ``depthbench train`` runs it: the Accelerate
backend, our exact-resume data path (seeded per-sample augmentation, resumable sampler), the per-step all-reduce
of loss and flags (a ``.item()`` sync), timm's scheduler, metrics.jsonl + TensorBoard every ``log_interval``
steps. Checkpoints and evaluation are not part of a training step and are left out. The bare side is
``for x, y in loader: loss = ce(model(x), y); loss.backward(); opt.step(); opt.zero_grad()``.

Rounds alternate (bare, engine, bare, ...) after a warm-up epoch each, so other load on the machine affects
both alike. Overhead = bare / engine throughput - 1, from the median of the per-round ratios (and, as a
cross-check, from the best round of each side).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

import timm
import torch
import torch.nn.functional as F
from mmengine import Config
from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import models  # noqa: E402,F401
from harness.core.rundir import RunDir  # noqa: E402
from harness.engine.backends import AccelerateBackend  # noqa: E402
from harness.engine.builders import TrainingObjects, build_optimizer, build_scheduler  # noqa: E402
from harness.engine.data import SeededSamples, TrainSampler  # noqa: E402
from harness.engine.loop import RunLog, TrainState, train_one_epoch  # noqa: E402
from harness.tasks.losses import TrainingLoss  # noqa: E402


class Tensors(torch.utils.data.Dataset):
    def __init__(self, n: int, size: int, classes: int):
        g = torch.Generator().manual_seed(0)
        self.images = torch.randn(n, 3, size, size, generator=g)
        self.targets = torch.randint(0, classes, (n,), generator=g)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        return self.images[i], int(self.targets[i])


def bare_epoch(model, loader, optimizer) -> float:
    model.train()
    start = time.perf_counter()
    for images, targets in loader:
        loss = F.cross_entropy(model(images), targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet18")
    p.add_argument("--input-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=20, help="optimizer steps per timed epoch")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    cfg = Config.fromfile(str(Path(__file__).resolve().parent.parent / "configs/_base_/schedules/deit_300e.py"))
    cfg.merge_from_dict(
        {
            "optim.opt": "momentum",
            "optim.lr": 0.01,
            "optim.lr_base_batch": None,
            "optim.weight_decay": 0.0,
            "optim.eps": None,
            "optim.betas": None,
            "sched.warmup_epochs": 0,
            "batch_size": args.batch_size,
            "epochs": 1000,
        }
    )
    dataset = Tensors(args.steps * args.batch_size, args.input_size, 10)
    torch.manual_seed(0)
    bare_model = timm.create_model(args.model, num_classes=10)
    engine_model = timm.create_model(args.model, num_classes=10)
    engine_model.load_state_dict(bare_model.state_dict())

    bare_loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, drop_last=True)
    bare_optimizer = torch.optim.SGD(bare_model.parameters(), lr=0.01, momentum=0.9)

    backend = AccelerateBackend("fp32", 1)
    optimizer = build_optimizer(engine_model, cfg)
    model, optimizer = backend.prepare(engine_model, optimizer)
    scheduler = build_scheduler(optimizer, cfg, args.steps)
    loader = DataLoader(
        SeededSamples(dataset), batch_size=args.batch_size, drop_last=True, sampler=TrainSampler(dataset, 0, 1, seed=0)
    )
    objects = TrainingObjects(model, optimizer, scheduler, None, TrainingLoss(torch.nn.CrossEntropyLoss()), None)
    state = TrainState()
    run = RunDir.create("engine-overhead", path=Path(tempfile.mkdtemp()) / "run")
    log = RunLog(run, state, True, tensorboard=True)

    def engine_epoch() -> float:
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):  # the engine's log lines (still written, not shown)
            train_one_epoch(objects, loader, backend, state, cfg, log)
        state.epoch, state.batch_in_epoch = state.epoch + 1, 0
        return time.perf_counter() - start

    bare_epoch(bare_model, bare_loader, bare_optimizer)  # warm-up
    engine_epoch()
    bare, engine = [], []
    for _ in range(args.rounds):
        bare.append(args.steps * args.batch_size / bare_epoch(bare_model, bare_loader, bare_optimizer))
        engine.append(args.steps * args.batch_size / engine_epoch())
    log.close()
    ratio = statistics.median(b / e for b, e in zip(bare, engine))
    print(
        f"{args.model} @{args.input_size}px, batch {args.batch_size}, {args.steps} steps x {args.rounds} rounds, "
        f"{torch.get_num_threads()} threads"
    )
    print(f"  bare PyTorch loop : median {statistics.median(bare):8.1f} img/s  (best {max(bare):8.1f})")
    print(f"  depthbench engine : median {statistics.median(engine):8.1f} img/s  (best {max(engine):8.1f})")
    print(
        f"  engine overhead   : {100 * (ratio - 1):+.2f} % (median of per-round ratios; "
        f"best vs best {100 * (max(bare) / max(engine) - 1):+.2f} %)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
