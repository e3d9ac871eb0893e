"""``depthbench submit --estimate`` (harness/measure/estimate.py): the cost arithmetic on fixtures, and a real
``--table`` dry run.

Steps per epoch are checked against the engine's own samplers (harness/engine/data.py: DistributedSampler or timm's
RepeatAugSampler behind ``TrainSampler``) -- an independent reference, not the formula restated. Requeues, wall
time, GPU-hours and the array's span against numbers worked out by hand.
"""
import json
import re

import pytest
import torch

from harness.core.config import load_config
from harness.measure import estimate as est

DIGITS = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"
RESNET18 = "configs/stepsnet/resnet18_8xb128-300e_in1k.py"


# ----------------------------------------------------------------------------------------------- arithmetic
@pytest.mark.parametrize("images, world, micro, accum, repeated", [
    (1437, 1, 64, 1, False), (1437, 2, 16, 1, False), (1437, 3, 8, 2, False), (50_000, 8, 128, 1, False),
    (2560, 8, 128, 1, True), (1_281_167, 32, 32, 1, True), (1000, 4, 7, 3, True), (10, 4, 8, 1, False)])
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
    assert est.allocations(86_160, day, warning, startup) == 1       # exactly one allocation's worth
    assert est.allocations(86_161, day, warning, startup) == 2
    assert est.allocations(10, None, warning, startup) is None       # no --time: nothing to say
    assert est.wall_seconds(10, None, startup) == 130
    with pytest.raises(ValueError, match="leaves no training time"):
        est.allocations(10, 200, warning, startup)


def test_array_span_with_and_without_max_concurrent():
    walls = [3.0, 1.0, 2.0, 4.0]
    assert est.makespan(walls, None) == 4.0                           # all at once
    assert est.makespan(walls, 1) == 10.0                             # one after another
    assert est.makespan(walls, 8) == 4.0                              # more slots than runs
    assert est.makespan([], 3) == 0.0


def test_array_span_order_is_slurms():
    # elements start in index order as slots free up: [3, 1, 2, 4] with 2 slots -> slot A: 3 (0-3), slot B: 1 (0-1),
    # 2 (1-3), then 4 starts at 3 on whichever slot frees first (A at 3 or B at 3) -> ends at 7
    assert est.makespan([3.0, 1.0, 2.0, 4.0], 2) == 7.0


# ----------------------------------------------------------------------------------------------- matching
def preflight_record(cfg, micro, step_ms, device="cuda", world=8, time="2026-11-20T10:00:00+00:00",
                     partition=None, allreduce_ms=None, **extra):
    ident = est.identity(cfg, micro)
    return {"format": "depthbench-preflight/1", "time": time, "device": device, "device_name": "NVIDIA H100",
            "partition": partition, "path": f"/runs/preflight/{time}/preflight.json",
            "configs": [{**ident, "step_ms": step_ms, "world": world, "allreduce_ms": allreduce_ms, **extra}]}


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
    assert est.find_timing(ident, layout(partition="a100"), [preflight_record(cfg, 128, 1.0, partition="h100")],
                           []) is None
    bench = {"model": "resnet18", "model_kwargs": "", "input_size": "3x224x224", "precision": "bf16",
             "device": "cuda", "device_name": "NVIDIA H100", "train_step_time": "50.0", "train_batch_size": "64",
             "date": "2026-11-20T00:00:00Z"}
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
    jobs = [est.Job("digits", DIGITS), est.Job("digits-w8", DIGITS, ["model.width=8"]),
            est.Job("mask-rcnn", "configs/det/x.py", command="finetune")]
    result = est.estimate(jobs, est.Layout(nodes=1), records=[record], bench_rows=[])
    timed, untimed, finetune = result.rows
    assert (timed.steps, timed.micro_batch) == (22 * 20, 64)         # 1,437 digits // 64 = 22 steps, 20 epochs
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
    record = preflight_record(cfg, 128, step_ms=250.0)
    (runs / "preflight" / "x").mkdir(parents=True)
    (runs / "preflight" / "x" / "preflight.json").write_text(json.dumps(record))
    out = cli("submit", "--table", "stepsnet:1", "--rows", "ResNet-18,Steps-ResNet-18", "--gpus-per-node", 8,
              "--time", "5", "--warning", 60, "--max-concurrent", 1, f"data.root={data}", "--dry-run", "--estimate",
              env={"OMP_NUM_THREADS": "1"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("#!/bin/bash") and "#SBATCH --array=0-1%1" in out.stdout  # the script, unchanged
    assert not list(runs.glob("slurm/*.json"))                                           # nothing submitted
    lines = out.stderr.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("estimate: 2 run(s), each on 1 node(s) x 8 GPU"))
    resnet = next(line for line in lines[head:] if re.match(r"\s+0\s+ResNet-18\s", line))
    steps_resnet = next(line for line in lines[head:] if re.match(r"\s+1\s+Steps-ResNet-18\s", line))
    total = next(line for line in lines[head:] if re.match(r"\s+total\s", line))
    # 2,560 images / 8 ranks / 128 = 2 steps x 300 epochs = 600 steps of 0.25 s = 150 s; an allocation of 5 min
    # trains 300 - 60 - 120 = 120 s -> 2 allocations, 1 requeue; wall 150 + 2 x 120 = 390 s; 390 x 8 / 3600 GPU-h
    assert re.search(r"\b300\s+2,560\s+128\s+600\s+0\.250 s\s+0\.9\s+00:06:30\s+1\s+preflight 2026-11-20", resnet), resnet
    assert re.search(r"\b600\s+-\s+-\s+-\s+-\s+none: no preflight record or bench CSV for steps_resnet18", steps_resnet)
    assert re.search(r"1,200\s+0\.9\+\s+00:06:30\+\s+1 of 2 run\(s\) timed", total), total
