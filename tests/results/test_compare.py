"""results.compare: runs matched to the paper tables' rows -- ours beside the paper's number with the delta, mean and
spread over seeds, a run's setting (the paper's or a labelled reduced one), an ablation step's own runs, and the
cells that ``depthbench eval`` records fill (robustness sets, input sizes, pool modes, analyses, lm-eval tasks).

The expected cells are computed by hand from the hand-written run fixtures in tests/fixtures/results/runs (see
the comments there and here), never copied from the code's output.
"""

import json

import pytest

from fixtures.paper_views import DEMO, TRANSNEXT_TINY, cells, fresh_audit, views_of
from fixtures.paper_views import eval_run as _eval_run
from fixtures.paper_views import paper_view as _paper_view
from fixtures.paper_views import suite as _suite
from pathlib import Path
from results import compare, paper_tables, render


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    yield from fresh_audit(tmp_path_factory)


def test_table_cells_paper_ours_delta_mean_std(audit):
    views, _, _ = views_of(audit=audit)
    t1, t2 = cells(views[0]), cells(views[1])
    # ResNet-18: best top-1 of three done seeds 70.0, 70.5, 71.0 -> 70.5 ± 0.5, Δ +0.3; the running 4th is flagged
    assert t1["ResNet-18"]["top1"] == "70.2 / 70.5 ± 0.5 (n=3) [3 done, 1 running] / +0.3"
    # params: resnet18 has 11,689,512 -> 11.69 M, printed 11.7 -> Δ -0.01, matches as printed
    assert t1["ResNet-18"]["params_m"] == "11.7 / 11.69 ✓ / -0.01"
    # Steps-ResNet-18: only a preempted run at the paper's setting (shown, flagged), and a reduced-scale run
    assert t1["Steps-ResNet-18"]["top1"] == "71.8 / 40.0 [1 preempted] / -31.8"
    assert t1["↳ reduced: embedded digits 16px, 20 epochs"] == {"top1": "95.0"}
    # DeiT-T: the digits preset is a smaller model: labelled by what differs, no paper value, no delta
    assert t1["DeiT-T"]["top1"] == "72.2 / —"
    assert t1["↳ reduced: digits 16px, 30 epochs; model depth=4, img_size=16, patch_size=4"] == {"top1": "88.3"}
    assert t1["Lost row"]["top1"] == "60.0 / —"
    # detection: mmengine's coco/bbox_mAP fractions become percent
    assert t2["Swin-T"] == {"schedule": "1x", "ap_b": "43.7 / 44.1 / +0.4", "ap_m": "39.8 / 40.2 / +0.4"}
    assert t2["Steps-Swin-T"]["ap_b"] == "44.1 / —"
    order = [render.line_label(line) for line in views[0].lines]
    assert order.index("↳ reduced: embedded digits 16px, 20 epochs") == order.index("Steps-ResNet-18") + 1


def test_an_override_or_another_config_is_not_the_papers_setting():
    row = paper_tables.load(DEMO)[0].rows[0]
    base = {"config_file": row.config, "model_kwargs": json.dumps({"drop_path_rate": 0.05}), "overrides": ""}
    assert compare.setting_of(base, row) is None
    assert compare.setting_of({**base, "overrides": "seed=3 data.root=/x"}, row) is None
    assert compare.setting_of({**base, "overrides": "epochs=2"}, row) == "overrides epochs=2"
    assert compare.setting_of({**base, "config_file": "configs/x/y.py"}, row) == "config y.py"
    assert compare.setting_of({**base, "scale": "tiny"}, row) == "tiny"


def test_an_ablation_run_fills_its_own_step_only():
    """TransNeXt Table 2's last three steps are one model (transnext_micro, one config) told apart by model kwargs:
    a run of one step is that step's result, not a differently-set run of the other two."""
    import pandas as pd

    table = next(t for t in paper_tables.load_paper("transnext") if t.id == "2")
    config = "configs/transnext/transnext-micro_8xb128-300e_in1k.py"

    def run(name, kwargs, top1):
        return {
            "path": f"/runs/{name}",
            "status": "done",
            "model": "transnext_micro",
            "config_file": config,
            "model_kwargs": json.dumps(kwargs),
            "overrides": "",
            "metric.top1": top1,
        }

    index = compare.RunIndex(
        pd.DataFrame(
            [
                run("plain", {}, 82.0),
                run("no-qe", {"query_embedding": False}, 81.5),
                run("tiny", {"embed_dims": [8, 16, 32, 64]}, 40.0),
            ]
        )
    )
    view = compare.view_table(table, index)
    by_name = {}
    for line in view.lines:
        by_name.setdefault(line.row.name, []).append((line.setting, line.runs))
    assert by_name["+ Query Embedding"][0] == (None, ["/runs/plain"])
    assert by_name["+ Positional Attention"][0] == (None, ["/runs/no-qe"])
    assert by_name["SRA→PFA"][0] == (None, [])  # no run of step 6
    shown = {name: {p for _, paths in lines for p in paths} for name, lines in by_name.items()}
    assert "/runs/plain" not in shown["SRA→PFA"] | shown["+ Positional Attention"]
    assert "/runs/no-qe" not in shown["SRA→PFA"] | shown["+ Query Embedding"]
    # a run that is no row's architecture (a smaller width) stays a labelled reduced line under every step
    reduced = [(name, s) for name, lines in by_name.items() for s, paths in lines if paths == ["/runs/tiny"]]
    assert {name for name, _ in reduced} == {"SRA→PFA", "+ Positional Attention", "+ Query Embedding"}
    assert all("embed_dims" in s for _, s in reduced)


STEPS_DEIT_S = "configs/stepsnet/steps-deit-small_8xb128-300e_in1k.py"


@pytest.mark.tier("integration")
def test_eval_suite_records_fill_the_evaluation_only_cells(tmp_path):
    root = tmp_path / "runs"
    sizes = (224, 256, 320, 384, 480, 512, 640)
    _eval_run(
        root,
        "tiny",
        TRANSNEXT_TINY,
        "transnext_tiny",
        224,
        [
            {"kind": "eval", "epoch": 299, "top1": 84.1, "top5": 96.0},
            _suite("imagenet-c", "mCE", 47.0),
            _suite("imagenet-c", "relative_mCE", 60.0),
            _suite("imagenet-a", "top1", 38.0),
            _suite("imagenet-a", "top1", 99.0, size=384),  # another size: not Table 1
            _suite("imagenet-r", "top1", 50.0),
            _suite("imagenet-sketch", "top1", 37.5),
            _suite("imagenet-v2", "top1", 70.0),
            _suite("imagenet-v2", "top1", 73.0),  # evaluated again: newest wins
            *[_suite("val", "top1", 80.0 + i / 10, size=s, pool="normal") for i, s in enumerate(sizes)],
            *[_suite("val", "top1", 70.0 + i / 10, size=s, pool="linear") for i, s in enumerate(sizes)],
            _suite("val", "top1", 60.0, size=640, overrides={"length_scaling": False}),
            _suite("val", "top1", 50.0, size=640, overrides={"position_bias": "interpolate"}),
        ],
    )
    t1 = _paper_view("transnext", "1", root)["TransNeXt-Tiny"]
    assert t1["in1k"] == "84.0 / 84.1 / +0.1"  # the training evaluation
    assert (t1["in_c"], t1["in_a"], t1["in_r"], t1["sketch"], t1["in_v2"]) == (
        "46.5 / 47.0 / +0.5",
        "39.9 / 38.0 / -1.9",
        "49.6 / 50.0 / +0.4",
        "37.6 / 37.5 / -0.1",
        "73.8 / 73.0 / -0.8",
    )
    t5 = _paper_view("transnext", "5", root)
    # Normal Mode: 80.0 + i/10 at the i-th size; the paper's 224 column is 84.0 -> Δ -4.0
    assert t5["TransNeXt-Tiny (Normal Mode)"]["r224"] == "84.0 / 80.0 / -4.0"
    assert t5["TransNeXt-Tiny (Normal Mode)"]["r640"] == "81.6 / 80.6 / -1.0"
    assert t5["TransNeXt-Tiny (Linear Mode)"]["r256"] == "84.0 / 70.1 / -13.9"
    assert t5["TransNeXt-Tiny (Linear Mode)"]["r640"] == "80.7 / 70.6 / -10.1"
    assert t5["TransNeXt-Tiny (No Length-scaling)"]["r640"] == "80.9 / 60.0 / -20.9"
    assert t5["TransNeXt-Tiny (No Length-scaling)"]["r224"] == "84.0 / —"  # evaluated at 640 only
    assert t5["TransNeXt-Tiny (Interpolate RPE)"]["r640"] == "79.5 / 50.0 / -29.5"
    assert t5["TransNeXt-Micro (Normal Mode)"]["r224"] == "82.5 / —"  # another model: no run

    _eval_run(
        root,
        "steps",
        STEPS_DEIT_S,
        "steps_deit_small",
        224,
        [
            {"kind": "eval", "epoch": 299, "top1": 81.2},  # the training evaluation fills none of Tables 6-7
            _suite("val", "top1", 80.0),
            _suite("val", "top1", 76.0, analysis="mask_first=32"),
            _suite("val", "top1", 80.5, analysis="mask_last=32"),
            _suite("val", "top1", 5.0, analysis="mask_first=160"),
            _suite("val", "top1", 77.5, analysis="drop_last=0:4"),
            _suite("val", "top1", 80.1, analysis="drop_last=2:1"),
        ],
    )
    t6 = _paper_view("stepsnet", "6", root)
    assert t6["Slow path"] == {
        "none": "81.0 / 80.0 / -1.0",
        "m32": "77.3 / 76.0 / -1.3",
        "m64": "68.3 / —",
        "m96": "49.0 / —",
        "m128": "20.4 / —",
        "m160": "4.4 / 5.0 / +0.6",
    }
    assert t6["Fast path"]["m32"] == "80.9 / 80.5 / -0.4" and t6["Fast path"]["m160"] == "80.3 / —"
    t7 = _paper_view("stepsnet", "7", root)
    assert (t7["F_1 (last 4 blocks)"]["acc"], t7["F_2 (last 2 blocks)"]["acc"], t7["F_3 (last 1 block)"]["acc"]) == (
        "77.0 / 77.5 / +0.5",
        "78.1 / —",
        "80.5 / 80.1 / -0.4",
    )


@pytest.mark.tier("integration")
def test_eval_suite_of_a_reduced_run_defaults_to_its_training_size(tmp_path):
    root = tmp_path / "runs"
    _eval_run(
        root,
        "digits",
        TRANSNEXT_TINY,
        "transnext_tiny",
        32,
        [
            _suite("imagenet-c", "mCE", 90.0, size=32),
            _suite("imagenet-c", "mCE", 10.0, size=224),
            _suite("val", "top1", 40.0, size=256, pool="linear"),
        ],
        scale="embedded digits 32px, 2 epochs",
    )
    t1 = _paper_view("transnext", "1", root)
    assert t1["TransNeXt-Tiny"]["in_c"] == "46.5 / —"  # never presented at the paper's setting
    assert t1["↳ reduced: embedded digits 32px, 2 epochs"] == {
        "in1k": "—",
        "in_c": "90.0",
        "in_a": "—",
        "in_r": "—",
        "sketch": "—",
        "in_v2": "—",
    }
    t5 = _paper_view("transnext", "5", root)
    assert t5["↳ reduced: embedded digits 32px, 2 epochs"]["r256"] == "40.0"


@pytest.mark.tier("integration")
def test_lm_eval_records_fill_scalenet_table_x(tmp_path):
    """The seven zero-shot tasks and their average, as harness/tasks/lm_eval.py writes them (no input size)."""
    config = "configs/scalenet/scalenet-llama-3.2-1b-2x_8xb16-3e_alpaca.py"
    run = tmp_path / "runs" / Path(config).stem / "r0"
    run.mkdir(parents=True)
    (run / "meta.json").write_text(
        json.dumps(
            {
                "status": "done",
                "experiment": Path(config).stem,
                "run_id": "r0",
                "config_file": config,
                "command": f"depthbench train {config}",
            }
        )
    )
    (run / "config.py").write_text(
        "model = dict(name='scalenet_llama_3_2_1b_2x', config='llama_3_2_1b', "
        "scalenet=dict(k=2, rank=16), trainable='adapters_norms', weights='<llama>')\n"
        "data = dict(type='alpaca')\nepochs = 3\n"
    )
    tasks = {
        "boolq": "acc",
        "piqa": "acc",
        "hellaswag": "acc_norm",
        "winogrande": "acc",
        "arc_easy": "acc_norm",
        "arc_challenge": "acc_norm",
        "openbookqa": "acc_norm",
        "average": "mean",
    }
    records = [
        dict(_suite(task, metric, 50.0 + i), protocol="lm-eval", input_size=None, analysis=None)
        for i, (task, metric) in enumerate(tasks.items())
    ]
    records.append(dict(_suite("boolq", "acc_norm", 99.0), protocol="lm-eval", input_size=None))  # not Table X's metric
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    row = _paper_view("scalenet", "X", tmp_path / "runs")["Llama-3.2-1B ScaleNet"]
    assert (row["boolq"], row["piqa"], row["hellaswag"], row["obqa"], row["average"]) == (
        "66.12 / 50.00 / -16.12",
        "75.73 / 51.00 / -24.73",
        "64.98 / 52.00 / -12.98",
        "36.80 / 56.00 / +19.20",
        "57.61 / 57.00 / -0.61",
    )
