"""``depthbench claims --quick`` end to end: every arm of two papers' claims trained through the engine (one seed,
the claims files' shortened schedules), the source run initialising ScaleNet's expanded arm, the report written
without verdicts, and a second call training nothing. The data is the real glyphs dataset at 16x16 (generated
into the user's cache on first use: ~30 s of CPU)."""

import json
import os

import pytest

from harness.commands.claims import run
from results.claims import load_claims

pytestmark = pytest.mark.tier("system")

PAPERS = ["horesnet", "scalenet"]  # one resolution (16x16), and ScaleNet's source -> expanded dependency


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("claims")
    return run(PAPERS, quick=True, out=out, jobs=2), out


def config(work_dir) -> dict:
    return json.loads((work_dir / "config.json").read_text())  # the run's resolved config, as data


def test_every_arm_trains_once_with_the_quick_schedule(quick):
    report, out = quick
    arms = {(p, a) for p in PAPERS for a in load_claims(p).arms}
    assert {(s.paper, s.arm) for s in report.runs} == arms and all(s.seed == 200 for s in report.runs)
    for spec in report.runs:
        meta = json.loads((spec.work_dir / "meta.json").read_text())
        assert meta["status"] == "done", spec.work_dir
        evals = [
            json.loads(line) for line in (spec.work_dir / "metrics.jsonl").read_text().splitlines() if '"top1"' in line
        ]
        assert len(evals) == 1, spec.work_dir  # quick: epochs=1
        console = (spec.work_dir.parent / f"{spec.work_dir.name}.console.txt").read_text().splitlines()
        assert console[0].startswith(f"$ depthbench train {spec.config} ") and console[0].endswith(
            f"--work-dir {spec.work_dir} --resume auto"
        )  # the command line to rerun or submit the run
        resolved = config(spec.work_dir)
        assert resolved["epochs"] == 1 and resolved["data"]["train_subset"] == 2120 and resolved["seed"] == 200


def test_the_expanded_arm_starts_from_the_trained_source(quick):
    report, out = quick
    by_arm = {s.arm: s for s in report.runs if s.paper == "scalenet"}
    assert config(by_arm["scalenet"].work_dir)["model"]["pretrained"] == str(by_arm["shallow"].work_dir / "best.pth")
    assert config(by_arm["scratch-3x"].work_dir)["model"]["pretrained"] is None
    assert config(by_arm["scratch-compute"].work_dir)["model"]["pretrained"] is None


def test_the_report_has_every_claim_without_verdicts(quick):
    report, out = quick
    claims = [(p, c.id) for p in PAPERS for c in load_claims(p).claims]
    records = json.loads((out / "claims.json").read_text())
    assert [(r["claim"]["paper"], r["claim"]["id"]) for r in records] == claims
    assert all(r["verdict"] == "no verdict" and r["interval"]["low"] is None for r in records)
    assert all(r["setting"].endswith("[--quick]") for r in records)
    for paper, claim_id in [(p, c.id) for p in PAPERS for c in load_claims(p).claims if not c.measure]:
        assert (out / "figures" / f"{paper}-{claim_id}.png").stat().st_size > 0  # efficiency claims: claims.md
    assert (out / "figures" / "glyphs-samples.png").is_file()
    assert [line.split(":")[0] for line in report.status] == PAPERS
    assert all(line.endswith("[--quick: no verdicts]") for line in report.status)
    text = (out / "claims.md").read_text()
    for paper in PAPERS:  # every claim quotes its paper; the hardware is named
        assert all(c.text in text for c in load_claims(paper).claims)
    assert "## Hardware" in text and " torch " in text and " timm " in text
    assert all(r["hardware"] and r["planned"] == [1] for r in records)


def test_status_reads_the_report_and_knows_a_quick_folder(quick):
    """One source of truth: --status summarises the folder's claims.json (what claims.md was written from), with
    or without --quick, and never advises moving a quick folder's runs away."""
    report, out = quick
    for flag in (True, False):
        status = run(PAPERS, quick=flag, out=out, status=True).status
        assert status == report.status, status
        assert not any("move them away" in line or "no claims evaluated yet" in line for line in status)


def test_a_full_run_into_the_quick_folder_is_one_line(quick):
    from harness.core.errors import DepthbenchError

    report, out = quick
    with pytest.raises(DepthbenchError, match=r"holds a --quick report; add --quick to continue it"):
        run(PAPERS, quick=False, out=out)


def test_status_of_the_committed_report_shows_its_verdicts():
    from results.claims import read_report
    from harness.core.choices import CLAIMS_OUT

    stored = read_report(CLAIMS_OUT / "claims.json")
    status = run(status=True).status
    assert not any("no claims evaluated yet" in line for line in status)
    for paper in {r.claim.paper for r, _ in stored}:
        line = next(line for line in status if line.startswith(f"{paper}:"))
        mine = [r for r, _ in stored if r.claim.paper == paper]
        assert f"{len(mine)} claim" in line
        assert all(f"{sum(r.verdict == v for r in mine)} {v}" in line for v in {r.verdict for r in mine})


def test_a_second_call_reuses_the_finished_runs(quick, capsys):
    report, out = quick
    before = {s.work_dir: os.stat(s.work_dir / "metrics.jsonl").st_mtime_ns for s in report.runs}
    again = run(PAPERS, quick=True, out=out, jobs=2)
    assert "runs to train" not in capsys.readouterr().err
    assert {s.work_dir: os.stat(s.work_dir / "metrics.jsonl").st_mtime_ns for s in again.runs} == before
    # the trained claims' numbers are the runs'; efficiency claims are measured again (seconds, nothing trained)
    assert [r.summary() for r in again.results if not r.claim.measure] == [
        r.summary() for r in report.results if not r.claim.measure
    ]
