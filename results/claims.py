"""The papers' claims at reduced scale: definitions (``results/tables/claims/<paper>.yaml``), statistics, verdicts.

A claims file names the *arms* of a paper's central comparisons (each a config under ``configs/claims/``, trained
with several seeds) and the *claims* that compare two arms::

    paper: horesnet
    setting: "glyphs 32x32 (53 classes, held-out typefaces), 6 epochs, batch 64, ..."   # the reduced setting
    arms:
      euler10: {config: configs/claims/horesnet10-euler_1xb64-6e_glyphs.py, label: "Euler x4 (10 layers)"}
      rk4-10: {config: configs/claims/horesnet10-rk4_1xb64-6e_glyphs.py, label: "RK-4 x1 (10 layers)"}
      shallow: {config: ..., role: source}          # trained only to initialise another arm (ScaleNet)
      deep: {config: ..., init_from: shallow}       # model.pretrained = the source arm's run (same seed)
    claims:
      - id: rk4-vs-euler-10
        text: "At equal parameters a higher-order scheme (RK-4) classifies better than Euler"
        paper: {table: "3", column: top1, rows: {"Euler X4": 91.72, "RK4 X1": 91.51}}
        baseline: euler10                           # the reference arm ...
        treatment: rk4-10                           # ... and the arm the paper says is better
        metric: top1                                # top1 (last evaluation) or top1_auc (mean over epochs)
        direction: higher                           # higher | lower | no_worse (then margin: points)
        equal: {params: 0.02, flops: 0.02}          # audited before training: relative gap allowed
        expected: {flops: lower}                    # audited too: the treatment must have fewer FLOPs (slicing)
    quick: [epochs=1, data.train_subset=2000]       # --quick: the same overrides on every arm

The numbers under ``paper`` are copied from ``results/tables/<paper>.yaml`` and checked against it when loaded.

Statistics (:func:`compare`): per arm mean ± sample standard deviation over seeds; the difference treatment −
baseline with a 95 % **Welch t-interval** by default (unequal variances, Welch–Satterthwaite degrees of
freedom). With 3 seeds per arm that is the honest interval: a percentile bootstrap (``method="bootstrap"``)
has only 10 distinct resamples per arm and comes out too narrow, so it is offered for larger seed counts only.
Verdicts (:func:`verdict`): *supported* when the interval excludes 0 in the paper's direction, *contradicted*
when it excludes 0 the other way, *inconclusive* otherwise; for ``no_worse`` claims (slicing saves FLOPs "at no
accuracy cost") supported means the interval lies above −margin and contradicted that it lies below −margin.
With one seed per arm (``--quick``) there is no interval and no verdict.

Fairness (:func:`check_equal_budget`): the compared arms' resolved configs must agree on every key of
:data:`BUDGET_KEYS` (epochs, batch, optimizer, schedule, data, augmentation, EMA, distillation, precision,
evaluation interval); only ``model`` may differ. A pair that differs is refused in one line before training.
No training here: the functions take per-seed metric values and per-epoch curves and return dataclasses.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from results.paper_tables import TABLES_DIR, TableError, read_yaml

CLAIMS_DIR = TABLES_DIR / "claims"
REPO = TABLES_DIR.parent.parent
METRICS = {"top1": "top-1 of the last evaluation (%)",
           "top1_auc": "mean top-1 over the evaluated epochs (%), the normalised area under the learning curve"}
DIRECTIONS = ("higher", "lower", "no_worse")
VERDICTS = ("supported", "contradicted", "inconclusive", "no verdict")
INTERVAL_METHODS = ("welch", "bootstrap")
# keys whose values must be identical in the compared arms' resolved configs (only `model` may differ)
BUDGET_KEYS = ("epochs", "batch_size", "grad_accum", "clip_grad", "optim", "sched", "data", "aug", "ema", "distill",
               "precision", "eval_interval")
AUDIT_MEASURES = ("params", "flops")
# a baseline outside this band (mean top-1, %) is flagged: saturated data or a recipe at chance cannot tell arms apart
CREDIBLE_BASELINE = (60.0, 95.0)
FILE_FIELDS = {"paper", "setting", "arms", "claims", "quick", "note"}
ARM_FIELDS = {"config", "label", "overrides", "role", "init_from", "note"}
CLAIM_FIELDS = {"id", "text", "paper", "baseline", "treatment", "metric", "direction", "margin", "equal", "note",
                "expected"}
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
class Claim:
    paper: str
    id: str
    text: str
    source: PaperSource
    baseline: str
    treatment: str
    metric: str = "top1"
    direction: str = "higher"
    margin: float = 0.0                  # points; only for direction no_worse
    equal: dict = field(default_factory=dict)   # measure -> allowed relative gap, audited before training
    expected: dict = field(default_factory=dict)  # measure -> "lower"/"higher": treatment vs baseline, audited
    note: str = ""


@dataclass(frozen=True)
class ClaimsFile:
    paper: str
    setting: str
    arms: dict                           # name -> Arm
    claims: tuple[Claim, ...]
    quick: tuple[str, ...] = ()
    path: Path | None = None

    def arms_of(self, claim: Claim) -> list[Arm]:
        """The arms a claim needs trained, sources first (an arm initialised from a source needs its run)."""
        names = [claim.baseline, claim.treatment]
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
    quick = doc.get("quick") or []
    if not isinstance(quick, list) or not all(isinstance(o, str) and "=" in o for o in quick):
        raise ClaimError(f"{path}: 'quick' is a list of key=value overrides applied to every arm under --quick")
    result = ClaimsFile(paper, str(doc["setting"]), arms, tuple(claims), tuple(quick), path)
    _check_paper_numbers(result, tables)
    return result


def _no_extra(mapping: dict, allowed: set, where: str) -> None:
    extra = set(mapping) - allowed
    if extra:
        raise ClaimError(f"{where}: unknown field(s) {sorted(extra)}; allowed: {sorted(allowed)}")


def _claim(c, paper: str, arms: dict, where: str) -> Claim:
    if not isinstance(c, dict) or not c.get("id"):
        raise ClaimError(f"{where}: each claim needs an 'id'")
    where = f"{where} ({c['id']})"
    _no_extra(c, CLAIM_FIELDS, where)
    for key in ("text", "paper", "baseline", "treatment"):
        if not c.get(key):
            raise ClaimError(f"{where}: '{key}' is missing")
    for key in ("baseline", "treatment"):
        if c[key] not in arms:
            raise ClaimError(f"{where}: {key} {c[key]!r} is not an arm; known: {', '.join(arms)}")
        if arms[c[key]].role == "source":
            raise ClaimError(f"{where}: {key} {c[key]!r} is a source arm (it only initialises others)")
    if c["baseline"] == c["treatment"]:
        raise ClaimError(f"{where}: baseline and treatment are the same arm {c['baseline']!r}")
    metric, direction = c.get("metric", "top1"), c.get("direction", "higher")
    if metric not in METRICS:
        raise ClaimError(f"{where}: metric {metric!r} is not one of {', '.join(METRICS)}")
    if direction not in DIRECTIONS:
        raise ClaimError(f"{where}: direction {direction!r} is not one of {', '.join(DIRECTIONS)}")
    margin = c.get("margin", 0.0)
    if direction == "no_worse" and not (isinstance(margin, (int, float)) and margin > 0):
        raise ClaimError(f"{where}: direction no_worse needs a positive 'margin' (points of {metric})")
    if direction != "no_worse" and "margin" in c:
        raise ClaimError(f"{where}: 'margin' only applies to direction no_worse")
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
    return Claim(paper, str(c["id"]), " ".join(str(c["text"]).split()), source, c["baseline"], c["treatment"],
                 metric, direction, float(margin) if direction == "no_worse" else 0.0, dict(equal),
                 dict(expected), str(c.get("note", "")))


def _check_paper_numbers(claims: ClaimsFile, tables: Mapping | None) -> None:
    """Every row a claim cites exists in the paper's table with the number the claim copied."""
    if tables is None:
        from results.paper_tables import load_paper

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
    base, treat = budget_view(configs[claim.baseline]), budget_view(configs[claim.treatment])
    for key in BUDGET_KEYS:
        diff = _first_difference(base[key], treat[key], key)
        if diff:
            path, a, b = diff
            raise ClaimError(f"claim {claim.paper}/{claim.id}: the arms differ in {path} ({claim.baseline}: {a!r}, "
                             f"{claim.treatment}: {b!r}); both arms need the same data, epochs, batch, optimizer "
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
    from harness.core.config import load_config

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


def seeds_per_arm(seeds, quick: bool) -> int:
    """How many seeds each arm trains: ``seeds`` (an integer, 1 or more), one under ``--quick``."""
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise ClaimError(f"--seeds {seeds}: give the number of seeds per arm, 1 or more")
    return 1 if quick else seeds


def check_claims(claims: ClaimsFile, quick: bool = False) -> dict:
    """Every claim of ``claims`` is a fair comparison (:func:`check_equal_budget`) and, where it says so, of equal
    (or the expected) size, audited with the one FLOP counter (:func:`check_audit`): one line on the first that is
    not, before anything trains or is submitted. Returns each arm's resolved config."""
    configs = resolve_configs(claims, quick)
    for claim in claims.claims:
        check_equal_budget(claim, configs)
        if claim.equal or claim.expected:
            check_audit(claim, {arm: arm_size(configs[arm]) for arm in (claim.baseline, claim.treatment)})
    return configs


def arm_size(cfg) -> dict:
    """Parameters and FLOPs (MACs) of an arm's model at its input size, on the meta device."""
    from harness.engine.models import build_model, model_kwargs
    from harness.measure.flops import count_flops, count_params

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


def plan_runs(claims: ClaimsFile, seeds: int, quick: bool, out: Path) -> list[RunSpec]:
    """One run per (arm a claim needs, seed); sources first, each arm initialised from its source's same seed."""
    needed = {}
    for claim in claims.claims:
        for arm in claims.arms_of(claim):
            needed[arm.name] = arm
    specs, by_key = [], {}
    for arm in needed.values():
        for seed in range(seeds):
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
    from harness.core.errors import DepthbenchError
    from harness.core.rundir import RunDir

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
    from harness.core.files import BadFile, read_json
    from harness.engine.builders import load_training_config

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
    method: str                          # "welch" or "bootstrap"
    level: float
    diff: float                          # mean(treatment) - mean(baseline)
    low: float | None                    # None: not enough seeds for an interval
    high: float | None
    df: float | None = None              # Welch–Satterthwaite degrees of freedom

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

    def summary(self) -> str:
        """One line: the claim, both arms, the interval and the verdict."""
        c, b, t, i = self.claim, self.baseline, self.treatment, self.interval
        ci = (f"[{i.low:+.2f}, {i.high:+.2f}]" if i.low is not None else "no interval (one seed)")
        return (f"{c.paper}/{c.id}: {c.treatment} {t.mean:.2f} ± {t.std:.2f} vs {c.baseline} {b.mean:.2f} ± "
                f"{b.std:.2f} ({c.metric}, n={t.n}/{b.n}); Δ {i.diff:+.2f}, {i.level:.0%} {i.method} {ci} → "
                f"{self.verdict}")


def read_report(path: str | Path) -> list[tuple[ClaimResult, str]]:
    """The results a ``depthbench claims`` report holds (its claims.json: each ClaimResult as a dict plus the
    reduced ``setting``), rebuilt as ``(ClaimResult, setting)``; a file that is not that raises ClaimError."""
    from harness.core.files import BadFile, read_json

    path = Path(path)
    try:
        results = []
        for r in read_json(path, expect=list, what="claims report"):
            source = r["claim"]["source"]
            claim = Claim(**{**r["claim"], "source": PaperSource(**{**source, "rows": dict(source["rows"])})})
            arms = [ArmStats(str(r[k]["arm"]), tuple(map(float, r[k]["values"])), float(r[k]["mean"]),
                             float(r[k]["std"])) for k in ("baseline", "treatment")]
            i = r["interval"]
            low, high = (None if i[k] is None else float(i[k]) for k in ("low", "high"))
            interval = Interval(str(i["method"]), float(i["level"]), float(i["diff"]), low, high, i.get("df"))
            results.append((ClaimResult(claim, *arms, interval, str(r["verdict"]), tuple(map(str, r["notes"]))),
                            str(r["setting"])))
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


def welch_interval(treatment: Sequence[float], baseline: Sequence[float], level: float = 0.95) -> Interval:
    """Welch's t-interval for mean(treatment) − mean(baseline) (unequal variances)."""
    from scipy import stats

    t, b = np.asarray(treatment, float), np.asarray(baseline, float)
    diff = float(t.mean() - b.mean())
    if len(t) < 2 or len(b) < 2:
        return Interval("welch", level, diff, None, None)
    vt, vb = t.var(ddof=1) / len(t), b.var(ddof=1) / len(b)
    se = math.sqrt(vt + vb)
    if se == 0.0:  # identical values in both arms: the difference is exact
        return Interval("welch", level, diff, diff, diff, math.inf)
    df = (vt + vb) ** 2 / (vt ** 2 / (len(t) - 1) + vb ** 2 / (len(b) - 1))
    half = float(stats.t.ppf(0.5 + level / 2, df)) * se
    return Interval("welch", level, diff, diff - half, diff + half, float(df))


def bootstrap_interval(treatment: Sequence[float], baseline: Sequence[float], level: float = 0.95,
                       resamples: int = 10_000, seed: int = 0) -> Interval:
    """Percentile bootstrap of mean(treatment) − mean(baseline), seeds resampled within each arm (fixed RNG)."""
    t, b = np.asarray(treatment, float), np.asarray(baseline, float)
    diff = float(t.mean() - b.mean())
    if len(t) < 2 or len(b) < 2:
        return Interval("bootstrap", level, diff, None, None)
    rng = np.random.default_rng(seed)
    dt = t[rng.integers(len(t), size=(resamples, len(t)))].mean(axis=1)
    db = b[rng.integers(len(b), size=(resamples, len(b)))].mean(axis=1)
    low, high = np.quantile(dt - db, [0.5 - level / 2, 0.5 + level / 2])
    return Interval("bootstrap", level, diff, float(low), float(high))


def verdict(interval: Interval, direction: str, margin: float = 0.0) -> str:
    """supported / contradicted / inconclusive for the paper's ``direction`` (see the module docstring);
    "no verdict" without an interval."""
    if interval.low is None:
        return "no verdict"
    low, high = interval.low, interval.high
    if direction == "lower":
        low, high = -high, -low
    if direction == "no_worse":
        if low > -margin:
            return "supported"
        return "contradicted" if high < -margin else "inconclusive"
    if direction not in DIRECTIONS:
        raise ClaimError(f"direction {direction!r} is not one of {', '.join(DIRECTIONS)}")
    if low > 0:
        return "supported"
    return "contradicted" if high < 0 else "inconclusive"


def compare(claim: Claim, values: Mapping[str, Sequence[float]], method: str = "welch",
            level: float = 0.95) -> ClaimResult:
    """The claim's statistics and verdict from per-seed metric values (``{arm: [value per seed]}``)."""
    if method not in INTERVAL_METHODS:
        raise ClaimError(f"interval method {method!r} is not one of {', '.join(INTERVAL_METHODS)}")
    for arm in (claim.baseline, claim.treatment):
        if arm not in values:
            raise ClaimError(f"claim {claim.paper}/{claim.id}: no values for arm {arm!r}")
    base, treat = arm_stats(claim.baseline, values[claim.baseline]), arm_stats(claim.treatment, values[claim.treatment])
    interval = (welch_interval if method == "welch" else bootstrap_interval)(treat.values, base.values, level)
    notes = []
    if not CREDIBLE_BASELINE[0] <= base.mean <= CREDIBLE_BASELINE[1]:  # both metrics are top-1 in %
        notes.append(f"baseline {base.mean:.1f} % ({claim.metric}) is outside {CREDIBLE_BASELINE[0]:.0f}–"
                     f"{CREDIBLE_BASELINE[1]:.0f} %: the reduced setting may not be able to tell the arms apart")
    if method == "bootstrap" and min(base.n, treat.n) < 6:
        notes.append(f"bootstrap with {min(base.n, treat.n)} seeds per arm is too narrow; Welch is the default")
    return ClaimResult(claim, base, treat, interval, verdict(interval, claim.direction, claim.margin), tuple(notes))


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
def status_line(paper: str, results: Sequence[ClaimResult]) -> str:
    """``depthbench claims --status``: one line per paper, e.g. ``horesnet: 4 claims — 2 supported, 2
    inconclusive (3 seeds)``."""
    if not results:
        return f"{paper}: no claims evaluated yet"
    counts = {v: sum(r.verdict == v for r in results) for v in VERDICTS}
    parts = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    seeds = sorted({min(r.baseline.n, r.treatment.n) for r in results})
    seeds_text = f"{seeds[0]} seed{'s' if seeds[0] != 1 else ''}" if len(seeds) == 1 else f"{seeds[0]}–{seeds[-1]} seeds"
    return f"{paper}: {len(results)} claim{'s' if len(results) != 1 else ''} — {parts} ({seeds_text}, reduced setting)"
