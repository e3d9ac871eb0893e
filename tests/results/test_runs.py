"""results.runs: collecting runs -- every run with its status, model and setting, a config read without executing
it, each run's evaluations reduced (best, last, mean), in parallel as serially -- names broken and hostile files as
problems of their run, once each, loses no other run and waits on none. A ``depthbench test`` run is labelled by
the checkpoint it tested and that run's setting -- not by the schedule its config names -- and its metrics
(metrics.jsonl ``"kind": "test"``) fill its row (issue 45).

The expected cells are computed by hand from the hand-written run fixtures in tests/fixtures/results/runs (see
the comments there and here), never copied from the code's output.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from fixtures.files import in_time as _in_time
from fixtures.paper_views import DEMO, RUNS, SHORTENED, TRANSNEXT_TINY, cells, views_of
from fixtures.paper_views import finetune_and_test as _finetune_and_test
from fixtures.paper_views import eval_run as _eval_run
from fixtures.paper_views import suite as _suite
from results import compare, paper_tables, runs

ROOT = Path(__file__).resolve().parents[2]


def test_results_name_a_fifo_or_a_link_in_a_run_and_wait_on_neither(tmp_path):
    from results import runs

    for name in ("fifo", "link"):
        (tmp_path / "exp" / name).mkdir(parents=True)
    os.mkfifo(tmp_path / "exp" / "fifo" / "meta.json")
    os.mkfifo(tmp_path / "exp" / "fifo" / "metrics.jsonl")
    (tmp_path / "secret.json").write_text('{"status": "done", "model": "private"}')
    (tmp_path / "exp" / "link" / "meta.json").symlink_to(tmp_path / "secret.json")
    frame, problems = _in_time(lambda: runs.collect([tmp_path]))
    assert len(frame) == 2 and set(frame["status"]) == {"unknown"} and "private" not in set(frame["model"])
    text = problems.summary()
    assert "a FIFO" in text and "a symbolic link" in text


# ------------------------------------------------------------------------------------------------ results
def test_results_never_raise_on_what_they_read(tmp_path):
    from results import figures, runs

    def run(name, meta, metrics='{"kind": "eval", "epoch": 0, "top1": 50.0}\n'):
        folder = tmp_path / "exp" / name
        folder.mkdir(parents=True)
        (folder / "meta.json").write_text(meta if isinstance(meta, str) else json.dumps(meta))
        (folder / "metrics.jsonl").write_text(metrics)

    good = {"status": "done", "experiment": "exp", "run_id": "good", "start": "1", "model": "resnet18"}
    run("good", good)
    run("nested", "[" * 100000 + "]" * 100000)
    run("digits", '{"status": "done", "epochs": ' + "9" * 5000 + "}")
    run("list-model", {**good, "run_id": "list-model", "start": "2", "model": ["resnet18"]})
    run("dict-model", {**good, "run_id": "dict-model", "start": "3", "model": {"name": "resnet18"}})
    run("list-experiment", {**good, "run_id": "list-experiment", "start": "4", "experiment": ["a"]})
    run("int-command", {**good, "run_id": "int-command", "start": "5", "command": 7, "config_file": 8})
    run("nested-metrics", {**good, "run_id": "nested-metrics", "start": "6"}, "[" * 100000 + "\n")
    run("exp$\\frac{$", {**good, "run_id": "exp$\\frac{$", "start": "7"})
    frame, problems = runs.collect([tmp_path])
    assert len(frame) == 9
    assert set(frame["status"]) <= {"done", "unknown"}
    flagged = {Path(path).name for path, _ in problems.items}
    assert {
        "nested",
        "digits",
        "list-model",
        "dict-model",
        "list-experiment",
        "int-command",
        "nested-metrics",
    } <= flagged, problems.summary()
    drawn = figures.training_curves(sorted(frame["path"]), tmp_path / "fig" / "curves")
    assert drawn and all(path.stat().st_size > 0 for path in drawn)  # the "$" run's name drawn as text


# ------------------------------------------------------------------------------------------------ collection
def test_collect_reads_every_run_and_flags_status():
    frame, problems = runs.collect([RUNS])
    assert len(frame) == 8 and len(problems) == 0, problems.summary()
    status = dict(zip(frame["run_id"], frame["status"]))
    assert status["seed3"] == "running" and status["20261102-090000"] == "preempted"
    seed0 = frame[frame["run_id"] == "seed0"].iloc[0]
    assert seed0["model"] == "resnet18" and seed0["seed"] == 0 and seed0["epochs"] == 300
    assert seed0["metric.top1"] == 70.0 and seed0["eval_epoch"] == 1  # best of 60.0, 70.0, 69.0
    seed2 = frame[frame["run_id"] == "seed2"].iloc[0]
    assert seed2["config_file"] == "configs/stepsnet/resnet18_8xb128-300e_in1k.py"  # absolute path, other checkout
    detection = frame[frame["experiment"] == "mask-rcnn_swin-t_fpn_1x_coco"].iloc[0]
    assert detection["metric.bbox_mAP"] == pytest.approx(44.1) and detection["metric.segm_mAP"] == pytest.approx(40.2)


def test_config_fields_are_read_without_executing_the_file():
    text = (
        "_base_ = ['x.py']\nmodel = dict(\n    depth=4,\n    name='deit_tiny_patch16_224',\n    img_size=(16, 16))\n"
        "epochs = 30\nimport os\nos.system('false')\noptim = dict(lr=1e-3, betas=[0.9, 0.999])\n"
    )
    fields = runs.read_config_fields(text)
    assert fields == {
        "_base_": ["x.py"],
        "model": {"depth": 4, "name": "deit_tiny_patch16_224", "img_size": (16, 16)},
        "epochs": 30,
        "optim": {"lr": 1e-3, "betas": [0.9, 0.999]},
    }


def test_a_downstream_config_names_its_backbone():
    text = (
        "model = dict(\n    type='MaskRCNN',\n    backbone=dict(\n        type='DepthbenchBackbone',\n"
        "        model_name='steps_swin_tiny',\n        model_kwargs=dict(strict_img_size=False),\n"
        "        init_cfg=dict(type='Pretrained', checkpoint=pretrained)),\n    neck=dict(type='FPN'))\n"
    )
    model = runs.read_config_fields(text)["model"]
    assert runs.model_identity(model) == ("steps_swin_tiny", {"strict_img_size": False})
    assert runs.model_identity({"name": "resnet18", "drop_path_rate": 0.05, "pretrained": None}) == (
        "resnet18",
        {"drop_path_rate": 0.05},
    )


@pytest.mark.parametrize(
    "reduce, expected",
    [
        # last evals 69.0, 70.2, 71.0: mean 70.067, sample std 1.007
        ("last", "70.2 / 70.1 ± 1.0 (n=3) [3 done, 1 running] / -0.1"),
        # mean of each run's evals: 66.333, 68.567, 71.0 -> 68.633 ± 2.334
        ("mean", "70.2 / 68.6 ± 2.3 (n=3) [3 done, 1 running] / -1.6"),
    ],
)
def test_reduce_modes(reduce, expected):
    views, _, _ = views_of(reduce=reduce)
    assert cells(views[0])["ResNet-18"]["top1"] == expected


def test_parallel_collection_gives_the_serial_frame_and_problems(tmp_path):
    root = tmp_path / "runs"
    shutil.copytree(RUNS, root)
    (root / "lost" / "no-meta").mkdir(parents=True)
    (root / "lost" / "no-meta" / "metrics.jsonl").write_text('{"kind": "eval", "top1": 1.0}\nnot json\n')
    serial, serial_problems = runs.collect([root], workers=1)
    parallel, parallel_problems = runs.collect([root], workers=2)
    assert len(serial) == 9 and sorted(serial_problems.items) == sorted(parallel_problems.items)
    assert len(parallel_problems) == 2  # no meta.json + the garbage line, each once
    import pandas as pd

    pd.testing.assert_frame_equal(serial, parallel)


def test_aggregation_of_an_empty_or_missing_root():
    frame, problems = runs.collect([ROOT / "no" / "such" / "dir"])
    assert frame.empty and len(problems) == 0


# ------------------------------------------------------------------------------------------------ robustness
def test_broken_runs_are_reported_once_and_never_lose_the_others(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    shutil.copytree(RUNS, root)
    seed0 = root / "resnet18_8xb128-300e_in1k" / "seed0" / "metrics.jsonl"
    lines = seed0.read_text().splitlines()
    seed0.write_text("\n".join(lines[:2] + ["garbage \x00 line"] + lines[2:]) + '\n{"kind": "eval", "top1": 9')
    no_meta = root / "lost" / "run-without-meta"
    no_meta.mkdir(parents=True)
    (no_meta / "metrics.jsonl").write_text('{"kind": "eval", "epoch": 0, "top1": 12.0}\n')
    gone = root / "old" / "gone-config"
    gone.mkdir(parents=True)
    (gone / "meta.json").write_text(
        json.dumps(
            {
                "status": "done",
                "experiment": "old",
                "run_id": "gone-config",
                "start": "x",
                "config_file": "configs/stepsnet/removed_recipe.py",
            }
        )
    )
    (gone / "config.py").write_text("model = dict(name='resnet18')\n")
    (gone / "metrics.jsonl").write_text('{"kind": "eval", "epoch": 0, "top1": 33.0}\n')
    shutil.copytree(root / "resnet18_8xb128-300e_in1k" / "seed1", root / "copies" / "seed1")  # the same run twice
    for name, model in (("renamed", "resnet18_old_name"), ("unknown", "steps_resnet18_v0")):
        run = root / "legacy" / name
        run.mkdir(parents=True)
        (run / "meta.json").write_text(
            json.dumps({"status": "failed", "experiment": "legacy", "run_id": name, "start": name, "model": model})
        )
        (run / "metrics.jsonl").write_text('{"kind": "eval", "epoch": 0, "top1": 1.0}\n')
    monkeypatch.setattr(runs, "MODEL_RENAMES", {"resnet18_old_name": "resnet18"})

    frame, problems = runs.collect([root, root / "resnet18_8xb128-300e_in1k"])  # overlapping roots: no duplicates
    runs.check_runs(frame, problems)
    summary = problems.summary()
    expected = {
        "seed0": "metrics.jsonl 2 lines (first: 3) not JSON",
        "run-without-meta": "no meta.json",
        "gone-config": "its config configs/stepsnet/removed_recipe.py no longer exists",
        "copies/seed1": "duplicate of",
        "renamed": "model resnet18_old_name was renamed to resnet18",
        "unknown": "model steps_resnet18_v0 is not registered any more (renamed?)",
    }
    assert len(problems) == len(expected), summary
    for where, message in expected.items():
        hits = [line for line in summary.splitlines() if message in line]
        assert len(hits) == 1 and where in hits[0], (where, summary)
    assert "closest now: steps_resnet18" in summary
    assert len(frame) == 8 + 4  # the fixture's 8 + no-meta, gone-config and the two legacy runs; the copy once
    assert frame[frame["run_id"] == "run-without-meta"].iloc[0]["status"] == "unknown"
    index = compare.RunIndex(frame, runs.MODEL_RENAMES)
    view = compare.view_table(paper_tables.load(DEMO)[0], index)
    got = cells(view)
    # seed0's good lines still give its best 70.0; the renamed model's failed run joins ResNet-18 (as a reduced
    # line: it recorded no config), flagged failed
    assert got["ResNet-18"]["top1"] == "70.2 / 70.5 ± 0.5 (n=3) [3 done, 1 running] / +0.3"
    assert got["↳ reduced: no config recorded"] == {"top1": "1.0 [1 failed]"}
    assert got["↳ reduced: config removed_recipe.py"] == {"top1": "33.0"}


@pytest.mark.tier("integration")
def test_broken_eval_suite_lines_are_reported_once_and_the_rest_is_used(tmp_path):
    root = tmp_path / "runs"
    run = _eval_run(root, "tiny", TRANSNEXT_TINY, "transnext_tiny", 224, [_suite("imagenet-a", "top1", 38.0)])
    with open(run / "metrics.jsonl", "a") as fh:
        fh.write('{"kind": "eval_suite", "dataset": "imagenet-r", "value": 5\n')  # cut short
        fh.write('{"kind": "eval_suite", "dataset": "imagenet-r", oops}\n')  # garbage between braces
        fh.write(json.dumps(_suite("imagenet-r", "top1", float("nan"))) + "\n")  # no number: left out, not a problem
        fh.write(json.dumps(_suite("imagenet-sketch", "top1", 37.5)) + "\n")
    garbled = root / "x" / "garbled-meta"
    garbled.mkdir(parents=True)
    (garbled / "meta.json").write_text('{"status": "do')
    frame, problems = runs.collect([root])
    assert len(frame) == 2 and len(problems) == 2, problems.summary()
    summary = problems.summary()
    assert "metrics.jsonl 2 lines (first: 2) not JSON" in summary and "meta.json unreadable" in summary
    t1 = cells(
        compare.view_table(
            next(t for t in paper_tables.load_paper("transnext") if t.id == "1"), compare.RunIndex(frame)
        )
    )["TransNeXt-Tiny"]
    assert (t1["in_a"], t1["in_r"], t1["sketch"]) == ("39.9 / 38.0 / -1.9", "49.6 / —", "37.6 / 37.5 / -0.1")


def test_a_test_run_carries_its_checkpoints_label_and_its_metrics(tmp_path):
    from downstream.finetune import tested_scale
    from results.runs import collect

    run, test = _finetune_and_test(tmp_path / "runs")
    frame, problems = collect([tmp_path / "runs"])
    assert not len(problems), problems.summary()
    row = frame.set_index("path").loc[str(test)]
    assert row["scale"] == f"test of {run.name}/last.pth: {SHORTENED}"
    assert "500 iterations" not in row["scale"]
    assert row["metric.bbox_mAP"] == 31.2 and row["metric.segm_mAP"] == 28.7  # percent, as the fine-tune's
    assert frame.set_index("path").loc[str(run)]["metric.bbox_mAP"] == 25.0
    assert tested_scale(None) is None and tested_scale(tmp_path / "nowhere") is None  # no run: no setting claimed
