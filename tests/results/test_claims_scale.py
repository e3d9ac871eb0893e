"""The claims at the papers' own scale (results/claims_scale.py): `claims PAPER --scale paper --plan` prints each
claim's arms, seeds per look and GPU-hours from submit --estimate's machinery; `submit --claims PAPER --scale paper`
submits the first look as a job array."""

import textwrap

import pytest
from clitools import run_cli_here as cli

from harness.core.config import load_config
from harness.measure import estimate as est
from results import claims_scale as sc
from results.claims import ClaimError, available_claims, load, load_claims

pytestmark = pytest.mark.tier("integration")  # the CLI in a fresh process; every paper's recipes resolved
DEIT_TINY = "configs/deit/deit-tiny_8xb128-300e_in1k.py"


def test_every_paper_plans_its_claims_at_its_scale_without_records():
    """All five papers: each accuracy claim with a paper recipe gets arms and seeds per look, each efficiency claim
    the command that measures it; with no preflight record or bench row the rows say there is no step time."""
    assert set(available_claims()) == {"horesnet", "scalenet", "sret", "stepsnet", "transnext"}
    for paper in available_claims():
        f = load_claims(paper)
        rows = sc.plan(f, records=[], bench_rows=[])
        assert [r.claim for r in rows] == [c.id for c in f.claims]
        planned = [r for r in rows if r.arms]
        assert planned, paper
        for r in planned:
            assert r.looks and r.looks[0] >= 3 and r.first_look_hours is None
            assert all(s.startswith("no step time") for s in r.sources)
        for r in rows:
            claim = next(c for c in f.claims if c.id == r.claim)
            assert bool(claim.measure) == ("--efficiency --device cuda" in r.how)
        text = "\n".join(sc.format_plan(rows, f))
        assert "seeds per look" in text and "total:" in text and "no GPU-hours" in text


def preflight(cfg, micro, step_ms):
    ident = est.identity(cfg, micro)
    return {
        "format": "depthbench-preflight/1",
        "time": "2026-11-20T10:00:00+00:00",
        "device": "cuda",
        "device_name": "NVIDIA H100",
        "partition": None,
        "path": "/runs/preflight/x/preflight.json",
        "configs": [{**ident, "step_ms": step_ms, "world": 8, "allreduce_ms": None, "gmacs": 1.26}],
    }


def test_gpu_hours_come_from_the_estimate_and_say_what_is_extrapolated():
    """One preflight record of DeiT-Tiny's recipe: its arm is measured, the recursive DeiT-Tiny is extrapolated by
    FLOPs from it; the first look's GPU-hours are its seeds times both arms' runs, as submit --estimate works
    them out."""
    f = load_claims("sret")
    record = preflight(load_config(DEIT_TINY), 128, 300.0)
    rows = {r.claim: r for r in sc.plan(f, records=[record], bench_rows=[])}
    r = rows["recursion-vs-none"]
    measured, extrapolated = r.sources
    assert measured.startswith("measured: preflight") and extrapolated.startswith("extrapolated: ")
    jobs = [
        est.Job("a", DEIT_TINY, ["seed=0"]),
        est.Job("b", DEIT_TINY, ["model.name='deit_tiny_naive_recursive'", "seed=0"]),
    ]
    by_hand = est.estimate(jobs, est.Layout(nodes=1, gpus_per_node=8), records=[record], bench_rows=[])
    assert by_hand.rows[0].device_hours == pytest.approx(375_300 * 0.3 * 8 / 3600 + 120 * 8 / 3600)
    assert r.first_look_hours == pytest.approx(r.looks[0] * by_hand.device_hours)
    assert r.all_looks_hours == pytest.approx(r.looks[-1] * by_hand.device_hours)
    # SReT-T has no record: timed by the nearest model in FLOPs, and labelled so
    assert all(s.startswith("extrapolated: ") for s in rows["sliced-no-loss"].sources)
    assert "GPU-h at the first look" in "\n".join(sc.format_plan(list(rows.values()), f))


def test_a_paper_scale_section_naming_other_arms_is_one_line(tmp_path):
    text = (
        load_claims("sret")
        .path.read_text()
        .replace("        loop1: {config: configs/deit/", "        loop0: {config: configs/deit/")
    )
    path = tmp_path / "sret.yaml"
    path.write_text(text)
    with pytest.raises(ClaimError, match="the claim compares") as e:
        sc.paper_scale(load(path))
    assert "\n" not in str(e.value)


def test_the_cli_prints_the_plan_and_refuses_plan_without_paper_scale():
    code, out, err = cli("claims", "horesnet", "--scale", "paper", "--plan")
    assert code == 0, err
    assert "rk4-vs-euler-18 (confirmatory, better): seeds per look" in out and "horesnet18_rk4" in out
    code, out, err = cli("claims", "horesnet", "--plan")
    assert code == 2 and "--plan goes with --scale paper" in err and len(err.strip().splitlines()) == 1


def test_submit_paper_scale_puts_the_first_look_in_one_array(tmp_path, monkeypatch):
    monkeypatch.setenv("DEPTHBENCH_RUNS", str(tmp_path))  # --claims-out goes under the runs root
    out = tmp_path / "claims-paper"
    code, script, err = cli(
        "submit", "--claims", "sret", "--scale", "paper", "--claims-out", out, "--gpus-per-node", "8", "--dry-run"
    )
    assert code == 0, err
    looks = {r.claim: r.looks for r in sc.plan(load_claims("sret"), records=[], bench_rows=[])}
    first = looks["recursion-vs-none"][0]
    for seed in range(first):
        assert f"WORK_DIR={out}/runs/sret/loop1/seed{seed}\n" in script
        assert f"WORK_DIR={out}/runs/sret/loop2/seed{seed}\n" in script
        # the sliced claim's loop2 is another recipe (SReT-T without slicing): its own folder
        assert f"WORK_DIR={out}/runs/sret/loop2-sliced-no-loss/seed{seed}\n" in script
    assert f"seed{first}\n" not in script  # the first look only
    assert "deit_tiny_naive_recursive" in script and "SReT_T_wo_slice" in script
    assert "# ---- the second job" not in script
    assert textwrap.dedent(script).count("WORK_DIR=") >= 4 * first


def test_paper_scale_looks_are_decided_from_the_submitted_runs(tmp_path, monkeypatch):
    """`claims sret --scale paper` reads the runs `submit --claims sret --scale paper` wrote (fabricated here by the
    run-directory writer, no training): the recursion claim, +1.8 points at a 0.05 spread, is supported at its one
    look; the slicing claim's noisy first look decides nothing, so its next look (6 seeds) is what submit sends."""
    monkeypatch.setenv("DEPTHBENCH_RUNS", str(tmp_path))  # --claims-out goes under the runs root
    from claimruns import finished_run

    from results.claims_run import run_values

    f, out = load_claims("sret"), tmp_path / "claims-paper"
    looks = {r.claim: r.looks for r in sc.plan(f, records=[], bench_rows=[]) if r.arms}
    assert looks == {"recursion-vs-none": (3,), "sliced-no-loss": (3, 6)}  # the file's paper_scale plan
    before = sc.decide(f, out)
    assert before.results == [] and before.waiting == {"recursion-vs-none": 0, "sliced-no-loss": 0}
    assert sorted((s.arm, s.seed) for s in before.next_runs) == sorted(
        (arm, seed) for arm in ("loop1", "loop2", "loop2-sliced-no-loss", "loop2-sliced") for seed in range(3)
    )
    tops = {
        "loop1": [72.0, 72.3, 71.9],
        "loop2": [73.8, 74.1, 73.75],  # +1.8, +1.8, +1.85
        "loop2-sliced-no-loss": [76.0, 76.1, 75.9],
        "loop2-sliced": [75.1, 76.6, 75.7],  # -0.9, +0.5, -0.2: a margin of 0.5 is neither ruled in nor out
    }
    for spec in before.next_runs:
        finished_run(spec, tops[spec.arm][spec.seed], 1.0, config=False)
    assert run_values(before.next_runs)[("sret", "loop2")] == dict(enumerate(tops["loop2"]))
    after = sc.decide(f, out)
    verdicts = {r.claim.id: r for r in after.results}
    assert verdicts["recursion-vs-none"].verdict == "supported"
    assert verdicts["recursion-vs-none"].interval.diff == pytest.approx(1.8167, abs=1e-4)
    assert verdicts["sliced-no-loss"].verdict == "inconclusive" and verdicts["sliced-no-loss"].stopped_at == 3
    assert after.next_look == {"recursion-vs-none": None, "sliced-no-loss": 6} and after.waiting == {}
    assert sorted((s.arm, s.seed) for s in after.next_runs) == [
        (arm, seed) for arm in ("loop2-sliced", "loop2-sliced-no-loss") for seed in (3, 4, 5)
    ]
    code, text, err = cli("claims", "sret", "--scale", "paper", "--out", out)
    assert code == 0, err
    assert "sret/recursion-vs-none:" in text and "→ supported" in text and "no more seeds: recursion-vs-none" in text
    assert (
        f"next look: sliced-no-loss at 6 seeds; 6 run(s) to train: `depthbench submit --claims sret --scale "
        f"paper --claims-out {out}`" in text
    )
    code, script, err = cli(
        "submit", "--claims", "sret", "--scale", "paper", "--claims-out", out, "--gpus-per-node", "8", "--dry-run"
    )
    assert code == 0, err
    assert f"WORK_DIR={out}/runs/sret/loop2-sliced/seed5\n" in script and "runs/sret/loop1/" not in script
