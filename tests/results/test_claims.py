"""results/claims.py: the statistics and verdicts of `depthbench claims`, the equal-budget rule, the claim files;
claims reports and claim runs read as bounded records, and a claims file is data -- a config it names outside
configs/ never executes."""

from __future__ import annotations


import json
import math
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest

from clitools import fresh_imports
from fixtures.configs import names_out_of_configs
from fixtures.files import in_time as _in_time
from results import sequential as seq
from results.claims import (
    BUDGET_KEYS,
    Claim,
    ClaimError,
    Design,
    PaperSource,
    available_claims,
    check_audit,
    check_equal_budget,
    curve_band,
    evaluate,
    load,
    load_claims,
    metric_value,
    plan_looks,
    resolve_configs,
    status_line,
)
from results.paper_tables import Row, Table

ROOT = Path(__file__).resolve().parents[2]

POWER = {"sd": 2.0, "sd_from": "pilot", "effect": 3.0, "effect_from": "smallest worth detecting"}


def claim(kind="better", margin=3.0, metric="top1", equal=None, expected=None, test="paired", cid="c1"):
    return Claim(
        "paper",
        cid,
        "B beats A",
        PaperSource("1", "top1", {"A": 70.0, "B": 71.0}),
        "a",
        "b",
        metric,
        kind,
        margin,
        equal or {},
        expected or {},
        test=test,
        power=POWER,
    )


BASE = [75.0, 75.4, 74.8, 75.9, 74.2, 75.1]


def run(c, treat, base=BASE, looks=(3, 6), quick=False):
    values = {("paper", "a"): dict(enumerate(base)), ("paper", "b"): dict(enumerate(treat))}
    return evaluate([(c, Design())], values, {("paper", c.id): looks}, quick=quick)[0]


# ----------------------------------------------------------------------------------------- the pilot's spread
def test_the_pilot_spread_is_one_seeds_difference_as_power_sd_reads_it():
    """Paired: the sd of the per-seed differences (here 3, 2, 4: sd 1); Welch: the spread of the difference of two
    independent seeds, sqrt(sd_a² + sd_b²) (here sqrt 2); one seed gives none. The seeds a spread asks for grow with
    it, and the file's power.sd is the default."""
    from results.claims import difference_sd, seeds_needed

    values = {"a": {50: 10.0, 51: 12.0, 52: 11.0}, "b": {50: 13.0, 51: 14.0, 52: 15.0}}
    assert difference_sd(claim(), values) == (pytest.approx(1.0), 3)
    assert difference_sd(claim(test="welch"), values) == (pytest.approx(math.sqrt(2.0)), 3)
    assert difference_sd(claim(), {"a": {50: 1.0}, "b": {50: 2.0, 51: 3.0}}) == (None, 1)
    design = Design(family=1)
    assert seeds_needed(claim(), design) == seeds_needed(claim(), design, sd=POWER["sd"])
    assert seeds_needed(claim(), design, sd=1.0) < seeds_needed(claim(), design, sd=4.0)


# ----------------------------------------------------------------------------------------- verdicts
def test_a_known_effect_is_supported_at_the_first_decisive_look():
    result = run(claim(), [b + 5 + e for b, e in zip(BASE, [0.1, -0.2, 0.1, 0.0, 0.2, -0.1])])
    assert result.verdict == "supported" and result.interval.low > 0
    assert result.stopped_at in (3, 6) and result.p_value < 0.05 and result.level == 0.05


def test_a_reversed_effect_is_contradicted():
    assert run(claim(), [b - 5 for b in BASE]).verdict == "contradicted"


def test_pairing_uses_the_shared_seed():
    """Arms that move together seed by seed: the paired test sees a steady +1, Welch only noise."""
    base = [70.0, 80.0, 75.0, 85.0, 72.0, 78.0]
    treat = [b + 1.0 + e for b, e in zip(base, [0.05, -0.05, 0.0, 0.05, -0.05, 0.0])]
    assert run(claim(margin=0.5), treat, base).verdict == "supported"
    assert run(claim(margin=0.5, test="welch"), treat, base).verdict == "inconclusive"


def test_similar_and_no_worse_use_the_margin():
    near = [b + e for b, e in zip(BASE, [0.1, -0.1, 0.05, 0.0, -0.05, 0.1])]
    assert run(claim("similar", 1.0), near).verdict == "equivalent"
    assert run(claim("no_worse", 1.0), near).verdict == "supported"
    assert run(claim("no_worse", 1.0), [b - 4 for b in BASE]).verdict == "contradicted"
    assert run(claim("similar", 1.0), [b + 6 for b in BASE]).verdict == "contradicted"


def test_noise_is_inconclusive_and_says_what_it_rules_out():
    rng = np.random.default_rng(0)
    result = run(claim(margin=0.5), list(np.asarray(BASE) + rng.normal(0, 4, 6)))
    assert result.verdict == "inconclusive" and result.stopped_at == 6
    assert f"above {result.interval.high:+.2f}" in result.ruled_out


def test_holm_corrects_across_the_primaries():
    """Two claims with one-sided p about 0.04 each (one look): alone each is supported, together Holm rejects neither."""
    from scipy import stats

    diffs = [1.0, 0.7, 1.9]
    p = seq.repeated_p("better", 3.0, (3,), [seq.paired_estimate(diffs)])
    # one look: the plain one-sided t-test (a directional claim)
    assert p == pytest.approx(stats.ttest_1samp(diffs, 0, alternative="greater").pvalue, rel=1e-3)
    base = [75.0, 76.0, 74.0]
    treat = [b + d for b, d in zip(base, diffs)]
    values = {("paper", "a"): dict(enumerate(base)), ("paper", "b"): dict(enumerate(treat))}
    alone = evaluate([(claim(cid="c1"), Design())], values, {("paper", "c1"): (3,)})
    assert [r.verdict for r in alone] == ["supported"]
    both = evaluate(
        [(claim(cid="c1", margin=0.5), Design(family=2)), (claim(cid="c2", margin=0.5), Design(family=2))],
        values,
        {("paper", "c1"): (3,), ("paper", "c2"): (3,)},
    )
    assert [r.verdict for r in both] == ["inconclusive", "inconclusive"] and both[0].level is None


def test_holm_can_read_a_verdict_the_stopping_rule_trains_on_from():
    """The stopping rule decides at alpha / m whether more seeds train; Holm reads the verdict at its own level,
    which a claim can reach after its family's first rejection. The report says both (ScaleNet's first look: supported
    by Holm at 0.05, the rule at 0.025 trained on to 10 seeds)."""
    from dataclasses import replace

    from results.claims_run import _stopping

    base = [75.0, 76.0, 74.0]
    values = {
        ("paper", "a"): dict(enumerate(base)),
        ("paper", "b"): dict(enumerate([b + 5 + e for b, e in zip(base, [0.1, -0.1, 0.0])])),
        ("paper", "c"): dict(enumerate([b + d for b, d in zip(base, [2.0, 2.4, 2.9])])),
    }
    strong, weaker = claim(cid="c1", margin=0.5), replace(claim(cid="c2", margin=0.5), treatment="c")
    design = Design(family=2)
    results = evaluate([(strong, design), (weaker, design)], values, {("paper", "c1"): (3, 6), ("paper", "c2"): (3, 6)})
    assert [(r.verdict, r.level, r.stop_rule, r.trained_seeds) for r in results] == [
        ("supported", 0.025, "supported", 3),
        ("supported", 0.05, None, 3),
    ]
    assert 0.025 < results[1].p_value < 0.05
    assert _stopping(results[0], design).endswith("(alpha/m = 0.025) stopped: supported")
    assert _stopping(results[1], design) == (
        "read at 3 of 3 seeds trained; the stopping rule (alpha/m = 0.025) trains on to 6 seeds"
    )


def test_paired_and_welch_estimates_match_scipy():
    from scipy import stats

    a, b = [75.0, 75.4, 74.8, 76.1], [80.1, 79.0, 79.9, 80.5]
    welch = seq.welch_estimate(b, a)
    test = stats.ttest_ind(b, a, equal_var=False)
    assert welch.diff / welch.se == pytest.approx(test.statistic) and welch.df == pytest.approx(test.df)
    paired = seq.paired_estimate(np.subtract(b, a))
    assert paired.diff / paired.se == pytest.approx(stats.ttest_rel(b, a).statistic) and paired.df == 3


def test_boundaries_spend_alpha_like_obrien_fleming():
    z = seq.z_boundaries(0.05, (3, 6, 9))
    assert z[0] > z[1] > z[2] > 1.96 and z[2] < 2.1  # most alpha is left for the last look
    assert seq.z_boundaries(0.05, (9,)) == pytest.approx((1.959964,), abs=1e-5)
    assert seq.power(3.0, 2.0, 0.05, (3, 6, 9)) > seq.power(1.0, 2.0, 0.05, (3, 6, 9))


def test_one_seed_gives_no_interval_and_no_verdict():
    result = run(claim(), [80.0], [75.0], looks=(1,), quick=True)
    assert result.interval.low is None and result.verdict == "no verdict"
    assert "no interval" in result.summary()


def test_missing_or_non_finite_values_are_refused():
    with pytest.raises(ClaimError, match="non-finite"):
        run(claim(), [80.0, float("nan"), 81.0], BASE[:3], looks=(3,))


def test_every_shipped_claim_has_a_power_analysis_within_the_budget():
    files = [load_claims(p) for p in available_claims()]
    for f in files:
        for c in [c for c in f.claims if not c.measure]:  # efficiency claims: test_claims_efficiency.py
            looks, power = plan_looks(c, f.design)
            assert looks[-1] <= f.design.max_seeds and looks[0] == f.design.look_every
            assert (power is None) == (c.tier == "descriptive") and (power is None or 0 <= power <= 1)
            assert not set(f.design.tuning_seeds) & set(range(f.design.seeds_from, f.design.seeds_from + looks[-1]))


# ----------------------------------------------------------------------------------------- curves
def test_metric_values_and_curve_bands():
    curve = [(0, 10.0), (1, 40.0), (2, 70.0)]
    assert metric_value(curve, "top1") == 70.0 and metric_value(curve, "top1_auc") == pytest.approx(40.0)
    band = curve_band("a", [curve, [(0, 20.0), (1, 50.0), (2, 80.0)]])
    assert band.epochs == (0, 1, 2) and band.mean == pytest.approx((15.0, 45.0, 75.0))
    assert band.std[0] == pytest.approx(np.std([10, 20], ddof=1)) and band.low[2] == 70.0 and band.seeds == 2


def test_status_line_counts_verdicts():
    results = [
        run(claim(), [b + 5 for b in BASE]),
        run(claim(margin=0.5), list(np.asarray(BASE) + [3, -4, 2, -3, 1, 4])),
    ]
    assert status_line("paper", results) == "paper: 2 claims — 1 supported, 1 inconclusive (3–6 seeds, reduced setting)"
    assert status_line("paper", []) == "paper: no claims evaluated yet"
    assert math.isfinite(results[0].interval.diff)


@pytest.mark.tier("integration")
def test_claims_status_starts_without_torch():
    """``depthbench claims --status`` reads the committed report (results/claims): what it imports
    (results/claims_status.py, results/paper_tables.py, harness/core/config_paths.py) imports no torch, timm,
    MMEngine or SciPy -- the engine cost it ~7 CPU-s a call, 5 of them importing the stack."""
    out, imported = fresh_imports(
        "from harness.cli import main; print(main(['claims', '--status']))",
        ("torch", "timm", "mmengine", "scipy", "results.claims"),
    )
    lines = out.splitlines()
    assert imported == [] and lines[-1] == "0", out
    assert [ln.split(":")[0] for ln in lines[:-1]] == available_claims(), out


# ----------------------------------------------------------------------------------------- fairness
def budget(**changes):
    cfg = {
        "epochs": 6,
        "batch_size": 64,
        "grad_accum": 1,
        "clip_grad": None,
        "precision": "fp32",
        "eval_interval": 1,
        "optim": {"opt": "momentum", "lr": 0.1},
        "sched": {"sched": "cosine"},
        "data": {"type": "glyphs", "input_size": 32},
        "aug": {"crop_padding": 2, "hflip": 0.0},
        "ema": {"enable": False},
        "distill": {"teacher": None},
        "model": {"name": "resnet18"},
    }
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


@pytest.mark.parametrize(
    "change, where",
    [
        ({"epochs": 8}, "epochs"),
        ({"batch_size": 128}, "batch_size"),
        ({"optim__lr": 0.05}, "optim.lr"),
        ({"aug__hflip": 0.5}, "aug.hflip"),
        ({"data__input_size": 16}, "data.input_size"),
    ],
)
def test_a_claim_whose_arms_differ_in_budget_is_refused(change, where):
    with pytest.raises(ClaimError) as err:
        check_equal_budget(claim(), {"a": budget(), "b": budget(**change)})
    assert f"differ in {where} " in str(err.value) and "\n" not in str(err.value)


def test_an_interactions_pairs_may_differ_only_in_what_it_names():
    """HO-ResNet's depth interaction: each depth keeps its tuned epochs (named in budget_differs), but within a
    depth the two arms still train alike."""
    from dataclasses import replace

    c = replace(claim(), minus={"baseline": "c", "treatment": "d"}, budget_differs=("epochs",))
    configs = {"a": budget(), "b": budget(), "c": budget(epochs=4), "d": budget(epochs=4)}
    check_equal_budget(c, configs)
    with pytest.raises(ClaimError, match="the arms differ in epochs"):
        check_equal_budget(c, {**configs, "d": budget(epochs=5)})


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
TABLES = {
    "paper": [
        Table(
            "paper",
            "3",
            "a table",
            {"top1": "Top-1"},
            [Row(table="3", name="A", paper={"top1": 70.0}), Row(table="3", name="B", paper={"top1": 71.0})],
        )
    ]
}


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
    design: {alpha: 0.05, family: 1, target_power: 0.8, look_every: 3, max_seeds: 6, seeds_from: 100, tuning_seeds: [0, 1, 2]}
    claims:
      - id: b-beats-a
        tier: confirmatory
        quote: B beats A.
        where: Table 3
        paper: {table: "3", column: top1, rows: {A: 70.0, B: 71.0}}
        kind: better
        margin: 3.0
        test: paired
        power: {sd: 2.0, sd_from: pilot, effect: 3.0, effect_from: smallest worth detecting}
        baseline: a
        treatment: b
    exploratory:
      - {id: x, text: C beats A, why: not claimed by the paper}
    quick: [epochs=1]
"""


def test_a_valid_claims_file_loads(tmp_path):
    claims = load(write_claims(tmp_path, GOOD), tables=TABLES)
    (c,) = claims.claims
    assert (c.baseline, c.treatment, c.metric, c.kind, c.test, c.text) == (
        "a",
        "b",
        "top1",
        "better",
        "paired",
        "B beats A.",
    )
    assert claims.design.seeds_from == 100 and claims.exploratory[0].why == "not claimed by the paper"
    assert claims.design.pilot_seeds == tuple(range(50, 60))  # the default pilot block
    assert claims.quick == ("epochs=1",) and [a.name for a in claims.arms_of(c)] == ["a", "b"]


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("treatment: b", "treatment: c", "treatment 'c' is not an arm"),
        ("treatment: b", "treatment: a", "baseline and treatment are the same arm"),
        ("kind: better", "kind: sideways", "kind 'sideways'"),
        ("test: paired", "test: ranks", "test 'ranks'"),
        ("baseline: a", "baseline: a\n        metric: top5", "metric 'top5'"),
        ("margin: 3.0", "margin: 0", "'margin' (points of top1"),
        # issue 54: every value of a design or claim has a type and a range (no NaN, no infinity, seeds bounded)
        ("margin: 3.0", "margin: .inf", "'margin' (points of top1"),
        ("sd: 2.0", "sd: .nan", "power.sd (points) is nan"),
        ("effect: 3.0", "effect: -.inf", "power.effect (points) is -inf"),
        ("seeds_from: 100", "seeds_from: 1e30", "seeds_from is '1e30': give an integer"),
        ("seeds_from: 100", "seeds_from: 1.0e30", "give an integer in [0, "),
        ("seeds_from: 100", "seeds_from: 100.5", "seeds_from is 100.5: give an integer"),
        ("seeds_from: 100", "seeds_from: -3", "seeds_from is -3"),
        ("tuning_seeds: [0, 1, 2]", "tuning_seeds: [0, 1.5, 2]", "tuning_seeds is 1.5: give an integer"),
        ("tuning_seeds: [0, 1, 2]", "tuning_seeds: [0, .inf]", "tuning_seeds is inf: give an integer"),
        ("max_seeds: 6", "max_seeds: 1000000000", "max_seeds is 1000000000: give an integer in [3, 60]"),
        ("max_seeds: 6", "max_seeds: 60", "makes 20 looks; at most 5"),
        ("max_seeds: 6", "max_seeds: true", "max_seeds is True"),
        ("alpha: 0.05", "alpha: .nan", "alpha is nan"),
        ("alpha: 0.05", "alpha: five", "alpha is 'five'"),
        ("quote: B beats A.", "text: B beats A.", "unknown field(s) ['text']"),
        ("        where: Table 3\n", "", "'where' is missing"),
        ("sd: 2.0, ", "", "'power' needs sd"),
        ("seeds_from: 100", "seeds_from: 1", "overlap the tuning seeds"),
        # the pilot's block (claims --pilot) is disjoint from the tuning and the evaluation seeds
        ("tuning_seeds: [0, 1, 2]", "tuning_seeds: [0, 1, 2], pilot_seeds: [50, 101]", "overlap the tuning or eval"),
        ("tuning_seeds: [0, 1, 2]", "tuning_seeds: [0, 1, 2], pilot_seeds: [2, 50]", "overlap the tuning or eval"),
        ("tuning_seeds: [0, 1, 2]", "tuning_seeds: [0, 1, 2], pilot_seeds: [50, 50]", "pilot_seeds [50, 50] repeat"),
        ("tuning_seeds: [0, 1, 2]", "tuning_seeds: [0, 1, 2], pilot_seeds: [-1]", "pilot_seeds is -1"),
        ("    design: {", "    nodesign: {", "unknown field(s) ['nodesign']"),
        (
            "        test: paired\n",
            "        test: paired\n        budget_differs: [epochs]\n",
            "do not pair: test: welch",
        ),
        (
            "      - {id: x, text: C beats A, why: not claimed by the paper}",
            "      - {id: x, text: C}",
            "needs exactly 'id', 'text' and 'why'",
        ),
        ("baseline: a", "baseline: a\n        equal: {params: 2}", "'equal' maps"),
        ("baseline: a", "baseline: a\n        expected: {flops: fewer}", "'expected' maps"),
        ("baseline: a", "baseline: a\n        colour: red", "unknown field(s) ['colour']"),
        ("rows: {A: 70.0, B: 71.0}", "rows: {A: 70.5, B: 71.0}", "prints top1=70.0, the claim copied 70.5"),
        ("rows: {A: 70.0, B: 71.0}", "rows: {Z: 70.0}", "has no row 'Z'"),
        ('table: "3"', 'table: "9"', "has no table '9'"),
        ("config: CFG, label: B", "config: configs/claims/nope.py", "config configs/claims/nope.py does not exist"),
        ("setting: glyphs 32x32, 1 epoch", "setting: ''", "'setting' is missing"),
        ("quick: [epochs=1]", "quick: epochs", "'quick' is a list"),
    ],
)
def test_malformed_claims_files_are_refused_in_one_line(tmp_path, old, new, message):
    assert old in GOOD
    with pytest.raises(ClaimError) as err:
        load(write_claims(tmp_path, GOOD.replace(old, new)), tables=TABLES)
    assert message in str(err.value) and "\n" not in str(err.value)


def report_with(tmp_path, change):
    """A claims.json written by the report writer, with one field of its first claim changed."""
    import json

    from results.claims_run import write_report

    f = load(write_claims(tmp_path, GOOD), tables=TABLES)
    values = {("paper", "a"): {100: 70.0, 101: 71.0, 102: 72.0}, ("paper", "b"): {100: 71.0, 101: 72.5, 102: 73.0}}
    result = evaluate([(f.claims[0], f.design)], values, {("paper", "b-beats-a"): (3,)})
    out = tmp_path / "out"
    write_report(result, [f], [], out, False)
    records = json.loads((out / "claims.json").read_text())
    change(records[0])
    (out / "claims.json").write_text(json.dumps(records))
    return out


@pytest.mark.tier("integration")
@pytest.mark.parametrize(
    "change",
    [
        lambda r: r["claim"].update(text=["B", "beats", "A"]),
        lambda r: r["claim"].update(id={"x": 1}),
        lambda r: r["claim"].update(margin=float("inf")),
        lambda r: r.update(verdict=["supported"]),
    ],
)
def test_a_report_with_a_wrongly_typed_claim_is_one_line(tmp_path, capsys, change):
    """issue 54: a claims.json whose claim text is a list crashed both `claims --status` and `results --claims`."""
    from harness.cli import main

    out = report_with(tmp_path, change)
    (tmp_path / "runs").mkdir()
    assert main(["claims", "--status", "--out", str(out)]) == 2
    assert (
        main(
            [
                "results",
                "--claims",
                str(out),
                "--runs",
                str(tmp_path / "runs"),
                "--out",
                str(tmp_path / "r"),
                "--format",
                "md",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("claims.json is unreadable" in line for line in err), err


def test_an_intact_report_still_reads(tmp_path):
    from results.claims import read_report

    out = report_with(tmp_path, lambda r: None)
    ((result, setting),) = read_report(out / "claims.json")
    assert result.claim.text == "B beats A." and setting == "glyphs 32x32, 1 epoch"
    # the pilot's spread beside the runs': differences 1.0, 1.5, 1.0 have sd 0.29
    assert result.observed_sd == pytest.approx(np.std([1.0, 1.5, 1.0], ddof=1))
    text = (out / "claims.md").read_text()
    assert "spread of one seed's difference: pilot 2 (" in text and "; observed 0.29 over 3 evaluated seeds" in text


def test_a_source_arm_initialises_but_is_never_compared(tmp_path):
    body = GOOD.replace(
        "b: {config: CFG, label: B}", "b: {config: CFG, label: B, init_from: s}\n      s: {config: CFG, role: source}"
    )
    with pytest.raises(ClaimError, match="shares no initial weights"):
        load(write_claims(tmp_path, body), tables=TABLES)
    body = body.replace("test: paired", "test: welch")
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
    assert spec.seed == 200 and spec.work_dir.name == "seed200"  # evaluation seeds: not the tuning seeds 0-2
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

    assert stale_with(lambda r: r["data"].update(variant="cluttered")) == [
        "data.variant was 'cluttered', the recipe now says 'clean'"
    ]
    from results.claims import check_not_stale

    with pytest.raises(ClaimError, match=r"^1 finished claims run\(s\) .* \(data.variant was 'cluttered', .*\); do X$"):
        check_not_stale([spec], "do X")
    assert stale_with(lambda r: r["data"].pop("variant")) == [
        "data.variant was 'cluttered', the recipe now says 'clean'"
    ]  # recorded before variants: the cluttered set
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
    (relative,) = [s for s in plan_runs(load_claims("scalenet"), 1, True, Path("out")) if s.arm == "scalenet"]
    (absolute,) = [s for s in plan_runs(load_claims("scalenet"), 1, True, tmp_path / "out") if s.arm == "scalenet"]
    run = RunDir.create("claims-scalenet-scalenet", path=relative.work_dir)
    run.write_config("", load_training_config(REPO / relative.config, relative.overrides)[0].to_dict())
    run.finish("done")
    assert stale_runs([absolute]) == []
    (other,) = [s for s in plan_runs(load_claims("scalenet"), 1, True, tmp_path / "elsewhere") if s.arm == "scalenet"]
    other.work_dir = absolute.work_dir  # the recorded run, planned from another source run's weights
    assert "model.pretrained was" in stale_runs([other])[0][1]


@pytest.mark.tier("integration")
def test_device_cuda_without_a_gpu_is_one_line(tmp_path, capsys):
    import torch

    from harness.cli import main

    if torch.cuda.is_available():  # on a GPU machine the same call trains there; here it must refuse
        pytest.skip("a GPU is visible: --device cuda is valid here")
    assert main(["claims", "horesnet", "--device", "cuda", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--device cuda: torch sees no GPU here" in err[0]
    assert not (tmp_path / "out").exists()  # refused before any folder or run


def test_submit_trains_the_designs_first_look():
    """`submit --claims` without --seeds submits every design's first look (the plans start at look_every)."""
    from harness.core.choices import CLAIMS_SEEDS

    assert {load_claims(p).design.look_every for p in available_claims()} == {CLAIMS_SEEDS}


# ------------------------------------------------------------------------------------------ reports and runs read
@pytest.mark.parametrize("text", ["[" * 100000, "[1e999999999999]", '[{"claim": 1}]', "{}", "not json"])
def test_a_bad_claims_report_is_one_line(tmp_path, text):
    from results.claims import ClaimError, read_report

    (tmp_path / "claims.json").write_text(text)
    with pytest.raises(ClaimError) as error:
        read_report(tmp_path / "claims.json")
    assert "\n" not in str(error.value) and "claims.json" in str(error.value)


@pytest.mark.parametrize(
    "field,value",
    [
        ("stop_rule", "stop"),
        ("stop_rule", [1]),
        ("trained_seeds", 10**12),
        ("trained_seeds", "5"),
        ("p_value", 2.0),
        ("power", [0.5]),
        ("observed_sd", -1.0),
        ("seeds_needed", 3.5),
        ("val_loss", {"diff": "x"}),
        ("val_loss", [1, 2]),
        ("quick", "yes"),
    ],
)
def test_a_report_whose_numbers_are_not_what_claims_writes_is_one_line(tmp_path, field, value):
    """The committed report reads back; the same report with a per-claim field of the wrong type or range (a
    stopping rule that is no decision, a probability above 1, a spread below 0, ...) is refused in one line."""
    from harness.core.choices import CLAIMS_OUT
    from results.claims import ClaimError, read_report

    records = json.loads((CLAIMS_OUT / "claims.json").read_text())
    assert {r["stop_rule"] for r in records} >= {None, "supported"}
    assert all(r.trained_seeds >= r.stopped_at for r, _ in read_report(CLAIMS_OUT / "claims.json"))
    records[0][field] = value
    (tmp_path / "claims.json").write_text(json.dumps(records))
    with pytest.raises(ClaimError) as error:
        read_report(tmp_path / "claims.json")
    assert "\n" not in str(error.value) and field in str(error.value)


def test_a_claims_run_whose_meta_json_is_not_json_is_not_done(tmp_path):
    from results.claims import RunSpec, run_done

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "meta.json").write_text("{not json")
    spec = RunSpec("deit", "a", 0, "configs/x.py", [], tmp_path / "run")
    assert run_done(spec) is False
    (tmp_path / "run" / "meta.json").unlink()
    os.mkfifo(tmp_path / "run" / "meta.json")
    assert _in_time(lambda: run_done(spec)) is False


def test_claims_never_execute_a_config_a_claims_file_names_outside_configs(tmp_path, hostile_config):
    """``claims PATH --status`` and ``submit --claims`` load the arms' configs; a claims file is data."""
    from results import claims

    config, marker = hostile_config
    source = (ROOT / "results/tables/claims/horesnet.yaml").read_text()
    first_arm = "configs/claims/horesnet10-euler-w16_1xb64-4e_glyphs-16px.py"
    assert first_arm in source
    for name in names_out_of_configs(config):
        path = tmp_path / "horesnet.yaml"
        path.write_text(source.replace(first_arm, name))
        with pytest.raises(claims.ClaimError, match="is refused: a data file names a config by its repository path"):
            claims.check_claims(claims.load(path), quick=True)
        assert not marker.exists()
