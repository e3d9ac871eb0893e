"""What a submission will cost, before it is submitted: the arithmetic behind ``depthbench submit --estimate``.

Per run (an element of the submission: a config, a table row, a sweep point):

- **optimizer steps** = epochs x steps per epoch, where an epoch is what the engine's sampler gives each rank
  (harness/engine/data.py's TrainSampler: ``floor(N / world)`` samples; with ``data.repeated_aug``, as timm's
  RepeatAugSampler, ``floor(N // 256 * 256 / world)``), in whole micro-batches of
  ``batch_size / (world x grad_accum)``, divided by ``grad_accum``. N, the training images, comes from
  ``data.train_subset``, a preflight record of the same data, the split's ``_info.json`` (WebDataset), a count of
  the ImageFolder, or the known size of CIFAR / the digits / ImageNet-1k's 1,281,167 images;
- **step time**: the matching preflight records (harness/measure/preflight/: the same model, arguments, input
  size and precision on the same kind of device, and partition when both name one) at this layout's per-device
  batch, interpolated between measured batches (:func:`step_at_batch`), the longer of it and the gradient
  all-reduce (:func:`allreduce_seconds`: measured at this world size, else the record's bus bandwidth and the
  model's gradient bytes); else a ``depthbench bench`` CSV row (scaled per sample); else another model measured on
  the device, by the ratio of MACs (:func:`timing_by_flops`). No step time: the run says so and its cost is left
  out of the total;
- **scaling** (``--nodes`` > 1, :func:`scaling`): images/s on N nodes against one node at the same global batch,
  with a warning under 0.7 and the per-device batch that restores it;
- **wall time** = steps x step time + a start-up per allocation (imports, data scan, resume: ``startup_s``); with
  ``--time``, allocations = ceil(training time / (limit - warning - start-up)) and **requeues** = allocations - 1;
- **GPU-hours** = wall time x nodes x GPUs per node (rank-hours on CPU partitions).

The total adds steps and GPU-hours; its wall time is the array's makespan with ``--max-concurrent`` runs at once
(Slurm starts elements in index order as slots free up), queue waits not included. Evaluation passes are not
counted (on ImageNet ~1-2 % of training).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import ConfigError
from harness.core.files import BadFile, loads_json, printable, read_json, read_text
from harness.core.rundir import runs_root
from harness.core.schema import per_device_batch
from harness.engine.builders import load_training_config, speed_options
from harness.engine.data import steps_per_epoch
from harness.engine.models import build_model, model_kwargs
from harness.measure.bench import _plain, input_size_of
from harness.measure.cache import MeasurementCache, model_code
from harness.measure.flops import count_flops, example_inputs
from harness.measure.layout import Layout
from harness.measure.preflight import read_records
from harness.tasks.image import IMAGE_EXTENSIONS

IMAGENET_1K_TRAIN = 1_281_167
KNOWN_TRAIN_IMAGES = {"cifar10": 50_000, "cifar100": 50_000, "digits": 1_437}
STARTUP_S = 120.0  # per allocation: imports, building, the data scan, loading the checkpoint
# model arguments that do not change a step's cost (a bench CSV of the bare model still times the config's)
COST_FREE_KWARGS = (
    "num_classes",
    "drop_path_rate",
    "drop_rate",
    "attn_drop_rate",
    "proj_drop_rate",
    "pretrained",
    "pretrained_cfg",
    "checkpoint_path",
)


@dataclass
class Job:
    """One run of a submission: its name, config and ``key=value`` overrides."""

    name: str
    config: str
    overrides: Sequence[str] = ()
    command: str = "train"  # train | finetune (fine-tuning runs are listed, not estimated)


@dataclass
class Timing:
    """A step time found for a run: seconds per optimizer step at its per-device batch, and where it came from."""

    step_s: float
    source: str
    path: str = ""
    note: str = ""


@dataclass
class Scaling:
    """How a run's throughput on ``nodes`` nodes compares with one node at the same global batch."""

    nodes: int
    micro_batch: int  # per device on ``nodes`` nodes
    images_per_s: float
    one_node_batch: int  # per device on one node
    one_node_images_per_s: float
    efficiency: float  # images_per_s / (nodes x one_node_images_per_s)
    compute_s: float
    allreduce_s: float | None
    allreduce_from: str = ""
    restore_batch: int | None = None  # the smallest per-device batch with efficiency >= EFFICIENCY_WARNING
    restore_efficiency: float | None = None


EFFICIENCY_WARNING = 0.7


@dataclass
class Row:
    index: int
    name: str
    config: str
    epochs: int | None = None
    images: int | None = None
    images_from: str = ""
    micro_batch: int | None = None
    steps: int | None = None
    step_s: float | None = None
    source: str = ""
    device_hours: float | None = None
    wall_s: float | None = None
    requeues: int | None = None
    problem: str = ""
    scaling: Scaling | None = None


@dataclass
class Estimate:
    rows: list[Row]
    layout: Layout
    total_steps: int
    device_hours: float
    wall_s: float | None
    timed: int
    startup_s: float = STARTUP_S
    notes: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------------------------- the arithmetic
def allocations(train_s: float, time_s: int | None, warning_s: int, startup_s: float = STARTUP_S) -> int | None:
    """Slurm allocations a run of ``train_s`` seconds of steps needs under ``--time`` (None: no limit given); each
    starts up for ``startup_s`` and stops at the warning. Raises ValueError when an allocation has no time left."""
    if time_s is None:
        return None
    usable = time_s - warning_s - startup_s
    if usable <= 0:
        raise ValueError(
            f"--time {time_s} s leaves no training time after the {warning_s} s warning and "
            f"{startup_s:.0f} s of start-up"
        )
    return max(1, math.ceil(train_s / usable))


def wall_seconds(train_s: float, n_allocations: int | None, startup_s: float = STARTUP_S) -> float:
    """Training plus one start-up per allocation (one when there is no time limit)."""
    return train_s + (n_allocations or 1) * startup_s


def device_hours(wall_s: float, devices: int) -> float:
    return wall_s * devices / 3600


def makespan(walls: Sequence[float], max_concurrent: int | None) -> float:
    """Wall time of an array: elements start in index order whenever one of ``max_concurrent`` slots frees up
    (all at once when None)."""
    if not walls:
        return 0.0
    slots = [0.0] * min(len(walls), max_concurrent or len(walls))
    for wall in walls:
        i = min(range(len(slots)), key=slots.__getitem__)
        slots[i] += wall
    return max(slots)


# ----------------------------------------------------------------------------------------------- one run
def estimate(
    jobs: Sequence[Job],
    layout: Layout,
    *,
    records: list[dict] | None = None,
    bench_rows: list[dict] | None = None,
    startup_s: float = STARTUP_S,
) -> Estimate:
    """The cost of each of ``jobs`` on ``layout`` and the total. ``records``: preflight records, newest first
    (default: :func:`harness.measure.preflight.read_records`); ``bench_rows``: ``depthbench bench`` CSV rows
    (default: :func:`bench_csv_rows`)."""
    if records is None:
        records = read_records()
    if bench_rows is None:
        bench_rows = bench_csv_rows()
    repo = Path(__file__).resolve().parents[2]
    rows = []
    for index, job in enumerate(jobs):
        if job.command != "train":
            rows.append(
                Row(
                    index,
                    job.name,
                    job.config,
                    problem=f"a {job.command} run: not estimated (its cost is set by train_cfg.max_iters)",
                )
            )
            continue
        path = job.config if Path(job.config).is_file() else str(repo / job.config)  # elements name repo paths
        cfg = load_training_config(path, list(job.overrides))[0]  # as the run's ranks read it
        rows.append(_row(index, job, cfg, layout, records, bench_rows, startup_s))
    timed = [r for r in rows if r.wall_s is not None]
    notes = []
    if layout.time_s is None:
        notes.append("no --time: the partition's default limit applies; requeues not estimated")
    return Estimate(
        rows,
        layout,
        sum(r.steps or 0 for r in rows),
        sum(r.device_hours or 0 for r in timed),
        makespan([r.wall_s for r in timed], layout.max_concurrent) if timed else None,
        len(timed),
        startup_s,
        notes,
    )


def _row(
    index: int, job: Job, cfg, layout: Layout, records: list[dict], bench_rows: list[dict], startup_s: float
) -> Row:
    row = Row(index, job.name, job.config, epochs=cfg.epochs)
    accum = cfg.grad_accum
    try:
        row.micro_batch = per_device_batch(cfg.batch_size, layout.world, accum)
    except ConfigError as e:
        row.problem = str(e)
        return row
    row.images, row.images_from = train_images(cfg, records)
    if row.images is not None:
        row.steps = row.epochs * steps_per_epoch(
            row.images, layout.world, row.micro_batch, accum, cfg.data.repeated_aug
        )
    timing = find_timing(identity(cfg, row.micro_batch), layout, records, bench_rows)
    if layout.nodes > 1:
        row.scaling = scaling(cfg, layout, records)
    if timing is None:
        timing = timing_by_flops(identity(cfg, row.micro_batch), layout, records)
    if timing is None:
        ident = identity(cfg, row.micro_batch)
        row.source = (
            f"none: no preflight record or bench CSV for {ident['model']} at {_side(ident['input_size'])} "
            f"{ident['precision']} on {layout.device}; run `depthbench preflight` (or submit --preflight) "
            f"there"
        )
        return row
    row.step_s, row.source = timing.step_s, timing.source + (f" ({timing.note})" if timing.note else "")
    if row.steps is None:
        return row
    train_s = row.steps * row.step_s
    try:
        n = allocations(train_s, layout.time_s, layout.warning_s, startup_s)
    except ValueError as e:
        row.problem = str(e)
        return row
    row.requeues = None if n is None else n - 1
    row.wall_s = wall_seconds(train_s, n, startup_s)
    row.device_hours = device_hours(row.wall_s, layout.nodes * layout.ranks_per_node)
    return row


def scaling(cfg, layout: Layout, records: Sequence[dict]) -> Scaling | None:
    """Images/s of ``cfg`` on ``layout.nodes`` nodes against one node at the same global batch, from the preflight
    step times at the per-device batches each would run (:func:`step_at_batch`) and the gradient all-reduce
    (:func:`allreduce_seconds`); with the smallest per-device batch that keeps the efficiency at 0.7 or more when
    it is under. None without a preflight record of the model on this kind of device."""
    accum = cfg.grad_accum
    one = Layout(1, layout.gpus_per_node, layout.ntasks_per_node, partition=layout.partition)
    curve = batch_curve(identity(cfg, None), layout, records)
    if not curve:
        return None
    try:
        micro = per_device_batch(cfg.batch_size, layout.world, accum)
    except ConfigError:  # the row says so (:func:`_row`)
        return None
    record, config = curve[max(curve)]

    def images_per_s(lay: Layout, micro: int) -> tuple[float, float, float | None, str]:
        compute = step_at_batch(curve, micro)[0]
        allreduce, how = allreduce_seconds(record, config, lay.world)
        return micro * lay.world * accum / max(compute, allreduce or 0.0), compute, allreduce, how

    def efficiency(micro: int) -> float:
        return images_per_s(layout, micro)[0] / (layout.nodes * images_per_s(one, micro * layout.nodes)[0])

    rate, compute, allreduce, how = images_per_s(layout, micro)
    one_rate = images_per_s(one, micro * layout.nodes)[0]
    result = Scaling(
        layout.nodes,
        micro,
        rate,
        micro * layout.nodes,
        one_rate,
        rate / (layout.nodes * one_rate),
        compute,
        allreduce,
        how,
    )
    if result.efficiency < EFFICIENCY_WARNING:
        batch = micro
        while batch < 4 * max(curve) and batch < 8192:
            batch *= 2
            if efficiency(batch) >= EFFICIENCY_WARNING:
                result.restore_batch, result.restore_efficiency = batch, efficiency(batch)
                break
    return result


def identity(cfg, micro_batch: int | None) -> dict:
    """The model a config trains, as records name it: name, arguments, input size (C, H, W), precision, batch."""
    name = cfg.model.name
    kwargs = _plain(model_kwargs(cfg))
    size = list(input_size_of(name, cfg.data.get("input_size"), kwargs))
    return {
        "model": name,
        "model_kwargs": kwargs,
        "input_size": size,
        "precision": cfg.precision,
        "micro_batch": micro_batch,
        **{key: speed_options(cfg)[key] for key in SPEED_KEYS},
    }


# the engine options a preflight step is timed with (preflight.Plan.speed_options); a record without them: off
SPEED_KEYS = ("channels_last", "grad_checkpointing")


def _side(size) -> str:
    return "x".join(map(str, list(size)[-2:]))


# ----------------------------------------------------------------------------------------------- images per epoch
def train_images(cfg, records: Sequence[dict] = ()) -> tuple[int | None, str]:
    """Training images of a config's data and where the number comes from (``(None, why)`` when unknown)."""
    data = cfg.data
    subset = data.get("train_subset")
    n, source = _full_size(data, records)
    if subset:
        return (min(subset, n) if n else subset), f"data.train_subset={subset}"
    return n, source


def _full_size(data, records) -> tuple[int | None, str]:
    for record in records:
        for c in record.get("configs") or []:
            if (
                c.get("train_images")
                and c.get("data_type") == data.type
                and c.get("data_root")
                and data.get("root")
                and Path(str(data.root)).expanduser().resolve() == Path(c["data_root"]).resolve()
                and not _subset_of(c)
            ):
                return int(c["train_images"]), f"preflight {record.get('time', '')[:10]}"
    if data.type in KNOWN_TRAIN_IMAGES:
        return KNOWN_TRAIN_IMAGES[data.type], f"{data.type}'s train split"
    root = Path(str(data.root)).expanduser() if data.get("root") else None
    if data.type == "wds" and root is not None:
        n = _wds_size(root, str(data.train_split))
        if n:
            return n, f"{root}/_info.json"
    if data.type == "folder" and root is not None and (root / str(data.train_split)).is_dir():
        n = _count_images(root / str(data.train_split))
        if n is not None:
            return n, f"counted in {root / data.train_split}"
    if data.type in ("folder", "wds") and data.get("num_classes") == 1000:
        return IMAGENET_1K_TRAIN, "ImageNet-1k's train split (data.root not readable here)"
    return None, f"unknown: the {data.type} training set is not readable here (set data.train_subset, or run preflight)"


def _subset_of(config_record: dict) -> bool:
    return any(str(o).startswith("data.train_subset=") for o in config_record.get("overrides") or [])


def _wds_size(root: Path, split: str) -> int | None:
    if "|" in split:  # "train-{0000..1023}.tar|1281167"
        tail = split.rsplit("|", 1)[1].strip()
        return int(tail) if tail.isdigit() else None

    for name in ("_info.json", "info.json"):
        try:
            info = read_json(root / name, inside=root, what="WebDataset info")
        except (OSError, BadFile):
            continue
        splits = info.get("splits") if isinstance(info.get("splits"), dict) else {}
        entry = splits.get(split) if isinstance(splits.get(split), dict) else {}
        if type(entry.get("num_samples")) is int and entry["num_samples"] > 0:
            return entry["num_samples"]
    return None


def _count_images(folder: Path, limit_s: float = 20.0) -> int | None:
    """Files in the class folders of an ImageFolder split (None when counting takes longer than ``limit_s``)."""
    start, n = time.monotonic(), 0
    try:
        with os.scandir(folder) as classes:
            for entry in classes:
                if not entry.is_dir():
                    continue
                with os.scandir(entry.path) as files:
                    n += sum(1 for f in files if f.name.endswith(IMAGE_EXTENSIONS))
                if time.monotonic() - start > limit_s:
                    return None
    except OSError:
        return None
    return n


# ----------------------------------------------------------------------------------------------- step times
def find_timing(ident: dict, layout: Layout, records: Sequence[dict], bench_rows: Sequence[dict]) -> Timing | None:
    """The step time for the model ``ident`` on ``layout``'s kind of device at its per-device batch: from preflight
    records (:func:`batch_curve`: the newest measurement at each batch, interpolated between measured batches),
    else a bench CSV row (scaled per sample). A step is the longer of computing it and the gradient all-reduce
    (DDP overlaps them, :func:`allreduce_seconds`)."""
    curve = batch_curve(ident, layout, records)
    if curve:
        step, note = step_at_batch(curve, ident["micro_batch"])
        record, config = curve[min(curve, key=lambda b: abs(b - ident["micro_batch"]))]
        allreduce, how = allreduce_seconds(record, config, layout.world)
        if allreduce is not None:
            step = max(step, allreduce)
        elif layout.world > 1:
            note = "; ".join(filter(None, [note, "gradient sync not measured at this world size"]))
        where = printable(
            f"{record.get('device_name') or record.get('device')}"
            + (f", partition {record['partition']}" if record.get("partition") else "")
        )
        return Timing(step, f"preflight {str(record.get('time', ''))[:10]} {where}", record.get("path", ""), note)
    for row in bench_rows:
        if row.get("device") != layout.device or not _float(row.get("train_step_time")):
            continue
        if row.get("precision", "fp32") != ident["precision"] or row.get("model") != ident["model"]:
            continue
        if row.get("input_size") != "x".join(map(str, ident["input_size"])):
            continue
        if not _same_model({"model": row["model"], "model_kwargs": _json(row.get("model_kwargs"))}, ident, exact=False):
            continue
        batch = int(_float(row.get("train_batch_size") or row.get("batch_size")) or 0)
        if not batch:
            continue
        step = _float(row["train_step_time"]) / 1000 * ident["micro_batch"] / batch
        note = "" if batch == ident["micro_batch"] else f"scaled from batch {batch}"
        if layout.world > 1:
            note = "; ".join(filter(None, [note, "no gradient sync in a bench row"]))
        where = printable(row.get("device_name") or row["device"])
        return Timing(step, f"bench {printable(str(row.get('date', ''))[:10])} {where}", row.get("_path", ""), note)
    return None


def timing_by_flops(ident: dict, layout: Layout, records: Sequence[dict], gmacs=None) -> Timing | None:
    """A step time for a model nobody timed on this device, from one that was: its step at this batch
    (:func:`step_at_batch`) times the ratio of the two models' MACs per sample -- the measured model's utilisation,
    carried over. The measured model is the nearest family (a shared name part: steps_resnet18 ~ resnet18), else
    the nearest in MACs. ``gmacs(ident)``: the model's GMACs per sample (default: :func:`model_gmacs`)."""
    gmacs = gmacs or model_gmacs
    measured = {}
    for record in records:
        if record.get("device") != layout.device or (
            layout.partition and record.get("partition") and record["partition"] != layout.partition
        ):
            continue
        for c in record.get("configs") or []:
            if (
                c.get("step_ms")
                and c.get("gmacs")
                and c.get("micro_batch")
                and c.get("precision") == ident["precision"]
            ):
                measured.setdefault(
                    json.dumps([c["model"], c.get("model_kwargs"), c.get("input_size")], sort_keys=True), c
                )
    if not measured:
        return None
    target = gmacs(ident)
    if not target:
        return None
    tokens = _name_parts(ident["model"])

    def nearness(c):
        return (bool(tokens & _name_parts(c["model"])), -abs(math.log(c["gmacs"] / target)))

    base = max(measured.values(), key=nearness)
    curve = batch_curve({**base, "micro_batch": None}, layout, records)
    step, note = step_at_batch(curve, ident["micro_batch"])
    record = curve[min(curve, key=lambda b: abs(b - ident["micro_batch"]))][0]
    factor = target / base["gmacs"]
    kin = "same family" if nearness(base)[0] else "nearest by FLOPs"
    source = (
        f"by FLOPs: x{factor:.2f} {base['model']}'s step ({kin}, {target:.2f} / {base['gmacs']:.2f} GMACs at "
        f"its measured utilisation; preflight {str(record.get('time', ''))[:10]} "
        f"{record.get('device_name') or record.get('device')})"
    )
    if layout.world > 1:
        note = "; ".join(filter(None, [note, "gradient sync not measured for this model"]))
    return Timing(step * factor, source, record.get("path", ""), note)


def _name_parts(model: str) -> set[str]:
    """The alphabetic parts of a model name, less size words: ``steps_deit_small_patch16`` -> {steps, deit}."""
    return set(re.findall(r"[a-z]+", model.lower())) - {"tiny", "small", "base", "large", "patch", "window", "x"}


def model_gmacs(ident: dict) -> float | None:
    """GMACs per sample of the model ``ident`` at its input size (meta device; cached with the model's code)."""

    def count():
        model = build_model(ident["model"], **ident["model_kwargs"])
        return count_flops(model, inputs=example_inputs(model, tuple(ident["input_size"]))).total

    cache = MeasurementCache()
    value = cache.get(
        cache.key(
            "estimate", "macs", ident["model"], ident["model_kwargs"], ident["input_size"], model_code(ident["model"])
        ),
        count,
    )
    cache.save()
    return value["value"] / 1e9 if "value" in value else None


def batch_curve(ident: dict, layout: Layout, records: Sequence[dict]) -> dict[int, tuple[dict, dict]]:
    """``{per-device batch: (record, config)}``: the newest preflight measurement of the model ``ident`` at each
    batch on ``layout``'s kind of device (and partition, when both name one); records come newest first."""
    curve = {}
    for record in records:
        if record.get("device") != layout.device:
            continue
        if layout.partition and record.get("partition") and record["partition"] != layout.partition:
            continue
        for c in record.get("configs") or []:
            if c.get("step_ms") and c.get("micro_batch") and _same_model(c, ident, exact=True):
                curve.setdefault(int(c["micro_batch"]), (record, c))
    return curve


def step_at_batch(curve: dict[int, tuple[dict, dict]], batch: int) -> tuple[float, str]:
    """Seconds of compute per step at ``batch`` and how it was found. Between two measured batches: linear in the
    batch (a step's fixed cost stays; a small batch is not cheaper per sample). Outside them, never faster than
    measured: past the largest batch, per sample from it; below the smallest, the line through the two smallest,
    but at least the smallest batch's time per sample (with one measured batch: its step, no faster)."""
    points = sorted((b, c["step_ms"] / 1000) for b, (_, c) in curve.items())
    times = dict(points)
    if batch in times:
        return times[batch], ""
    larger = [(b, t) for b, t in points if b > batch]
    smaller = [(b, t) for b, t in points if b < batch]
    if larger and smaller:
        (b0, t0), (b1, t1) = smaller[-1], larger[0]
        return t0 + (t1 - t0) * (batch - b0) / (b1 - b0), f"interpolated between batches {b0} and {b1}"
    if smaller:  # past the largest measured batch: per sample from it
        b0, t0 = smaller[-1]
        return t0 * batch / b0, f"scaled from batch {b0}"
    (b0, t0) = larger[0]
    if len(larger) == 1:
        return t0, f"measured at batch {b0} only: assumed no faster at batch {batch}"
    (b1, t1) = larger[1]
    line = t0 + (t1 - t0) * (batch - b0) / (b1 - b0)
    return max(line, t0 * batch / b0), f"extrapolated below batch {b0} from batches {b0} and {b1}"


def allreduce_seconds(record: dict, config: dict, world: int) -> tuple[float | None, str]:
    """The gradient all-reduce of ``config``'s model on ``world`` ranks: measured when the record ran at that world
    size, else ring all-reduce arithmetic -- ``grad_bytes x 2(n-1)/n / bus bandwidth`` -- with the record's bus
    bandwidth at the message size nearest the gradients (nccl-tests' busbw, ``preflight`` all-reduce rows)."""
    if world <= 1:
        return 0.0, "one rank: no all-reduce"
    if config.get("allreduce_ms") and config.get("world") == world:
        return config["allreduce_ms"] / 1000, f"measured on {world} ranks"
    grad_bytes = config.get("grad_bytes") or (4 * config["params"] if config.get("params") else None)
    rows = [r for r in ((record.get("allreduce") or {}).get("rows") or []) if r.get("busbw_gbs")]
    if not grad_bytes or not rows:
        return None, ""
    row = min(rows, key=lambda r: abs(math.log(r["bytes"] / grad_bytes)))
    ranks = (record.get("allreduce") or {}).get("ranks") or record.get("world_size")
    hosts = len(record.get("hosts") or []) or 1
    seconds = grad_bytes * 2 * (world - 1) / world / (row["busbw_gbs"] * 1e9)
    size = f"{grad_bytes / 1e6:,.1f} MB" if grad_bytes >= 1e5 else f"{grad_bytes / 1e3:,.1f} kB"
    return seconds, (
        f"{size} of gradients at {row['busbw_gbs']:.3g} GB/s bus bandwidth, measured on {ranks} ranks "
        f"on {hosts} node(s)"
    )


def _same_model(record: dict, ident: dict, exact: bool) -> bool:
    if record.get("model") != ident["model"]:
        return False
    if exact:
        return (
            record.get("model_kwargs") == ident["model_kwargs"]
            and list(record.get("input_size") or []) == list(ident["input_size"])
            and record.get("precision") == ident["precision"]
            and all(bool(record.get(key)) == ident.get(key, False) for key in SPEED_KEYS)
        )
    a = {k: v for k, v in (record.get("model_kwargs") or {}).items() if k not in COST_FREE_KWARGS}
    b = {k: v for k, v in ident["model_kwargs"].items() if k not in COST_FREE_KWARGS}
    return a == b


def _float(value) -> float | None:
    """A CSV cell as a finite number (NaN, inf, text: None)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _json(text) -> dict:
    try:
        return loads_json(text, source="model_kwargs") if text else {}
    except BadFile:
        return {}


def bench_csv_rows(folders: Sequence[str | Path] | None = None) -> list[dict]:
    """``depthbench bench`` CSV rows (newest first) from ``<runs>/bench/`` and the repository's
    ``benchmarks/results/``; each row carries its file in ``_path``."""
    repo = Path(__file__).resolve().parents[2]
    folders = folders if folders is not None else [runs_root() / "bench", repo / "benchmarks" / "results"]
    rows = []
    for folder in map(Path, folders):
        for path in sorted(folder.rglob("*.csv")) if folder.is_dir() else []:
            try:
                text = read_text(path, inside=folder, what="bench CSV", errors="strict")
                found = [
                    r
                    for r in csv.DictReader(io.StringIO(text, newline=""))
                    if r.get("model") and r.get("train_step_time")
                ]
            except (OSError, UnicodeDecodeError, csv.Error, BadFile):
                continue
            rows += [{**r, "_path": str(path)} for r in found]
    return sorted(rows, key=lambda r: r.get("date") or "", reverse=True)


# ----------------------------------------------------------------------------------------------- the table
def hms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 0:
        return "none"
    seconds = int(round(seconds))
    days, rest = divmod(seconds, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def format_estimate(est: Estimate) -> str:
    """The estimate as a table: one line per run, then the total."""
    lay = est.layout
    head = (
        f"estimate: {len(est.rows)} run(s), each on {lay.nodes} node(s) x {lay.ranks_per_node} "
        f"{'GPU' if lay.gpus_per_node else 'rank'}(s)"
    )
    if lay.time_s is not None:
        head += (
            f"; --time {hms(lay.time_s)} ({hms(lay.time_s - lay.warning_s - est.startup_s)} of steps per "
            f"allocation after the {lay.warning_s} s warning and {est.startup_s:.0f} s start-up)"
        )
    if lay.max_concurrent:
        head += f"; at most {lay.max_concurrent} at once"
    table = [
        ("#", "run", "epochs", "images", "batch/dev", "steps", "step", lay.unit, "wall", "requeues", "step time from")
    ]
    for r in est.rows:
        table.append(
            (
                str(r.index),
                r.name,
                str(r.epochs or "-"),
                f"{r.images:,}" if r.images is not None else "?",
                str(r.micro_batch or "-"),
                f"{r.steps:,}" if r.steps is not None else "?",
                f"{r.step_s:.3f} s" if r.step_s is not None else "-",
                f"{r.device_hours:,.1f}" if r.device_hours is not None else "-",
                hms(r.wall_s),
                "-" if r.requeues is None else str(r.requeues),
                r.problem or r.source,
            )
        )
    missing = "+" if len(est.rows) > est.timed else ""  # a lower bound: some runs have no step time
    total_cost = f"{est.device_hours:,.1f}{missing}" if est.timed else "-"
    table.append(
        (
            "",
            "total",
            "",
            "",
            "",
            f"{est.total_steps:,}",
            "",
            total_cost,
            hms(est.wall_s) + missing if est.timed else "-",
            "",
            f"{est.timed} of {len(est.rows)} run(s) timed"
            + (
                f"; wall = the array's span with at most {lay.max_concurrent} at once"
                if lay.max_concurrent and len(est.rows) > 1
                else ""
            ),
        )
    )
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    right = {2, 3, 4, 5, 6, 7, 8, 9}
    lines = [head]
    for row in table:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  " + "  ".join(cells) + "  " + row[-1])
    lines += format_scaling(est)
    images = {r.images_from for r in est.rows if r.images_from}
    if images:
        lines.append("  images per epoch from: " + "; ".join(sorted(images)))
    lines += [f"  note: {n}" for n in est.notes]
    lines.append("  (steps x step time + a start-up per allocation; queue waits and evaluation not included)")
    return "\n".join(lines)


def format_scaling(est: Estimate) -> list[str]:
    """One line per run on several nodes: images/s, the efficiency against one node, and a warning under 0.7."""
    lines = []
    for r in est.rows:
        sc = r.scaling
        if sc is None:
            if est.layout.nodes > 1 and r.step_s is not None:
                lines.append(
                    f"  scaling #{r.index}: not estimated (no preflight record of its model on this "
                    f"device: batch times and bus bandwidth come from one)"
                )
            continue
        sync = (
            "all-reduce not measured (no bus bandwidth in the record)"
            if sc.allreduce_s is None
            else f"all-reduce {sc.allreduce_s * 1000:,.1f} ms ({sc.allreduce_from})"
        )
        lines.append(
            f"  scaling #{r.index}: {sc.nodes} nodes {sc.images_per_s:,.0f} img/s at batch {sc.micro_batch}"
            f"/device (step {sc.compute_s * 1000:,.1f} ms, {sync}); one node {sc.one_node_images_per_s:,.0f}"
            f" img/s at batch {sc.one_node_batch}/device: efficiency {sc.efficiency:.2f}"
        )
        if sc.efficiency < EFFICIENCY_WARNING:
            fix = (
                f"a per-device batch of {sc.restore_batch} (global {sc.restore_batch * est.layout.world:,}; "
                f"rescale the lr) would give {sc.restore_efficiency:.2f}"
                if sc.restore_batch
                else "no per-device batch up to 4x the largest measured restores it"
            )
            lines.append(
                f"  warning: #{r.index} scales at {sc.efficiency:.2f} on {sc.nodes} nodes (under "
                f"{EFFICIENCY_WARNING}): fewer nodes cost less for nearly the same time, or {fix}"
            )
    return lines


def jobs_from_elements(elements: Sequence) -> list[Job]:
    """:class:`Job` s from a submission's elements (objects or dicts with ``name``, ``config``, ``overrides``)."""

    def get(e, key):
        return e[key] if isinstance(e, dict) else getattr(e, key)

    return [
        Job(
            get(e, "name"),
            str(get(e, "config")),
            list(get(e, "overrides")),
            (e.get("command") if isinstance(e, dict) else getattr(e, "command", None)) or "train",
        )
        for e in elements
    ]
