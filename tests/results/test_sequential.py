"""The claims' group-sequential design (results/sequential.py, results/claims.py): the plan's false-positive rate
under the null, and verdicts on data with a known effect, a reversed one and none."""

from dataclasses import replace

import numpy as np
import pytest

from results import sequential as seq
from results.claims import Claim, Design, PaperSource, available_claims, evaluate, load_claims, plan_looks

LOOKS = (3, 6, 9)


def null_rate(kind, test, sd, shift, design, looks, experiments=300, margin=3.0):
    """The share of ``experiments`` simulated null experiments in which the code that issues verdicts
    (results.claims.evaluate: repeated p-values, Holm over the design's family, the repeated intervals) reaches a
    wrong positive verdict: "supported" (better, no_worse) or "equivalent" (similar). ``shift``: the true effect
    on the null's boundary (0 for better, -margin for no_worse, +margin for similar); Welch arms share nothing."""
    rng = np.random.default_rng(7)
    c = claim(kind, margin, test=test)
    wrong = 0
    for _ in range(experiments):
        base = 80 + rng.standard_normal(looks[-1]) * (3.0 if test == "welch" else 0.0)
        treat = base + shift + rng.standard_normal(looks[-1]) * sd
        if test == "welch":
            treat = 80 + shift + rng.standard_normal(looks[-1]) * sd
        values = {("p", "base"): dict(enumerate(base)), ("p", "treat"): dict(enumerate(treat))}
        verdict = evaluate([(c, design)], values, {("p", "c"): looks})[0].verdict
        wrong += verdict == {"better": "supported", "no_worse": "supported", "similar": "equivalent"}[kind]
    return wrong / experiments


def shipped_design():
    """The alpha and the looks of the shipped plans (every file's design: one alpha, looks every look_every)."""
    designs = [load_claims(p).design for p in available_claims()]
    assert len({d.alpha for d in designs}) == 1
    d = designs[0]
    return Design(alpha=d.alpha, family=1, look_every=d.look_every, max_seeds=d.max_seeds), tuple(
        range(d.look_every, d.max_seeds + 1, d.look_every)
    )


@pytest.mark.parametrize(
    "kind, test, sd, shift",
    [
        ("better", "paired", 2.0, 0.0),
        ("better", "welch", 3.0, 0.0),
        ("no_worse", "paired", 1.0, -3.0),
        ("similar", "paired", 0.5, 3.0),
    ],
)
def test_the_verdict_code_keeps_the_plans_false_positive_rate(kind, test, sd, shift):
    """300 null experiments per test through evaluate (repeated p, Holm, the repeated interval), at the shipped
    plans' alpha and looks: a directional claim is one-sided at alpha, so its false "supported" rate is about
    alpha; TOST's false "equivalent" at the margin at most alpha. 300 experiments (a minute of CPU in all: each
    evaluate bisects its repeated p-value over the spending plan): the rate's standard error is 0.013 at 0.05."""
    design, looks = shipped_design()
    rate = null_rate(kind, test, sd, shift, design, looks)
    assert rate <= design.alpha + 0.035, rate


def test_holm_keeps_the_familywise_rate_over_the_files_family():
    """Three null claims of one family (m = 3 in the design): at least one false "supported" in at most alpha of
    the experiments, through evaluate's Holm (300 experiments, a bound 3 standard errors above alpha; 600 gave
    0.053 familywise and 0.018 per claim when written)."""
    design, looks = shipped_design()
    design = Design(alpha=design.alpha, family=3, look_every=design.look_every, max_seeds=design.max_seeds)
    rng = np.random.default_rng(11)
    claims = [claim(cid=f"c{i}") for i in range(3)]
    any_wrong = 0
    for _ in range(300):
        values = {}
        for i in range(3):
            base = 80 + rng.standard_normal(looks[-1])
            values[("p", f"b{i}")], values[("p", f"t{i}")] = (
                dict(enumerate(base)),
                dict(enumerate(base + rng.standard_normal(looks[-1]) * 2)),
            )
        pairs = [(replace(c, baseline=f"b{i}", treatment=f"t{i}"), design) for i, c in enumerate(claims)]
        results = evaluate(pairs, values, {("p", c.id): looks for c in claims})
        any_wrong += any(r.verdict == "supported" for r in results)
    assert any_wrong / 300 <= design.alpha + 0.038


def test_the_family_is_the_files_whatever_the_call_names():
    """One claim of a family of three is read at alpha/3 (Holm with the missing members at p = 1), as in the
    whole run: naming fewer papers or claims does not make a verdict easier."""
    diffs = [1.0, -0.2, 2.0, 0.5, 1.7]  # one-sided p 0.033: two-sided (0.066) it would not be supported alone
    base = [75.0, 76.0, 74.0, 75.5, 74.5]
    values = {
        ("p", "base"): dict(enumerate(base)),
        ("p", "treat"): {i: b + d for i, (b, d) in enumerate(zip(base, diffs))},
    }
    c = claim(margin=0.5)
    alone = evaluate([(c, Design(family=1))], values, {("p", "c"): (5,)})[0]
    in_family = evaluate([(c, Design(family=3))], values, {("p", "c"): (5,)})[0]
    assert alone.p_value == in_family.p_value and 0.05 / 3 < alone.p_value < 0.05
    assert alone.verdict == "supported" and in_family.verdict != "supported"


def test_a_seeds_cap_keeps_the_plans_boundaries():
    """`--seeds 5` under a 5/10 plan trains 5 seeds and reads them against the plan's first (strict) boundary --
    not a one-look plan at 5 that spends the whole alpha."""
    from results.claims_run import plan

    f = load_claims("sret")
    plans, targets, _ = plan([f], 5, False)
    for c in f.claims:
        full, _ = plan_looks(c, f.design)
        assert plans[(c.paper, c.id)] == full and targets[(c.paper, c.id)] == tuple(sorted({min(n, 5) for n in full}))


def claim(kind="better", margin=3.0, cid="c", test="paired"):
    return Claim(
        "p",
        cid,
        "quote",
        PaperSource("1", "top1", {"a": 1}),
        "base",
        "treat",
        kind=kind,
        margin=margin,
        test=test,
        power={"sd": 1.0, "sd_from": "", "effect": 3.0, "effect_from": ""},
    )


def verdict_of(diffs, kind="better", margin=3.0):
    rng = np.random.default_rng(0)
    base = 80 + rng.standard_normal(len(diffs)) * 3
    values = {("p", "base"): dict(enumerate(base)), ("p", "treat"): dict(enumerate(base + np.asarray(diffs)))}
    c = claim(kind, margin)
    return evaluate([(c, Design())], values, {("p", "c"): LOOKS})[0]


def test_a_known_effect_is_supported_and_a_reversed_one_contradicted():
    rng = np.random.default_rng(2)
    noise = rng.standard_normal(9) * 0.5
    assert verdict_of(5 + noise).verdict == "supported"
    assert verdict_of(-5 + noise).verdict == "contradicted"


def test_no_effect_with_a_tight_spread_is_equivalent_and_a_wide_one_inconclusive():
    rng = np.random.default_rng(3)
    assert verdict_of(rng.standard_normal(9) * 0.3, kind="similar", margin=1.0).verdict == "equivalent"
    assert verdict_of(rng.standard_normal(9) * 0.3, kind="better", margin=1.0).verdict == "equivalent"
    wide = verdict_of(rng.standard_normal(9) * 8, kind="better", margin=1.0)
    assert wide.verdict == "inconclusive" and "rule out" in wide.ruled_out


def test_holm_steps_down():
    assert seq.holm([0.01, 0.04, 0.03, 0.005], 0.05) == [0.05 / 3, None, None, 0.05 / 4]
    assert seq.holm([0.001, 0.02], 0.05) == [0.025, 0.05]


def test_a_look_uses_the_whole_plans_boundaries():
    """At 3 of 3/6/9 seeds the boundary is O'Brien-Fleming's strict first one, not a fixed-sample test at 3."""
    from results.claims import stop_decision

    c = claim()
    base = [80.0, 81.0, 79.0]
    values = {"base": dict(enumerate(base)), "treat": {i: b + d for i, (b, d) in enumerate(zip(base, [4, 5, 6]))}}
    assert stop_decision(c, Design(), values, (3,)) == "supported"  # a one-look plan decides
    assert stop_decision(c, Design(), values, (3, 6, 9)) is None  # the sequential plan waits for more seeds


def test_the_planners_power_is_the_verdict_codes():
    """The power the plan is sized with (seq.power, vectorised) is the rate at which evaluate -- the code that
    issues verdicts -- says "supported" on data with that effect and spread (300 experiments: standard error
    0.03 near 0.5)."""
    design, looks = shipped_design()
    planned = seq.power(2.0, 2.5, design.alpha, looks)
    rng = np.random.default_rng(5)
    c = claim(margin=0.5)
    supported = 0
    for _ in range(300):
        base = 80 + rng.standard_normal(looks[-1])
        values = {
            ("p", "base"): dict(enumerate(base)),
            ("p", "treat"): dict(enumerate(base + 2.0 + rng.standard_normal(looks[-1]) * 2.5)),
        }
        supported += evaluate([(c, design)], values, {("p", "c"): looks})[0].verdict == "supported"
    assert 0.2 < planned < 0.9 and abs(supported / 300 - planned) < 0.09, (supported / 300, planned)


def test_a_descriptive_claim_gets_an_interval_and_no_verdict():
    """Outside the family: a clear effect is reported with its interval, without a verdict or a Holm slot."""
    c = replace(claim(), tier="descriptive")
    base = [80.0, 81.0, 79.0, 80.5, 79.5]
    values = {("p", "base"): dict(enumerate(base)), ("p", "treat"): {i: b + 5 for i, b in enumerate(base)}}
    result = evaluate([(c, Design(family=0))], values, {("p", "c"): (5,)})[0]
    assert result.verdict == "no verdict" and result.interval.low is not None and result.p_value is None
    assert any("descriptive" in note for note in result.notes)
