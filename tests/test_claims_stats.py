"""results/claims.py: the statistics and verdicts of `depthbench claims`, the equal-budget rule, the claim files."""
import textwrap
from pathlib import Path

import numpy as np
import pytest

from results.claims import (BUDGET_KEYS, Claim, ClaimError, PaperSource, available_claims, check_audit,
                            check_equal_budget, compare, curve_band, load, load_claims, metric_value, resolve_configs,
                            status_line, verdict, welch_interval)
from results.paper_tables import Row, Table


def claim(direction="higher", margin=0.0, metric="top1", equal=None, expected=None):
    return Claim("paper", "c1", "B beats A", PaperSource("1", "top1", {"A": 70.0, "B": 71.0}), "a", "b", metric,
                 direction, margin, equal or {}, expected or {})


BASE = [75.0, 75.4, 74.8]


# ----------------------------------------------------------------------------------------- verdicts
def test_a_known_effect_is_supported():
    result = compare(claim(), {"a": BASE, "b": [80.1, 80.3, 79.9]})
    assert result.verdict == "supported"
    assert result.interval.diff == pytest.approx(5.0333, abs=1e-3) and result.interval.low > 0
    assert (result.baseline.n, result.treatment.n) == (3, 3)
    assert result.baseline.std == pytest.approx(np.std(BASE, ddof=1))


def test_a_reversed_effect_is_contradicted():
    assert compare(claim(), {"a": BASE, "b": [70.2, 69.7, 70.5]}).verdict == "contradicted"


def test_noise_is_inconclusive():
    rng = np.random.default_rng(0)
    a, b = 75 + rng.normal(0, 1, 3), 75 + rng.normal(0, 1, 3)
    assert compare(claim(), {"a": a, "b": b}).verdict == "inconclusive"


def test_direction_lower_mirrors_higher():
    lower = compare(claim("lower"), {"a": BASE, "b": [70.2, 69.7, 70.5]})
    assert lower.verdict == "supported"
    assert compare(claim("lower"), {"a": BASE, "b": [80.1, 80.3, 79.9]}).verdict == "contradicted"


def test_no_worse_uses_the_margin():
    # slicing: "fewer FLOPs at no accuracy cost" within 1 point
    assert compare(claim("no_worse", 1.0), {"a": BASE, "b": [74.9, 75.2, 75.1]}).verdict == "supported"
    assert compare(claim("no_worse", 1.0), {"a": BASE, "b": [71.0, 71.3, 70.8]}).verdict == "contradicted"
    assert compare(claim("no_worse", 1.0), {"a": BASE, "b": [73.0, 75.9, 74.0]}).verdict == "inconclusive"


def test_welch_interval_matches_scipy():
    from scipy import stats

    a, b = [75.0, 75.4, 74.8, 76.1], [80.1, 79.0, 79.9]
    interval = welch_interval(b, a)
    test = stats.ttest_ind(b, a, equal_var=False)
    reference = test.confidence_interval(0.95)
    assert (interval.low, interval.high) == pytest.approx((reference.low, reference.high))
    assert interval.df == pytest.approx(test.df) and interval.method == "welch"


def test_one_seed_gives_no_interval_and_no_verdict():
    result = compare(claim(), {"a": [75.0], "b": [80.0]})
    assert result.interval.low is None and result.verdict == "no verdict"
    assert "no interval" in result.summary()


def test_identical_arms_have_an_exact_difference():
    assert compare(claim(), {"a": BASE, "b": BASE}).verdict == "inconclusive"
    assert verdict(welch_interval([80.0, 80.0], [75.0, 75.0]), "higher") == "supported"


def test_bootstrap_is_deterministic_and_flagged_for_few_seeds():
    first = compare(claim(), {"a": BASE, "b": [80.1, 80.3, 79.9]}, method="bootstrap")
    again = compare(claim(), {"a": BASE, "b": [80.1, 80.3, 79.9]}, method="bootstrap")
    assert first.interval == again.interval and first.interval.low <= first.interval.diff <= first.interval.high
    assert any("Welch is the default" in n for n in first.notes)
    with pytest.raises(ClaimError, match="interval method"):
        compare(claim(), {"a": BASE, "b": BASE}, method="t")


def test_a_baseline_that_cannot_separate_arms_is_flagged():
    saturated = compare(claim(), {"a": [99.0, 99.2, 99.1], "b": [99.5, 99.4, 99.6]})
    assert any("outside 60–95" in n for n in saturated.notes)
    at_chance = compare(claim(metric="top1_auc"), {"a": [2.1, 2.4, 3.0], "b": [10.0, 12.0, 14.0]})
    assert any("baseline 2.5 % (top1_auc) is outside 60–95" in n for n in at_chance.notes)
    assert not compare(claim(), {"a": BASE, "b": BASE}).notes


def test_missing_or_non_finite_values_are_refused():
    with pytest.raises(ClaimError, match="no values for arm 'b'"):
        compare(claim(), {"a": BASE})
    with pytest.raises(ClaimError, match="non-finite"):
        compare(claim(), {"a": BASE, "b": [80.0, float("nan"), 81.0]})


# ----------------------------------------------------------------------------------------- curves
def test_metric_values_and_curve_bands():
    curve = [(0, 10.0), (1, 40.0), (2, 70.0)]
    assert metric_value(curve, "top1") == 70.0 and metric_value(curve, "top1_auc") == pytest.approx(40.0)
    band = curve_band("a", [curve, [(0, 20.0), (1, 50.0), (2, 80.0)]])
    assert band.epochs == (0, 1, 2) and band.mean == pytest.approx((15.0, 45.0, 75.0))
    assert band.std[0] == pytest.approx(np.std([10, 20], ddof=1)) and band.low[2] == 70.0 and band.seeds == 2


def test_status_line_counts_verdicts():
    results = [compare(claim(), {"a": BASE, "b": [80.1, 80.3, 79.9]}),
               compare(claim(), {"a": BASE, "b": [75.1, 74.6, 75.5]})]
    assert status_line("paper", results) == "paper: 2 claims — 1 supported, 1 inconclusive (3 seeds, reduced setting)"
    assert status_line("paper", []) == "paper: no claims evaluated yet"


# ----------------------------------------------------------------------------------------- fairness
def budget(**changes):
    cfg = {"epochs": 6, "batch_size": 64, "grad_accum": 1, "clip_grad": None, "precision": "fp32",
           "eval_interval": 1, "optim": {"opt": "momentum", "lr": 0.1}, "sched": {"sched": "cosine"},
           "data": {"type": "glyphs", "input_size": 32}, "aug": {"crop_padding": 2, "hflip": 0.0},
           "ema": {"enable": False}, "distill": {"teacher": None}, "model": {"name": "resnet18"}}
    for key, value in changes.items():
        section, _, leaf = key.partition("__")
        if leaf:
            cfg[section] = {**cfg[section], leaf: value}
        else:
            cfg[section] = value
    return cfg


def test_arms_may_differ_only_in_the_model():
    check_equal_budget(claim(), {"a": budget(), "b": budget(model={"name": "steps_resnet18", "pretrained": "x"})})
    assert "model" not in BUDGET_KEYS


@pytest.mark.parametrize("change, where", [({"epochs": 8}, "epochs"), ({"batch_size": 128}, "batch_size"),
                                           ({"optim__lr": 0.05}, "optim.lr"), ({"aug__hflip": 0.5}, "aug.hflip"),
                                           ({"data__input_size": 16}, "data.input_size")])
def test_a_claim_whose_arms_differ_in_budget_is_refused(change, where):
    with pytest.raises(ClaimError) as err:
        check_equal_budget(claim(), {"a": budget(), "b": budget(**change)})
    assert f"differ in {where} " in str(err.value) and "\n" not in str(err.value)


def test_the_size_audit_refuses_unequal_arms():
    sizes = {"a": {"params": 1000, "flops": 2000}, "b": {"params": 1010, "flops": 2500}}
    assert check_audit(claim(equal={"params": 0.02}), sizes)["params"] == pytest.approx(0.01)
    with pytest.raises(ClaimError, match=r"\+25.0% flops"):
        check_audit(claim(equal={"params": 0.02, "flops": 0.02}), sizes)
    # slicing: equal parameters, and the treatment must really save FLOPs
    assert check_audit(claim(equal={"params": 0.02}, expected={"flops": "higher"}), sizes)["flops"] == 0.25
    with pytest.raises(ClaimError, match="should have lower flops"):
        check_audit(claim(equal={"params": 0.02}, expected={"flops": "lower"}), sizes)


# ----------------------------------------------------------------------------------------- claim files
TABLES = {"paper": [Table("paper", "3", "a table", {"top1": "Top-1"},
                          [Row(table="3", name="A", paper={"top1": 70.0}), Row(table="3", name="B", paper={"top1": 71.0})])]}


def write_claims(tmp_path, body: str):
    # a claims file names configs inside the repository's configs/ only (issue 39)
    path = tmp_path / "paper.yaml"
    path.write_text(textwrap.dedent(body).replace("CFG", "configs/claims/resnet18-w16_1xb64-2e_glyphs.py"))
    return path


GOOD = """
    paper: paper
    setting: glyphs 32x32, 1 epoch
    arms:
      a: {config: CFG, label: A}
      b: {config: CFG, label: B}
    claims:
      - id: b-beats-a
        text: B beats A
        paper: {table: "3", column: top1, rows: {A: 70.0, B: 71.0}}
        baseline: a
        treatment: b
    quick: [epochs=1]
"""


def test_a_valid_claims_file_loads(tmp_path):
    claims = load(write_claims(tmp_path, GOOD), tables=TABLES)
    (c,) = claims.claims
    assert (c.baseline, c.treatment, c.metric, c.direction) == ("a", "b", "top1", "higher")
    assert claims.quick == ("epochs=1",) and [a.name for a in claims.arms_of(c)] == ["a", "b"]


@pytest.mark.parametrize("old, new, message", [
    ("treatment: b", "treatment: c", "treatment 'c' is not an arm"),
    ("treatment: b", "treatment: a", "baseline and treatment are the same arm"),
    ("baseline: a", "baseline: a\n        direction: sideways", "direction 'sideways'"),
    ("baseline: a", "baseline: a\n        metric: top5", "metric 'top5'"),
    ("baseline: a", "baseline: a\n        direction: no_worse", "needs a positive 'margin'"),
    ("baseline: a", "baseline: a\n        equal: {params: 2}", "'equal' maps"),
    ("baseline: a", "baseline: a\n        expected: {flops: fewer}", "'expected' maps"),
    ("baseline: a", "baseline: a\n        colour: red", "unknown field(s) ['colour']"),
    ("rows: {A: 70.0, B: 71.0}", "rows: {A: 70.5, B: 71.0}", "prints top1=70.0, the claim copied 70.5"),
    ("rows: {A: 70.0, B: 71.0}", "rows: {Z: 70.0}", "has no row 'Z'"),
    ('table: "3"', 'table: "9"', "has no table '9'"),
    ("config: CFG, label: B", "config: configs/claims/nope.py", "config configs/claims/nope.py does not exist"),
    ("setting: glyphs 32x32, 1 epoch", "setting: ''", "'setting' is missing"),
    ("quick: [epochs=1]", "quick: epochs", "'quick' is a list"),
])
def test_malformed_claims_files_are_refused_in_one_line(tmp_path, old, new, message):
    assert old in GOOD
    with pytest.raises(ClaimError) as err:
        load(write_claims(tmp_path, GOOD.replace(old, new)), tables=TABLES)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_source_arm_initialises_but_is_never_compared(tmp_path):
    body = GOOD.replace("b: {config: CFG, label: B}",
                        "b: {config: CFG, label: B, init_from: s}\n      s: {config: CFG, role: source}")
    claims = load(write_claims(tmp_path, body), tables=TABLES)
    assert [a.name for a in claims.arms_of(claims.claims[0])] == ["s", "a", "b"]
    with pytest.raises(ClaimError, match="is a source arm"):
        load(write_claims(tmp_path, body.replace("treatment: b", "treatment: s")), tables=TABLES)
    with pytest.raises(ClaimError, match="initialised from 'q'"):
        load(write_claims(tmp_path, body.replace("init_from: s", "init_from: q")), tables=TABLES)


def test_an_unknown_paper_names_the_known_ones():
    with pytest.raises(ClaimError, match="no claims for paper 'nope'; known: "):
        load_claims("nope")


@pytest.mark.parametrize("paper", available_claims())
def test_every_shipped_claim_is_fair_and_cites_the_paper(paper):
    claims = load_claims(paper)  # the paper's numbers are checked against results/tables/<paper>.yaml
    assert claims.claims
    for quick in (False, True):
        configs = resolve_configs(claims, quick=quick)
        for c in claims.claims:
            check_equal_budget(c, configs)


def test_a_finished_run_trained_with_another_recipe_is_stale(tmp_path):
    import json

    from harness.core.rundir import RunDir
    from harness.engine.builders import load_training_config
    from results.claims import REPO, load_claims, plan_runs, stale_runs

    spec = next(s for s in plan_runs(load_claims("stepsnet"), 1, False, tmp_path) if s.arm == "deit")
    cfg = load_training_config(REPO / spec.config, spec.overrides)[0]
    run = RunDir.create("claims-stepsnet-deit", path=spec.work_dir)
    run.write_config("", cfg.to_dict())  # what `depthbench train` records
    run.finish("done")
    assert stale_runs([spec]) == []
    path = spec.work_dir / "config.json"
    recorded = json.loads(path.read_text())
    assert recorded["data"]["variant"] == "clean"  # the DeiT claims train on the clean glyphs

    def stale_with(change) -> list:
        edited = json.loads(json.dumps(recorded))
        change(edited)
        path.write_text(json.dumps(edited))
        return [why for _, why in stale_runs([spec])]

    assert stale_with(lambda r: r["data"].update(variant="cluttered")) == \
        ["data.variant was 'cluttered', the recipe now says 'clean'"]
    from results.claims import check_not_stale

    with pytest.raises(ClaimError, match=r"^1 finished claims run\(s\) .* \(data.variant was 'cluttered', .*\); do X$"):
        check_not_stale([spec], "do X")
    assert stale_with(lambda r: r["data"].pop("variant")) == \
        ["data.variant was 'cluttered', the recipe now says 'clean'"]  # recorded before variants: the cluttered set
    assert stale_with(lambda r: r["optim"].update(lr=0.5)) == ["optim.lr was 0.5, the recipe now says 0.001"]
    assert stale_with(lambda r: r["model"].update(depth=8)) == ["model.depth was 8, the recipe now says 4"]
    assert stale_with(lambda r: r.pop("ema")) == []  # a key the run did not record is not compared
    path.unlink()
    assert stale_runs([spec])[0][1] == "its config.json is missing or unreadable"


def test_the_same_source_weights_named_relative_or_absolute_are_not_stale(tmp_path, monkeypatch):
    """`depthbench claims --out results/claims` records ScaleNet's model.pretrained relative to the working
    directory; `submit --claims` plans it absolute (a Slurm job runs elsewhere): the same file, not a new recipe."""
    from harness.core.rundir import RunDir
    from harness.engine.builders import load_training_config
    from results.claims import REPO, load_claims, plan_runs, stale_runs

    monkeypatch.chdir(tmp_path)
    relative, = [s for s in plan_runs(load_claims("scalenet"), 1, True, Path("out")) if s.arm == "scalenet"]
    absolute, = [s for s in plan_runs(load_claims("scalenet"), 1, True, tmp_path / "out") if s.arm == "scalenet"]
    run = RunDir.create("claims-scalenet-scalenet", path=relative.work_dir)
    run.write_config("", load_training_config(REPO / relative.config, relative.overrides)[0].to_dict())
    run.finish("done")
    assert stale_runs([absolute]) == []
    other, = [s for s in plan_runs(load_claims("scalenet"), 1, True, tmp_path / "elsewhere") if s.arm == "scalenet"]
    other.work_dir = absolute.work_dir  # the recorded run, planned from another source run's weights
    assert "model.pretrained was" in stale_runs([other])[0][1]
