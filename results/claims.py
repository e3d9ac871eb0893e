"""The papers' claims at reduced scale: definitions (``results/tables/claims/<paper>.yaml``), a pre-registered
design per claim, statistics and verdicts.

A claims file quotes the paper and fixes the design before any evaluated run (docs/claims.md has the whole schema)::

    paper: horesnet
    setting: "glyphs 16x16 (53 classes, held-out typefaces), 5 epochs, batch 64, ..."   # the reduced setting
    design: {alpha: 0.05, family: 1, target_power: 0.8, look_every: 5, max_seeds: 10, seeds_from: 200,
             tuning_seeds: [0, 1, 2]}               # family: m, the confirmatory claims (Holm's family)
    arms:
      euler18: {config: configs/claims/horesnet18-euler-w16_1xb64-5e_glyphs-16px.py, label: "Euler x8"}
      shallow: {config: ..., role: source}          # trained only to initialise another arm (ScaleNet)
      deep: {config: ..., init_from: shallow}       # model.pretrained = the source arm's run (same seed)
    claims:
      - id: rk4-vs-euler-18
        tier: confirmatory                          # confirmatory: a verdict, Holm over the file's family;
                                                    # descriptive: an interval, no verdict
        quote: "After that, higher order schemes are showing more and more apparent advantages ..."  # verbatim
        where: "Table 3 caption"
        paper: {table: "3", column: top1, rows: {"Euler X8": 92.68, "RK4 X2": 92.98}}
        kind: better                                # better | no_worse | similar (the paper's claim)
        margin: 3.0                                 # points: no_worse/similar margin; for better the
                                                    # smallest effect worth detecting (an "equivalent" verdict)
        test: paired                                # paired (same seed, data order, init) | welch
        baseline: euler18
        treatment: rk4-18
        minus: {baseline: euler10, treatment: rk4-10}   # optional: an interaction (the gain minus this gain)
        power: {sd: 9.9, sd_from: "...", effect: 3.0, effect_from: "..."}   # the power analysis' inputs
        equal: {params: 0.0, flops: 0.0}            # audited before training: relative gap allowed
        budget_differs: [epochs]                    # budget keys the arms may differ in (ScaleNet's 3E)
    exploratory: [{id: ..., text: ..., why: ...}]   # listed in the report, never trained, no verdict
    quick: [epochs=1, data.train_subset=2000]       # --quick: the same overrides on every arm

The numbers under ``paper`` are copied from ``results/tables/<paper>.yaml`` and checked against it when loaded.

The design (:mod:`results.sequential`): looks every ``look_every`` seeds per arm up to the seed count the power
analysis gives (``power.sd`` measured on the tuning seeds, ``power.effect`` the paper's effect or the smallest
worth detecting; at most ``max_seeds``), Lan-DeMets O'Brien-Fleming-type alpha spending, repeated confidence
intervals of the paired per-seed difference (Welch where the arms share no initialisation), one-sided for "better"
and "no worse", TOST for "similar", Holm's step-down over each file's confirmatory family (its size in the file).
Evaluation seeds start at ``seeds_from``, disjoint from the ``tuning_seeds`` the recipes were tuned on. Verdicts:
*supported*, *contradicted*, *equivalent* (within the margin) or *inconclusive* with the largest effect the data
rule out.

Fairness (:func:`check_equal_budget`): the compared arms' resolved configs must agree on every key of
:data:`BUDGET_KEYS` (epochs, batch, optimizer, schedule, data, augmentation, EMA, distillation, precision,
evaluation interval) except those the claim lists in ``budget_differs``; only ``model`` may differ otherwise.
No training here: the functions take per-seed metric values and per-epoch curves and return dataclasses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
from scipy import stats

from harness.core.config import load_config
from harness.core.errors import DepthbenchError
from harness.core.files import BadFile, read_json
from harness.core.rundir import RunDir
from harness.engine.builders import load_training_config
from harness.engine.models import build_model, model_kwargs
from harness.measure import bench as hb
from harness.measure.flops import count_flops, count_params
from results import sequential as seq

# the definitions and the report's reading (no engine: `claims --status`), part of this module's interface
from results.claims_status import (
    ARM_FIELDS,
    AUDIT_MEASURES,
    BUDGET_KEYS,
    CLAIM_FIELDS,
    CLAIMS_DIR,
    DESIGN_FIELDS,
    FILE_FIELDS,
    KINDS,
    MEASURES,
    METRICS,
    POWER_FIELDS,
    REPO,
    SOURCE_FIELDS,
    TESTS,
    VERDICTS,
    Arm,
    ArmStats,
    BenchModel,
    BenchPlan,
    Claim,
    ClaimError,
    ClaimResult,
    ClaimsFile,
    Design,
    Exploratory,
    Interval,
    PaperSource,
    available_claims,
    bench_key,
    load,
    load_claims,
    ratio_margin,
    read_report,
    seeds_per_arm,
    split_bench_key,
    status_line,
)


# ----------------------------------------------------------------------------------------- fairness
def budget_view(cfg) -> dict:
    """The keys of a resolved config that a fair comparison keeps equal (plain data, for comparing and printing)."""
    return {key: _plain(cfg.get(key)) for key in BUDGET_KEYS}


def check_equal_budget(claim: Claim, configs: Mapping[str, Mapping]) -> None:
    """Refuse a claim whose two arms' resolved configs differ in a :data:`BUDGET_KEYS` key (one line, the first
    difference). ``configs``: arm name -> resolved config (an MMEngine Config or a plain dict). In an interaction
    (``minus``) each pair is compared whole; ``budget_differs`` then names what may differ between the two pairs
    (e.g. each depth's own tuned epochs). An efficiency claim trains nothing: no budget to compare."""
    if claim.measure:
        return
    pairs = [(claim.baseline, claim.treatment, claim.budget_differs)]
    if claim.minus:
        pairs = [
            (claim.baseline, claim.treatment, ()),
            (claim.minus["baseline"], claim.minus["treatment"], ()),
            (claim.baseline, claim.minus["baseline"], claim.budget_differs),
        ]
    for a, b, differs in pairs:
        _check_pair_budget(claim, a, b, configs, differs)


def _check_pair_budget(claim: Claim, a: str, b: str, configs: Mapping[str, Mapping], differs=()) -> None:
    base, treat = budget_view(configs[a]), budget_view(configs[b])
    for key in [k for k in BUDGET_KEYS if k not in differs]:
        diff = _first_difference(base[key], treat[key], key)
        if diff:
            path, va, vb = diff
            raise ClaimError(
                f"claim {claim.paper}/{claim.id}: the arms differ in {path} ({a}: {va!r}, "
                f"{b}: {vb!r}); both arms need the same data, epochs, batch, optimizer "
                "budget and augmentation — only the model may differ"
            )


def _first_difference(a, b, path: str, recorded_only: bool = False):
    """The first ``(path, a's value, b's value)`` where ``a`` and ``b`` differ, or None. ``recorded_only``: ``a`` is
    a run's record, and only the keys of ``b``'s mappings that it recorded are compared (list items whole)."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = [k for k in sorted(b) if k in a] if recorded_only else sorted(set(a) | set(b))
        for key in keys:
            diff = _first_difference(a.get(key, "<unset>"), b.get(key, "<unset>"), f"{path}.{key}", recorded_only)
            if diff:
                return diff
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            diff = _first_difference(x, y, f"{path}[{i}]")
            if diff:
                return diff
        return None
    return None if a == b else (path, a, b)


def resolve_configs(claims: ClaimsFile, quick: bool = False) -> dict:
    """Each arm's resolved config (``_base_`` and overrides applied; the ``quick`` overrides too)."""
    return {
        name: load_config(REPO / arm.config, list(arm.overrides) + (list(claims.quick) if quick else []))
        for name, arm in claims.arms.items()
    }


def check_audit(claim: Claim, sizes: Mapping[str, Mapping[str, float]]) -> dict:
    """Refuse a claim whose arms differ in parameters/FLOPs by more than ``claim.equal`` allows, or whose
    treatment is not smaller/larger where ``claim.expected`` says so. ``sizes``: arm -> {"params": n, "flops": n}
    (harness/measure/flops.py). Returns the relative gaps (treatment vs baseline) of every measure in ``sizes``."""
    base, treat = sizes[claim.baseline], sizes[claim.treatment]
    gaps = {m: treat[m] / base[m] - 1.0 for m in AUDIT_MEASURES if m in base and m in treat}
    for measure in set(claim.equal) | set(claim.expected):
        if measure not in gaps:
            raise ClaimError(
                f"claim {claim.paper}/{claim.id}: no {measure} count for {claim.baseline} and "
                f"{claim.treatment}; the audit needs it"
            )
    for measure, allowed in claim.equal.items():
        if abs(gaps[measure]) > allowed:
            raise ClaimError(
                f"claim {claim.paper}/{claim.id}: {claim.treatment} has {gaps[measure]:+.1%} {measure} "
                f"vs {claim.baseline} ({treat[measure]:,.0f} vs {base[measure]:,.0f}); the claim "
                f"compares at equal {measure} (±{allowed:.0%}): fix the widths in the arms' configs"
            )
    for measure, way in claim.expected.items():
        if (gaps[measure] >= 0) if way == "lower" else (gaps[measure] <= 0):
            raise ClaimError(
                f"claim {claim.paper}/{claim.id}: {claim.treatment} should have {way} {measure} than "
                f"{claim.baseline} but has {gaps[measure]:+.1%} ({treat[measure]:,.0f} vs "
                f"{base[measure]:,.0f}); check the arms' configs"
            )
    return gaps


def check_claims(claims: ClaimsFile, quick: bool = False) -> dict:
    """Every claim of ``claims`` is a fair comparison (:func:`check_equal_budget`) and, where it says so, of equal
    (or the expected) size, audited with the one FLOP counter (:func:`check_audit`): one line on the first that is
    not, before anything trains or is submitted. Returns each arm's resolved config."""
    configs = resolve_configs(claims, quick)
    for claim in [c for c in claims.claims if not c.measure]:  # efficiency claims train nothing
        check_equal_budget(claim, configs)
        pairs = [claim] + (
            [replace(claim, baseline=claim.minus["baseline"], treatment=claim.minus["treatment"], minus={})]
            if claim.minus
            else []
        )
        for pair in pairs:
            if pair.equal or pair.expected:
                check_audit(pair, {arm: arm_size(configs[arm]) for arm in (pair.baseline, pair.treatment)})
    return configs


def arm_size(cfg) -> dict:
    """Parameters and FLOPs (MACs) of an arm's model at its input size, on the meta device."""
    model = build_model(cfg.model.name, **model_kwargs(cfg))
    return {"params": count_params(model), "flops": count_flops(model, cfg.data.input_size).total}


# ----------------------------------------------------------------------------------------- runs
@dataclass
class RunSpec:
    """One training run of a comparison: an arm's config and seed, in ``<out>/runs/<paper>/<arm>/seed<k>`` -- where
    ``depthbench claims`` looks for it, whether it trained it itself or a Slurm array did."""

    paper: str
    arm: str
    seed: int
    config: str
    overrides: list
    work_dir: Path
    needs: Path | None = None  # the source run's best.pth that initialises this one (ScaleNet)

    @property
    def console(self) -> Path:
        return self.work_dir.parent / f"{self.work_dir.name}.console.txt"


def plan_runs(
    claims: ClaimsFile,
    seeds: int,
    quick: bool,
    out: Path,
    only: Iterable[Claim] | None = None,
    pilot: bool = False,
) -> list[RunSpec]:
    """One run per (arm a claim of ``only`` -- default all -- needs, evaluation seed: the design's
    ``seeds_from`` + 0 .. ``seeds`` - 1; ``pilot``: the first ``seeds`` of its ``pilot_seeds``); sources first, each
    arm initialised from its source's same seed."""
    needed = {}
    for claim in claims.claims if only is None else only:
        for arm in claims.arms_of(claim):
            needed[arm.name] = arm
    design = claims.design
    seed_list = design.pilot_seeds[:seeds] if pilot else range(design.seeds_from, design.seeds_from + seeds)
    specs, by_key = [], {}
    for arm in needed.values():
        for seed in seed_list:
            work_dir = Path(out) / "runs" / claims.paper / arm.name / f"seed{seed}"
            overrides = [
                *arm.overrides,
                *(claims.quick if quick else ()),
                f"seed={seed}",
                f"experiment='claims-{claims.paper}-{arm.name}'",
            ]
            needs = None
            if arm.init_from:
                needs = by_key[(arm.init_from, seed)].work_dir / "best.pth"
                overrides.append(f"model.pretrained='{needs}'")
            spec = RunSpec(claims.paper, arm.name, seed, arm.config, overrides, work_dir, needs)
            by_key[(arm.name, seed)] = spec
            specs.append(spec)
    return specs


def run_done(spec: RunSpec) -> bool:
    """The run finished (its meta.json says done); a missing or unreadable run directory is not done."""
    try:
        return RunDir.open(spec.work_dir, writer=False).meta().get("status") == "done"
    except DepthbenchError:
        return False


def stale_runs(specs: Sequence[RunSpec]) -> list[tuple[RunSpec, str]]:
    """The finished runs of ``specs`` whose recorded recipe (their ``config.json``) is not what their arm's config
    and overrides give now -- in the model or a :data:`BUDGET_KEYS` key -- each with the first difference: after a
    recipe changes, comparing them would mix two recipes, so they have to be trained again. Keys a run did not
    record (added to the engine since) are not compared; glyphs runs recorded before ``data.variant`` existed are
    the cluttered set."""
    stale = []
    for spec in specs:
        if not run_done(spec):
            continue
        try:
            saved = read_json(spec.work_dir / "config.json", inside=spec.work_dir, what="config.json")
        except (OSError, BadFile):
            stale.append((spec, "its config.json is missing or unreadable"))
            continue
        if isinstance(saved.get("data"), dict) and saved["data"].get("type") == "glyphs":
            saved["data"].setdefault("variant", "cluttered")  # glyphs.DEFAULT_VARIANT (results imports no task)
        cfg = load_training_config(REPO / spec.config, list(spec.overrides))[0]  # as `depthbench train` records it
        planned = {**budget_view(cfg), "model": _plain(cfg.model)}
        recorded, wanted = (saved.get("model") or {}).get("pretrained"), planned["model"].get("pretrained")
        if (
            isinstance(recorded, str)
            and isinstance(wanted, str)
            and Path(recorded).absolute() == Path(wanted).absolute()
        ):
            saved["model"]["pretrained"] = wanted  # the same weights, named relative here and absolute there
        for key in [k for k in (*BUDGET_KEYS, "model") if k in saved]:
            diff = _first_difference(saved[key], planned[key], key, recorded_only=True)
            if diff:
                path, was, now = diff
                stale.append((spec, f"{path} was {was!r}, the recipe now says {now!r}"))
                break
    return stale


def check_not_stale(specs: Sequence[RunSpec], remedy: str) -> None:
    """Refuse, in one line, finished runs trained with another recipe than their arm's now (:func:`stale_runs`):
    reused, they would be compared with runs of the recipe they no longer have. ``remedy``: what the user does."""
    stale = stale_runs(specs)
    if stale:
        spec, why = stale[0]
        raise ClaimError(
            f"{len(stale)} finished claims run(s) were trained with another recipe than their arm's "
            f"config gives now, e.g. {spec.work_dir} ({why}); {remedy}"
        )


def _plain(value):
    """Mappings as sorted dicts, tuples as lists: a config and its JSON record compare equal."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def arm_stats(arm: str, values: Iterable[float]) -> ArmStats:
    values = tuple(float(v) for v in values)
    if not values:
        raise ClaimError(f"arm {arm!r} has no finished runs to summarise")
    if not all(math.isfinite(v) for v in values):
        raise ClaimError(f"arm {arm!r} has a non-finite metric value {values}")
    std = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    return ArmStats(arm, values, float(np.mean(values)), std)


def plan_looks(claim: Claim, design: Design, bench: BenchPlan | None = None) -> tuple[tuple[int, ...], float | None]:
    """The claim's looks (seeds per arm) from its power analysis, and the plan's power: the fewest seeds, in steps
    of ``look_every`` up to ``max_seeds``, that reach ``target_power`` at alpha / m (m: the file's family; the level
    every stopping decision is taken at, so that Holm cannot undo it). A descriptive claim has one look, at the
    file's first (an interval, no verdict, no power). An efficiency claim: :func:`efficiency_plan`."""
    if claim.tier == "descriptive":
        return (design.look_every,), None
    alpha = design.alpha / design.family
    if claim.measure:
        return efficiency_plan(claim, design, bench)
    return seq.seeds_for_power(
        abs(claim.power["effect"]) or claim.margin,
        claim.power["sd"],
        alpha,
        design.target_power,
        design.look_every,
        design.max_seeds,
        claim.kind,
        claim.margin,
    )


def efficiency_plan(claim: Claim, design: Design, bench: BenchPlan | None) -> tuple[tuple[int, ...], float]:
    """An efficiency claim's one look and its power at alpha / m: throughput, the ``bench`` section's rounds (the
    per-round log ratios, a paired t test); memory, one exact measurement (the allocator's peak is
    deterministic), decided without sampling error (power 1)."""
    if claim.measure == "memory":
        return (1,), 1.0
    rounds = (bench or BenchPlan()).rounds
    effect = abs(claim.power["effect"]) or claim.margin
    return (rounds,), seq.power(
        effect, claim.power["sd"], design.alpha / design.family, (rounds,), claim.kind, claim.margin, 4000
    )


def seeds_needed(claim: Claim, design: Design, most: int = 60, sd: float | None = None) -> int | None:
    """The seeds per arm the power analysis asks for without the budget's cap -- a plan with three looks at
    thirds of it, n a multiple of 3 -- or None when even ``most`` do not reach ``target_power``. ``sd``: one seed's
    difference (default the file's ``power.sd``; a pilot's or the evaluated seeds' spread to see what it asks)."""
    alpha = design.alpha / max(design.family, 1)
    effect = abs(claim.power["effect"]) or claim.margin
    sd = claim.power["sd"] if sd is None else sd
    for n in range(3, most + 1, 3):
        looks = (n,) if n == 3 else (n // 3, 2 * n // 3, n)
        if seq.power(effect, sd, alpha, looks, claim.kind, claim.margin, 4000) >= design.target_power:
            return n
    return None


def difference_sd(claim: Claim, values: Mapping[str, Mapping[int, float]]) -> tuple[float | None, int]:
    """The between-seed spread of one seed's difference -- what ``power.sd`` stands for -- from ``values`` (arm ->
    {seed: value}) at the seeds every arm has, and how many: paired, the sd of the per-seed differences (minus
    the other pair's in an interaction); Welch, sqrt(sd_treatment² + sd_baseline²), the spread of the difference of
    two independent seeds (results.sequential.power's reading of sd for Welch claims). None below two seeds."""
    common = sorted(set.intersection(*(set(values.get(a, {})) for a in claim.arm_names)))
    if len(common) < 2:
        return None, len(common)
    if claim.test == "welch":
        treat = np.std([values[claim.treatment][s] for s in common], ddof=1)
        base = np.std([values[claim.baseline][s] for s in common], ddof=1)
        return float(math.hypot(treat, base)), len(common)
    return float(np.std(_paired_differences(claim, values, common), ddof=1)), len(common)


def _paired_differences(claim: Claim, values, seeds) -> list[float]:
    d = [values[claim.treatment][s] - values[claim.baseline][s] for s in seeds]
    if claim.minus:
        d = [x - (values[claim.minus["treatment"]][s] - values[claim.minus["baseline"]][s]) for x, s in zip(d, seeds)]
    return d


def plain_interval(claim: Claim, values: Mapping[str, Mapping[int, float]], seeds, alpha: float) -> dict | None:
    """A plain two-sided t interval at 1 - ``alpha`` of the claim's difference at ``seeds`` (paired or Welch as
    the claim), for a measure that is not pre-registered (no plan, no looks, no verdict): ``{diff, low, high,
    level, n}``, or None where an arm lacks a seed or there are fewer than two."""
    if len(seeds) < 2 or any(s not in values.get(a, {}) for a in claim.arm_names for s in seeds):
        return None
    if claim.test == "welch":
        est = seq.welch_estimate(
            [values[claim.treatment][s] for s in seeds], [values[claim.baseline][s] for s in seeds]
        )
    else:
        est = seq.paired_estimate(_paired_differences(claim, values, seeds))
    half = float(stats.t.isf(alpha / 2, est.df)) * est.se if est.se > 0 else 0.0
    return {"diff": est.diff, "low": est.diff - half, "high": est.diff + half, "level": 1 - alpha, "n": len(seeds)}


def estimates(claim: Claim, values: Mapping[str, Mapping[int, float]], looks: Sequence[int]) -> list[seq.Estimate]:
    """The claim's effect at each look whose seeds all arms have (``values``: arm -> {seed: value}); the first
    ``n`` evaluation seeds that every arm finished make look ``n``."""
    common = sorted(set.intersection(*(set(values.get(a, {})) for a in claim.arm_names)))
    out = []
    for n in looks:
        if len(common) < n:
            break
        seeds = common[:n]
        if claim.measure == "memory":  # one exact value per model: the interval is the point
            d = values[claim.treatment][seeds[-1]] - values[claim.baseline][seeds[-1]]
            out.append(seq.Estimate(d, 0.0, math.inf, n))
            continue
        if claim.test == "welch":
            out.append(
                seq.welch_estimate(
                    [values[claim.treatment][s] for s in seeds], [values[claim.baseline][s] for s in seeds]
                )
            )
            continue
        out.append(seq.paired_estimate(_paired_differences(claim, values, seeds)))
    return out


def stop_decision(claim: Claim, design: Design, values, looks: Sequence[int]) -> str | None:
    """The decision the plan (``looks``: all of them, which fix the boundaries, whatever a ``--seeds`` cap trains)
    reaches by the looks ``values`` cover, at the stopping level alpha / m (m: the file's family): a claim with a
    decision trains no more seeds. A descriptive claim never decides."""
    if claim.tier == "descriptive":
        return None
    reached = seq.run_looks(
        claim.kind, claim.margin, design.alpha / design.family, looks, estimates(claim, values, looks)
    )
    return reached[-1].decision if reached else None


def evaluate(
    claims: Sequence[tuple[Claim, Design]],
    values: Mapping[tuple[str, str], Mapping[int, float]],
    looks: Mapping[tuple[str, str], tuple[int, ...]],
    powers: Mapping | None = None,
    quick: bool = False,
) -> list[ClaimResult]:
    """Every claim's result. Confirmatory claims: repeated p-values, Holm over each paper's family -- its size m is
    the design's ``family``, whatever subset ``claims`` holds (a missing member counts as p = 1) -- then the
    verdict read off the repeated interval at the level Holm gives (alpha / m where it rejects nothing).
    Descriptive claims: the interval at 1 - alpha, no verdict. ``values``: (paper, arm) -> {seed: value};
    ``looks``: (paper, claim id) -> the plan's looks."""
    prepared = []
    for claim, design in claims:
        arm_values = {a: values.get((claim.paper, a), {}) for a in claim.arm_names}
        plan = looks[(claim.paper, claim.id)]
        ests = [] if quick else estimates(claim, arm_values, plan)
        prepared.append((claim, design, arm_values, plan, ests))
    pvalues = [seq.repeated_p(c.kind, c.margin, plan, ests) if ests else 1.0 for c, _, _, plan, ests in prepared]
    levels: list = [None] * len(prepared)
    for paper in {c.paper for c, _ in claims}:
        family = [i for i, (c, d) in enumerate(claims) if c.paper == paper and c.tier == "confirmatory"]
        if not family or quick:
            continue
        design = claims[family[0]][1]
        if len(family) > design.family:
            raise ClaimError(
                f"{paper}: {len(family)} confirmatory claims given, the design's family has {design.family}"
            )
        padded = [pvalues[i] for i in family] + [1.0] * (design.family - len(family))
        for i, level in zip(family, seq.holm(padded, design.alpha)):
            levels[i] = level
    return [
        _result(claim, design, arm_values, plan, ests, p, level, (powers or {}).get((claim.paper, claim.id)), quick)
        for (claim, design, arm_values, plan, ests), p, level in zip(prepared, pvalues, levels)
    ]


def _result(claim: Claim, design: Design, arm_values, plan, ests, p, level, power, quick) -> ClaimResult:
    descriptive = claim.tier == "descriptive"
    read_at = design.alpha if descriptive else (level if level is not None else design.alpha / design.family)
    reached = seq.run_looks(claim.kind, claim.margin, read_at, plan, ests) if ests else []
    decision = reached[-1].decision if reached else None
    common = sorted(set.intersection(*(set(v) for v in arm_values.values()))) if arm_values else []
    used = common[: reached[-1].n] if reached else common[:1]
    base = arm_stats(claim.baseline, [arm_values[claim.baseline][s] for s in used])
    treat = arm_stats(claim.treatment, [arm_values[claim.treatment][s] for s in used])
    ruled_out = ""
    level_shown = 1 - (2 * read_at if claim.kind in seq.DIRECTIONAL else read_at)  # see seq.run_looks
    if quick or not reached or not math.isfinite(reached[-1].low):  # one seed: no interval
        verdict = "no verdict"
        interval = Interval(claim.test, level_shown, treat.mean - base.mean, None, None)
    else:
        last = reached[-1]
        interval = Interval(claim.test, level_shown, last.estimate.diff, last.low, last.high, last.estimate.df)
        if descriptive:
            verdict = "no verdict"
        elif level is not None:  # Holm rejected the claim's (one-sided or TOST) null hypothesis
            verdict = {"better": "supported", "no_worse": "supported", "similar": "equivalent"}[claim.kind]
        else:
            # a "supported"/"equivalent" decision at alpha/m implies Holm's rejection: what is left here is
            # "equivalent" (better) or "contradicted", read at alpha/m
            verdict = decision or "inconclusive"
            if verdict == "inconclusive":
                ruled_out = (
                    f"the data rule out an effect above {last.high:+.2f} and below {last.low:+.2f} "
                    f"points ({interval.level:.1%} repeated interval at {last.n} seeds)"
                )
    notes = (
        []
        if len(common) >= (plan[0] if plan else 1) or quick
        else [f"only {len(common)} seeds finished in every arm; the plan's first look needs {plan[0]}"]
    )
    if descriptive:
        notes.append("descriptive: an interval at the file's alpha, no verdict")
    stopping = (
        []
        if descriptive or not ests
        else seq.run_looks(claim.kind, claim.margin, design.alpha / design.family, plan, ests)
    )
    return ClaimResult(
        claim,
        base,
        treat,
        interval,
        verdict,
        tuple(notes),
        tuple(
            {"n": lk.n, "diff": lk.estimate.diff, "low": lk.low, "high": lk.high, "decision": lk.decision}
            for lk in reached
        ),
        tuple(plan),
        power,
        None if quick or descriptive else p,
        level,
        ruled_out,
        quick,
        observed_sd=reached[-1].estimate.se * math.sqrt(reached[-1].n) if reached else None,
        stop_rule=stopping[-1].decision if stopping else None,
        trained_seeds=len(common),
    )


# ----------------------------------------------------------------------------------------- efficiency
def measure_efficiency(
    claims: ClaimsFile, device: str | None = None, quick: bool = False, progress=None
) -> tuple[dict, str]:
    """Measure the models of ``claims``' efficiency claims with ``depthbench bench``'s machinery
    (:func:`harness.measure.bench.benchmark`: every model the claims name, interleaved in the same rounds with
    the machine's matmul, in each mode they name; ``device`` None: a GPU where one is visible). Returns
    ``(values, hardware)``: values maps (paper, ``model:measure:mode``) -> {round: value} -- throughput: the log
    of samples/s in each round; memory: minus the log of the peak MiB one warm step allocates, one exact value
    (round 0) -- so that treatment minus baseline is the log of the treatment's advantage; hardware: the machine
    in one line. ``quick``: 2 rounds, batch 1, no warm-up (the plumbing only)."""
    wanted = [c for c in claims.claims if c.measure]
    if not wanted:
        return {}, ""
    plan = claims.bench
    names = list(dict.fromkeys(split_bench_key(k)[0] for c in wanted for k in (c.baseline, c.treatment)))
    modes = sorted({c.mode for c in wanted})
    participants = []
    for name in names:
        m = plan.models[name]
        participants.append(
            hb.Participant(m.model, dict(m.kwargs), hb.input_size_of(m.model, m.size, m.kwargs), label=name)
        )
    options = hb.BenchOptions(
        mode="both" if len(modes) == 2 else modes[0],
        batch_size=1 if quick else plan.batch_size,
        device=device,
        repeats=2 if quick else plan.rounds,
        iters=1 if quick else plan.iters,
        warmup=0 if quick else plan.warmup,
        memory=False,
        peak_size=256 if quick else None,
    )
    hb.check_options(options)
    threads, cores = hb.pin_threads(None, options.device)
    result = hb.benchmark(participants, [], options, threads=threads, cores=cores, progress=progress)
    values = {}
    rows = {r["label"]: r for r in result.rows}
    for c in wanted:
        for key in (c.baseline, c.treatment):
            name, measure, mode = split_bench_key(key)
            if measure == "throughput":
                values[(c.paper, key)] = {
                    i: math.log(options.batch_size / s) for i, s in enumerate(result.times[mode][name])
                }
            else:
                values[(c.paper, key)] = {0: -math.log(max(rows[name][f"{mode}_peak_mib"], 1e-3))}
    info = result.machine
    hardware = (
        f"{info['device_name']} ({info['device']}, {info['threads']} thread(s)), torch {info['torch']}, "
        f"timm {info['timm']}; bench batch {options.batch_size}, {options.repeats} interleaved rounds x "
        f"{options.iters} step(s), load average {info['load_avg_1m']} at the start, {info['date']}"
    )
    return values, hardware


# ----------------------------------------------------------------------------------------- curves
def metric_value(curve: Sequence[tuple[int, float]], metric: str) -> float:
    """One run's value of ``metric`` from its evaluation curve ``[(epoch, top1), ...]`` (epochs ascending)."""
    if not curve:
        raise ClaimError("a run without evaluation records has no metric value")
    if metric == "top1":
        return float(curve[-1][1])
    if metric == "top1_auc":
        return float(np.mean([v for _, v in curve]))
    raise ClaimError(f"metric {metric!r} is not one of {', '.join(METRICS)}")


@dataclass(frozen=True)
class CurveBand:
    arm: str
    epochs: tuple[int, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    low: tuple[float, ...]  # min over seeds
    high: tuple[float, ...]  # max over seeds
    seeds: int


def curve_band(arm: str, curves: Sequence[Sequence[tuple[int, float]]]) -> CurveBand:
    """Mean, std and min/max over seeds of an arm's learning curves, on the epochs all seeds evaluated."""
    if not curves:
        raise ClaimError(f"arm {arm!r} has no curves")
    epochs = sorted(set.intersection(*(set(e for e, _ in c) for c in curves)))
    grid = np.array([[dict(c)[e] for e in epochs] for c in curves], dtype=float)
    std = grid.std(axis=0, ddof=1) if len(curves) > 1 else np.zeros(len(epochs))
    return CurveBand(
        arm,
        tuple(epochs),
        tuple(grid.mean(axis=0)),
        tuple(std),
        tuple(grid.min(axis=0)),
        tuple(grid.max(axis=0)),
        len(curves),
    )
