"""``depthbench test`` runs in the results (issue 45): a test is labelled by the checkpoint it tested and that run's
setting -- not by the schedule its config names -- and its metrics (metrics.jsonl ``"kind": "test"``) fill the
runs table and runs.html. The run directories are written through the writer's own API (harness.core.rundir, as
downstream/hooks.py's RunDirHook writes them)."""

import html
import re
from pathlib import Path

from harness.core.rundir import RunDir

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "results"
CONFIG = "configs/det/mask-rcnn_steps-resnet18-w32_fpn_500it_embedded-coco.py"
SHORTENED = "embedded coco-shapes 128px, 40 iterations"  # what `finetune CONFIG train_cfg.max_iters=40` records


def _finetune_and_test(root: Path) -> tuple[Path, Path]:
    """A 40-iteration fine-tune and a test of its last.pth, written as finetune/test write them."""
    from downstream.finetune import tested_scale
    from harness.core.config import load_config

    cfg = load_config(ROOT / CONFIG)
    experiment = root / "mask-rcnn_steps-resnet18-w32_fpn_500it_embedded-coco"
    run = RunDir.create(
        experiment.name,
        path=experiment / "20261127-101500",
        engine="mmengine",
        mode="finetune",
        config_file=CONFIG,
        scale=SHORTENED,
        command=f"depthbench finetune {CONFIG} train_cfg.max_iters=40",
    )
    run.write_config(cfg.pretty_text, cfg.to_dict())
    run.log_metrics(kind="eval", epoch=0, global_step=40, **{"coco/bbox_mAP": 0.25, "coco/segm_mAP": 0.2})
    run.finish("done", global_step=40)
    checkpoint = run.path / "last.pth"
    scale = tested_scale(run.path)
    assert scale == SHORTENED  # the tested run's setting, read from its meta.json
    test = RunDir.create(
        experiment.name,
        path=experiment / "20261127-101500-test-iter_40",
        engine="mmengine",
        mode="test",
        checkpoint=str(checkpoint),
        tta=False,
        config_file=CONFIG,
        tested_run=str(run.path),
        scale=scale,
        command=f"depthbench test {CONFIG} {checkpoint}",
    )
    test.write_config(cfg.pretty_text, cfg.to_dict())
    test.log_metrics(kind="test", **{"coco/bbox_mAP": 0.312, "coco/segm_mAP": 0.287})
    test.finish("done", global_step=0)
    return run.path, test.path


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


def test_runs_html_shows_a_test_runs_metrics(tmp_path, cli):
    _, test = _finetune_and_test(tmp_path / "runs")
    out = tmp_path / "site"
    done = cli(
        "results",
        "--file",
        FIXTURES / "demo.yaml",
        "--runs",
        tmp_path / "runs",
        "--format",
        "html",
        "--out",
        out,
        env={"DEPTHBENCH_CACHE": str(tmp_path / "cache")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    page = (out / "runs.html").read_text()
    head = [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<th>(.*?)</th>", page)]
    rows = [
        [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", r)]
        for r in re.findall(r"<tr>(.*?)</tr>", page.split("<tbody>")[1])
    ]
    (tested,) = [dict(zip(head, r)) for r in rows if r[head.index("run_id")] == test.name]
    assert tested["metric.bbox_mAP"] == "31.2" and tested["metric.segm_mAP"] == "28.7"
    assert tested["scale"].startswith("test of ") and SHORTENED in tested["scale"]
