"""The papers' claims at reduced scale: definitions (``results/tables/claims/<paper>.yaml``), a pre-registered
design per claim, statistics and verdicts.

A claims file quotes the paper and fixes the design before any evaluated run (docs/claims.md has the whole schema)::

    paper: horesnet
    setting: "glyphs 16x16 (53 classes, held-out typefaces), 5 epochs, batch 64, ..."   # the reduced setting
    design: {alpha: 0.05, target_power: 0.8, look_every: 3, max_seeds: 6, seeds_from: 100, tuning_seeds: [0, 1, 2]}
    arms:
      euler18: {config: configs/claims/horesnet18-euler-w16_1xb64-5e_glyphs-16px.py, label: "Euler x8"}
      shallow: {config: ..., role: source}          # trained only to initialise another arm (ScaleNet)
      deep: {config: ..., init_from: shallow}       # model.pretrained = the source arm's run (same seed)
    claims:                                         # the primaries: each gets a verdict, Holm across a run's
      - id: rk4-vs-euler-18
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
intervals of the paired per-seed difference (Welch where the arms share no initialisation), TOST for "similar" and
"no worse", Holm's step-down over the run's primaries. Evaluation seeds start at ``seeds_from``, disjoint from the
``tuning_seeds`` the recipes were tuned on. Verdicts: *supported*, *contradicted*, *equivalent* (within the
margin) or *inconclusive* with the largest effect the data rule out.

Fairness (:func:`check_equal_budget`): the compared arms' resolved configs must agree on every key of
:data:`BUDGET_KEYS` (epochs, batch, optimizer, schedule, data, augmentation, EMA, distillation, precision,
evaluation interval) except those the claim lists in ``budget_differs``; only ``model`` may differ otherwise.
No training here: the functions take per-seed metric values and per-epoch curves and return dataclasses.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from harness.core.config import config_named_by, load_config
from harness.core.errors import DepthbenchError
from harness.core.files import BadFile, read_json
from harness.core.rundir import RunDir
from harness.engine.builders import load_training_config
from harness.engine.models import build_model, model_kwargs
from harness.measure.flops import count_flops, count_params
from results import sequential as seq
from results.paper_tables import TABLES_DIR, TableError, load_paper, read_yaml

CLAIMS_DIR = TABLES_DIR / "claims"
REPO = TABLES_DIR.parent.parent
METRICS = {"top1": "top-1 of the last evaluation (%)",
           "top1_auc": "mean top-1 over the evaluated epochs (%), the normalised area under the learning curve"}
KINDS = seq.KINDS
TESTS = ("paired", "welch")
VERDICTS = ("supported", "contradicted", "equivalent", "inconclusive", "no verdict")
# keys whose values must be identical in the compared arms' resolved configs (only `model` may differ)
BUDGET_KEYS = ("epochs", "batch_size", "grad_accum", "clip_grad", "optim", "sched", "data", "aug", "ema", "distill",
               "precision", "eval_interval")
AUDIT_MEASURES = ("params", "flops")
FILE_FIELDS = {"paper", "setting", "design", "arms", "claims", "exploratory", "quick", "note"}
DESIGN_FIELDS = {"alpha", "target_power", "look_every", "max_seeds", "seeds_from", "tuning_seeds"}
ARM_FIELDS = {"config", "label", "overrides", "role", "init_from", "note"}
CLAIM_FIELDS = {"id", "quote", "where", "paper", "kind", "margin", "test", "baseline", "treatment", "minus", "metric",
                "equal", "expected", "budget_differs", "power", "note"}
POWER_FIELDS = {"sd", "sd_from", "effect", "effect_from"}
SOURCE_FIELDS = {"table", "column", "rows", "note"}


class ClaimError(TableError):
    """A malformed claims file, or arms that would not be a fair comparison; one line naming file and place."""


# ----------------------------------------------------------------------------------------- definitions
@dataclass(frozen=True)
class Arm:
    name: str
    config: str                          # path relative to the repository root
    label: str
    overrides: tuple[str, ...] = ()      # key=value on top of the config (also subject to the budget check)
    role: str = "arm"                    # "arm" (compared) or "source" (only initialises another arm)
    init_from: str | None = None         # the source arm whose trained weights (same seed) initialise this one
    note: str = ""


@dataclass(frozen=True)
class PaperSource:
    table: str
    column: str
    rows: dict                           # row name -> the paper's number (as printed)
    note: str = ""

    def numbers(self) -> str:
        """The paper's rows and numbers as printed, e.g. ``ResNet-18 70.2, Steps-ResNet-18 71.8``."""
        return ", ".join(f"{name} {value}" for name, value in self.rows.items())


@dataclass(frozen=True)
class Design:
    """The pre-registered plan shared by a file's claims (fixed before any evaluated run)."""
    alpha: float = 0.05                  # familywise, two-sided, over the run's primaries (Holm)
    target_power: float = 0.8
    look_every: int = 3                  # seeds per arm between looks
    max_seeds: int = 6                   # the budget's cap on seeds per arm
    seeds_from: int = 100                # evaluation seeds: seeds_from, seeds_from + 1, ...
    tuning_seeds: tuple[int, ...] = (0, 1, 2)   # the seeds the recipes were tuned on (never evaluated)


@dataclass(frozen=True)
class Claim:
    paper: str
    id: str
    text: str                            # the paper's sentence, verbatim
    source: PaperSource
    baseline: str
    treatment: str
    metric: str = "top1"
    kind: str = "better"                 # better | no_worse | similar
    margin: float = 3.0                  # points (see the module docstring)
    equal: dict = field(default_factory=dict)   # measure -> allowed relative gap, audited before training
    expected: dict = field(default_factory=dict)  # measure -> "lower"/"higher": treatment vs baseline, audited
    note: str = ""
    where: str = ""                      # section / table of the quote
    test: str = "paired"                 # paired | welch
    minus: dict = field(default_factory=dict)    # {baseline, treatment} of the pair whose gain is subtracted
    budget_differs: tuple = ()
    power: dict = field(default_factory=dict)    # sd, sd_from, effect, effect_from

    @property
    def arm_names(self) -> list[str]:
        return [self.baseline, self.treatment, *([self.minus["baseline"], self.minus["treatment"]] if self.minus
                                                  else [])]


@dataclass(frozen=True)
class Exploratory:
    id: str
    text: str
    why: str


@dataclass(frozen=True)
class ClaimsFile:
    paper: str
    setting: str
    arms: dict                           # name -> Arm
    claims: tuple[Claim, ...]
    quick: tuple[str, ...] = ()
    path: Path | None = None
    design: Design = Design()
    exploratory: tuple[Exploratory, ...] = ()

    def arms_of(self, claim: Claim) -> list[Arm]:
        """The arms a claim needs trained, sources first (an arm initialised from a source needs its run)."""
        names = claim.arm_names
        needed = [self.arms[n].init_from for n in names if self.arms[n].init_from] + names
        return [self.arms[n] for n in dict.fromkeys(needed)]


def available_claims() -> list[str]:
    return sorted(p.stem for p in CLAIMS_DIR.glob("*.yaml"))


def load_claims(paper: str) -> ClaimsFile:
    """The claims of ``paper`` (``results/tables/claims/<paper>.yaml``), validated."""
    path = CLAIMS_DIR / f"{paper}.yaml"
    if not path.exists():
        known = ", ".join(available_claims()) or "none"
        raise ClaimError(f"no claims for paper {paper!r}; known: {known}")
    return load(path)


def load(path: str | Path, tables: Mapping | None = None) -> ClaimsFile:
    """Load and validate one claims file. ``tables``: ``{paper: [Table, ...]}`` to check the paper's numbers
    against (default: ``results/tables/<paper>.yaml``)."""
    path = Path(path)
    doc = read_yaml(path, ClaimError, "claims file")
    if not isinstance(doc, dict) or not isinstance(doc.get("arms"), dict) or not isinstance(doc.get("claims"), list):
        raise ClaimError(f"{path}: expected a mapping with 'paper', 'setting', an 'arms' mapping and a 'claims' list")
    _no_extra(doc, FILE_FIELDS, f"{path}")
    paper = str(doc.get("paper") or path.stem)
    if not doc.get("setting"):
        raise ClaimError(f"{path}: 'setting' is missing; say the reduced setting (data, epochs, batch, recipe)")
    design = _design(doc.get("design"), f"{path}: design")
    arms = {}
    for name, a in doc["arms"].items():
        where = f"{path}: arm {name!r}"
        if not isinstance(a, dict) or "config" not in a:
            raise ClaimError(f"{where}: each arm needs a 'config' (a file under configs/claims/)")
        _no_extra(a, ARM_FIELDS, where)
        overrides = a.get("overrides") or []
        if not isinstance(overrides, list) or not all(isinstance(o, str) and "=" in o for o in overrides):
            raise ClaimError(f"{where}: 'overrides' is a list of key=value strings")
        role = a.get("role", "arm")
        if role not in ("arm", "source"):
            raise ClaimError(f"{where}: role {role!r} is not 'arm' or 'source'")
        a = {**a, "config": config_named_by(a["config"], where, ClaimError)}  # data names no code outside configs/
        if not (REPO / a["config"]).is_file():
            raise ClaimError(f"{where}: config {a['config']} does not exist")
        arms[str(name)] = Arm(str(name), str(a["config"]), str(a.get("label", name)), tuple(overrides), role,
                              a.get("init_from"), str(a.get("note", "")))
    for arm in arms.values():
        if arm.init_from is not None and (arm.init_from not in arms or arms[arm.init_from].init_from):
            raise ClaimError(f"{path}: arm {arm.name!r} is initialised from {arm.init_from!r}, which is not an arm "
                             f"of this file (or is itself initialised from another); known: {', '.join(arms)}")
    claims, seen = [], set()
    for i, c in enumerate(doc["claims"]):
        claim = _claim(c, paper, arms, f"{path}: claim #{i + 1}")
        if claim.id in seen:
            raise ClaimError(f"{path}: claim id {claim.id!r} appears twice")
        seen.add(claim.id)
        claims.append(claim)
    exploratory = []
    for i, x in enumerate(doc.get("exploratory") or []):
        if not isinstance(x, dict) or set(x) != {"id", "text", "why"}:
            raise ClaimError(f"{path}: exploratory #{i + 1} needs exactly 'id', 'text' and 'why' (no verdict)")
        exploratory.append(Exploratory(str(x["id"]), " ".join(str(x["text"]).split()), " ".join(str(x["why"]).split())))
    quick = doc.get("quick") or []
    if not isinstance(quick, list) or not all(isinstance(o, str) and "=" in o for o in quick):
        raise ClaimError(f"{path}: 'quick' is a list of key=value overrides applied to every arm under --quick")
    result = ClaimsFile(paper, str(doc["setting"]), arms, tuple(claims), tuple(quick), path, design,
                        tuple(exploratory))
    _check_paper_numbers(result, tables)
    return result


def _design(d, where: str) -> Design:
    if not isinstance(d, dict):
        raise ClaimError(f"{where} is missing: the pre-registered plan ({', '.join(sorted(DESIGN_FIELDS))})")
    _no_extra(d, DESIGN_FIELDS, where)
    try:
        design = Design(**{**d, "tuning_seeds": tuple(int(s) for s in d.get("tuning_seeds", ()))})
    except (TypeError, ValueError) as e:
        raise ClaimError(f"{where}: {e}") from None
    if not (0 < design.alpha < 0.5 and 0 < design.target_power < 1 and isinstance(design.look_every, int)
            and design.look_every >= 2 and isinstance(design.max_seeds, int) and design.max_seeds >= design.look_every):
        raise ClaimError(f"{where}: alpha in (0, 0.5), target_power in (0, 1), look_every >= 2 seeds and max_seeds "
                         ">= look_every")
    evaluated = range(design.seeds_from, design.seeds_from + design.max_seeds)
    if any(s in evaluated for s in design.tuning_seeds):
        raise ClaimError(f"{where}: evaluation seeds {design.seeds_from}-{evaluated[-1]} overlap the tuning seeds "
                         f"{list(design.tuning_seeds)}; move seeds_from past them")
    return design


def _no_extra(mapping: dict, allowed: set, where: str) -> None:
    extra = set(mapping) - allowed
    if extra:
        raise ClaimError(f"{where}: unknown field(s) {sorted(extra)}; allowed: {sorted(allowed)}")


def _claim(c, paper: str, arms: dict, where: str) -> Claim:
    if not isinstance(c, dict) or not c.get("id"):
        raise ClaimError(f"{where}: each claim needs an 'id'")
    where = f"{where} ({c['id']})"
    _no_extra(c, CLAIM_FIELDS, where)
    for key in ("quote", "where", "paper", "kind", "test", "baseline", "treatment", "power"):
        if not c.get(key):
            raise ClaimError(f"{where}: '{key}' is missing (every claim quotes its paper and states its design)")
    minus = c.get("minus") or {}
    if minus and (not isinstance(minus, dict) or set(minus) != {"baseline", "treatment"}):
        raise ClaimError(f"{where}: 'minus' is {{baseline: ARM, treatment: ARM}}, the pair whose gain is subtracted")
    for key, name in [("baseline", c["baseline"]), ("treatment", c["treatment"]),
                      *[(f"minus.{k}", v) for k, v in minus.items()]]:
        if name not in arms:
            raise ClaimError(f"{where}: {key} {name!r} is not an arm; known: {', '.join(arms)}")
        if arms[name].role == "source":
            raise ClaimError(f"{where}: {key} {name!r} is a source arm (it only initialises others)")
    if c["baseline"] == c["treatment"]:
        raise ClaimError(f"{where}: baseline and treatment are the same arm {c['baseline']!r}")
    metric, kind, test = c.get("metric", "top1"), c["kind"], c["test"]
    if metric not in METRICS:
        raise ClaimError(f"{where}: metric {metric!r} is not one of {', '.join(METRICS)}")
    if kind not in KINDS:
        raise ClaimError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)} (what the paper claims)")
    if test not in TESTS:
        raise ClaimError(f"{where}: test {test!r} is not one of {', '.join(TESTS)}")
    if test == "paired" and any(arms[n].init_from for n in (c["baseline"], c["treatment"])):
        raise ClaimError(f"{where}: an arm initialised from another run shares no initial weights with its "
                         "counterpart: test: welch")
    if minus and test != "paired":
        raise ClaimError(f"{where}: an interaction ('minus') is estimated per seed: test: paired")
    margin = c.get("margin")
    if not (isinstance(margin, (int, float)) and margin > 0):
        raise ClaimError(f"{where}: 'margin' (points of {metric}) must be positive: the similar/no-worse margin, "
                         "or for 'better' the smallest effect worth detecting")
    power = c["power"]
    if not isinstance(power, dict) or set(power) != POWER_FIELDS or not all(
            isinstance(power[k], (int, float)) for k in ("sd", "effect")) or power["sd"] <= 0:
        raise ClaimError(f"{where}: 'power' needs sd (> 0, points: the measured spread of one seed's difference), "
                         "sd_from, effect (points) and effect_from (where each comes from)")
    budget_differs = c.get("budget_differs") or []
    if not isinstance(budget_differs, list) or set(budget_differs) - set(BUDGET_KEYS):
        raise ClaimError(f"{where}: 'budget_differs' lists keys of {', '.join(BUDGET_KEYS)}")
    if budget_differs and test == "paired":
        raise ClaimError(f"{where}: arms with different budgets ({budget_differs}) do not pair: test: welch")
    equal = c.get("equal") or {}
    if not isinstance(equal, dict) or set(equal) - set(AUDIT_MEASURES) or not all(
            isinstance(v, (int, float)) and 0 <= v < 1 for v in equal.values()):
        raise ClaimError(f"{where}: 'equal' maps {' and/or '.join(AUDIT_MEASURES)} to an allowed relative gap "
                         f"in [0, 1), e.g. {{params: 0.02, flops: 0.02}}")
    expected = c.get("expected") or {}
    if not isinstance(expected, dict) or set(expected) - set(AUDIT_MEASURES) or not all(
            v in ("lower", "higher") for v in expected.values()):
        raise ClaimError(f"{where}: 'expected' maps {' and/or '.join(AUDIT_MEASURES)} to lower or higher "
                         "(the treatment's size against the baseline's), e.g. {flops: lower}")
    src = c["paper"]
    if not isinstance(src, dict) or not src.get("table") or not isinstance(src.get("rows"), dict) or not src["rows"]:
        raise ClaimError(f"{where}: 'paper' needs the table id, the column and the rows with the paper's numbers, "
                         "e.g. {table: '3', column: top1, rows: {'Euler X4': 91.72}}")
    _no_extra(src, SOURCE_FIELDS, f"{where}: paper")
    source = PaperSource(str(src["table"]), str(src.get("column", "top1")), dict(src["rows"]), str(src.get("note", "")))
    return Claim(paper, str(c["id"]), " ".join(str(c["quote"]).split()), source, c["baseline"], c["treatment"],
                 metric, kind, float(margin), dict(equal), dict(expected), " ".join(str(c.get("note", "")).split()),
                 str(c["where"]), test, dict(minus), tuple(budget_differs), dict(power))


def _check_paper_numbers(claims: ClaimsFile, tables: Mapping | None) -> None:
    """Every row a claim cites exists in the paper's table with the number the claim copied."""
    if tables is None:
        try:
            paper_tables = load_paper(claims.paper)
        except TableError as e:
            raise ClaimError(f"{claims.path}: {e}") from None
    else:
        paper_tables = tables.get(claims.paper, [])
    by_id = {t.id: t for t in paper_tables}
    for claim in claims.claims:
        where = f"{claims.path}: claim {claim.id!r}"
        table = by_id.get(claim.source.table)
        if table is None:
            raise ClaimError(f"{where}: {claims.paper} has no table {claim.source.table!r}; "
                             f"known: {', '.join(by_id)}")
        rows = {r.name: r for r in table.rows}
        for name, number in claim.source.rows.items():
            if name not in rows:
                raise ClaimError(f"{where}: table {table.id} has no row {name!r}")
            printed = (rows[name].paper or {}).get(claim.source.column)
            if printed is None or not _same_number(printed, number):
                raise ClaimError(f"{where}: table {table.id} row {name!r} prints {claim.source.column}={printed}, "
                                 f"the claim copied {number}")


def _same_number(a, b) -> bool:
    try:
        return math.isclose(float(a), float(b), abs_tol=1e-9)
    except (TypeError, ValueError):
        return str(a) == str(b)


# ----------------------------------------------------------------------------------------- fairness
def budget_view(cfg) -> dict:
    """The keys of a resolved config that a fair comparison keeps equal (plain data, for comparing and printing)."""
    return {key: _plain(cfg.get(key)) for key in BUDGET_KEYS}


def check_equal_budget(claim: Claim, configs: Mapping[str, Mapping]) -> None:
    """Refuse a claim whose two arms' resolved configs differ in a :data:`BUDGET_KEYS` key (one line, the first
    difference). ``configs``: arm name -> resolved config (an MMEngine Config or a plain dict)."""
    pairs = [(claim.baseline, claim.treatment)] + ([(claim.baseline, claim.minus["baseline"]),
                                                     (claim.minus["baseline"], claim.minus["treatment"])]
                                                    if claim.minus else [])
    for a, b in pairs:
        _check_pair_budget(claim, a, b, configs)


def _check_pair_budget(claim: Claim, a: str, b: str, configs: Mapping[str, Mapping]) -> None:
    base, treat = budget_view(configs[a]), budget_view(configs[b])
    for key in [k for k in BUDGET_KEYS if k not in claim.budget_differs]:
        diff = _first_difference(base[key], treat[key], key)
        if diff:
            path, va, vb = diff
            raise ClaimError(f"claim {claim.paper}/{claim.id}: the arms differ in {path} ({a}: {va!r}, "
                             f"{b}: {vb!r}); both arms need the same data, epochs, batch, optimizer "
                             "budget and augmentation — only the model may differ")


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
    return {name: load_config(REPO / arm.config, list(arm.overrides) + (list(claims.quick) if quick else []))
            for name, arm in claims.arms.items()}


def check_audit(claim: Claim, sizes: Mapping[str, Mapping[str, float]]) -> dict:
    """Refuse a claim whose arms differ in parameters/FLOPs by more than ``claim.equal`` allows, or whose
    treatment is not smaller/larger where ``claim.expected`` says so. ``sizes``: arm -> {"params": n, "flops": n}
    (harness/measure/flops.py). Returns the relative gaps (treatment vs baseline) of every measure in ``sizes``."""
    base, treat = sizes[claim.baseline], sizes[claim.treatment]
    gaps = {m: treat[m] / base[m] - 1.0 for m in AUDIT_MEASURES if m in base and m in treat}
    for measure in set(claim.equal) | set(claim.expected):
        if measure not in gaps:
            raise ClaimError(f"claim {claim.paper}/{claim.id}: no {measure} count for {claim.baseline} and "
                             f"{claim.treatment}; the audit needs it")
    for measure, allowed in claim.equal.items():
        if abs(gaps[measure]) > allowed:
            raise ClaimError(f"claim {claim.paper}/{claim.id}: {claim.treatment} has {gaps[measure]:+.1%} {measure} "
                             f"vs {claim.baseline} ({treat[measure]:,.0f} vs {base[measure]:,.0f}); the claim "
                             f"compares at equal {measure} (±{allowed:.0%}): fix the widths in the arms' configs")
    for measure, way in claim.expected.items():
        if (gaps[measure] >= 0) if way == "lower" else (gaps[measure] <= 0):
            raise ClaimError(f"claim {claim.paper}/{claim.id}: {claim.treatment} should have {way} {measure} than "
                             f"{claim.baseline} but has {gaps[measure]:+.1%} ({treat[measure]:,.0f} vs "
                             f"{base[measure]:,.0f}); check the arms' configs")
    return gaps


def seeds_per_arm(seeds, quick: bool) -> int | None:
    """The cap on seeds per arm: ``seeds`` (an integer, 1 or more; None: the design's plan), one under
    ``--quick``."""
    if seeds is not None and (not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1):
        raise ClaimError(f"--seeds {seeds}: give the most seeds per arm to train, 1 or more")
    return 1 if quick else seeds


def check_claims(claims: ClaimsFile, quick: bool = False) -> dict:
    """Every claim of ``claims`` is a fair comparison (:func:`check_equal_budget`) and, where it says so, of equal
    (or the expected) size, audited with the one FLOP counter (:func:`check_audit`): one line on the first that is
    not, before anything trains or is submitted. Returns each arm's resolved config."""
    configs = resolve_configs(claims, quick)
    for claim in claims.claims:
        check_equal_budget(claim, configs)
        pairs = [claim] + ([replace(claim, baseline=claim.minus["baseline"], treatment=claim.minus["treatment"],
                                    minus={})] if claim.minus else [])
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
    needs: Path | None = None        # the source run's best.pth that initialises this one (ScaleNet)

    @property
    def console(self) -> Path:
        return self.work_dir.parent / f"{self.work_dir.name}.console.txt"


def plan_runs(claims: ClaimsFile, seeds: int, quick: bool, out: Path,
              only: Iterable[Claim] | None = None) -> list[RunSpec]:
    """One run per (arm a claim of ``only`` -- default all -- needs, evaluation seed: the design's
    ``seeds_from`` + 0 .. ``seeds`` - 1); sources first, each arm initialised from its source's same seed."""
    needed = {}
    for claim in claims.claims if only is None else only:
        for arm in claims.arms_of(claim):
            needed[arm.name] = arm
    specs, by_key = [], {}
    for arm in needed.values():
        for seed in range(claims.design.seeds_from, claims.design.seeds_from + seeds):
            work_dir = Path(out) / "runs" / claims.paper / arm.name / f"seed{seed}"
            overrides = [*arm.overrides, *(claims.quick if quick else ()), f"seed={seed}",
                         f"experiment='claims-{claims.paper}-{arm.name}'"]
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
        if isinstance(recorded, str) and isinstance(wanted, str) and \
                Path(recorded).absolute() == Path(wanted).absolute():
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
        raise ClaimError(f"{len(stale)} finished claims run(s) were trained with another recipe than their arm's "
                         f"config gives now, e.g. {spec.work_dir} ({why}); {remedy}")


def _plain(value):
    """Mappings as sorted dicts, tuples as lists: a config and its JSON record compare equal."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# ----------------------------------------------------------------------------------------- statistics
@dataclass(frozen=True)
class ArmStats:
    arm: str
    values: tuple[float, ...]
    mean: float
    std: float                           # sample standard deviation (ddof=1); 0 for one seed

    @property
    def n(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class Interval:
    method: str                          # "paired" or "welch" (repeated confidence interval of the plan)
    level: float                         # the familywise level it is read at (1 - alpha/m or Holm's)
    diff: float                          # the effect: mean(treatment - baseline) (minus the shallower gain)
    low: float | None                    # None: not enough seeds for an interval
    high: float | None
    df: float | None = None

    def bounds(self) -> str:
        """``[low, high]`` with signs, or ``—`` without an interval (one seed)."""
        return f"[{self.low:+.2f}, {self.high:+.2f}]" if self.low is not None else "—"


@dataclass(frozen=True)
class ClaimResult:
    claim: Claim
    baseline: ArmStats
    treatment: ArmStats
    interval: Interval
    verdict: str
    notes: tuple[str, ...] = ()
    looks: tuple = ()                    # ({n, diff, low, high, decision}, ...) at the looks reached
    planned: tuple = ()                  # the plan's looks (seeds per arm)
    power: float | None = None           # of the plan, at the design's effect (or margin) and sd
    p_value: float | None = None         # repeated p-value (Holm's input)
    level: float | None = None           # the level Holm rejected at, or None
    ruled_out: str = ""                  # inconclusive: the largest effect the data rule out
    quick: bool = False
    hardware: tuple = ()                 # the machines the runs came from (one text each)
    seeds_needed: int | None = None      # for the target power without the budget's cap (None: more than 60)

    @property
    def stopped_at(self) -> int:
        return self.looks[-1]["n"] if self.looks else 0

    def summary(self) -> str:
        """One line: the claim, both arms, the interval and the verdict."""
        c, b, t, i = self.claim, self.baseline, self.treatment, self.interval
        ci = f"{i.bounds()} ({i.method}, {i.level:.1%})" if i.low is not None else "no interval (one seed)"
        extra = f"; {self.ruled_out}" if self.ruled_out else ""
        return (f"{c.paper}/{c.id}: {c.treatment} {t.mean:.2f} ± {t.std:.2f} vs {c.baseline} {b.mean:.2f} ± "
                f"{b.std:.2f} ({c.metric}, n={t.n}/{b.n}); effect {i.diff:+.2f} {ci} → {self.verdict}{extra}")


def read_report(path: str | Path) -> list[tuple[ClaimResult, str]]:
    """The results a ``depthbench claims`` report holds (its claims.json: each ClaimResult as a dict plus the
    reduced ``setting``), rebuilt as ``(ClaimResult, setting)``; a file that is not that raises ClaimError."""
    path = Path(path)
    try:
        results = []
        for r in read_json(path, expect=list, what="claims report"):
            source = r["claim"]["source"]
            if "direction" in r["claim"]:  # a report of the earlier, unplanned claims (before the design)
                legacy = dict(r["claim"])
                legacy["kind"] = {"no_worse": "no_worse"}.get(legacy.pop("direction"), "better")
                r["claim"] = legacy
            claim = Claim(**{**r["claim"], "source": PaperSource(**{**source, "rows": dict(source["rows"])}),
                             "budget_differs": tuple(r["claim"].get("budget_differs", ()))})
            arms = [ArmStats(str(r[k]["arm"]), tuple(map(float, r[k]["values"])), float(r[k]["mean"]),
                             float(r[k]["std"])) for k in ("baseline", "treatment")]
            i = r["interval"]
            low, high = (None if i[k] is None else float(i[k]) for k in ("low", "high"))
            interval = Interval(str(i["method"]), float(i["level"]), float(i["diff"]), low, high, i.get("df"))
            extra = {k: r[k] for k in ("power", "p_value", "level", "ruled_out", "quick", "seeds_needed") if k in r}
            results.append((ClaimResult(claim, *arms, interval, str(r["verdict"]), tuple(map(str, r["notes"])),
                                        tuple(r.get("looks", ())), tuple(r.get("planned", ())),
                                        hardware=tuple(r.get("hardware", ())), **extra), str(r["setting"])))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError, BadFile) as e:
        raise ClaimError(f"{path} is unreadable ({e!r}); rerun `depthbench claims --out {path.parent}` to rewrite "
                         "it") from None
    return results


def arm_stats(arm: str, values: Iterable[float]) -> ArmStats:
    values = tuple(float(v) for v in values)
    if not values:
        raise ClaimError(f"arm {arm!r} has no finished runs to summarise")
    if not all(math.isfinite(v) for v in values):
        raise ClaimError(f"arm {arm!r} has a non-finite metric value {values}")
    std = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    return ArmStats(arm, values, float(np.mean(values)), std)


def plan_looks(claim: Claim, design: Design, primaries: int) -> tuple[tuple[int, ...], float]:
    """The claim's looks (seeds per arm) from its power analysis, and the plan's power: the fewest seeds, in steps
    of ``look_every`` up to ``max_seeds``, that reach ``target_power`` at alpha / ``primaries`` (the level every
    stopping decision is taken at, so that Holm cannot undo it)."""
    alpha = design.alpha / max(1, primaries)
    return seq.seeds_for_power(abs(claim.power["effect"]) or claim.margin, claim.power["sd"], alpha,
                               design.target_power, design.look_every, design.max_seeds, claim.kind, claim.margin)


def seeds_needed(claim: Claim, design: Design, primaries: int, most: int = 60) -> int | None:
    """The seeds per arm the power analysis asks for without the budget's cap -- a plan with three looks at
    thirds of it, n a multiple of 3 -- or None when even ``most`` do not reach ``target_power``."""
    alpha = design.alpha / max(1, primaries)
    effect = abs(claim.power["effect"]) or claim.margin
    for n in range(3, most + 1, 3):
        looks = (n,) if n == 3 else (n // 3, 2 * n // 3, n)
        if seq.power(effect, claim.power["sd"], alpha, looks, claim.kind, claim.margin, 4000) >= design.target_power:
            return n
    return None


def estimates(claim: Claim, values: Mapping[str, Mapping[int, float]], looks: Sequence[int]) -> list[seq.Estimate]:
    """The claim's effect at each look whose seeds all arms have (``values``: arm -> {seed: value}); the first
    ``n`` evaluation seeds that every arm finished make look ``n``."""
    common = sorted(set.intersection(*(set(values.get(a, {})) for a in claim.arm_names)))
    out = []
    for n in looks:
        if len(common) < n:
            break
        seeds = common[:n]
        if claim.test == "welch":
            out.append(seq.welch_estimate([values[claim.treatment][s] for s in seeds],
                                          [values[claim.baseline][s] for s in seeds]))
            continue
        d = [values[claim.treatment][s] - values[claim.baseline][s] for s in seeds]
        if claim.minus:
            d = [x - (values[claim.minus["treatment"]][s] - values[claim.minus["baseline"]][s])
                 for x, s in zip(d, seeds)]
        out.append(seq.paired_estimate(d))
    return out


def stop_decision(claim: Claim, values, looks: Sequence[int], alpha: float) -> str | None:
    """The decision the plan (``looks``: all of them, which fix the boundaries) reaches by the looks ``values``
    cover, at the stopping level ``alpha`` (alpha / m): a claim with a decision trains no more seeds."""
    reached = seq.run_looks(claim.kind, claim.margin, alpha, looks, estimates(claim, values, looks))
    return reached[-1].decision if reached else None


def evaluate(claims: Sequence[tuple[Claim, Design]], values: Mapping[tuple[str, str], Mapping[int, float]],
             looks: Mapping[tuple[str, str], tuple[int, ...]], powers: Mapping | None = None,
             quick: bool = False) -> list[ClaimResult]:
    """Every primary claim's verdict: repeated p-values, Holm over the claims, then the verdict read off the
    repeated interval at the level Holm gives (alpha / m where it rejects nothing). ``values``: (paper, arm) ->
    {seed: value}; ``looks``: (paper, claim id) -> the plan's looks."""
    alpha = claims[0][1].alpha if claims else 0.05
    m = len(claims)
    prepared = []
    for claim, _ in claims:
        arm_values = {a: values.get((claim.paper, a), {}) for a in claim.arm_names}
        plan = looks[(claim.paper, claim.id)]
        ests = [] if quick else estimates(claim, arm_values, plan)
        prepared.append((claim, arm_values, plan, ests))
    pvalues = [seq.repeated_p(c.kind, c.margin, plan, ests) if ests else 1.0 for c, _, plan, ests in prepared]
    levels = seq.holm(pvalues, alpha) if not quick else [None] * m
    results = []
    for (claim, arm_values, plan, ests), p, level in zip(prepared, pvalues, levels):
        read_at = level if level is not None else alpha / m
        reached = seq.run_looks(claim.kind, claim.margin, read_at, plan, ests) if ests else []
        decision = reached[-1].decision if reached else None
        common = sorted(set.intersection(*(set(v) for v in arm_values.values()))) if arm_values else []
        used = common[:reached[-1].n] if reached else common[:1]
        base = arm_stats(claim.baseline, [arm_values[claim.baseline][s] for s in used])
        treat = arm_stats(claim.treatment, [arm_values[claim.treatment][s] for s in used])
        ruled_out = ""
        if quick or not reached or not math.isfinite(reached[-1].low):  # one seed: no interval
            verdict = "no verdict"
            diff = treat.mean - base.mean
            interval = Interval(claim.test, 1 - read_at, diff, None, None)
        else:
            last = reached[-1]
            interval = Interval(claim.test, 1 - read_at, last.estimate.diff, last.low, last.high, last.estimate.df)
            if level is not None:  # Holm rejected the claim's null hypothesis
                verdict = {"better": "supported" if last.estimate.diff > 0 else "contradicted",
                           "no_worse": "supported", "similar": "equivalent"}[claim.kind]
            else:
                # a "supported"/"equivalent" primary decision at alpha/m implies Holm's rejection: what is left
                # here is "equivalent" (better) or "contradicted" (similar, no_worse), read at alpha/m
                verdict = decision or "inconclusive"
                if verdict == "inconclusive":
                    ruled_out = (f"the data rule out an effect above {last.high:+.2f} and below {last.low:+.2f} "
                                 f"points ({interval.level:.1%} repeated interval at {last.n} seeds)")
        notes = [] if len(common) >= (plan[0] if plan else 1) or quick else [
            f"only {len(common)} seeds finished in every arm; the plan's first look needs {plan[0]}"]
        results.append(ClaimResult(claim, base, treat, interval, verdict, tuple(notes),
                                   tuple({"n": lk.n, "diff": lk.estimate.diff, "low": lk.low, "high": lk.high,
                                          "decision": lk.decision} for lk in reached), tuple(plan),
                                   (powers or {}).get((claim.paper, claim.id)), None if quick else p, level,
                                   ruled_out, quick))
    return results


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
    low: tuple[float, ...]              # min over seeds
    high: tuple[float, ...]             # max over seeds
    seeds: int


def curve_band(arm: str, curves: Sequence[Sequence[tuple[int, float]]]) -> CurveBand:
    """Mean, std and min/max over seeds of an arm's learning curves, on the epochs all seeds evaluated."""
    if not curves:
        raise ClaimError(f"arm {arm!r} has no curves")
    epochs = sorted(set.intersection(*(set(e for e, _ in c) for c in curves)))
    grid = np.array([[dict(c)[e] for e in epochs] for c in curves], dtype=float)
    std = grid.std(axis=0, ddof=1) if len(curves) > 1 else np.zeros(len(epochs))
    return CurveBand(arm, tuple(epochs), tuple(grid.mean(axis=0)), tuple(std), tuple(grid.min(axis=0)),
                     tuple(grid.max(axis=0)), len(curves))


# ----------------------------------------------------------------------------------------- reporting
def status_line(paper: str, results: Sequence[ClaimResult], quick: bool = False) -> str:
    """``depthbench claims --status``: one line per paper, e.g. ``horesnet: 3 claims — 1 supported, 2
    inconclusive (3–6 seeds)``."""
    if not results:
        return f"{paper}: no claims evaluated yet"
    counts = {v: sum(r.verdict == v for r in results) for v in VERDICTS}
    parts = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    seeds = sorted({min(r.baseline.n, r.treatment.n) for r in results})
    seeds_text = (f"{seeds[0]} seed{'s' if seeds[0] != 1 else ''}" if len(seeds) == 1
                  else f"{seeds[0]}–{seeds[-1]} seeds")
    return (f"{paper}: {len(results)} claim{'s' if len(results) != 1 else ''} — {parts} ({seeds_text}, reduced "
            f"setting)" + (" [--quick: no verdicts]" if quick else ""))
