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
    first_seed = {p: load_claims(p).design.seeds_from for p in PAPERS}  # each file's first evaluation seed
    assert {(s.paper, s.arm) for s in report.runs} == arms
    assert all(s.seed == first_seed[s.paper] for s in report.runs)
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
        assert (
            resolved["epochs"] == 1
            and resolved["data"]["train_subset"] == 2120
            and resolved["seed"] == first_seed[spec.paper]
        )


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
        # the committed report is current; descriptive claims a --tier confirmatory call left out are named as such
        assert "predates" not in line, line
        tiers = {c.id: c.tier for c in load_claims(paper).claims}
        left_out = [i for i in tiers if i not in {r.claim.id for r in mine}]
        assert all(tiers[i] == "descriptive" for i in left_out), left_out
        assert ("descriptive, not trained there: " + ", ".join(left_out) in line) == bool(left_out), line


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


def test_tier_confirmatory_over_a_finished_folder_trains_nothing(tmp_path, monkeypatch):
    """`claims horesnet --tier confirmatory --seeds 5` over a folder whose confirmatory runs are done (written by
    the run-directory writer, as the lead's run left them): nothing starts, the descriptive claims are listed as
    not trained with their cost; once their runs are in the folder too, a second call reports them, again
    training nothing. The report puts the pilot's spread beside the evaluated seeds' and the validation loss's
    interval beside top-1."""
    import statistics
    from dataclasses import replace

    from claimruns import finished_run
    from scipy import stats

    from results import claims as cl
    from results import claims_run

    def no_training(*args, **kwargs):
        raise AssertionError("a run was started")

    monkeypatch.setattr(claims_run, "start_forked", no_training)
    monkeypatch.setattr(claims_run, "prepare_data", lambda datasets, jobs: None)  # the glyphs cache: not needed
    full = load_claims("horesnet")
    # efficiency claims: bench, elsewhere; the 10-layer claim as the second design had it (descriptive), so that
    # both descriptive claims need runs no confirmatory claim trains
    f = replace(
        full,
        claims=tuple(
            replace(c, tier="descriptive") if c.id == "similar-below-18" else c for c in full.claims if not c.measure
        ),
    )
    out = tmp_path / "claims"
    top1 = {"euler18": 60.0, "rk4-18": 69.0, "k4only-18": 70.0, "euler10": 50.0, "rk4-10": 52.0}
    spread = [0.0, 1.5, -1.0, 2.0, -0.5]  # per seed, on the treatment arms only: the paired differences' spread
    losses = {"euler18": 1.5, "rk4-18": 1.2, "k4only-18": 1.21, "euler10": 2.0, "rk4-10": 1.9}

    def fabricate(arms):
        for spec in cl.plan_runs(f, 5, False, out):
            if spec.arm in arms:
                i = spec.seed - f.design.seeds_from
                bump = spread[i] if spec.arm != "euler18" else 0.0
                finished_run(spec, top1[spec.arm] + bump, losses[spec.arm] + bump / 100)

    fabricate({"euler18", "rk4-18", "k4only-18"})
    first = claims_run.run_claims([f], out, 5, False, 1, tier="confirmatory")
    assert {r.claim.id for r in first.results} == {"rk4-vs-euler-18", "k4only-no-worse-18"}
    text = (out / "claims.md").read_text()
    for cid in ("similar-below-18", "gain-grows-with-depth"):
        line = next(x for x in text.splitlines() if x.startswith(f"- **{cid}**"))
        assert "not trained in this run (10 run(s), cost: " in line and "`depthbench claims horesnet` trains" in line
        minutes = float(line.split("cost: ")[1].split(" min of run time")[0])
        assert 10 < minutes < 100  # 10 runs of the 10-layer arms, each cheaper than an 18-layer run's 10 minutes
    rk4 = next(r for r in first.results if r.claim.id == "rk4-vs-euler-18")
    differences = [9.0 + s for s in spread]
    assert rk4.observed_sd == pytest.approx(statistics.stdev(differences))
    assert f"pilot {rk4.claim.power['sd']:g} ({rk4.claim.power['sd_from']})" in text
    assert f"observed {statistics.stdev(differences):.2f} over 5 evaluated seeds, which would need" in text
    loss_d = [-0.3 + s / 100 for s in spread]
    half = stats.t.isf(0.025, 4) * statistics.stdev(loss_d) / 5**0.5
    assert rk4.val_loss["diff"] == pytest.approx(-0.3 + sum(spread) / 500)
    assert rk4.val_loss["low"] == pytest.approx(rk4.val_loss["diff"] - half)
    assert "validation loss (descriptive, not pre-registered: no verdict)" in text

    fabricate({"euler10", "rk4-10"})  # the descriptive claims' runs, trained by an earlier full call
    second = claims_run.run_claims([f], out, 5, False, 1, tier="confirmatory")
    assert {r.claim.id for r in second.results} == {c.id for c in f.claims}
    assert "not trained in this run" not in (out / "claims.md").read_text()
    assert [r.summary() for r in second.results if r.claim.tier == "confirmatory"] == [
        r.summary() for r in first.results
    ]


def test_a_descriptive_claim_on_the_runs_the_confirmatory_ones_trained_is_reported(tmp_path, monkeypatch):
    """`claims horesnet --tier confirmatory`: the depth interaction (descriptive) takes the four arms the
    confirmatory claims train, at the same seeds, so once the call has trained them it is reported with its
    interval -- not listed as "not trained in this run (0 run(s))", as it was before."""
    from dataclasses import replace

    from claimruns import finished_run

    from results import claims as cl
    from results import claims_run

    full = load_claims("horesnet")
    accuracy = [c for c in full.claims if not c.measure]  # efficiency claims: bench, elsewhere
    assert [c.id for c in accuracy if c.tier == "descriptive"] == ["gain-grows-with-depth"]
    # the descriptive claim first in the file, so a report that appended it after the others would show it
    f = replace(full, claims=tuple(sorted(accuracy, key=lambda c: c.tier != "descriptive")))
    top1 = {"euler18": 60.0, "rk4-18": 69.0, "k4only-18": 70.0, "euler10": 50.0, "rk4-10": 52.0}
    bump = {"rk4-18": [0.0, 1.5, -1.0, 2.0, -0.5], "rk4-10": [0.5, -1.0, 0.0, 1.0, 0.0]}  # differences that spread
    trained = []

    def train_runs(specs, jobs, env=None):  # a finished run directory per spec, as `depthbench train` leaves one
        for spec in specs:
            if not cl.run_done(spec):
                finished_run(spec, top1[spec.arm] + bump.get(spec.arm, [0.0] * 5)[spec.seed - f.design.seeds_from], 1.0)
                trained.append(spec.arm)

    monkeypatch.setattr(claims_run, "train_runs", train_runs)
    monkeypatch.setattr(claims_run, "prepare_data", lambda datasets, jobs: None)  # the glyphs cache: not needed
    out = tmp_path / "claims"
    report = claims_run.run_claims([f], out, 5, False, 1, tier="confirmatory")
    assert set(trained) == set(top1)  # the 10-layer arms train for the confirmatory similar-below-18
    depth = next(r for r in report.results if r.claim.id == "gain-grows-with-depth")
    assert depth.interval.diff == pytest.approx((9.0 + 0.4) - (2.0 + 0.1))  # the per-seed bumps' means
    assert [r.claim.id for r in report.results] == [c.id for c in f.claims]  # in the file's order, not appended
    text = (out / "claims.md").read_text()
    assert "not trained in this run" not in text
    lines = text.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("- **gain-grows-with-depth**"))
    assert lines[at].startswith("- **gain-grows-with-depth** (better, margin 3 points, paired)")
    assert "**no verdict**" in lines[at + 1]
    plan = next(x for x in lines[at:] if x.startswith("  - plan (descriptive)"))
    assert "looks reached: 5;" in plan  # a look of a descriptive claim decides nothing, so none is printed
    # what the runs cost: 5 arms x 5 seeds, each 10 minutes from start to end (finished_run's times)
    assert "- Training: 25 runs, 4 h 10 min of run time summed (each run's start to end; horesnet 4 h 10 min)" in text


def test_a_quick_pilot_writes_the_spread_of_its_runs(tmp_path, capsys):
    """`claims --pilot --quick --seeds 2` on HO-ResNet's 10-layer pair: the arms train at pilot seeds 50 and 51 in
    the pilot's own folder, and pilot.json/pilot.md hold the per-arm means and the paired spread that the runs'
    metrics.jsonl give by hand, with the power block to paste -- and no verdict."""
    import statistics
    from dataclasses import replace

    from harness.cli import main
    from results import claims_pilot

    full = load_claims("horesnet")
    f = replace(full, claims=tuple(c for c in full.claims if c.id == "similar-below-18"))
    out = tmp_path / "pilot"
    report = claims_pilot.run_pilot([f], out, 2, True, 2, "cpu")
    assert sorted((s.arm, s.seed) for s in report.runs) == [(a, s) for a in ("euler10", "rk4-10") for s in (50, 51)]
    top1 = {}
    for spec in report.runs:
        assert spec.work_dir == out / "runs" / "horesnet" / spec.arm / f"seed{spec.seed}"
        evals = [json.loads(x) for x in (spec.work_dir / "metrics.jsonl").read_text().splitlines() if '"eval"' in x]
        assert "loss" in evals[-1]  # the engine logs the validation loss with top-1: the report's second measure
        top1[(spec.arm, spec.seed)] = evals[-1]["top1"]
    d = [top1[("rk4-10", s)] - top1[("euler10", s)] for s in (50, 51)]
    (row,) = json.loads((out / "pilot.json").read_text())
    assert row["sd"] == pytest.approx(statistics.stdev(d))
    assert row["arms"]["euler10"]["mean"] == pytest.approx(statistics.mean(top1[("euler10", s)] for s in (50, 51)))
    assert row["arms"]["rk4-10"]["sd"] == pytest.approx(statistics.stdev(top1[("rk4-10", s)] for s in (50, 51)))
    assert row["power"]["sd"] == round(statistics.stdev(d), 2) and "seeds 50, 51" in row["power"]["sd_from"]
    assert row["power"]["effect"] == f.claims[0].power["effect"]
    text = (out / "pilot.md").read_text()
    assert f"    power: {{sd: {round(statistics.stdev(d), 2)}, sd_from: " in text and "**No verdicts**" in text
    assert not (out / "claims.json").exists()
    assert main(["claims", "horesnet", "--pilot", "--seeds", "11", "--out", str(out)]) == 2
    assert "has 10 pilot_seeds; give at most that" in capsys.readouterr().err
