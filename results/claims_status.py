"""What ``depthbench claims --status`` reads, without the engine: the claims files (``results/tables/claims/<paper>.yaml``,
loaded and validated: the schema is :mod:`results.claims`' docstring) and the verdicts a report holds
(``<out>/claims.json``), one line per paper.

A module of its own so that ``claims --status`` -- and everything else that only reads claims -- imports no torch,
timm or MMEngine (tests/results/test_claims.py keeps it so): planning, fairness audits, statistics and
curves are :mod:`results.claims`, which re-exports all of this.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping, Sequence

from harness.core.config_paths import config_named_by
from harness.core.errors import DepthbenchError
from harness.core.files import BadFile, read_json
from results.paper_tables import TABLES_DIR, TableError, load_paper, read_yaml

CLAIMS_DIR = TABLES_DIR / "claims"
REPO = TABLES_DIR.parent.parent
METRICS = {
    "top1": "top-1 of the last evaluation (%)",
    "top1_auc": "mean top-1 over the evaluated epochs (%), the normalised area under the learning curve",
}
# efficiency claims (a claim with `measure`): the arms are models of the file's `bench` section, measured by
# harness.measure.bench in interleaved paired rounds; the effect is the log of the treatment's advantage --
# throughput: log(treatment/baseline samples/s) per round; memory: log(baseline/treatment peak MiB), the
# allocator's peak of one warm step (deterministic: one exact value, an interval of width zero)
MEASURES = {
    "throughput": "samples/s, log ratio per interleaved round (treatment / baseline)",
    "memory": "peak MiB one warm step allocates, log ratio (baseline / treatment: > 0 = less memory)",
}
BENCH_MODES = ("infer", "train")
BENCH_FIELDS = {"batch_size", "rounds", "iters", "warmup", "models", "note"}
BENCH_MODEL_FIELDS = {"model", "kwargs", "size", "label"}
MAX_ROUNDS = 60  # interleaved rounds of a bench claim (its one look)
KINDS = ("better", "no_worse", "similar")  # what a claim may say of its arms (results.sequential tests each)
TESTS = ("paired", "welch")
# confirmatory: the file's family (its size written in the design), a verdict each, Holm over the family;
# descriptive: an interval and no verdict
TIERS = ("confirmatory", "descriptive")
VERDICTS = ("supported", "contradicted", "equivalent", "inconclusive", "no verdict")
# keys whose values must be identical in the compared arms' resolved configs (only `model` may differ)
BUDGET_KEYS = (
    "epochs",
    "batch_size",
    "grad_accum",
    "clip_grad",
    "optim",
    "sched",
    "data",
    "aug",
    "ema",
    "distill",
    "precision",
    "eval_interval",
)
AUDIT_MEASURES = ("params", "flops")
FILE_FIELDS = {"paper", "setting", "design", "arms", "claims", "exploratory", "quick", "note", "bench", "paper_scale"}
DESIGN_FIELDS = {
    "alpha",
    "family",
    "target_power",
    "look_every",
    "max_seeds",
    "seeds_from",
    "tuning_seeds",
    "pilot_seeds",
}
ARM_FIELDS = {"config", "label", "overrides", "role", "init_from", "note"}
CLAIM_FIELDS = {
    "id",
    "tier",
    "quote",
    "where",
    "paper",
    "kind",
    "margin",
    "test",
    "baseline",
    "treatment",
    "minus",
    "metric",
    "equal",
    "expected",
    "budget_differs",
    "power",
    "note",
    "measure",
    "mode",
}
POWER_FIELDS = {"sd", "sd_from", "effect", "effect_from"}
SOURCE_FIELDS = {"table", "column", "rows", "note"}
# a design's bounds, checked when the file loads (before any planning or training): the plan's boundaries are a
# K-dimensional normal integral per look count tried, so the looks and seeds a file may ask for are bounded
MAX_SEEDS = 60  # seeds per arm (the power analysis' own ceiling, results.claims.seeds_needed)
MAX_LOOKS = 5  # looks per plan (max_seeds / look_every): 5 plan in ~4 CPU-s, 10 in ~140
SEED_LIMIT = 2**31  # evaluation and tuning seeds are in [0, SEED_LIMIT): numpy and torch take them all
MAX_POINTS = 100.0  # margins, spreads and effects: points of a percentage metric


class ClaimError(TableError):
    """A malformed claims file, or arms that would not be a fair comparison; one line naming file and place."""


# ----------------------------------------------------------------------------------------- definitions
@dataclass(frozen=True)
class Arm:
    name: str
    config: str  # path relative to the repository root
    label: str
    overrides: tuple[str, ...] = ()  # key=value on top of the config (also subject to the budget check)
    role: str = "arm"  # "arm" (compared) or "source" (only initialises another arm)
    init_from: str | None = None  # the source arm whose trained weights (same seed) initialise this one
    note: str = ""


@dataclass(frozen=True)
class PaperSource:
    table: str
    column: str
    rows: dict  # row name -> the paper's number (as printed)
    note: str = ""

    def numbers(self) -> str:
        """The paper's rows and numbers as printed, e.g. ``ResNet-18 70.2, Steps-ResNet-18 71.8``."""
        return ", ".join(f"{name} {value}" for name, value in self.rows.items())


@dataclass(frozen=True)
class Design:
    """The pre-registered plan shared by a file's claims (fixed before any evaluated run)."""

    alpha: float = 0.05  # familywise over the file's confirmatory claims (Holm)
    family: int = 1  # m: how many confirmatory claims the file has (Holm's family)
    target_power: float = 0.8
    look_every: int = 3  # seeds per arm between looks
    max_seeds: int = 6  # the budget's cap on seeds per arm
    seeds_from: int = 100  # evaluation seeds: seeds_from, seeds_from + 1, ...
    tuning_seeds: tuple[int, ...] = (0, 1, 2)  # the seeds the recipes were tuned on (never evaluated)
    # `claims --pilot`: the seeds whose spread gives power.sd before an evaluated run (disjoint from both above)
    pilot_seeds: tuple[int, ...] = tuple(range(50, 60))


@dataclass(frozen=True)
class Claim:
    paper: str
    id: str
    text: str  # the paper's sentence, verbatim
    source: PaperSource
    baseline: str
    treatment: str
    metric: str = "top1"
    kind: str = "better"  # better | no_worse | similar
    margin: float = 3.0  # points (see the module docstring)
    equal: dict = field(default_factory=dict)  # measure -> allowed relative gap, audited before training
    expected: dict = field(default_factory=dict)  # measure -> "lower"/"higher": treatment vs baseline, audited
    note: str = ""
    where: str = ""  # section / table of the quote
    test: str = "paired"  # paired | welch
    minus: dict = field(default_factory=dict)  # {baseline, treatment} of the pair whose gain is subtracted
    budget_differs: tuple = ()
    power: dict = field(default_factory=dict)  # sd, sd_from, effect, effect_from
    tier: str = "confirmatory"  # confirmatory (a verdict, Holm over the file's family) | descriptive
    measure: str = ""  # "" (an accuracy claim, trained arms) | throughput | memory (MEASURES)
    mode: str = ""  # a measure claim's step: infer | train

    @property
    def arm_names(self) -> list[str]:
        return [
            self.baseline,
            self.treatment,
            *([self.minus["baseline"], self.minus["treatment"]] if self.minus else []),
        ]


@dataclass(frozen=True)
class BenchModel:
    """A model an efficiency claim measures: a registered name at the paper's size (its keyword arguments and
    input side), built on this machine by harness.measure.bench (nothing is trained)."""

    name: str
    model: str
    kwargs: dict = field(default_factory=dict)
    size: int | None = None  # input side (None: the model's default)
    label: str = ""


@dataclass(frozen=True)
class BenchPlan:
    """How a file's efficiency claims are measured (fixed in the file): batch, interleaved rounds (the claims'
    one look), timed steps per round and untimed warm-up steps."""

    models: dict = field(default_factory=dict)  # name -> BenchModel
    batch_size: int = 8
    rounds: int = 6
    iters: int = 1
    warmup: int = 1
    note: str = ""  # what is measured, in words: the report's "Models:" line


@dataclass(frozen=True)
class Exploratory:
    id: str
    text: str
    why: str


@dataclass(frozen=True)
class ClaimsFile:
    paper: str
    setting: str
    arms: dict  # name -> Arm
    claims: tuple[Claim, ...]
    quick: tuple[str, ...] = ()
    path: Path | None = None
    design: Design = Design()
    exploratory: tuple[Exploratory, ...] = ()
    bench: BenchPlan = BenchPlan()

    def arms_of(self, claim: Claim) -> list[Arm]:
        """The arms a claim needs trained, sources first (an arm initialised from a source needs its run); an
        efficiency claim trains none."""
        if claim.measure:
            return []
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
    bench = _bench(doc.get("bench"), f"{path}: bench")
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
        arms[str(name)] = Arm(
            str(name),
            str(a["config"]),
            str(a.get("label", name)),
            tuple(overrides),
            role,
            a.get("init_from"),
            str(a.get("note", "")),
        )
    for arm in arms.values():
        if arm.init_from is not None and (arm.init_from not in arms or arms[arm.init_from].init_from):
            raise ClaimError(
                f"{path}: arm {arm.name!r} is initialised from {arm.init_from!r}, which is not an arm "
                f"of this file (or is itself initialised from another); known: {', '.join(arms)}"
            )
    claims, seen = [], set()
    for i, c in enumerate(doc["claims"]):
        claim = _claim(c, paper, arms, f"{path}: claim #{i + 1}", bench)
        if claim.id in seen:
            raise ClaimError(f"{path}: claim id {claim.id!r} appears twice")
        seen.add(claim.id)
        claims.append(claim)
    exploratory = []
    for i, x in enumerate(doc.get("exploratory") or []):
        if not isinstance(x, dict) or set(x) != {"id", "text", "why"}:
            raise ClaimError(f"{path}: exploratory #{i + 1} needs exactly 'id', 'text' and 'why' (no verdict)")
        exploratory.append(Exploratory(str(x["id"]), " ".join(str(x["text"]).split()), " ".join(str(x["why"]).split())))
    confirmatory = sum(c.tier == "confirmatory" for c in claims)
    if confirmatory != design.family:
        raise ClaimError(
            f"{path}: design.family says {design.family} confirmatory claim(s), the file has "
            f"{confirmatory}; the family is fixed before any evaluated run: make them agree"
        )
    quick = doc.get("quick") or []
    if not isinstance(quick, list) or not all(isinstance(o, str) and "=" in o for o in quick):
        raise ClaimError(f"{path}: 'quick' is a list of key=value overrides applied to every arm under --quick")
    result = ClaimsFile(
        paper, str(doc["setting"]), arms, tuple(claims), tuple(quick), path, design, tuple(exploratory), bench
    )
    _check_paper_numbers(result, tables)
    return result


def _design(d, where: str) -> Design:
    if not isinstance(d, dict):
        raise ClaimError(f"{where} is missing: the pre-registered plan ({', '.join(sorted(DESIGN_FIELDS))})")
    _no_extra(d, DESIGN_FIELDS, where)
    value = {key: d.get(key, getattr(Design, key)) for key in DESIGN_FIELDS}
    family = bounded(value["family"], f"{where}: family (m, the number of confirmatory claims)", 0, 50, integer=True)
    look_every = bounded(value["look_every"], f"{where}: look_every", 2, MAX_SEEDS, integer=True)
    max_seeds = bounded(value["max_seeds"], f"{where}: max_seeds", look_every, MAX_SEEDS, integer=True)
    if max_seeds // look_every > MAX_LOOKS:
        raise ClaimError(
            f"{where}: max_seeds {max_seeds} at look_every {look_every} makes "
            f"{max_seeds // look_every} looks; at most {MAX_LOOKS}: look less often"
        )
    for key in ("tuning_seeds", "pilot_seeds"):
        if not isinstance(value[key], (list, tuple)) or len(value[key]) > MAX_SEEDS:
            raise ClaimError(f"{where}: {key} is a list of at most {MAX_SEEDS} seeds")
    design = Design(
        family=family,
        alpha=bounded(value["alpha"], f"{where}: alpha", 0, 0.5, open_low=True, open_high=True),
        target_power=bounded(value["target_power"], f"{where}: target_power", 0, 1, open_low=True, open_high=True),
        look_every=look_every,
        max_seeds=max_seeds,
        seeds_from=bounded(value["seeds_from"], f"{where}: seeds_from", 0, SEED_LIMIT - max_seeds, integer=True),
        tuning_seeds=_seeds(value["tuning_seeds"], f"{where}: tuning_seeds"),
        pilot_seeds=_seeds(value["pilot_seeds"], f"{where}: pilot_seeds"),
    )
    evaluated = range(design.seeds_from, design.seeds_from + design.max_seeds)
    if any(s in evaluated for s in design.tuning_seeds):
        raise ClaimError(
            f"{where}: evaluation seeds {design.seeds_from}-{evaluated[-1]} overlap the tuning seeds "
            f"{list(design.tuning_seeds)}; move seeds_from past them"
        )
    overlap = sorted(set(design.pilot_seeds) & (set(evaluated) | set(design.tuning_seeds)))
    if overlap or len(set(design.pilot_seeds)) != len(design.pilot_seeds):
        raise ClaimError(
            f"{where}: pilot_seeds {list(design.pilot_seeds)} repeat a seed or overlap the tuning or evaluation "
            f"seeds ({overlap}); the pilot's block is disjoint from both: pick other seeds"
        )
    return design


def _seeds(seeds, where: str) -> tuple[int, ...]:
    return tuple(bounded(s, where, 0, SEED_LIMIT - 1, integer=True) for s in seeds)


def _bench(b, where: str) -> BenchPlan:
    """The file's ``bench`` section (absent: no efficiency claims), every number bounded."""
    if b is None:
        return BenchPlan()
    if not isinstance(b, dict) or not isinstance(b.get("models"), dict) or not b["models"]:
        raise ClaimError(
            f"{where}: expected a mapping with 'models' (name -> {{model, kwargs, size}}), "
            "'batch_size', 'rounds', 'iters' and 'warmup'"
        )
    _no_extra(b, BENCH_FIELDS, where)
    models = {}
    for name, m in b["models"].items():
        at = f"{where}: model {name!r}"
        if not isinstance(m, dict) or not isinstance(m.get("model"), str) or not m["model"]:
            raise ClaimError(f"{at}: give 'model', a registered model name")
        _no_extra(m, BENCH_MODEL_FIELDS, at)
        kwargs = m.get("kwargs") or {}
        if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
            raise ClaimError(f"{at}: 'kwargs' maps keyword names to values")
        size = None if m.get("size") is None else bounded(m["size"], f"{at}: size", 8, 1024, integer=True)
        models[str(name)] = BenchModel(str(name), m["model"], dict(kwargs), size, str(m.get("label", name)))
    return BenchPlan(
        models,
        bounded(b.get("batch_size", 8), f"{where}: batch_size", 1, 256, integer=True),
        bounded(b.get("rounds", 6), f"{where}: rounds", 2, MAX_ROUNDS, integer=True),
        bounded(b.get("iters", 1), f"{where}: iters", 1, 50, integer=True),
        bounded(b.get("warmup", 1), f"{where}: warmup", 0, 50, integer=True),
        _text(b.get("note", ""), f"{where}: note"),
    )


def _text(value, where: str) -> str:
    if not isinstance(value, str):
        raise ClaimError(f"{where}: expected text, got {type(value).__name__}")
    return value


def bounded(
    value,
    where: str,
    low: float,
    high: float,
    *,
    integer: bool = False,
    open_low: bool = False,
    open_high: bool = False,
):
    """``value`` if it is a number (an integer where ``integer``; never a bool, NaN or infinite) within
    ``[low, high]`` (``open_*``: that end excluded); otherwise one line naming ``where`` and the range."""
    kind = int if integer else (int, float)
    ok = (
        isinstance(value, kind)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (low < value if open_low else low <= value)
        and (value < high if open_high else value <= high)
    )
    if not ok:
        what = "an integer" if integer else "a finite number"
        raise ClaimError(
            f"{where} is {value!r}: give {what} in {'(' if open_low else '['}{low:g}, {high:g}"
            f"{')' if open_high else ']'}"
        )
    return int(value) if integer else float(value)


def _no_extra(mapping: dict, allowed: set, where: str) -> None:
    extra = set(mapping) - allowed
    if extra:
        raise ClaimError(f"{where}: unknown field(s) {sorted(extra)}; allowed: {sorted(allowed)}")


def _claim(c, paper: str, arms: dict, where: str, bench: BenchPlan = BenchPlan()) -> Claim:
    if not isinstance(c, dict) or not c.get("id"):
        raise ClaimError(f"{where}: each claim needs an 'id'")
    where = f"{where} ({c['id']})"
    _no_extra(c, CLAIM_FIELDS, where)
    if c.get("measure") is not None:
        return _measure_claim(c, paper, where, bench)
    for key in ("tier", "quote", "where", "paper", "kind", "test", "baseline", "treatment", "power"):
        if not c.get(key):
            raise ClaimError(f"{where}: '{key}' is missing (every claim quotes its paper and states its design)")
    minus = c.get("minus") or {}
    if minus and (not isinstance(minus, dict) or set(minus) != {"baseline", "treatment"}):
        raise ClaimError(f"{where}: 'minus' is {{baseline: ARM, treatment: ARM}}, the pair whose gain is subtracted")
    for key, name in [
        ("baseline", c["baseline"]),
        ("treatment", c["treatment"]),
        *[(f"minus.{k}", v) for k, v in minus.items()],
    ]:
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
    if c["tier"] not in TIERS:
        raise ClaimError(f"{where}: tier {c['tier']!r} is not one of {', '.join(TIERS)}")
    if test not in TESTS:
        raise ClaimError(f"{where}: test {test!r} is not one of {', '.join(TESTS)}")
    if test == "paired" and any(arms[n].init_from for n in (c["baseline"], c["treatment"])):
        raise ClaimError(
            f"{where}: an arm initialised from another run shares no initial weights with its counterpart: test: welch"
        )
    if minus and test != "paired":
        raise ClaimError(f"{where}: an interaction ('minus') is estimated per seed: test: paired")
    margin = bounded(
        c.get("margin"),
        f"{where}: 'margin' (points of {metric}: the similar/no-worse margin, or for "
        "'better' the smallest effect worth detecting)",
        0,
        MAX_POINTS,
        open_low=True,
    )
    power = c["power"]
    if not isinstance(power, dict) or set(power) != POWER_FIELDS:
        raise ClaimError(
            f"{where}: 'power' needs sd (> 0, points: the measured spread of one seed's difference), "
            "sd_from, effect (points) and effect_from (where each comes from)"
        )
    power = {
        **power,
        "sd": bounded(power["sd"], f"{where}: power.sd (points)", 0, MAX_POINTS, open_low=True),
        "effect": bounded(power["effect"], f"{where}: power.effect (points)", -MAX_POINTS, MAX_POINTS),
    }
    budget_differs = c.get("budget_differs") or []
    if not isinstance(budget_differs, list) or set(budget_differs) - set(BUDGET_KEYS):
        raise ClaimError(f"{where}: 'budget_differs' lists keys of {', '.join(BUDGET_KEYS)}")
    if budget_differs and test == "paired" and not minus:  # an interaction's pairs may differ (check_equal_budget)
        raise ClaimError(f"{where}: arms with different budgets ({budget_differs}) do not pair: test: welch")
    equal = c.get("equal") or {}
    if (
        not isinstance(equal, dict)
        or set(equal) - set(AUDIT_MEASURES)
        or not all(isinstance(v, (int, float)) and 0 <= v < 1 for v in equal.values())
    ):
        raise ClaimError(
            f"{where}: 'equal' maps {' and/or '.join(AUDIT_MEASURES)} to an allowed relative gap "
            f"in [0, 1), e.g. {{params: 0.02, flops: 0.02}}"
        )
    expected = c.get("expected") or {}
    if (
        not isinstance(expected, dict)
        or set(expected) - set(AUDIT_MEASURES)
        or not all(v in ("lower", "higher") for v in expected.values())
    ):
        raise ClaimError(
            f"{where}: 'expected' maps {' and/or '.join(AUDIT_MEASURES)} to lower or higher "
            "(the treatment's size against the baseline's), e.g. {flops: lower}"
        )
    src = c["paper"]
    if not isinstance(src, dict) or not src.get("table") or not isinstance(src.get("rows"), dict) or not src["rows"]:
        raise ClaimError(
            f"{where}: 'paper' needs the table id, the column and the rows with the paper's numbers, "
            "e.g. {table: '3', column: top1, rows: {'Euler X4': 91.72}}"
        )
    _no_extra(src, SOURCE_FIELDS, f"{where}: paper")
    source = PaperSource(str(src["table"]), str(src.get("column", "top1")), dict(src["rows"]), str(src.get("note", "")))
    return Claim(
        paper,
        str(c["id"]),
        " ".join(str(c["quote"]).split()),
        source,
        c["baseline"],
        c["treatment"],
        metric,
        kind,
        float(margin),
        dict(equal),
        dict(expected),
        " ".join(str(c.get("note", "")).split()),
        str(c["where"]),
        test,
        dict(minus),
        tuple(budget_differs),
        dict(power),
        c["tier"],
    )


def _measure_claim(c: dict, paper: str, where: str, bench: BenchPlan) -> Claim:
    """An efficiency claim: two models of the file's ``bench`` section, a measure and a mode; its margin and
    power.effect are fractions on the ratio scale (0.1: 10 %), kept as the log of 1 + the fraction (the scale the
    per-round log ratios are tested on); power.sd is the spread of one round's log ratio."""
    for key in ("tier", "quote", "where", "paper", "kind", "baseline", "treatment", "power", "mode"):
        if not c.get(key):
            raise ClaimError(
                f"{where}: '{key}' is missing (an efficiency claim quotes its paper and names its "
                "models, mode and design)"
            )
    if c["measure"] not in MEASURES:
        raise ClaimError(f"{where}: measure {c['measure']!r} is not one of {', '.join(MEASURES)}")
    if c["mode"] not in BENCH_MODES:
        raise ClaimError(f"{where}: mode {c['mode']!r} is not one of {', '.join(BENCH_MODES)}")
    for key in ("baseline", "treatment"):
        if c[key] not in bench.models:
            raise ClaimError(
                f"{where}: {key} {c[key]!r} is not a model of the file's bench section; known: "
                f"{', '.join(bench.models) or 'none'}"
            )
    if c["baseline"] == c["treatment"]:
        raise ClaimError(f"{where}: baseline and treatment are the same model {c['baseline']!r}")
    if c["kind"] not in KINDS:
        raise ClaimError(f"{where}: kind {c['kind']!r} is not one of {', '.join(KINDS)} (what the paper claims)")
    if c["tier"] not in TIERS:
        raise ClaimError(f"{where}: tier {c['tier']!r} is not one of {', '.join(TIERS)}")
    if c.get("test", "paired") != "paired" or set(c) & {"minus", "equal", "expected", "budget_differs", "metric"}:
        raise ClaimError(
            f"{where}: an efficiency claim is paired by round (test: paired) and takes no minus, "
            "equal, expected, budget_differs or metric"
        )
    margin = bounded(c.get("margin"), f"{where}: 'margin' (a fraction of the ratio: 0.1 = 10 %)", 0, 1, open_low=True)
    power = c["power"]
    if not isinstance(power, dict) or set(power) != POWER_FIELDS:
        raise ClaimError(
            f"{where}: 'power' needs sd (> 0: one round's log ratio), sd_from, effect (a fraction "
            "of the ratio) and effect_from"
        )
    power = {
        **power,
        "sd": bounded(power["sd"], f"{where}: power.sd (log ratio)", 0, 1, open_low=True),
        "effect": math.log1p(bounded(power["effect"], f"{where}: power.effect (a fraction)", -0.9, 10)),
    }
    src = c["paper"]
    if not isinstance(src, dict) or not src.get("table") or not isinstance(src.get("rows"), dict) or not src["rows"]:
        raise ClaimError(f"{where}: 'paper' needs the table id, the column and the rows with the paper's numbers")
    _no_extra(src, SOURCE_FIELDS, f"{where}: paper")
    source = PaperSource(str(src["table"]), str(src.get("column", "top1")), dict(src["rows"]), str(src.get("note", "")))
    return Claim(
        paper,
        str(c["id"]),
        " ".join(str(c["quote"]).split()),
        source,
        bench_key(c["baseline"], c["measure"], c["mode"]),
        bench_key(c["treatment"], c["measure"], c["mode"]),
        c["measure"],
        c["kind"],
        math.log1p(margin),
        {},
        {},
        " ".join(str(c.get("note", "")).split()),
        str(c["where"]),
        "paired",
        {},
        (),
        power,
        c["tier"],
        c["measure"],
        c["mode"],
    )


def only_efficiency(claims: ClaimsFile) -> ClaimsFile:
    """``claims`` with its efficiency claims alone (``claims --efficiency``); its design -- the family's size m --
    unchanged, so Holm counts the claims left out as not rejected."""
    return replace(claims, claims=tuple(c for c in claims.claims if c.measure), exploratory=())


def claims_files(papers: list[str] | None = None, efficiency: bool = False) -> list[ClaimsFile]:
    """The claims files of ``papers`` (default: every paper with claims); ``efficiency``: their efficiency claims
    alone, the papers without any left out. An unknown paper or a bad file is one line."""
    files = [load_claims(p) for p in (papers or available_claims())]
    if efficiency:
        files = [f for f in (only_efficiency(f) for f in files) if f.claims]
        if not files:
            raise DepthbenchError(f"--efficiency: {', '.join(papers or [])} has no efficiency claims")
    return files


def bench_key(model: str, measure: str, mode: str) -> str:
    """An efficiency claim's arm: a model of the bench section measured one way, e.g. ``swin_b:throughput:infer``
    (one model may be the arm of a throughput and a memory claim)."""
    return f"{model}:{measure}:{mode}"


def split_bench_key(key: str) -> tuple[str, str, str]:
    """``(model, measure, mode)`` of a :func:`bench_key`."""
    model, measure, mode = key.rsplit(":", 2)
    return model, measure, mode


def ratio_margin(claim: Claim) -> float:
    """An efficiency claim's margin as the file gives it, a fraction of the ratio (0.1 = 10 %)."""
    return math.expm1(claim.margin)


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
            raise ClaimError(f"{where}: {claims.paper} has no table {claim.source.table!r}; known: {', '.join(by_id)}")
        rows = {r.name: r for r in table.rows}
        for name, number in claim.source.rows.items():
            if name not in rows:
                raise ClaimError(f"{where}: table {table.id} has no row {name!r}")
            printed = (rows[name].paper or {}).get(claim.source.column)
            if printed is None or not _same_number(printed, number):
                raise ClaimError(
                    f"{where}: table {table.id} row {name!r} prints {claim.source.column}={printed}, "
                    f"the claim copied {number}"
                )


def _same_number(a, b) -> bool:
    try:
        return math.isclose(float(a), float(b), abs_tol=1e-9)
    except (TypeError, ValueError):
        return str(a) == str(b)


def seeds_per_arm(seeds, quick: bool) -> int | None:
    """The cap on seeds per arm: ``seeds`` (an integer, 1 or more; None: the design's plan), one under
    ``--quick``."""
    if seeds is not None and (not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1):
        raise ClaimError(f"--seeds {seeds}: give the most seeds per arm to train, 1 or more")
    return 1 if quick else seeds


# ----------------------------------------------------------------------------------------- the report
@dataclass(frozen=True)
class ArmStats:
    arm: str
    values: tuple[float, ...]
    mean: float
    std: float  # sample standard deviation (ddof=1); 0 for one seed

    @property
    def n(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class Interval:
    method: str  # "paired" or "welch" (repeated confidence interval of the plan)
    level: float  # the familywise level it is read at (1 - alpha/m or Holm's)
    diff: float  # the effect: mean(treatment - baseline) (minus the shallower gain)
    low: float | None  # None: not enough seeds for an interval
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
    looks: tuple = ()  # ({n, diff, low, high, decision}, ...) at the looks reached
    planned: tuple = ()  # the plan's looks (seeds per arm)
    power: float | None = None  # of the plan, at the design's effect (or margin) and sd
    p_value: float | None = None  # repeated p-value (Holm's input)
    level: float | None = None  # the level Holm rejected at, or None
    ruled_out: str = ""  # inconclusive: the largest effect the data rule out
    quick: bool = False
    hardware: tuple = ()  # the machines the runs came from (one text each)
    seeds_needed: int | None = None  # for the target power without the budget's cap (None: more than 60)
    observed_sd: float | None = None  # one seed's difference as the runs spread it (beside power.sd, the pilot's)
    observed_seeds_needed: int | None = None  # seeds_needed at observed_sd (None: more than 60, or no spread)
    # a second, descriptive measure (not pre-registered, no verdict): the validation loss's difference at the
    # seeds the verdict used, {diff, low, high, level, n} (a plain t interval), None where the runs logged none
    val_loss: dict | None = None
    # the stopping rule's reading (confirmatory claims: the plan at alpha / m, which decides whether more seeds
    # train; the verdict is read at Holm's level, so the two can differ): its decision or None (train on), and the
    # seeds per arm every arm had when the report was written
    stop_rule: str | None = None
    trained_seeds: int = 0

    @property
    def stopped_at(self) -> int:
        return self.looks[-1]["n"] if self.looks else 0

    def summary(self) -> str:
        """One line: the claim, both arms, the interval and the verdict."""
        c, b, t, i = self.claim, self.baseline, self.treatment, self.interval
        if c.measure:  # the effect is a log ratio: shown as the ratio
            ci = f"[{math.exp(i.low):.3f}, {math.exp(i.high):.3f}]" if i.low is not None else "no interval"
            return (
                f"{c.paper}/{c.id}: {c.measure} ({c.mode}) advantage of {c.treatment.split(':')[0]} over "
                f"{c.baseline.split(':')[0]} {math.exp(i.diff):.3f}x {ci} at {i.level:.1%} → {self.verdict}"
            )
        ci = f"{i.bounds()} ({i.method}, {i.level:.1%})" if i.low is not None else "no interval (one seed)"
        extra = f"; {self.ruled_out}" if self.ruled_out else ""
        return (
            f"{c.paper}/{c.id}: {c.treatment} {t.mean:.2f} ± {t.std:.2f} vs {c.baseline} {b.mean:.2f} ± "
            f"{b.std:.2f} ({c.metric}, n={t.n}/{b.n}); effect {i.diff:+.2f} {ci} → {self.verdict}{extra}"
        )


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
            _check_report_claim(r["claim"])
            claim = Claim(
                **{
                    **r["claim"],
                    "source": PaperSource(**{**source, "rows": dict(source["rows"])}),
                    "budget_differs": tuple(r["claim"].get("budget_differs", ())),
                }
            )
            arms = [
                ArmStats(str(r[k]["arm"]), tuple(map(float, r[k]["values"])), float(r[k]["mean"]), float(r[k]["std"]))
                for k in ("baseline", "treatment")
            ]
            i = r["interval"]
            low, high = (None if i[k] is None else float(i[k]) for k in ("low", "high"))
            interval = Interval(str(i["method"]), float(i["level"]), float(i["diff"]), low, high, i.get("df"))
            extra = {
                k: r[k]
                for k in (
                    "power",
                    "p_value",
                    "level",
                    "ruled_out",
                    "quick",
                    "seeds_needed",
                    "observed_sd",
                    "observed_seeds_needed",
                    "val_loss",
                    "stop_rule",
                    "trained_seeds",
                )
                if k in r
            }
            _check_report_extra(extra)
            if r["verdict"] not in VERDICTS:
                raise ValueError(f"verdict {r['verdict']!r} is not one of {', '.join(VERDICTS)}")
            results.append(
                (
                    ClaimResult(
                        claim,
                        *arms,
                        interval,
                        str(r["verdict"]),
                        tuple(map(str, r["notes"])),
                        tuple(r.get("looks", ())),
                        tuple(r.get("planned", ())),
                        hardware=tuple(r.get("hardware", ())),
                        **extra,
                    ),
                    str(r["setting"]),
                )
            )
    except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError, BadFile, ClaimError) as e:
        raise ClaimError(
            f"{path} is unreadable ({e!r}); rerun `depthbench claims --out {path.parent}` to rewrite it"
        ) from None
    return results


def _check_report_extra(extra: dict) -> None:
    """A report's per-claim numbers have the types `depthbench claims` writes (a probability in [0, 1], a seed
    count, a spread, a decision, a text), so a hand-edited or hostile claims.json fails here in one line rather
    than where the report is printed or drawn."""
    for key, (low, high, integer) in {
        "power": (0, 1, False),
        "p_value": (0, 1, False),
        "level": (0, 1, False),
        "seeds_needed": (0, 10_000, True),
        "observed_seeds_needed": (0, 10_000, True),
        "observed_sd": (0, MAX_POINTS, False),
        "trained_seeds": (0, 10_000, True),
    }.items():
        if extra.get(key) is not None:
            bounded(extra[key], key, low, high, integer=integer)
    if extra.get("stop_rule") not in (None, "supported", "contradicted", "equivalent"):
        raise ValueError(f"stop_rule {extra['stop_rule']!r} is not a decision")
    if not isinstance(extra.get("ruled_out", ""), str) or not isinstance(extra.get("quick", False), bool):
        raise ValueError("ruled_out is not a text or quick not true/false")
    loss = extra.get("val_loss")
    if loss is not None and not (
        isinstance(loss, dict) and all(bounded(v, f"val_loss {k}", -1e6, 1e6) is not None for k, v in loss.items())
    ):
        raise ValueError("val_loss is not a record of numbers")


def _check_report_claim(record: dict) -> None:
    """A report's claim has the types a claims file gives it (texts are strings, the margin a finite number):
    anything else, e.g. a list as the quote, would end in a traceback where the report is read or printed."""
    for key in ("paper", "id", "text", "baseline", "treatment", "metric", "kind", "note", "where", "test", "tier"):
        if key in record and not isinstance(record[key], str):
            raise ValueError(f"claim field {key!r} is a {type(record[key]).__name__}, not text")
    bounded(record.get("margin"), "claim field 'margin'", 0, MAX_POINTS, open_low=True)


# ----------------------------------------------------------------------------------------- reporting
@dataclass
class ClaimsReport:
    """What ``depthbench claims`` returns (results/claims_run.py writes it; :func:`read_status` reads it back)."""

    results: list  # ClaimResult per claim
    out: Path
    runs: list = field(default_factory=list)
    files: list = field(default_factory=list)
    status: list = field(default_factory=list)  # one line per paper


def read_status(files, out: Path) -> ClaimsReport:
    """``--status``: the verdicts of the report ``out`` holds (its claims.json: the one source the report's
    claims.md and the HTML Claims page are written from), per paper; a --quick folder says so, and claims the
    report lacks or that changed since it was written are named."""
    report = out / "claims.json"
    if not report.is_file():
        return ClaimsReport([], out, status=[f"{f.paper}: no claims evaluated yet (no report in {out})" for f in files])
    stored = read_report(report)
    lines, results = [], []
    for f in files:
        mine = [r for r, _ in stored if r.claim.paper == f.paper]
        results += mine
        quick = any(r.quick or setting.endswith("[--quick]") for r, setting in stored if r.claim.paper == f.paper)
        reported = {(r.claim.id, r.claim.text, r.claim.kind) for r in mine}
        # a descriptive claim the report lacks was left out by `--tier confirmatory` (claims.md lists it with its
        # cost) or added since: either way not trained there, which is not a stale verdict
        untrained = [c.id for c in f.claims if c.tier == "descriptive" and c.id not in {r.claim.id for r in mine}]
        current = {(c.id, c.text, c.kind) for c in f.claims if c.id not in untrained}
        line = status_line(f.paper, mine, quick) if mine else f"{f.paper}: not in the report {report}"
        if mine and untrained:
            line += (
                f"; descriptive, not trained there: {', '.join(untrained)} (`depthbench claims {f.paper}` trains them)"
            )
        if mine and current != reported:
            line += (
                f" — the report predates the current claims file ({len(current - reported)} claim(s) new or "
                f"changed): rerun `depthbench claims {f.paper}{' --quick' if quick else ''} --out {out}`"
            )
        lines.append(line)
    return ClaimsReport(results, out, [], [], lines)


def status_line(paper: str, results: Sequence[ClaimResult], quick: bool = False) -> str:
    """``depthbench claims --status``: one line per paper, e.g. ``horesnet: 3 claims — 1 supported, 2
    inconclusive (3–6 seeds)``."""
    if not results:
        return f"{paper}: no claims evaluated yet"
    counts = {v: sum(r.verdict == v for r in results) for v in VERDICTS}
    parts = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    seeds = sorted({min(r.baseline.n, r.treatment.n) for r in results if not r.claim.measure})
    seeds_text = (
        ""
        if not seeds
        else f"{seeds[0]} seed{'s' if seeds[0] != 1 else ''}"
        if len(seeds) == 1
        else f"{seeds[0]}–{seeds[-1]} seeds"
    )
    measured = sum(bool(r.claim.measure) for r in results)
    where = ", ".join(
        x
        for x in (
            f"{seeds_text}, reduced setting" if seeds else "",
            f"{measured} efficiency claim{'s' if measured != 1 else ''} measured on the paper's models"
            if measured
            else "",
        )
        if x
    )
    return f"{paper}: {len(results)} claim{'s' if len(results) != 1 else ''} — {parts} ({where})" + (
        " [--quick: no verdicts]" if quick else ""
    )
