"""The ``loader`` check, per rank and CONFIG: the images/s the config's training loader (its data, transforms and
``data.workers``; harness/engine/data.py) delivers on this rank, against the images/s the step consumes, with the
``data.workers`` that would feed it."""

from __future__ import annotations

import gc
import math
import os
import time
from typing import Callable

import torch

from harness.engine.data import DeviceLoader, build_loaders, check_data, loader_options, set_train_epoch
from harness.measure.preflight.common import Check, Options, Rank, one_line
from harness.measure.preflight.plan import Plan


def loader_check(rank: Rank, plan: Plan, opts: Options, step_ms: float | None) -> tuple[Check, dict]:
    """The check, and its numbers for the record; ``step_ms``: the step check's time (None: not measured)."""
    try:
        return _measured_loader(rank, plan, opts, step_ms)
    except Exception as e:
        return rank.check("loader", "fail", f"{plan.label}: {one_line(e)}", config=plan.label), {}


def _measured_loader(rank: Rank, plan: Plan, opts: Options, step_ms: float | None) -> tuple[Check, dict]:
    if plan.problem:
        return rank.check("loader", "fail", f"{plan.label}: {plan.problem}", config=plan.label), {}
    cfg, batch, unit = plan.cfg, plan.micro_batch, plan.unit
    root = check_data(cfg.data)
    workers = cfg.data.workers
    train, val = build_loaders(cfg, rank.rank, plan.world, batch)
    del val
    try:
        images = len(train.dataset)
    except TypeError:  # a stream (WebDataset) has no length
        images = None
    set_train_epoch(train, 0)
    # steady state: worker start-up is paid once per run, and the workers prefetch 2 batches each while they
    # start, which arrive at once; the rate is taken after those
    skip = 2 * workers
    stamps, start = [], time.perf_counter()

    def enough() -> bool:
        seconds = time.perf_counter() - stamps[0]
        return seconds >= opts.loader_seconds or (
            len(stamps) >= skip + max(10, 4 * workers) and seconds >= min(2.0, opts.loader_seconds)
        )

    # the configured pipeline as training runs it: batches finished on the device (loader.pipeline='device'
    # decodes and augments there, loader.device_normalize normalises), each one waited for
    pipeline = loader_options(cfg)["pipeline"]
    source = DeviceLoader(train, rank.device) if getattr(train, "finish", None) is not None else train
    synchronize = torch.cuda.synchronize if str(rank.device).startswith("cuda") else (lambda: None)
    for _ in _limited(source, enough):
        synchronize()
        stamps.append(time.perf_counter())
    del train, source
    gc.collect()  # persistent workers end with their loader
    if not stamps:
        return rank.check("loader", "fail", f"{plan.label}: the loader gave no batch of {batch}", config=plan.label), {}
    first = stamps[0] - start
    steady = stamps[skip:] if len(stamps) - skip >= 3 else stamps
    if len(steady) >= 3:
        rate = (len(steady) - 1) * batch / (steady[-1] - steady[0])
    else:
        rate = len(stamps) * batch / (stamps[-1] - start)
    numbers = {
        "loader_per_s": round(rate, 2),
        "loader_first_batch_s": round(first, 3),
        "train_images": images,
        "workers": workers,
        "data_root": str(root),
        "pipeline": pipeline,
    }
    base = (
        f"{plan.label}: loader {rate:,.0f} {unit}/s per rank from {root} ({pipeline} pipeline, "
        f"data.workers={workers}, "
        f"{len(stamps)} batches, first after {first:.1f} s"
        + (": start-up included, a lower bound)" if len(steady) < 3 else ")")
    )
    if not step_ms:
        return rank.check("loader", "ok", base, rate, f"{unit}/s", plan.label, **numbers), numbers
    consume = batch / step_ms * 1000
    numbers["step_per_s"] = round(consume, 2)
    ratio = consume / rate
    cores = _cores_per_rank(rank.local_world)
    if ratio <= 1:
        text = f"{base} >= the step's {consume:,.0f} {unit}/s ({1 / ratio:.1f}x headroom)"
        verdict = "ok"
        if workers == 0:  # loading in the training process is not overlapped with the step
            wait = batch / rate * 1000
            text += f"; with data.workers=0 each step also waits {wait:,.0f} ms for its batch"
            if wait > 0.1 * step_ms:
                verdict, text = "warn", text + f" (+{wait / step_ms:.0%}): data.workers=1 would overlap it"
        return rank.check("loader", verdict, text, ratio, "x", plan.label, **numbers), numbers
    per_worker = rate / max(workers, 1)
    needed = math.ceil(consume * 1.2 / per_worker)
    if needed <= max(cores - 1, 1):
        advice = f"raise data.workers to {needed}"
    else:
        reach = per_worker * max(cores - 1, 1)
        advice = (
            f"even data.workers={max(cores - 1, 1)} (this rank's {cores} cores) gives ~{reach:,.0f} "
            f"{unit}/s: faster storage or decoding (WebDataset shards, a local copy), or more CPU cores "
            f"per GPU (--cpus-per-task)"
        )
    numbers["suggested_workers"] = needed
    text = (
        f"{plan.label}: loader-bound by {ratio:.1f}x: the loader delivers {rate:,.0f} {unit}/s per rank "
        f"(data.workers={workers}), the step consumes {consume:,.0f}; {advice}"
    )
    return rank.check("loader", "warn", text, ratio, "x", plan.label, **numbers), numbers


def _limited(loader, stop: Callable[[], bool]):
    """The loader's batches until ``stop()`` says enough (checked after each batch)."""
    for batch in loader:
        yield batch
        if stop():
            return


def _cores_per_rank(local_world: int) -> int:
    if os.environ.get("SLURM_CPUS_PER_TASK", "").isdigit():
        return int(os.environ["SLURM_CPUS_PER_TASK"])
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(local_world, 1))
