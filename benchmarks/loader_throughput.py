"""Can the training loader keep up? Images/s per loader worker of depthbench's training loader against timm's
``create_loader`` with the same transforms, on an ImageNet-like folder of JPEGs, and what our exact-resume
reseeding costs.

    .venv/bin/python benchmarks/loader_throughput.py [--images 3000] [--classes 100] [--workers 0 1 2]
        [--batch-size 32] [--batches 24] [--rounds 5] [--config configs/deit/deit-small_8xb128-300e_in1k.py]
        [--step-ms deit_s=240 ...] [--json out.json]

The folder (``--root``, default ``<data cache>/loader-bench-spread-<images>x<classes>``, outside the repository) is
made once: JPEGs (quality 90) with ImageNet's spread of sizes (:func:`image_size`: its three most common sizes for
about half the images, the rest landscape or portrait with the longer side 500 and the shorter anywhere from 200,
a few larger up to 1000 -- hundreds of distinct sizes, dozens in a batch of 128, as in ImageNet; three sizes only
made the device pipeline's same-size buckets unrealistically large and its rate optimistic), smooth random scenes with
texture and noise, so that they decode at about natural images' cost. The transforms are the config's (DeiT's
recipe by default: RandomResizedCrop 224, flip, RandAugment m9, random erasing 0.25; Mixup runs on the device and
is not the loader's).

Loaders, each with ``w`` workers (0: the main process loads):

- ``depthbench``: ``harness.engine.data.build_loaders`` as ``depthbench train`` builds it (every sample augmented
  under an RNG seeded from (seed, epoch, slot) -- exact resume);
- ``depthbench, no reseed``: the same loader, the per-sample seeding skipped (its cost is the ratio);
- ``depthbench uint8``: ``loader.device_normalize=True``: uint8 batches, normalised on the device (not timed here:
  on a GPU it is one fused pass over the batch);
- ``timm create_loader``: timm's loader with the same transform arguments (float batches), and ``timm
  create_loader uint8`` (``use_prefetcher=True``: timm's uint8 collation, its device-side part not timed).

Each round every loader delivers ``--batches`` batches, interleaved (A B C, then C B A); the rate is taken from the
``prefetch x workers``-th batch on (worker start-up and the batches workers had ready are left out). Images/s per
worker = images/s / max(workers, 1). Reported: median [q25-q75] over rounds, and per-round ratios. The per-sample
seeding is also timed alone (``seed_all`` per sample against the per-sample loading time).

``--pipelines`` (issue 42) instead compares ``loader.pipeline`` ``cpu`` (timm's transforms in the workers) and
``device`` (workers read bytes; decode, crop, RandAugment, erasing batched on ``--device``) on the folder and on its
shards (``depthbench data pack``, made once next to it): images/s of finished batches on the device (the device
part included and waited for) and the CPU cores used (process + reaped workers' CPU time / wall time), rounds
interleaved, ratios per round. On a CPU machine ``--device cpu`` runs the device part on the CPU: the numbers say
what the batched code costs there, not what a GPU does (the GPU check's ``loader`` part, tests/tools/test_gpu_check.py,
measures that).

``--memory`` (issue 52) finishes one evaluation batch of the device pipeline on the CPU holding one 9000x9000 JPEG
among 15 of the folder's, and prints the peak resident memory it added against one image's bytes and the batch
padded to it.

``--step-ms NAME=MS`` (repeatable; e.g. a training step time ``depthbench bench`` measured on your GPU at the
recipe's per-GPU batch) adds how many workers per GPU keep up: ceil(batch per GPU / step time / images/s per
worker).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import resource
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageFilter
from timm.data import create_dataset, create_loader
from torch.utils.data import DataLoader

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from harness.commands.data import run_pack  # noqa: E402
from harness.core.files import atomic_dir, data_cache  # noqa: E402
from harness.engine.builders import load_training_config  # noqa: E402
from harness.engine.data import (  # noqa: E402
    DeviceLoader,
    SeededSamples,
    build_dataset,
    build_loaders,
    sample_seed,
    seed_all,
    set_train_epoch,
)
from harness.tasks.image import black_zero_bit_posterize  # noqa: E402
from harness.tasks.image_device import DeviceAugment, EncodedImages, EvalBox, collate_encoded  # noqa: E402

SIZES = ((500, 375), (375, 500), (500, 333))  # ImageNet's most common image sizes (w, h)


def image_size(rng) -> tuple:
    """One (w, h) drawn as ImageNet's train set spreads them (roughly: ~50 % its three most common sizes, ~45 % the
    longer side 500 and the shorter 200-500, ~5 % larger, the longer side 500-1000), from ``rng``."""
    kind = rng.random()
    if kind < 0.5:
        return SIZES[int(rng.integers(len(SIZES)))]
    longer = 500 if kind < 0.95 else int(rng.integers(501, 1001))
    shorter = int(rng.integers(200, longer + 1))
    return (longer, shorter) if rng.random() < 0.75 else (shorter, longer)  # most photographs are landscape


def make_folder(root: Path, images: int, classes: int, seed: int = 0) -> Path:
    """``root/{train,val}/<class>/<n>.JPEG``, written once (atomically: a half-written folder is never used), in a
    thread per core (PIL's filters and JPEG encoder and numpy's arithmetic release the GIL; 2,048 images took ~40 s
    of one core on the GPU machine). Each image is drawn from its own seed, so the set does not depend on the
    threads."""
    with atomic_dir(root) as tmp:
        if tmp is None:
            return root
        jobs = [
            (tmp / split / f"n{i % classes:08d}" / f"{i:06d}.JPEG", (seed, s, i))
            for s, (split, count) in enumerate((("train", images), ("val", max(classes, images // 10))))
            for i in range(count)
        ]
        for folder in {path.parent for path, _ in jobs}:
            folder.mkdir(parents=True)
        with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            list(pool.map(lambda job: write_image(*job), jobs))
    return root


def write_image(path: Path, seed: tuple) -> None:
    """One ImageNet-like JPEG: a smooth scene (low-resolution colours, upsampled) + texture at two scales + sensor
    noise, at a size drawn as ImageNet's spread (:func:`image_size`)."""
    rng = np.random.default_rng(seed)
    w, h = image_size(rng)
    base = Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)).resize((w, h), Image.BICUBIC)
    texture = (
        Image.fromarray(rng.integers(0, 256, (h // 8, w // 8, 3), dtype=np.uint8))
        .resize((w, h), Image.BILINEAR)
        .filter(ImageFilter.GaussianBlur(1.5))
    )
    pixels = 0.7 * np.asarray(base, dtype=np.float32) + 0.3 * np.asarray(texture, dtype=np.float32)
    pixels += rng.normal(0, 6, (h, w, 3)).astype(np.float32)
    Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(path, quality=90)


def training_config(config: str, root: Path, classes: int, workers: int, device_normalize: bool = False):
    cfg, _ = load_training_config(
        config,
        [
            f"data.root={root}",
            f"data.num_classes={classes}",
            f"data.workers={workers}",
            "data.repeated_aug=False",
            f"loader.device_normalize={device_normalize}",
            "loader.persistent_workers=False",
        ],
    )
    return cfg


class _NoSeed:
    """A TrainSampler whose items carry no seed: SeededSamples then loads without reseeding."""

    def __init__(self, sampler):
        self.sampler = sampler

    def __iter__(self):
        for index, _seed, valid in self.sampler:
            yield index, None, valid

    def __len__(self):
        return len(self.sampler)


def build(kind: str, cfg, batch_size: int, workers: int):
    """A fresh iterable of training batches of loader ``kind`` (``set_epoch(e)`` picks the epoch's order)."""
    if kind.startswith("depthbench"):
        loader, _ = build_loaders(cfg, rank=0, world_size=1, micro_batch=batch_size)
        if kind == "depthbench, no reseed":
            loader = DataLoader(
                loader.dataset,
                batch_size=batch_size,
                sampler=_NoSeed(loader.sampler),
                drop_last=True,
                num_workers=workers,
                worker_init_fn=loader.worker_init_fn,
                generator=torch.Generator().manual_seed(0),
            )
        return loader, lambda epoch: set_train_epoch(loader, epoch)

    d, a = cfg.data, cfg.aug
    dataset = create_dataset("", root=d.root, split=d.train_split, is_training=True, input_img_mode="RGB")
    loader = create_loader(
        dataset,
        input_size=(3, d.input_size, d.input_size),
        batch_size=batch_size,
        is_training=True,
        use_prefetcher=kind.endswith("uint8"),
        re_prob=a.reprob,
        re_mode=a.remode,
        re_count=a.recount,
        scale=a.scale,
        ratio=a.ratio,
        hflip=a.hflip,
        color_jitter=a.color_jitter,
        auto_augment=a.auto_augment,
        interpolation=d.interpolation,
        mean=d.mean,
        std=d.std,
        num_workers=workers,
        distributed=False,
        pin_memory=False,
        persistent_workers=False,
        device=torch.device("cpu"),
    )
    # the same fix as ours (timm's RandAugment asks Pillow for 0 posterize bits now and then, which Pillow 11+ refuses)
    black_zero_bit_posterize(dataset.transform)
    inner = getattr(loader, "loader", loader)  # the prefetcher's device-side part is not the workers' work
    return inner, lambda epoch: None


def pipeline_rate(cfg, batch_size: int, batches: int, device: str, epoch: int) -> dict:
    """One pass of ``batches`` finished batches of the training loader (``DeviceLoader``: the device part runs and
    is waited for): images/s after the first batch, and CPU cores used over the pass (this process and its loader
    workers, which are reaped at the end of the pass: ``RUSAGE_CHILDREN``)."""

    def cpu_seconds():
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    loader, _ = build_loaders(cfg, rank=0, world_size=1, micro_batch=batch_size)
    set_train_epoch(loader, epoch)
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    iterator = iter(finished_batches(loader, device))
    start, images = None, 0
    for i in range(batches):
        inputs, _ = next(iterator)
        sync()
        if i == 0:
            start = time.perf_counter()
        else:
            images += len(inputs)
    seconds = time.perf_counter() - start
    del iterator, loader  # the workers end and are reaped: their CPU time is counted

    gc.collect()
    wall = time.perf_counter() - wall0
    return {"images_per_s": images / seconds, "cores": (cpu_seconds() - cpu0) / wall}


def finished_batches(loader, device):
    """The loader's batches finished on ``device`` as training gets them: the device pipeline's background feeder
    (its own thread and CUDA stream) where the loader's ``finish`` offers one, else ``DeviceLoader``."""
    finish = getattr(loader, "finish", None)
    if hasattr(finish, "background_batches"):
        return finish.background_batches(loader, device)
    return DeviceLoader(loader, device)


def large_image_memory(root: Path, side: int = 9000, small: int = 15, size: int = 224) -> dict:
    """``--memory``: peak resident memory added by finishing one evaluation batch of the device pipeline (on the
    CPU) that holds one ``side`` x ``side`` JPEG among ``small`` of ImageNet's sizes, against the bytes of that image
    decoded (uint8) and as float32 -- the bound is one image, not the batch padded to it."""
    large = root / f"large-{side}.JPEG"
    if not large.exists():
        Image.new("RGB", (side, side), (90, 120, 150)).save(large, quality=90)
    files = [large] + sorted((root / "val").rglob("*.JPEG"))[:small]

    class Files:
        def __len__(self):
            return len(files)

        def read(self, index):
            return Path(files[index]).read_bytes(), 0

        def filename(self, index):
            return str(files[index])

    dataset = EncodedImages(Files(), EvalBox(size, 0.875, "center"))
    batch, _ = collate_encoded([dataset[i] for i in range(len(files))])
    gc.collect()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    out = DeviceAugment(size, (0.5,) * 3, (0.5,) * 3, training=False)(batch)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    padded = len(files) * 3 * side * side * 4
    print(
        f"one {side}x{side} JPEG among {small}: peak +{peak / 1e9:.2f} GB (one image: {3 * side * side / 1e9:.2f} GB "
        f"uint8 + {12 * side * side / 1e9:.2f} GB float32; padded to it: {padded / 1e9:.1f} GB); {seconds:.1f} s",
        flush=True,
    )
    return {
        "side": side,
        "small": small,
        "batch": tuple(out.shape),
        "peak_added_bytes": peak,
        "one_image_uint8_bytes": 3 * side * side,
        "one_image_float_bytes": 12 * side * side,
        "padded_batch_float_bytes": padded,
        "seconds": round(seconds, 2),
    }


def compare_pipelines(args, root: Path) -> dict:
    """``--pipelines``: cpu against device pipeline, on the folder and its shards, interleaved rounds."""
    shards = root.with_name(root.name + "-shards")
    if not shards.exists():
        run_pack(root, shards, shard_size=500)
    results = {}
    for workers in args.workers:
        cfgs = {}
        # the device pipeline on CUDA needs loader workers (its feeder would run the reseeding loader in a thread)
        kinds = [
            (source, pipeline)
            for source in ("folder", "shards")
            for pipeline in ("cpu", "device")
            if pipeline == "cpu" or workers or not args.device.startswith("cuda")
        ]
        for source, pipeline in kinds:
            cfg = training_config(args.config, shards if source == "shards" else root, args.classes, workers)
            cfg.data.type = "shards" if source == "shards" else "folder"
            cfg.data.pin_memory = args.device.startswith("cuda")
            cfg.loader.pipeline = pipeline
            cfgs[(source, pipeline)] = cfg
        runs = {kind: [] for kind in kinds}
        for round_index in range(args.rounds + 1):  # round 0: warm-up
            for kind in kinds if round_index % 2 == 0 else kinds[::-1]:
                measured = pipeline_rate(cfgs[kind], args.batch_size, args.batches, args.device, round_index)
                if round_index:
                    runs[kind].append(measured)
        for (source, pipeline), values in runs.items():
            rate = quantiles([v["images_per_s"] for v in values])
            cores = quantiles([v["cores"] for v in values])
            per_core = quantiles([v["images_per_s"] / v["cores"] for v in values])
            key = f"{source} {pipeline} @ {workers} workers"
            results[key] = {
                "images_per_s": round(rate["median"], 1),
                "q25": round(rate["q25"], 1),
                "q75": round(rate["q75"], 1),
                "cores": round(cores["median"], 2),
                "images_per_core_s": round(per_core["median"], 1),
            }
            print(
                f"workers {workers}  {source:<6} {pipeline:<6} {rate['median']:8.1f} img/s "
                f"[{rate['q25']:.1f}-{rate['q75']:.1f}]  {cores['median']:.2f} cores  "
                f"{per_core['median']:.1f} img/s per core",
                flush=True,
            )
        for source in ("folder", "shards"):
            device, cpu = runs[(source, "device")], runs[(source, "cpu")]
            for name, f in (
                ("img/s", lambda v: v["images_per_s"]),
                ("img/s per core", lambda v: v["images_per_s"] / v["cores"]),
            ):
                q = quantiles([f(a) / f(b) for a, b in zip(device, cpu)])
                results[f"{source} device / cpu {name} @ {workers} workers"] = {k: round(v, 3) for k, v in q.items()}
                print(
                    f"workers {workers}  {source} device / cpu, {name}: {q['median']:.2f}x "
                    f"[{q['q25']:.2f}-{q['q75']:.2f}]",
                    flush=True,
                )
    return results


def time_batches(loader, batches: int, skip: int) -> float:
    """Images/s from batch ``skip`` to batch ``batches`` of a fresh pass (the pass is then closed)."""
    iterator = iter(loader)
    start, images = None, 0
    for i in range(batches):
        inputs, _ = next(iterator)
        if i == skip:
            start = time.perf_counter()
        elif i > skip:
            images += len(inputs)
    seconds = time.perf_counter() - start
    del iterator  # shuts the workers down before the next loader's round
    return images / seconds


def reseed_cost(cfg, samples: int = 200) -> dict:
    """``seed_all`` per sample against loading one sample (main process, no workers), in microseconds."""
    dataset = SeededSamples(build_dataset(cfg.data, cfg.aug, cfg.data.train_split, is_training=True))
    seeds = [sample_seed(0, 1, i) for i in range(samples)]
    start = time.perf_counter()
    for seed in seeds:
        seed_all(seed)
    seed_us = (time.perf_counter() - start) / samples * 1e6
    start = time.perf_counter()
    dataset.__getitems__([(i % len(dataset), None, True) for i in range(samples // 4)])
    load_us = (time.perf_counter() - start) / (samples // 4) * 1e6
    return {"seed_all_us": round(seed_us, 1), "load_us": round(load_us, 1), "fraction": round(seed_us / load_us, 4)}


def quantiles(values) -> dict:
    q25, median, q75 = np.percentile(values, [25, 50, 75])
    return {"median": float(median), "q25": float(q25), "q75": float(q75)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", help="the generated folder (default: in depthbench's data cache)")
    p.add_argument(
        "--config",
        default="configs/deit/deit-small_8xb128-300e_in1k.py",
        help="the training config whose transforms are measured",
    )
    p.add_argument("--images", type=int, default=3000)
    p.add_argument("--classes", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--batches", type=int, default=24, help="batches per loader per round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument(
        "--loaders",
        nargs="+",
        default=[
            "depthbench",
            "depthbench, no reseed",
            "depthbench uint8",
            "timm create_loader",
            "timm create_loader uint8",
        ],
    )
    p.add_argument(
        "--step-ms",
        nargs="*",
        default=[],
        metavar="NAME=MS[@BATCH]",
        help="training step times (ms) at a per-GPU batch (default the config's batch_size / 8)",
    )
    p.add_argument("--json", help="write the results here")
    p.add_argument(
        "--pipelines",
        action="store_true",
        help="compare loader.pipeline cpu and device on the folder and its shards (issue 42)",
    )
    p.add_argument("--device", default="cpu", help="--pipelines: where the device pipeline runs (cpu, cuda)")
    p.add_argument(
        "--memory",
        action="store_true",
        help="peak memory of a device-pipeline batch holding one 9000x9000 JPEG (issue 52)",
    )
    args = p.parse_args(argv)

    torch.set_num_threads(1)  # the main process only receives batches; workers are single-threaded anyway
    root = Path(args.root) if args.root else data_cache() / f"loader-bench-spread-{args.images}x{args.classes}"
    start = time.perf_counter()
    make_folder(root, args.images, args.classes)
    print(
        f"folder {root} ({args.images} training JPEGs, {args.classes} classes; "
        f"{time.perf_counter() - start:.0f} s to make or find)",
        flush=True,
    )
    if args.memory:
        result = {"memory": large_image_memory(root), "cpu": _cpu_name(), "torch": torch.__version__}
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))
        return 0
    if args.pipelines:
        result = {
            "pipelines": compare_pipelines(args, root),
            "root": str(root),
            "config": args.config,
            "batch_size": args.batch_size,
            "device": args.device,
            "load_avg": os.getloadavg(),
            "cpu": _cpu_name(),
            "torch": torch.__version__,
        }
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))
        return 0
    rows, ratios = [], {}
    for workers in args.workers:
        cfgs = {
            kind: training_config(args.config, root, args.classes, workers, device_normalize=kind.endswith("uint8"))
            for kind in args.loaders
        }
        loaders = {kind: build(kind, cfgs[kind], args.batch_size, workers) for kind in args.loaders}
        factor = cfgs[args.loaders[0]].loader.prefetch_factor or 2
        skip = max(1, factor * workers)
        if args.batches <= skip:
            raise SystemExit(f"--batches {args.batches} must exceed prefetch x workers = {skip}")
        rates = {kind: [] for kind in args.loaders}
        order = list(args.loaders)
        for round_index in range(args.rounds + 1):  # round 0: warm-up (file cache, imports in workers)
            for kind in order if round_index % 2 == 0 else order[::-1]:
                loader, set_epoch = loaders[kind]
                set_epoch(round_index)
                rate = time_batches(loader, args.batches, skip)
                if round_index:
                    rates[kind].append(rate)
        for kind in args.loaders:
            q = quantiles(rates[kind])
            rows.append(
                {
                    "loader": kind,
                    "workers": workers,
                    "images_per_s": round(q["median"], 1),
                    "q25": round(q["q25"], 1),
                    "q75": round(q["q75"], 1),
                    "per_worker": round(q["median"] / max(workers, 1), 1),
                    "rounds": len(rates[kind]),
                }
            )
            print(
                f"workers {workers}  {kind:<26} {q['median']:8.1f} img/s [{q['q25']:.1f}-{q['q75']:.1f}]  "
                f"{q['median'] / max(workers, 1):7.1f} per worker",
                flush=True,
            )
        for name, (a, b) in {
            "reseed cost (no reseed / depthbench)": ("depthbench, no reseed", "depthbench"),
            "depthbench / timm": ("depthbench", "timm create_loader"),
            "uint8 / float (depthbench)": ("depthbench uint8", "depthbench"),
            "depthbench uint8 / timm uint8": ("depthbench uint8", "timm create_loader uint8"),
        }.items():
            if a in rates and b in rates:
                q = quantiles([x / y for x, y in zip(rates[a], rates[b])])
                ratios[f"{name} @ {workers} workers"] = {k: round(v, 4) for k, v in q.items()}
                print(f"workers {workers}  {name}: {q['median']:.3f}x [{q['q25']:.3f}-{q['q75']:.3f}]", flush=True)
    cost = reseed_cost(training_config(args.config, root, args.classes, 0))
    print(
        f"seed_all per sample: {cost['seed_all_us']} us against {cost['load_us']} us to load one sample "
        f"({100 * cost['fraction']:.2f} %)"
    )
    needs = []
    per_worker = max((r["per_worker"] for r in rows if r["loader"] == "depthbench" and r["workers"] == 1), default=None)
    for item in args.step_ms:
        name, _, value = item.partition("=")
        ms, _, batch = value.partition("@")
        batch = int(batch) if batch else training_config(args.config, root, args.classes, 0).batch_size // 8
        needed = batch / (float(ms) / 1000) / per_worker if per_worker else None
        needs.append(
            {
                "name": name,
                "step_ms": float(ms),
                "batch": batch,
                "images_per_s": batch / float(ms) * 1000,
                "workers": math.ceil(needed) if needed else None,
            }
        )
        print(
            f"{name}: {batch} images per {ms} ms step = {batch / float(ms) * 1000:.0f} img/s -> "
            f"{math.ceil(needed) if needed else '?'} workers at {per_worker} img/s per worker"
        )
    result = {
        "rows": rows,
        "ratios": ratios,
        "reseed": cost,
        "workers_needed": needs,
        "root": str(root),
        "config": args.config,
        "batch_size": args.batch_size,
        "load_avg": os.getloadavg(),
        "cpu": _cpu_name(),
        "torch": torch.__version__,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            return next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), "")
    except OSError:
        return ""


if __name__ == "__main__":
    sys.exit(main())
