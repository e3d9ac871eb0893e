"""Efficiency claims (results/claims.py, results/claims_status.py): the papers' throughput and memory claims as
confirmatory claims -- loaded from the claims files with their bounds, tested on per-round log ratios by the code
that issues every verdict (evaluate -> Holm over the file's family), measured by bench's machinery."""

import math
import textwrap

import numpy as np
import pytest

from results import claims as cl
from results.claims import ClaimError, Design, evaluate, load, load_claims, plan_looks

HEADER = """\
paper: horesnet
setting: "a test"
design: {alpha: 0.05, family: FAMILY, look_every: 5, max_seeds: 10, seeds_from: 200}
arms: {}
"""
BENCH = """\
bench:
  batch_size: 2
  rounds: 6
  models:
    a: {model: resnet10t, size: 32}
    b: {model: resnet10t, size: 32, kwargs: {drop_rate: 0.0}}
"""
CLAIM = """\
  - id: ID
    tier: confirmatory
    measure: MEASURE
    mode: infer
    quote: "q"
    where: "Table 2"
    paper: {table: "2", column: time, rows: {Euler: 1, RK-4: 1}}
    kind: KIND
    margin: 0.1
    baseline: a
    treatment: b
    power: {sd: 0.05, sd_from: "assumed", effect: 0.3, effect_from: "the paper"}
"""


def write(tmp_path, text):
    path = tmp_path / "horesnet.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def efficiency_file(tmp_path, claims=(("t", "throughput", "better"),), bench=BENCH, family=None):
    body = "".join(CLAIM.replace("ID", i).replace("MEASURE", m).replace("KIND", k) for i, m, k in claims)
    text = HEADER.replace("FAMILY", str(len(claims) if family is None else family)) + bench + "claims:\n" + body
    return load(write(tmp_path, text))


# ----------------------------------------------------------------------------------------- the files
def test_the_shipped_files_hold_the_papers_efficiency_claims_in_their_families():
    """Every paper with an efficiency sentence has it as a confirmatory claim of its Holm family, measured on
    models of the file's bench section, with its margin on the ratio scale (10 %)."""
    wanted = {"stepsnet": 3, "horesnet": 3, "sret": 1, "transnext": 1}
    for paper, count in wanted.items():
        f = load_claims(paper)
        mine = [c for c in f.claims if c.measure]
        assert len(mine) == count, paper
        assert all(c.tier == "confirmatory" for c in mine)
        assert f.design.family == sum(c.tier == "confirmatory" for c in f.claims)
        for c in mine:
            assert cl.split_bench_key(c.baseline)[0] in f.bench.models and c.mode in ("infer", "train")
            assert cl.ratio_margin(c) == pytest.approx(0.10)
            assert f.arms_of(c) == []  # measured, never trained


def test_a_throughput_claim_plans_one_look_at_the_files_rounds(tmp_path):
    f = efficiency_file(tmp_path)
    looks, power = plan_looks(f.claims[0], f.design, f.bench)
    assert looks == (6,) and 0.5 < power <= 1.0
    f = efficiency_file(tmp_path, claims=(("m", "memory", "better"),))
    assert plan_looks(f.claims[0], f.design, f.bench) == ((1,), 1.0)


@pytest.mark.parametrize(
    "change, words",
    [
        (("measure: MEASURE", "measure: speed"), "measure 'speed'"),
        (("baseline: a", "baseline: c"), "baseline 'c' is not a model of the file's bench section"),
        (("margin: 0.1", "margin: 1.5"), "'margin'"),
        (("margin: 0.1", "margin: .nan"), "'margin'"),
        (("mode: infer", "mode: both"), "mode 'both'"),
        (("    power:", "    test: welch\n    power:"), "paired by round"),
    ],
)
def test_bad_efficiency_claims_are_one_line(tmp_path, change, words):
    global CLAIM
    saved = CLAIM
    CLAIM = CLAIM.replace(*change)
    try:
        with pytest.raises(ClaimError, match=words.replace("(", r"\(").replace(")", r"\)")) as e:
            efficiency_file(tmp_path)
    finally:
        CLAIM = saved
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "bench, words",
    [
        (BENCH.replace("rounds: 6", "rounds: 1000"), "rounds"),
        (BENCH.replace("batch_size: 2", "batch_size: 0"), "batch_size"),
        (BENCH.replace("size: 32}", "size: 100000}", 1), "size"),
        ("bench: {models: {}}\n", "'models'"),
    ],
)
def test_a_bad_bench_section_is_one_line(tmp_path, bench, words):
    with pytest.raises(ClaimError, match=words):
        efficiency_file(tmp_path, bench=bench)


# ----------------------------------------------------------------------------------------- verdicts
def verdicts(f, values, design=None):
    design = design or f.design
    looks = {(c.paper, c.id): plan_looks(c, design, f.bench)[0] for c in f.claims}
    return {r.claim.id: r for r in evaluate([(c, design) for c in f.claims], values, looks)}


def rounds(ratio, spread, n=6, seed=0):
    """Per-round log throughputs of a baseline and a treatment ``ratio`` times as fast, ``spread`` of noise."""
    rng = np.random.default_rng(seed)
    base = 3.0 + rng.standard_normal(n) * 0.1  # the machine's load moves both models of a round alike
    return dict(enumerate(base)), dict(enumerate(base + math.log(ratio) + rng.standard_normal(n) * spread))


def test_a_speedup_is_supported_a_slowdown_contradicted_and_no_change_equivalent(tmp_path):
    f = efficiency_file(tmp_path, claims=(("t", "throughput", "better"),))
    base, treat = rounds(1.35, 0.03)
    r = verdicts(f, {("horesnet", "a:throughput:infer"): base, ("horesnet", "b:throughput:infer"): treat})["t"]
    assert r.verdict == "supported" and 1.2 < math.exp(r.interval.low) < 1.35 < math.exp(r.interval.high)
    base, treat = rounds(0.7, 0.03)
    r = verdicts(f, {("horesnet", "a:throughput:infer"): base, ("horesnet", "b:throughput:infer"): treat})["t"]
    assert r.verdict == "contradicted"
    base, treat = rounds(1.0, 0.01)
    r = verdicts(f, {("horesnet", "a:throughput:infer"): base, ("horesnet", "b:throughput:infer"): treat})["t"]
    assert r.verdict == "equivalent"  # within the 10 % margin either way
    assert "x [" in r.summary() and "→ equivalent" in r.summary()


def test_an_exact_memory_ratio_decides_against_its_margin(tmp_path):
    """Memory is one exact value per model (the allocator's peak): the interval is the point."""
    f = efficiency_file(tmp_path, claims=(("m", "memory", "better"), ("s", "memory", "similar")))

    def values(base_mib, treat_mib):
        return {
            ("horesnet", "a:memory:infer"): {0: -math.log(base_mib)},
            ("horesnet", "b:memory:infer"): {0: -math.log(treat_mib)},
        }

    r = verdicts(f, values(150.0, 100.0))
    assert r["m"].verdict == "supported" and math.exp(r["m"].interval.diff) == pytest.approx(1.5)
    assert r["m"].interval.low == r["m"].interval.high
    assert r["s"].verdict == "contradicted"  # 1.5x is outside the 10 % of "the same memory"
    r = verdicts(f, values(100.0, 103.0))  # exact: 3 % more memory is within "the same" and not "less"
    assert r["s"].verdict == "equivalent" and r["m"].verdict == "contradicted"


def test_an_efficiency_claim_shares_holm_with_the_files_other_claims(tmp_path):
    """The family is the file's m, whatever the call holds: alone in a family of 4, a claim whose repeated p is
    between alpha/4 and alpha is not rejected; in a family of 1 it is."""
    base, treat = rounds(1.12, 0.06, seed=3)
    values = {("horesnet", "a:throughput:infer"): base, ("horesnet", "b:throughput:infer"): treat}
    f = efficiency_file(tmp_path)
    one = verdicts(f, values)["t"]
    assert 0.05 / 4 < one.p_value < 0.05 and one.level == 0.05
    four = verdicts(f, values, Design(alpha=0.05, family=4, look_every=5, max_seeds=10, seeds_from=200))["t"]
    assert four.level is None and four.verdict != "supported"


@pytest.mark.tier("integration")
def test_the_verdict_code_keeps_alpha_for_throughput_claims_under_the_null(tmp_path):
    """300 null experiments (ratio 1, the shipped rounds and a 5 % per-round spread) through evaluate -> Holm:
    "supported" about alpha of the time (one-sided); and for "similar", ratios on the margin (1.1x) are called
    "equivalent" at most alpha of the time."""
    f = efficiency_file(tmp_path, claims=(("t", "throughput", "better"),))
    g = efficiency_file(tmp_path, claims=(("t", "throughput", "similar"),))
    wrong = {"better": 0, "similar": 0}
    for seed in range(300):
        base, treat = rounds(1.0, 0.05, seed=seed)
        values = {("horesnet", "a:throughput:infer"): base, ("horesnet", "b:throughput:infer"): treat}
        wrong["better"] += verdicts(f, values)["t"].verdict == "supported"
        base, treat = rounds(1.1, 0.05, seed=seed)
        values = {("horesnet", "a:throughput:infer"): base, ("horesnet", "b:throughput:infer"): treat}
        wrong["similar"] += verdicts(g, values)["t"].verdict == "equivalent"
    assert wrong["better"] / 300 <= 0.05 + 0.035, wrong
    assert wrong["similar"] / 300 <= 0.05 + 0.035, wrong


# ----------------------------------------------------------------------------------------- measuring
@pytest.mark.tier("integration")
def test_bench_measures_the_claims_models_in_paired_rounds(tmp_path):
    """harness.measure.bench times both models in the same rounds: one log throughput per round and model, one
    memory value per model and mode, the machine named."""
    f = efficiency_file(
        tmp_path,
        claims=(("t", "throughput", "better"), ("m", "memory", "better")),
        bench=BENCH.replace("rounds: 6", "rounds: 3"),
    )
    values, hardware = cl.measure_efficiency(f, "cpu")
    assert set(values) == {
        ("horesnet", "a:throughput:infer"),
        ("horesnet", "b:throughput:infer"),
        ("horesnet", "a:memory:infer"),
        ("horesnet", "b:memory:infer"),
    }
    assert len(values[("horesnet", "a:throughput:infer")]) == 3
    assert list(values[("horesnet", "a:memory:infer")]) == [0]
    assert all(math.isfinite(v) for series in values.values() for v in series.values())
    assert "cpu" in hardware and "3 interleaved rounds" in hardware and "batch 2" in hardware


def test_efficiency_only_keeps_the_family_and_refuses_a_paper_without_any():
    from harness.commands.claims import run
    from harness.core.errors import DepthbenchError
    from results.claims_status import only_efficiency

    f = only_efficiency(load_claims("sret"))
    assert [c.id for c in f.claims] == ["recursion-1x-faster-than-2x"] and f.design.family == 3
    with pytest.raises(DepthbenchError, match="no efficiency claims"):
        run(["scalenet"], efficiency=True)


def test_the_status_line_says_efficiency_claims_are_measured_not_reduced(tmp_path):
    f = efficiency_file(tmp_path)
    base, treat = rounds(1.35, 0.03)
    r = verdicts(f, {("horesnet", "a:throughput:infer"): base, ("horesnet", "b:throughput:infer"): treat})["t"]
    line = cl.status_line("horesnet", [r])
    assert "1 efficiency claim measured on the paper's models" in line and "reduced setting" not in line


def test_an_efficiency_only_report_says_it_measured_the_papers_own_models(tmp_path):
    """claims.md of `claims --efficiency` (results/claims-efficiency): no trained number, so its header and each
    paper's section name the papers' own models, never a reduced setting."""
    from results.claims_run import write_report

    f = efficiency_file(tmp_path)
    base, treat = rounds(1.35, 0.03)
    r = verdicts(f, {("horesnet", "a:throughput:infer"): base, ("horesnet", "b:throughput:infer"): treat})["t"]
    write_report([r], [f], [], tmp_path / "out", quick=False)
    text = (tmp_path / "out" / "claims.md").read_text()
    title, _, first = text.splitlines()[:3]
    assert title.startswith("# The papers' efficiency claims, measured on the papers' own models")
    assert "nothing is at a reduced setting" in first.lower() and "Setting: " not in text
    assert "\nModels: a (resnet10t), b (resnet10t)\n" in text  # the file's bench section has no note


def test_the_measurement_is_the_folders_one_look_read_back_by_later_calls(tmp_path, monkeypatch):
    """results/claims_run.py efficiency_values: the first call measures and writes out/efficiency/<paper>.json,
    a later call over the same folder reads the same values and machine line back without measuring (adding seeds
    or rewriting the report draws no second look); a changed plan (here --quick) measures again; an unreadable
    file is one line saying what to do."""
    from harness.core.errors import DepthbenchError
    from results import claims_run

    f = efficiency_file(tmp_path, claims=(("t", "throughput", "better"), ("m", "memory", "better")))
    measured = []

    def fake_measure(claims, device=None, quick=False, progress=None):
        measured.append(quick)
        values = {(claims.paper, k): {0: -1.5, 1: -1.25} for k in ("a:throughput:infer", "b:throughput:infer")}
        return values, f"a machine, call {len(measured)}"

    monkeypatch.setattr(claims_run.cl, "measure_efficiency", fake_measure)
    out = tmp_path / "out"
    out.mkdir()
    first = claims_run.efficiency_values(f, out, "cpu", False)
    assert measured == [False] and (out / "efficiency" / "horesnet.json").is_file()
    assert (
        claims_run.efficiency_values(f, out, "cpu", False)
        == first
        == (
            {
                ("horesnet", "a:throughput:infer"): {0: -1.5, 1: -1.25},
                ("horesnet", "b:throughput:infer"): {0: -1.5, 1: -1.25},
            },
            "a machine, call 1",
        )
    )
    assert measured == [False]
    assert claims_run.efficiency_values(f, out, "cpu", True)[1] == "a machine, call 2" and measured == [False, True]
    (out / "efficiency" / "horesnet.json").write_text('{"key": ')
    with pytest.raises(DepthbenchError, match="delete it and the efficiency claims are measured again"):
        claims_run.efficiency_values(f, out, "cpu", True)
