"""``depthbench demo --quick`` end to end (the main job, issue 15): every stage's run finishes with the run
contract, the reduced setting is recorded, the report renders in headless chromium; a rerun reuses the runs."""

import json
import re
import subprocess
from pathlib import Path

import pytest

from pages import visit  # the browser fixture is conftest.browser

from clitools import ROOT, run_cli_here
from harness.workflows.demo import plan

# in this process: pytest-timeout keeps the old subprocess deadline (900 s) on a hung demo, fixture included
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), pytest.mark.tier("integration")]
RUN_NAMES = [r.name for stage in plan(quick=True) for r in stage.runs]


def demo_here(*args) -> subprocess.CompletedProcess:
    """``depthbench demo ARGS`` from the repository, in this process, its runs one thread each. Not a process of its
    own: a fork would start a preloaded server of its own for its runs (a fresh interpreter, ~5 s of CPU) beside
    the one this process's forked CLIs share, and import the report's stack again for the rerun; the runs are still
    processes (forks of that shared server)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        mp.setenv("OMP_NUM_THREADS", "1")  # what the runs inherit
        code, out, err = run_cli_here("demo", *args)
    return subprocess.CompletedProcess(["depthbench", "demo", *args], code, out, err)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    first = demo_here("--quick", "--out", out)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    return out, first


def meta(path: Path) -> dict:
    return json.loads((path / "meta.json").read_text())


def test_every_stage_run_is_done_and_labelled_reduced(demo):
    out, first = demo
    assert len(RUN_NAMES) == 8  # 4 HO-ResNet, 2 ResNet/Steps-ResNet, 1 pretraining, 1 fine-tune
    for name in RUN_NAMES:
        run = out / "runs" / name
        assert meta(run)["status"] == "done", name
        assert "embedded" in meta(run)["scale"], name
        evals = [
            json.loads(line)
            for line in (run / "metrics.jsonl").read_text().splitlines()
            if json.loads(line).get("kind") == "eval"
        ]
        assert evals, name
        assert f"{name}: done in" in first.stdout
    # the fine-tune started from the demo's own pretraining checkpoint, through the backbone's init_cfg
    finetune_config = (out / "runs" / "mask-rcnn-steps-resnet18-w32" / "config.py").read_text()
    assert str(out / "runs" / "steps-resnet18-w32" / "best.pth") in finetune_config
    assert meta(out / "runs" / "mask-rcnn-steps-resnet18-w32")["engine"] == "mmengine"
    # the equal-size audit of the StepsNet pair ran with the FLOP counter
    sizes = json.loads((out / "audit.json").read_text())
    (p1, f1), (p2, f2) = [(v["params"], v["flops"]) for v in sizes.values()]
    assert abs(p2 / p1 - 1) < 0.03 and abs(f2 / f1 - 1) < 0.03
    assert re.search(r"open the report: .*index\.html", first.stdout)


def test_tables_carry_paper_and_demo_numbers(demo):
    out, _ = demo
    tables = "\n".join(p.read_text() for p in (out / "tables").glob("*.md"))
    assert "91.72" in tables  # HO-ResNet Table 3, Euler X4: the paper's CIFAR-10 top-1
    assert "reduced: embedded glyphs 16px, 1 epoch, a tenth of the images" in tables
    assert "Setting: embedded" in (out / "summary.md").read_text()
    assert (out / "tables" / "status.txt").read_text().strip()


def test_report_renders_in_the_browser(demo, browser):  # noqa: F811
    out, _ = demo
    pages = sorted((out / "report").glob("*.html"))
    assert {"index.html", "horesnet.html", "stepsnet.html"} <= {p.name for p in pages}
    for path in pages:
        page, errors, failed = visit(browser, path.as_uri())
        assert not errors and not failed, (path.name, errors, failed)
        images = page.eval_on_selector_all("img", "els => els.map(e => e.complete && e.naturalWidth > 0)")
        assert all(images), path.name
        if path.name == "horesnet.html":
            assert "reduced: embedded glyphs 16px" in page.inner_text("body")
        page.close()


def test_a_rerun_reuses_the_finished_runs(demo):
    out, _ = demo
    before = {
        name: (out / "runs" / name / "last.pth").stat().st_mtime_ns
        for name in RUN_NAMES
        if (out / "runs" / name / "last.pth").exists()
    }
    before["mask-rcnn"] = (out / "runs" / "mask-rcnn-steps-resnet18-w32" / "metrics.jsonl").stat().st_mtime_ns
    again = demo_here("--quick", "--out", out)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count(": reused (") == len(RUN_NAMES)
    assert "done in" not in again.stdout.split("Tables, figures")[0]
    after = {
        name: (out / "runs" / name / "last.pth").stat().st_mtime_ns
        for name in RUN_NAMES
        if (out / "runs" / name / "last.pth").exists()
    }
    after["mask-rcnn"] = (out / "runs" / "mask-rcnn-steps-resnet18-w32" / "metrics.jsonl").stat().st_mtime_ns
    assert after == before


def test_bad_out_is_one_line(tmp_path):
    target = tmp_path / "a-file"
    target.write_text("x")
    result = demo_here("--quick", "--out", target)
    assert result.returncode == 2
    assert (
        result.stderr.strip() == f"depthbench demo: error: --out {target} is a file; give a directory for the "
        "demo's runs and report"
    )


def test_the_equal_size_audit_refuses_a_pair_that_is_not(tmp_path):
    from harness.workflows.demo import audit_equal_size
    from harness.core.errors import DepthbenchError

    pair = [r.config for stage in plan(quick=True) if stage.equal_size for r in stage.runs]
    line = audit_equal_size(tmp_path, pair)
    assert line.startswith("resnet18 724.1k params") and "steps_resnet18" in line
    assert set(json.loads((tmp_path / "audit.json").read_text())) == {"resnet18", "steps_resnet18"}
    with pytest.raises(DepthbenchError, match="are not of equal size"):
        audit_equal_size(tmp_path, [pair[0], "configs/claims/horesnet10-euler-w16_1xb64-4e_glyphs-16px.py"])
