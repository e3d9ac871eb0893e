"""``depthbench submit --estimate`` (harness/measure/estimate.py): the cost arithmetic on fixtures, and a real
``--table`` dry run.

Steps per epoch are checked against the engine's own samplers (harness/engine/data.py: DistributedSampler or timm's
RepeatAugSampler behind ``TrainSampler``) -- an independent reference, not the formula restated. Requeues, wall
time, GPU-hours and the array's span against numbers worked out by hand.
"""

import json
import os
import re

import pytest
import torch

from fixtures.files import in_time as _in_time
from harness.core.config import load_config
from harness.measure import estimate as est

DIGITS = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"
RESNET18 = "configs/stepsnet/resnet18_8xb128-300e_in1k.py"


# ----------------------------------------------------------------------------------------------- arithmetic
@pytest.mark.parametrize(
    "images, world, micro, accum, repeated",
    [
        (1437, 1, 64, 1, False),
        (1437, 2, 16, 1, False),
        (1437, 3, 8, 2, False),
        (50_000, 8, 128, 1, False),
        (2560, 8, 128, 1, True),
        (1_281_167, 32, 32, 1, True),
        (1000, 4, 7, 3, True),
        (10, 4, 8, 1, False),
    ],
)
def test_steps_per_epoch_match_the_engines_samplers(images, world, micro, accum, repeated):
    from harness.engine.data import TrainSampler

    dataset = torch.utils.data.TensorDataset(torch.zeros(images))
    for rank in (0, world - 1):  # every rank gets the same count (padding / selection), the loader drops the rest
        sampler = TrainSampler(dataset, rank, world, seed=0, repeated_aug=repeated)
        reference = len(list(sampler)) // micro // accum
        assert est.steps_per_epoch(images, world, micro, accum, repeated) == reference


def test_allocations_requeues_wall_and_gpu_hours():
    day, warning, startup = 86400, 120, 120
    # 100 h of steps under a 1-day limit: each allocation trains 86,160 s -> 5 allocations, 4 requeues
    assert est.allocations(360_000, day, warning, startup) == 5
    assert est.wall_seconds(360_000, 5, startup) == 360_000 + 5 * 120
    assert est.device_hours(360_600, 16) == pytest.approx(360_600 * 16 / 3600)
    assert est.allocations(86_160, day, warning, startup) == 1  # exactly one allocation's worth
    assert est.allocations(86_161, day, warning, startup) == 2
    assert est.allocations(10, None, warning, startup) is None  # no --time: nothing to say
    assert est.wall_seconds(10, None, startup) == 130
    with pytest.raises(ValueError, match="leaves no training time"):
        est.allocations(10, 200, warning, startup)


def test_array_span_with_and_without_max_concurrent():
    walls = [3.0, 1.0, 2.0, 4.0]
    assert est.makespan(walls, None) == 4.0  # all at once
    assert est.makespan(walls, 1) == 10.0  # one after another
    assert est.makespan(walls, 8) == 4.0  # more slots than runs
    assert est.makespan([], 3) == 0.0


def test_array_span_order_is_slurms():
    # elements start in index order as slots free up: [3, 1, 2, 4] with 2 slots -> slot A: 3 (0-3), slot B: 1 (0-1),
    # 2 (1-3), then 4 starts at 3 on whichever slot frees first (A at 3 or B at 3) -> ends at 7
    assert est.makespan([3.0, 1.0, 2.0, 4.0], 2) == 7.0


# ----------------------------------------------------------------------------------------------- matching
def preflight_record(
    cfg,
    micro,
    step_ms,
    device="cuda",
    world=8,
    time="2026-11-20T10:00:00+00:00",
    partition=None,
    allreduce_ms=None,
    **extra,
):
    ident = est.identity(cfg, micro)
    return {
        "format": "depthbench-preflight/1",
        "time": time,
        "device": device,
        "device_name": "NVIDIA H100",
        "partition": partition,
        "path": f"/runs/preflight/{time}/preflight.json",
        "configs": [{**ident, "step_ms": step_ms, "world": world, "allreduce_ms": allreduce_ms, **extra}],
    }


def layout(**kw):
    return est.Layout(**{"nodes": 1, "gpus_per_node": 8, **kw})


def test_estimate_from_a_preflight_record_by_hand():
    cfg = load_config(RESNET18, ["data.train_subset=2560"])
    record = preflight_record(cfg, 128, step_ms=500.0)
    job = est.Job("ResNet-18", RESNET18, ["data.train_subset=2560"])
    result = est.estimate([job], layout(time_s=300, warning_s=60), records=[record], bench_rows=[])
    (row,) = result.rows
    # 2,560 images / 8 ranks = 320 -> 2 batches of 128 per epoch, x 300 epochs
    assert (row.images, row.micro_batch, row.steps) == (2560, 128, 600)
    assert row.step_s == pytest.approx(0.5) and "preflight 2026-11-20 NVIDIA H100" in row.source
    # 300 s of steps; an allocation trains 300 - 60 - 120 = 120 s -> 3 allocations, 2 requeues
    assert row.requeues == 2
    assert row.wall_s == pytest.approx(300 + 3 * 120)
    assert row.device_hours == pytest.approx(660 * 8 / 3600)
    assert (result.total_steps, result.timed) == (600, 1) and result.wall_s == pytest.approx(660)


def test_newest_exact_batch_first_then_scaled_then_bench_then_none():
    cfg = load_config(RESNET18)
    old = preflight_record(cfg, 128, 100.0, time="2026-11-01T00:00:00+00:00")
    new = preflight_record(cfg, 128, 120.0, time="2026-11-10T00:00:00+00:00")
    other_batch = preflight_record(cfg, 64, 70.0, time="2026-11-15T00:00:00+00:00")
    ident = est.identity(cfg, 128)
    lay = layout()
    timing = est.find_timing(ident, lay, [other_batch, new, old], [])
    assert timing.step_s == pytest.approx(0.120) and "2026-11-10" in timing.source  # exact batch wins over newer
    timing = est.find_timing(ident, lay, [other_batch], [])
    assert timing.step_s == pytest.approx(0.140) and "scaled from batch 64" in timing.note
    # the gradient all-reduce measured at this world size bounds the step from below (DDP overlaps the two)
    slow_link = preflight_record(cfg, 128, 100.0, allreduce_ms=180.0)
    assert est.find_timing(ident, lay, [slow_link], []).step_s == pytest.approx(0.180)
    # another kind of device or another partition is not "this hardware"
    assert est.find_timing(ident, lay, [preflight_record(cfg, 128, 1.0, device="cpu")], []) is None
    assert (
        est.find_timing(ident, layout(partition="a100"), [preflight_record(cfg, 128, 1.0, partition="h100")], [])
        is None
    )
    bench = {
        "model": "resnet18",
        "model_kwargs": "",
        "input_size": "3x224x224",
        "precision": "bf16",
        "device": "cuda",
        "device_name": "NVIDIA H100",
        "train_step_time": "50.0",
        "train_batch_size": "64",
        "date": "2026-11-20T00:00:00Z",
    }
    timing = est.find_timing(ident, lay, [], [bench])
    assert timing.step_s == pytest.approx(0.100) and timing.source.startswith("bench 2026-11-20")
    assert est.find_timing(ident, lay, [], [{**bench, "precision": "fp32"}]) is None
    assert est.find_timing(ident, lay, [], [{**bench, "model_kwargs": json.dumps({"depth": 9})}]) is None


def test_a_step_timed_with_other_speed_options_is_not_this_runs_step():
    """Grad checkpointing (or channels-last) changes a step's time: a record timed with it does not time a run
    without it, nor the other way round; a record older than the option (no key) counts as without it."""
    plain, ckpt = load_config(RESNET18), load_config(RESNET18, ["grad_checkpointing=True"])
    lay = layout()
    assert est.find_timing(est.identity(plain, 128), lay, [preflight_record(ckpt, 128, 90.0)], []) is None
    assert est.find_timing(est.identity(ckpt, 128), lay, [preflight_record(plain, 128, 60.0)], []) is None
    assert est.find_timing(est.identity(ckpt, 128), lay, [preflight_record(ckpt, 128, 90.0)], []).step_s == 0.09
    legacy = preflight_record(plain, 128, 60.0)
    for key in est.SPEED_KEYS:
        del legacy["configs"][0][key]
    assert est.find_timing(est.identity(plain, 128), lay, [legacy], []).step_s == pytest.approx(0.06)


def test_runs_without_a_step_time_say_so_and_stay_out_of_the_total():
    cfg = load_config(DIGITS)
    record = preflight_record(cfg, 64, 40.0, device="cpu", world=1)
    jobs = [
        est.Job("digits", DIGITS),
        est.Job("digits-w8", DIGITS, ["model.width=8"]),
        est.Job("mask-rcnn", "configs/det/x.py", command="finetune"),
    ]
    result = est.estimate(jobs, est.Layout(nodes=1), records=[record], bench_rows=[])
    timed, untimed, finetune = result.rows
    assert (timed.steps, timed.micro_batch) == (22 * 20, 64)  # 1,437 digits // 64 = 22 steps, 20 epochs
    assert timed.wall_s == pytest.approx(440 * 0.040 + est.STARTUP_S) and timed.requeues is None
    assert untimed.steps == 440 and untimed.step_s is None and untimed.source.startswith("none: no preflight")
    assert "not estimated" in finetune.problem
    assert result.timed == 1 and result.device_hours == pytest.approx(timed.device_hours)
    table = est.format_estimate(result)
    assert "1 of 3 run(s) timed" in table and "no --time" in table and "rank-h" in table


def test_images_per_epoch_sources(tmp_path):
    cfg = load_config(DIGITS)
    assert est.train_images(cfg) == (1437, "digits's train split")
    cfg = load_config(RESNET18, [f"data.root={str(tmp_path / 'nowhere')!r}"])
    assert est.train_images(cfg)[0] == est.IMAGENET_1K_TRAIN
    for i in range(3):
        (tmp_path / "train" / f"c{i}").mkdir(parents=True)
        for j in range(5):
            (tmp_path / "train" / f"c{i}" / f"{j}.JPEG").write_bytes(b"")
    cfg = load_config(RESNET18, [f"data.root={str(tmp_path)!r}"])
    assert est.train_images(cfg) == (15, f"counted in {tmp_path / 'train'}")
    cfg = load_config(RESNET18, [f"data.root={str(tmp_path)!r}", "data.train_subset=4"])
    assert est.train_images(cfg)[0] == 4


# ----------------------------------------------------------------------------------------------- a real dry run
@pytest.fixture
def runs(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    monkeypatch.setenv("DEPTHBENCH_RUNS", str(root))
    return root


def test_table_dry_run_estimate(runs, tmp_path, cli):
    data = tmp_path / "imagenet"
    for split, n in (("train", 2560), ("val", 1)):
        (data / split / "n01440764").mkdir(parents=True)
        for i in range(n):
            (data / split / "n01440764" / f"{i}.JPEG").write_bytes(b"")
    cfg = load_config(RESNET18, [f"data.root={str(data)!r}"])
    from harness.engine.models import build_model
    from harness.measure.flops import count_flops

    gmacs = {
        name: count_flops(build_model(name, num_classes=1000), 224).total / 1e9
        for name in ("resnet18", "steps_resnet18")
    }
    record = preflight_record(cfg, 128, step_ms=250.0, gmacs=gmacs["resnet18"])
    (runs / "preflight" / "x").mkdir(parents=True)
    (runs / "preflight" / "x" / "preflight.json").write_text(json.dumps(record))
    out = cli(
        "submit",
        "--table",
        "stepsnet:1",
        "--rows",
        "ResNet-18,Steps-ResNet-18",
        "--gpus-per-node",
        8,
        "--time",
        "5",
        "--warning",
        60,
        "--max-concurrent",
        1,
        f"data.root={data}",
        "--dry-run",
        "--estimate",
        env={"OMP_NUM_THREADS": "1"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("#!/bin/bash") and "#SBATCH --array=0-1%1" in out.stdout  # the script, unchanged
    assert not list(runs.glob("slurm/*.json"))  # nothing submitted
    lines = out.stderr.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("estimate: 2 run(s), each on 1 node(s) x 8 GPU"))
    resnet = next(line for line in lines[head:] if re.match(r"\s+0\s+ResNet-18\s", line))
    steps_resnet = next(line for line in lines[head:] if re.match(r"\s+1\s+Steps-ResNet-18\s", line))
    total = next(line for line in lines[head:] if re.match(r"\s+total\s", line))
    # 2,560 images / 8 ranks / 128 = 2 steps x 300 epochs = 600 steps of 0.25 s = 150 s; an allocation of 5 min
    # trains 300 - 60 - 120 = 120 s -> 2 allocations, 1 requeue; wall 150 + 2 x 120 = 390 s; 390 x 8 / 3600 GPU-h
    assert re.search(r"\b300\s+2,560\s+128\s+600\s+0\.250 s\s+0\.9\s+00:06:30\s+1\s+preflight 2026-11-20", resnet), (
        resnet
    )
    # issue 45 item 7: the unmeasured Steps-ResNet-18 by FLOPs from the measured ResNet-18, labelled with the factor
    factor = gmacs["steps_resnet18"] / gmacs["resnet18"]
    assert f"{0.25 * factor:.3f} s" in steps_resnet and " 600 " in steps_resnet, steps_resnet
    assert f"by FLOPs: x{factor:.2f} resnet18's step (same family" in steps_resnet, steps_resnet
    assert re.search(r"1,200\s+\S+\s+\S+\s+2 of 2 run\(s\) timed", total), total


# ----------------------------------------------------------------------------------------------- scaling (issue 40)
def batch_sweep_record(cfg, step_ms_by_batch: dict, grad_bytes=100e6, busbw_gbs=50.0, world=8):
    """One preflight record on one 8-GPU node: the model timed at several per-GPU batches, and the all-reduce."""
    configs = [
        {**est.identity(cfg, batch), "step_ms": ms, "world": world, "grad_bytes": grad_bytes}
        for batch, ms in step_ms_by_batch.items()
    ]
    return {
        "format": "depthbench-preflight/1",
        "time": "2026-11-20T10:00:00+00:00",
        "device": "cuda",
        "device_name": "NVIDIA H100",
        "hosts": ["node1"],
        "world_size": world,
        "path": "/runs/p/preflight.json",
        "allreduce": {
            "backend": "nccl",
            "ranks": world,
            "rows": [{"bytes": int(grad_bytes), "busbw_gbs": busbw_gbs}, {"bytes": 2**20, "busbw_gbs": 5.0}],
        },
        "configs": configs,
    }


def test_step_time_is_interpolated_between_measured_batches_never_scaled_from_one():
    cfg = load_config(RESNET18)
    curve = {b: ({}, {"step_ms": ms}) for b, ms in {16: 40.0, 64: 60.0, 128: 100.0}.items()}
    assert est.step_at_batch(curve, 64) == (0.06, "")
    step, note = est.step_at_batch(curve, 32)  # 40 + (60 - 40) x 16/48 ms: the fixed cost stays
    assert step == pytest.approx(0.04 + 0.02 / 3) and note == "interpolated between batches 16 and 64"
    assert est.step_at_batch(curve, 256)[0] == pytest.approx(0.2)  # past the largest: per sample, no faster
    # below the smallest: the line through 16 and 64 (33.3 ms at 8) but never under per-sample from 16 (20 ms)
    assert est.step_at_batch(curve, 8)[0] == pytest.approx(0.04 - 0.02 / 6)
    only = {128: ({}, {"step_ms": 100.0})}
    step, note = est.step_at_batch(only, 16)  # one measured batch: a smaller batch is assumed no faster
    assert step == pytest.approx(0.1) and "measured at batch 128 only" in note
    record = batch_sweep_record(cfg, {16: 40.0, 64: 60.0, 128: 100.0})
    timing = est.find_timing(est.identity(cfg, 32), layout(nodes=4), [record], [])
    assert timing.step_s == pytest.approx(0.04 + 0.02 / 3) and "interpolated" in timing.note


def test_scaling_efficiency_over_nodes_warns_under_0_7_with_the_batch_that_restores_it():
    # global batch 1,024 (the papers'): 8 nodes x 8 GPUs hold 16 images each, one node 128
    cfg = load_config(RESNET18, ["batch_size=1024"])
    record = batch_sweep_record(cfg, {16: 40.0, 64: 60.0, 128: 100.0})
    sc = est.scaling(cfg, layout(nodes=8), [record])
    # ring all-reduce of 100 MB on 64 ranks at 50 GB/s bus bandwidth: 1e8 x 2 x 63/64 / 5e10 s, under the 40 ms step
    assert sc.allreduce_s == pytest.approx(1e8 * 2 * 63 / 64 / 5e10)
    assert (sc.micro_batch, sc.one_node_batch) == (16, 128)
    assert sc.images_per_s == pytest.approx(1024 / 0.040) and sc.one_node_images_per_s == pytest.approx(1024 / 0.1)
    assert sc.efficiency == pytest.approx(25600 / (8 * 10240))  # 0.31
    # per-GPU 32: 46.7 ms vs one node at 256 (200 ms): 0.54; per-GPU 64: 60 ms vs 400 ms: 0.83 -> 64 restores it
    assert sc.restore_batch == 64 and sc.restore_efficiency == pytest.approx((64 * 64 / 0.06) / (8 * 512 * 8 / 0.4))
    # a slow link: the all-reduce (at 1 GB/s, 197 ms) bounds the step
    slow = est.scaling(cfg, layout(nodes=8), [batch_sweep_record(cfg, {16: 40.0, 64: 60.0, 128: 100.0}, busbw_gbs=1.0)])
    assert slow.images_per_s == pytest.approx(1024 / (1e8 * 2 * 63 / 64 / 1e9))
    job = est.Job("ResNet-18", RESNET18, ["batch_size=1024", "data.train_subset=10240"])
    table = est.format_estimate(est.estimate([job], layout(nodes=8), records=[record], bench_rows=[]))
    assert "scaling #0: 8 nodes 25,600 img/s at batch 16/device" in table
    assert "one node 10,240 img/s at batch 128/device: efficiency 0.31" in table
    assert "warning: #0 scales at 0.31 on 8 nodes (under 0.7)" in table and "per-device batch of 64" in table
    # two nodes: 64 per GPU (60 ms) against one node at 128 (100 ms): 0.83, no warning
    table = est.format_estimate(est.estimate([job], layout(nodes=2), records=[record], bench_rows=[]))
    assert "efficiency 0.83" in table and "warning" not in table


def test_an_unmeasured_model_is_timed_by_flops_from_the_nearest_family():
    """Issue 45 item 7: one preflight of a table's baselines times the rest, labelled with the factor."""
    resnet, deit = load_config(RESNET18), load_config("configs/deit/deit-small_8xb128-300e_in1k.py")
    record = preflight_record(resnet, 128, 100.0, gmacs=2.0)
    record["configs"].append({**est.identity(deit, 128), "step_ms": 300.0, "world": 8, "gmacs": 4.0})
    lay = layout()
    flops = {"steps_resnet18": 3.0, "steps_deit_small_patch16_224": 6.0, "transnext_micro": 2.5}.get

    def timing(model, micro=128):
        ident = {**est.identity(resnet, micro), "model": model}
        return est.timing_by_flops(ident, lay, [record], gmacs=lambda i: flops(i["model"]))

    same = timing("steps_resnet18")  # 3.0 / 2.0 GMACs x resnet18's 100 ms
    assert same.step_s == pytest.approx(0.15) and "x1.50 resnet18's step (same family" in same.source
    assert timing("steps_deit_small_patch16_224").step_s == pytest.approx(0.45)  # deit: 6.0 / 4.0 x 300 ms
    nearest = timing("transnext_micro")  # no shared name part: the nearest in MACs (resnet18, 2.0)
    assert nearest.step_s == pytest.approx(0.125) and "nearest by FLOPs" in nearest.source
    assert timing("steps_resnet18", micro=64).step_s == pytest.approx(0.15)  # one measured batch: no faster
    assert est.timing_by_flops(est.identity(resnet, 128), layout(gpus_per_node=0), [record]) is None  # other device


def test_bad_numbers_in_a_preflight_record_never_reach_the_estimate(tmp_path, monkeypatch):
    from harness.core.config import load_config
    from harness.measure import estimate as est
    from harness.measure.preflight import read_records

    cfg = load_config("configs/stepsnet/resnet18_8xb128-300e_in1k.py", ["data.train_subset=2560"])
    ident = est.identity(cfg, 128)
    folder = tmp_path / "preflight"
    for name, fields in (
        ("nan", {"step_ms": float("nan")}),
        ("text", {"step_ms": "fast"}),
        ("zero", {"step_ms": 5.0, "micro_batch": 0}),
        ("inf", {"step_ms": 1e999}),
        ("kwargs", {"step_ms": 5.0, "model_kwargs": [1], "input_size": 7}),
    ):
        (folder / name).mkdir(parents=True)
        record = {
            "format": "depthbench-preflight/1",
            "time": f"2026-11-2{len(name)}",
            "device": "cuda",
            "device_name": "GPU\x1b]0;pwned\x07\x1b[2J",
            "configs": [{**ident, "world": 8, **fields}],
        }
        (folder / name / "preflight.json").write_text(json.dumps(record))
    os.mkfifo(folder / "fifo")  # neither a folder nor a record: skipped at once
    (folder / "deep").mkdir()
    (folder / "deep" / "preflight.json").write_text("[" * 50000 + "]" * 50000)
    records = _in_time(lambda: read_records(tmp_path))
    assert len(records) == 5 and all("\x1b" not in r["device_name"] for r in records)
    job = est.Job("ResNet-18", "configs/stepsnet/resnet18_8xb128-300e_in1k.py", ["data.train_subset=2560"])
    (row,) = est.estimate([job], est.Layout(nodes=1, gpus_per_node=8), records=records, bench_rows=[]).rows
    assert row.step_s is None and row.source.startswith("none: no preflight record")
    good = {**json.loads((folder / "nan" / "preflight.json").read_text()), "configs": [{**ident, "step_ms": 250.0}]}
    (folder / "nan" / "preflight.json").write_text(json.dumps(good))
    (row,) = est.estimate(
        [job], est.Layout(nodes=1, gpus_per_node=8), records=read_records(tmp_path), bench_rows=[]
    ).rows
    assert row.step_s == pytest.approx(0.25) and "\x1b" not in row.source and "GPU?]0;pwned??[2J" in row.source


# ------------------------------------------------------------------------------------------------ preflight records
def test_bad_all_reduce_rows_and_gmacs_in_a_preflight_record_never_reach_the_estimate(tmp_path):
    import json

    from harness.core.config import load_config
    from harness.measure import estimate as est
    from harness.measure.preflight import read_records

    config = "configs/stepsnet/resnet18_8xb128-300e_in1k.py"
    cfg = load_config(config, ["data.train_subset=2560"])
    ident = est.identity(cfg, None)
    layout = est.Layout(nodes=2, gpus_per_node=8)
    folder = tmp_path / "preflight"
    (folder / "empty").mkdir(parents=True)
    (folder / "empty" / "preflight.json").write_bytes(b"")  # a zero-byte record: skipped
    record = {
        "format": "depthbench-preflight/1",
        "time": "2026-11-29",
        "device": "cuda",
        "world_size": 8,
        "allreduce": {
            "ranks": 8,
            "rows": [
                {"bytes": 0, "busbw_gbs": 10.0},
                {"bytes": 4096, "busbw_gbs": "9"},
                {"busbw_gbs": 5.0},
                {"bytes": 1 << 20, "busbw_gbs": -1.0},
            ],
        },
        "configs": [
            {**ident, "micro_batch": 64, "step_ms": 250.0, "world": 8, "grad_bytes": 46_000_000},
            {**ident, "model": "resnet50", "micro_batch": 64, "step_ms": 400.0, "gmacs": -4.1},
        ],
    }
    (folder / "r").mkdir()
    (folder / "r" / "preflight.json").write_text(json.dumps(record))
    records = read_records(tmp_path)
    assert len(records) == 1
    job = est.Job("ResNet-18", config, ["data.train_subset=2560"])
    (row,) = est.estimate([job], layout, records=records, bench_rows=[]).rows
    assert row.step_s == pytest.approx(0.25) and row.scaling is not None and row.scaling.allreduce_s is None
    other = {**ident, "model": "steps_resnet18", "micro_batch": 64}
    assert est.timing_by_flops(other, layout, records, gmacs=lambda _: 1.8) is None  # the -4.1 GMACs entry is out
