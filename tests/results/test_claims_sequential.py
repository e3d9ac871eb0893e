"""The claims' group-sequential design (results/sequential.py, results/claims.py): the plan's false-positive rate
under the null, and verdicts on data with a known effect, a reversed one and none."""
import numpy as np

from results import sequential as seq
from results.claims import Claim, Design, PaperSource, evaluate

LOOKS = (3, 6, 9)


def test_the_sequential_plan_keeps_its_false_positive_rate():
    """20,000 null experiments, paired t at 3, 6 and 9 seeds against the plan's boundaries (vectorised)."""
    rng = np.random.default_rng(1)
    d = rng.standard_normal((20_000, LOOKS[-1])) * 3.0
    q = seq.t_boundaries(0.05, LOOKS, [n - 1 for n in LOOKS])
    rejected = np.zeros(len(d), bool)
    for k, n in enumerate(LOOKS):
        x = d[:, :n]
        t = x.mean(1) / (x.std(1, ddof=1) / np.sqrt(n))
        rejected |= np.abs(t) >= q[k]
    assert abs(rejected.mean() - 0.05) < 0.01, rejected.mean()
    # and a fixed-sample t-test at each look without spending would not: the plan is what keeps alpha
    naive = np.zeros(len(d), bool)
    for n in LOOKS:
        x = d[:, :n]
        naive |= np.abs(x.mean(1) / (x.std(1, ddof=1) / np.sqrt(n))) >= __import__("scipy").stats.t.isf(0.025, n - 1)
    assert naive.mean() > 0.07


def claim(kind="better", margin=3.0, cid="c"):
    return Claim("p", cid, "quote", PaperSource("1", "top1", {"a": 1}), "base", "treat", kind=kind, margin=margin,
                 power={"sd": 1.0, "sd_from": "", "effect": 3.0, "effect_from": ""})


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
    assert stop_decision(c, values, (3,), 0.05) == "supported"        # a one-look plan decides
    assert stop_decision(c, values, (3, 6, 9), 0.05) is None          # the sequential plan waits for more seeds
