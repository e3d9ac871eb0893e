"""The results package: runs → DataFrame → paper tables with ours beside the paper, status, figures, robustness.

The expected cells below are computed by hand from the hand-written run fixtures in tests/fixtures/results/runs
(see the comments there and here), never copied from the code's output.
"""

import json
import re
import shutil
from pathlib import Path

import pytest

from results import compare, figures, paper_tables, render, runs
from results.audit import Audit
from results.status import table_status

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "results"
DEMO = FIXTURES / "demo.yaml"
RUNS = FIXTURES / "runs"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def audit(tmp_path_factory):
    cache = tmp_path_factory.mktemp("audit-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("DEPTHBENCH_CACHE", str(cache))
    yield Audit(progress=False)
    mp.undo()


def views_of(root=RUNS, reduce="best", audit=None, tables_file=DEMO):
    frame, problems = runs.collect([root], reduce=reduce)
    index = compare.RunIndex(frame, compare.MODEL_RENAMES)
    return [compare.view_table(t, index, audit) for t in paper_tables.load(tables_file)], frame, problems


def cells(view, label=None):
    """{line label: {column: cell text}}"""
    return {
        render.line_label(line): {c: render.cell_text(cell) for c, cell in line.cells.items()} for line in view.lines
    }


# ------------------------------------------------------------------------------------------------- collection
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


# ------------------------------------------------------------------------------------------------- tables
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


def test_markdown_csv_latex_carry_the_same_cells():
    views, _, _ = views_of()
    md = render.to_markdown(views[0])
    assert "| ResNet-18 | 11.7 | 70.2 / 70.5 ± 0.5 (n=3) [3 done, 1 running] / +0.3 |" in md  # no audit: paper only
    assert "| Lost row (not reproduced: the OCR lost this row) |" in md
    rows = [r for r in render.csv_records(views[0]) if r["row"] == "ResNet-18" and r["column"] == "top1"]
    assert len(rows) == 1 and rows[0]["n"] == 3 and rows[0]["ours"] == 70.5 and rows[0]["std"] == 0.5
    assert rows[0]["delta"] == pytest.approx(0.3) and rows[0]["setting"] == "paper"
    reduced = [r for r in render.csv_records(views[0]) if r["setting"].startswith("reduced")]
    assert {r["row"] for r in reduced} == {"Steps-ResNet-18", "DeiT-T"} and all(r["delta"] == "" for r in reduced)
    tex = render.to_latex(views[0])
    assert r"70.5 $\pm$ 0.5 (n=3)" in tex and r"\toprule" in tex and "\\_" not in tex.split("caption")[0]


def test_status_counts(audit):
    views, _, _ = views_of(audit=audit)
    s1, s2 = table_status(views[0]), table_status(views[1])
    assert (s1.rows, s1.expressed, s1.checkable, s1.verified) == (4, 3, 2, 2)
    assert (s1.run_paper, s1.run_reduced, s1.rendered) == (2, 1, 3)
    assert s1.reasons == [("Lost row", "the OCR lost this row")]
    assert s1.scales == [
        "digits 16px, 30 epochs; model depth=4, img_size=16, patch_size=4",
        "embedded digits 16px, 20 epochs",
    ]
    assert (s2.rows, s2.expressed, s2.checkable, s2.run_paper, s2.run_reduced, s2.rendered) == (2, 2, 0, 1, 0, 1)


def test_audit_is_cached_per_code_version(monkeypatch, tmp_path):
    monkeypatch.setenv("DEPTHBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr("harness.measure.cache.fingerprint", lambda: "measuring-code-1")
    row = paper_tables.load(DEMO)[0].rows[0]
    audit = Audit(progress=False)
    assert audit.row(row)["params_m"].ours == pytest.approx(11.689512)
    audit.save()
    assert audit.path == tmp_path / "measurements.json"
    cached = json.loads(audit.path.read_text())
    assert len(cached) == 1 and '"resnet18"' in next(iter(cached))
    # a second audit reads the cache and builds nothing ...
    from results.audit import RowContext

    build = RowContext.model
    monkeypatch.setattr(RowContext, "model", property(lambda self: pytest.fail("rebuilt a model")))
    assert Audit(progress=False).row(row)["params_m"].ours == pytest.approx(11.689512)
    # ... until the file that defines the model changes: then it measures again
    monkeypatch.setattr("harness.measure.cache.model_code", lambda model: "edited")
    monkeypatch.setattr(RowContext, "model", build)
    again = Audit(progress=False)
    assert again.row(row)["params_m"].ours == pytest.approx(11.689512) and again.cache.dirty


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


# ------------------------------------------------------------------------------------------------- real tables
def test_every_paper_yaml_parses_and_every_row_points_somewhere():
    import timm

    import models  # noqa: F401
    from models.scalenet_llama import LLAMA_MODELS  # Hugging Face Llama rows (ScaleNet Table X), not timm models

    problems = []
    for paper in paper_tables.available_papers():
        for table in paper_tables.load_paper(paper):
            for row in table.rows:
                where = f"{paper} table {table.id} row {row.name!r}"
                if row.reason:
                    continue
                if not row.model and not row.config:
                    problems.append(f"{where}: no model, config or reason")
                if row.model and not timm.is_model(row.model) and row.model not in LLAMA_MODELS:
                    problems.append(f"{where}: model {row.model} is not registered")
                if row.config and not (ROOT / row.config).is_file():
                    problems.append(f"{where}: config {row.config} does not exist")
    assert not problems, "\n".join(problems)


def test_every_real_table_renders_without_runs():
    tables = [t for p in paper_tables.available_papers() for t in paper_tables.load_paper(p)]
    index = compare.RunIndex(runs.collect([])[0])
    for table in tables:
        view = compare.view_table(table, index)
        text = render.to_markdown(view) + render.to_latex(view) + render.to_html(view)
        assert len(view.lines) == len(table.rows) and table.caption[:20] in text.replace("&amp;", "&")


def test_verify_json_on_every_real_table(cli, monkeypatch):
    """Issue 11: `depthbench verify --paper P --json` crashed (PrintedNumber through copy.deepcopy) on four papers.
    Measured values come from a stub here (the real measures are tested in test_verify.py); what is checked is
    that every check of every real table serialises."""
    import argparse
    import io
    from contextlib import redirect_stdout

    from harness.commands import verify

    monkeypatch.setattr("results.audit.Audit.value", lambda self, column, row, ctx=None: {"value": 1.0})
    for paper in paper_tables.available_papers():
        buf = io.StringIO()
        with redirect_stdout(buf):
            verify.main(
                argparse.Namespace(paper=[paper], file=None, table=None, json=True, failed=False, no_cache=True)
            )
        checks = json.loads(buf.getvalue())
        assert checks and {c["paper"] for c in checks} == {paper}
        reasons = [c for c in checks if c["status"] == "reason" and c["paper_value"] is not None]
        assert all(isinstance(c["paper_value"], (int, float, str)) for c in reasons)


def test_printed_number_survives_copy_and_pickle():
    import copy
    import pickle

    value = paper_tables.PrintedNumber("86.70")
    for clone in (copy.deepcopy(value), copy.copy(value), pickle.loads(pickle.dumps(value))):
        assert clone == 86.7 and clone.decimals == 2 and isinstance(clone, paper_tables.PrintedNumber)


# ------------------------------------------------------------------------------------------------- figures
def _png_ok(paths):
    from PIL import Image

    png = [p for p in paths if p.suffix == ".png"]
    svg = [p for p in paths if p.suffix == ".svg"]
    assert len(png) == 1 and len(svg) == 1 and svg[0].stat().st_size > 1000 and "<svg" in svg[0].read_text()
    with Image.open(png[0]) as image:
        assert image.size[0] > 200 and image.size[1] > 150
        assert len(image.convert("L").getcolors(maxcolors=2**16) or []) > 5  # something was drawn, not a blank canvas
    return True


def _lrc_run(tmp_path):
    run = tmp_path / "runs" / "sret-t" / "r1"
    run.mkdir(parents=True)
    (run / "meta.json").write_text('{"status": "done", "experiment": "sret-t", "run_id": "r1"}')
    lines = [
        json.dumps(
            {
                "kind": "lrc",
                "epoch": e,
                "global_step": 10 * e,
                "coefficients": {"transformers.0.blocks.0": {"attn_id": 1 + 0.1 * e, "attn_res": 1 - 0.05 * e}},
            }
        )
        for e in range(5)
    ]
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return run


def _sweep_runs(tmp_path):
    paths = []
    for lr, top1 in ((0.01, 80.0), (0.1, 90.0), (1.0, 70.0)):
        run = tmp_path / "sweep" / "horesnet86_lr-sweep" / f"lr-{lr}"
        run.mkdir(parents=True)
        (run / "meta.json").write_text('{"status": "done"}')
        (run / "config.py").write_text(f"model = dict(name='horesnet86_euler')\noptim = dict(lr={lr})\n")
        (run / "metrics.jsonl").write_text(json.dumps({"kind": "eval", "epoch": 0, "top1": top1}) + "\n")
        paths.append(run)
    return runs.collect([tmp_path / "sweep"])[0]


def test_every_figure_draws_from_fixtures(tmp_path):
    import pandas as pd

    real = [t for p in paper_tables.available_papers() for t in paper_tables.load_paper(p)]
    frame, _ = runs.collect([RUNS])
    index = compare.RunIndex(frame)
    views = [compare.view_table(t, index) for t in real]
    diagnose_csv = tmp_path / "shortcut_ratio.csv"
    diagnose_csv.write_text(
        "model,block,depth,gamma,sigma,width,step,step_width\n"
        + "".join(f"m{m},{b},{b / 4},{0.5 + 0.1 * b * m},1,64,,\n" for m in (1, 2) for b in range(5))
    )
    bench = pd.DataFrame(
        {
            "model": ["resnet18", "steps_resnet18", "deit_tiny_patch16_224"],
            "infer_samples_per_sec": [900.0, 700.0, 1200.0],
            "param_count": [11.7, 11.7, 5.7],
            "infer_gmacs": [1.8, 1.8, 1.3],
        }
    )
    out = tmp_path / "fig"
    made = {
        "stepsnet_depth": figures.stepsnet_depth(views, out / "a"),
        "horesnet_depth": figures.horesnet_depth(views, out / "b"),
        "horesnet_lr": figures.horesnet_lr(_sweep_runs(tmp_path), out / "c"),
        "scalenet_epochs": figures.scalenet_epochs(views, out / "d"),
        "sret_lrc": figures.sret_lrc([_lrc_run(tmp_path)], out / "e"),
        "throughput_accuracy": figures.throughput_accuracy(bench, views, out / "f"),
        "top1_vs_gflops": figures.top1_vs_gflops(views, out / "g"),
        "training_curves": figures.training_curves(list(frame["path"]), out / "h"),
        "shortcut_ratio": figures.shortcut_ratio([diagnose_csv], out / "i"),
    }
    assert set(made) == set(figures.FIGURES)
    for name, paths in made.items():
        assert paths, f"{name} drew nothing"
        assert _png_ok(paths), name


def test_figures_with_nothing_to_draw_return_nothing(tmp_path):
    import pandas as pd

    empty = runs.collect([])[0]
    assert figures.horesnet_lr(empty, tmp_path / "x") == []
    assert figures.sret_lrc([RUNS / "resnet18_8xb128-300e_in1k" / "seed0"], tmp_path / "y") == []
    assert figures.throughput_accuracy(pd.DataFrame(), [], tmp_path / "z") == []
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------------------------------------- robustness
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


def test_aggregation_of_an_empty_or_missing_root():
    frame, problems = runs.collect([ROOT / "no" / "such" / "dir"])
    assert frame.empty and len(problems) == 0


# ------------------------------------------------------------------------------------------------- CLI
def depthbench(capsys, *args) -> tuple[int, str, str]:
    from harness.cli import main

    code = main(["results", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.tier("integration")
def test_cli_tables_status_csv_and_bad_input(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("DEPTHBENCH_CACHE", str(tmp_path / "cache"))
    code, out, err = depthbench(capsys, "--file", DEMO, "--runs", RUNS, "--table", "2", "--no-audit")
    assert code == 0 and "| Swin-T | 1x | 43.7 / 44.1 / +0.4 | 39.8 / 40.2 / +0.4 |" in out
    assert "8 run(s) collected" in err
    code, out, _ = depthbench(capsys, "--file", DEMO, "--runs", RUNS, "--status", "--no-audit")
    assert code == 0 and "Lost row — the OCR lost this row" in out
    assert "demo: 6 rows, 5 expressed" in out
    code, out, _ = depthbench(
        capsys, "--file", DEMO, "--runs", RUNS, "--format", "csv", "--out", tmp_path / "o", "--no-audit"
    )
    assert code == 0 and (tmp_path / "o" / "results.csv").read_text().count("\n") > 10
    assert (tmp_path / "o" / "figures" / "training_curves.png").is_file()
    for args, message in [
        (("--paper", "stepnet"), "unknown paper 'stepnet'; did you mean stepsnet?"),
        (("--paper", "stepsnet", "--table", "99"), "no table '99' in stepsnet"),
        (("--runs", tmp_path / "missing"), "--runs"),
        (("--format", "html"), "give --out DIR"),
        (("--file", tmp_path / "nope.yaml"), "no such tables file"),
        (("--out", tmp_path / "o" / "results.csv"), "is a file"),
        (("--bench", tmp_path / "o" / "results.csv"), "has no 'model' and 'infer_samples_per_sec' columns"),
        (("--bench", tmp_path / "missing.csv"), "--bench"),
    ]:
        code, out, err = depthbench(capsys, *args)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and message in lines[0], err
        assert lines[0].startswith("depthbench results: error: ") and not out


# ------------------------------------------------------------------------------------------------- eval_suite cells
TRANSNEXT_TINY = "configs/transnext/transnext-tiny_8xb128-300e_in1k.py"
STEPS_DEIT_S = "configs/stepsnet/steps-deit-small_8xb128-300e_in1k.py"


def _suite(dataset, metric, value, size=224, pool=None, analysis="none", overrides=None):
    """One record as ``depthbench eval`` writes it (harness/tasks/protocols.py evaluate_suite)."""
    return {
        "kind": "eval_suite",
        "dataset": dataset,
        "protocol": dataset,
        "model": "m",
        "input_size": size,
        "pool_mode": pool,
        "analysis": analysis,
        "model_overrides": overrides or {},
        "checkpoint": "best.pth",
        "ema": False,
        "metric": metric,
        "value": value,
        "images": 10,
    }


def _eval_run(root, name, config, model, size, records, scale=None):
    """A hand-written run of ``config`` (its own model arguments, so at the paper's setting unless ``scale``)."""
    run = root / Path(config).stem / name
    run.mkdir(parents=True)
    meta = {
        "status": "done",
        "experiment": Path(config).stem,
        "run_id": name,
        "start": name,
        "config_file": config,
        "command": f"depthbench train {config}",
    }
    if scale:
        meta["scale"] = scale
    (run / "meta.json").write_text(json.dumps(meta))
    kwargs = json.loads(compare.config_model_kwargs(config))
    arguments = "".join(f", {k}={v!r}" for k, v in kwargs.items())
    (run / "config.py").write_text(
        f"model = dict(name={model!r}{arguments})\ndata = dict(type='imagefolder', input_size={size})\nepochs = 300\n"
    )
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run


def _paper_view(paper, table, root):
    frame, problems = runs.collect([root])
    assert len(problems) == 0, problems.summary()
    index = compare.RunIndex(frame)
    return cells(compare.view_table(next(t for t in paper_tables.load_paper(paper) if t.id == table), index))


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
def test_eval_selectors_are_validated(tmp_path):
    bad = tmp_path / "bad.yaml"
    for row, message in [
        ("{name: A, evals: {nope: {dataset: imagenet-a}}}", "evals for undeclared column(s) ['nope']"),
        ("{name: A, evals: {top1: {dataset: imagenet-x}}}", "dataset 'imagenet-x' is not a depthbench eval protocol"),
        ("{name: A, eval: {size: 224}}", "unknown selector key(s) ['size']"),
    ]:
        bad.write_text(f"paper: x\ntables:\n  - {{id: '1', caption: c, columns: {{top1: T}}, rows: [{row}]}}\n")
        with pytest.raises(paper_tables.TableError, match=re.escape(message)):
            paper_tables.load(bad)


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


def test_coefficient_hook_logs_sret_lrc_records_the_figure_draws(tmp_path):
    import timm
    import torch

    import models  # noqa: F401
    from harness.engine.hooks import CoefficientLogHook, build_hooks
    from harness.core.config import load_config

    class Log:  # RunLog.metrics' signature: what the training loop hands the hook
        def __init__(self):
            self.records = []

        def metrics(self, kind, **values):
            self.records.append({"kind": kind, "epoch": len(self.records), **values})

    cfg = load_config(ROOT / "configs/sret/sret-t_8xb64-300e_in1k.py")
    hook = next(h for h in build_hooks(cfg) if isinstance(h, CoefficientLogHook))
    model, log = timm.create_model("SReT_T", img_size=64, num_classes=10), Log()
    hook.after_epoch(model, log)
    block = model.get_submodule("transformers.0.blocks.0")
    with torch.no_grad():
        block.coefficient1.bias.fill_(0.25)  # an optimizer step moved one coefficient
    hook.after_epoch(model, log)
    first, second = (r["coefficients"]["transformers.0.blocks.0"] for r in log.records)
    assert [r["kind"] for r in log.records] == ["lrc", "lrc"] and first["attn_id"] != 0.25
    assert second["attn_id"] == 0.25 and second["attn_res"] == first["attn_res"]
    hook.after_epoch(timm.create_model("resnet18", num_classes=10), log)  # no coefficients: nothing logged
    assert len(log.records) == 2
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log.records))
    assert _png_ok(figures.sret_lrc([run], tmp_path / "lrc"))


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


@pytest.mark.tier("integration")
def test_results_cells_and_status_give_verifys_answer_for_the_dense_rows(tmp_path):
    """Issue 26: the dense rows (TransNeXt Table 14's segmentors, built from configs/seg) rendered as "error" in
    `depthbench results` while `depthbench verify` passed them. Both now read one audit: every architecture cell
    says what verify says, and --status counts the same rows as verified or failing."""
    from harness.commands import verify
    from harness.workflows.audit import dense_counter

    table = next(t for t in paper_tables.load_paper("transnext") if t.id == "14")
    checks = [c for c in verify.run(papers=["transnext"], table="14", progress=False) if c.column != "-"]
    dense = [c for c in checks if c.column.startswith("seg_")]
    assert any(c.status == "pass" for c in dense) and all(c.status in ("pass", "reason") for c in dense)
    index = compare.RunIndex(runs.collect([tmp_path / "no-runs"])[0], compare.MODEL_RENAMES)
    view = compare.view_table(table, index, Audit(progress=False, dense=dense_counter()))
    by_cell = {
        (line.row.name, column): cell
        for line in view.lines
        for column, cell in line.cells.items()
        if cell.kind == "arch"
    }
    for check in checks:
        cell = by_cell[(check.row, check.column)]
        assert cell.status == check.status, (check, cell)
        if check.ours is not None:
            assert cell.ours == pytest.approx(check.ours), (check, cell)
    status = table_status(view)
    failing_rows = {c.row for c in checks if c.status in ("fail", "error")}
    assert set(status.failing) == failing_rows
    assert status.verified == len({c.row for c in checks if c.status in ("pass", "fail", "error")} - failing_rows)
