"""The papers' claims at the papers' own scale: ``depthbench claims PAPER --scale paper --plan`` and ``depthbench
submit --claims PAPER --scale paper``.

Each claims file's ``paper_scale`` section maps its claims' arms to the papers' own recipes (``configs/<paper>/``:
ImageNet-1K, CIFAR-10; ``overrides`` where a recipe serves another model of the paper) and states the inputs of the
power analysis at that scale -- the spread of one seed's paired difference (no paper reports a seed spread: each
file states its assumption) and the effect -- plus the GPUs per run and the looks::

    paper_scale:
      gpus: 8                     # per run (the recipes' 8xb128)
      look_every: 2               # seeds per arm between looks
      max_seeds: 6
      seeds_from: 0
      sd: 0.2                     # points: one seed's paired difference at this scale
      sd_from: "assumed: ..."
      claims:
        steps-deit-vs-deit:       # a claim of the file (same kind, tier, test, Holm family)
          arms: {deit: {config: configs/deit/deit-tiny_8xb128-300e_in1k.py}, steps-deit: {config: ...}}
          effect: 1.0             # points (better: the effect the power is planned for)
          effect_from: "Table 1: +1.0"
          margin: 0.5             # points on the paper's scale

The plan: per claim its arms, the seeds per look (:func:`results.sequential.seeds_for_power` at alpha / m, m the
file's family) and the cost of the first look and of the whole plan in GPU-hours from ``submit --estimate``'s
machinery (:func:`harness.measure.estimate.estimate`: a preflight record of the recipe on a GPU, else a bench CSV
row, else another model's record scaled by FLOPs -- "extrapolated" -- else no step time, said per row). The
efficiency claims need no training: ``depthbench claims PAPER --efficiency --device cuda`` on one GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from harness.core.errors import DepthbenchError
from harness.core.rundir import RunDir
from harness.measure import estimate as est
from results import claims as cl
from results import sequential as seq
from results.claims import RunSpec
from harness.core.choices import claims_out
from results.claims_run import run_values
from results.claims_status import REPO, ClaimError, ClaimsFile, available_claims, bounded, load_claims
from results.paper_tables import read_yaml

SCALE_FIELDS = {"gpus", "look_every", "max_seeds", "seeds_from", "sd", "sd_from", "claims", "note"}
SCALE_CLAIM_FIELDS = {"arms", "effect", "effect_from", "margin", "note"}


@dataclass(frozen=True)
class ScaleArm:
    name: str
    config: str
    overrides: tuple = ()


@dataclass(frozen=True)
class ScaleClaim:
    id: str
    arms: tuple  # ScaleArm per arm the claim names
    effect: float
    effect_from: str
    margin: float
    note: str = ""


@dataclass(frozen=True)
class PaperScale:
    gpus: int
    look_every: int
    max_seeds: int
    seeds_from: int
    sd: float
    sd_from: str
    claims: dict  # claim id -> ScaleClaim
    note: str = ""


@dataclass
class PlanRow:
    """One claim at the paper's scale: its arms, looks (seeds per arm), power and cost."""

    paper: str
    claim: str
    tier: str
    kind: str
    arms: tuple = ()
    looks: tuple = ()
    power: float | None = None
    first_look_hours: float | None = None  # GPU-hours of the first look (runs with a step time)
    all_looks_hours: float | None = None
    sources: tuple = ()  # per arm: where its step time comes from
    untimed: int = 0  # arms without any step time (their cost is not in the hours)
    how: str = ""  # an efficiency claim: the command that measures it


def paper_scale(claims: ClaimsFile) -> PaperScale:
    """The file's ``paper_scale`` section, validated (one line on the first problem)."""
    where = f"{claims.path}: paper_scale"
    doc = read_yaml(claims.path, ClaimError, "claims file").get("paper_scale")
    if not isinstance(doc, dict) or not isinstance(doc.get("claims"), dict):
        raise ClaimError(f"{where} is missing: map the claims' arms to the paper's recipes (results/claims_scale.py)")
    extra = set(doc) - SCALE_FIELDS
    if extra:
        raise ClaimError(f"{where}: unknown field(s) {sorted(extra)}; allowed: {sorted(SCALE_FIELDS)}")
    look_every = bounded(doc.get("look_every"), f"{where}: look_every", 1, 20, integer=True)
    max_seeds = bounded(doc.get("max_seeds"), f"{where}: max_seeds", look_every, 20, integer=True)
    if max_seeds // look_every > 5:
        raise ClaimError(f"{where}: {max_seeds // look_every} looks; at most 5")
    known = {c.id: c for c in claims.claims}
    scaled = {}
    for cid, c in doc["claims"].items():
        at = f"{where}: claim {cid!r}"
        if cid not in known or known[cid].measure:
            raise ClaimError(
                f"{at} is not an accuracy claim of the file; known: "
                f"{', '.join(k for k, v in known.items() if not v.measure)}"
            )
        if not isinstance(c, dict) or set(c) - SCALE_CLAIM_FIELDS or not isinstance(c.get("arms"), dict):
            raise ClaimError(f"{at}: give arms (arm -> {{config, overrides}}), effect, effect_from and margin")
        if set(c["arms"]) != set(known[cid].arm_names):
            raise ClaimError(f"{at}: arms {sorted(c['arms'])}, the claim compares {sorted(known[cid].arm_names)}")
        arms = []
        for name, a in c["arms"].items():
            if not isinstance(a, dict) or not isinstance(a.get("config"), str) or not (REPO / a["config"]).is_file():
                raise ClaimError(f"{at}: arm {name!r} needs a config that exists under configs/")
            overrides = a.get("overrides") or []
            if not isinstance(overrides, list) or not all(isinstance(o, str) and "=" in o for o in overrides):
                raise ClaimError(f"{at}: arm {name!r}: overrides are key=value strings")
            arms.append(ScaleArm(str(name), a["config"], tuple(overrides)))
        scaled[cid] = ScaleClaim(
            cid,
            tuple(arms),
            bounded(c.get("effect"), f"{at}: effect", -100, 100),
            str(c.get("effect_from", "")),
            bounded(c.get("margin"), f"{at}: margin", 0, 100, open_low=True),
            str(c.get("note", "")),
        )
    return PaperScale(
        bounded(doc.get("gpus"), f"{where}: gpus", 1, 64, integer=True),
        look_every,
        max_seeds,
        bounded(doc.get("seeds_from", 0), f"{where}: seeds_from", 0, 2**31 - 100, integer=True),
        bounded(doc.get("sd"), f"{where}: sd", 0, 100, open_low=True),
        str(doc.get("sd_from", "")),
        scaled,
        str(doc.get("note", "")),
    )


def plan(claims: ClaimsFile, records: list | None = None, bench_rows: list | None = None) -> list[PlanRow]:
    """Every claim of the file at the paper's scale (:class:`PlanRow`); ``records``/``bench_rows``: the preflight
    records and bench CSV rows the estimate reads (None: the machine's, as ``submit --estimate``)."""
    scale = paper_scale(claims)
    layout = est.Layout(nodes=1, gpus_per_node=scale.gpus)
    rows = []
    for claim in claims.claims:
        row = PlanRow(claims.paper, claim.id, claim.tier, claim.kind)
        if claim.measure:
            row.how = (
                f"measured, not trained: depthbench claims {claims.paper} --efficiency --device cuda (one GPU, minutes)"
            )
            rows.append(row)
            continue
        sc = scale.claims.get(claim.id)
        if sc is None:
            row.how = "no recipe of the paper's for these arms (not planned at the paper's scale)"
            rows.append(row)
            continue
        alpha = claims.design.alpha / max(claims.design.family, 1)
        if claim.tier == "descriptive":
            row.looks = (scale.look_every,)
        else:
            row.looks, row.power = seq.seeds_for_power(
                abs(sc.effect) or sc.margin,
                scale.sd,
                alpha,
                0.8,
                scale.look_every,
                scale.max_seeds,
                claim.kind,
                sc.margin,
            )
        jobs = [
            est.Job(f"{claims.paper}/{a.name}", a.config, (*a.overrides, f"seed={scale.seeds_from}")) for a in sc.arms
        ]
        estimate = est.estimate(jobs, layout, records=records, bench_rows=bench_rows)
        timed = [r.device_hours for r in estimate.rows if r.device_hours is not None]
        row.arms = tuple(f"{a.name}: {a.config}{' ' + ' '.join(a.overrides) if a.overrides else ''}" for a in sc.arms)
        row.sources = tuple(_label(r) for r in estimate.rows)
        row.untimed = len(estimate.rows) - len(timed)
        if timed:
            per_seed = sum(timed)
            row.first_look_hours, row.all_looks_hours = per_seed * row.looks[0], per_seed * row.looks[-1]
        rows.append(row)
    return rows


def _label(r: est.Row) -> str:
    """Where a run's step time comes from, labelled: measured (a preflight record of this recipe), extrapolated
    (another model's, scaled by FLOPs, or a bench row), or none."""
    if r.step_s is None:
        return f"no step time ({r.problem or r.source})"
    kind = "measured" if r.source.startswith("preflight") else "extrapolated"
    return f"{kind}: {r.source}"


def format_plan(rows: list[PlanRow], claims: ClaimsFile) -> list[str]:
    """The plan as text, one block per claim, then the paper's total."""
    scale = paper_scale(claims)
    lines = [
        f"{claims.paper} at the paper's scale: {scale.gpus} GPU(s) per run, looks every {scale.look_every} "
        f"seeds up to {scale.max_seeds}, alpha {claims.design.alpha} over the family of "
        f"{claims.design.family} (Holm); seed spread {scale.sd:g} points ({scale.sd_from})"
    ]
    first = total = 0.0
    for r in rows:
        head = f"  {r.claim} ({r.tier}, {r.kind})"
        if r.how:
            lines.append(f"{head}: {r.how}")
            continue
        power = "" if r.power is None else f", power {r.power:.0%}"
        hours = (
            "no GPU-hours: no step time for any arm (run `depthbench preflight` on the GPU)"
            if r.first_look_hours is None
            else f"{r.first_look_hours:.0f} GPU-h at the first look, {r.all_looks_hours:.0f} at the last"
            + (f" (without {r.untimed} arm(s) that have no step time)" if r.untimed else "")
        )
        lines.append(f"{head}: seeds per look {list(r.looks)}{power}; {hours}")
        lines += [f"    arm {a}" for a in r.arms] + [f"    step time: {s}" for s in r.sources]
        first += r.first_look_hours or 0.0
        total += r.all_looks_hours or 0.0
    lines.append(
        f"  total: {first:.0f} GPU-h at the first look, {total:.0f} if every claim runs to its last look "
        "(timed arms only)"
    )
    return lines


def plan_papers(papers: list[str] | None = None, plan_only: bool = True, out: str | Path | None = None) -> list[str]:
    """``depthbench claims --scale paper [--plan]``: per paper (default: every paper with claims), its claims on
    the paper's own recipes (``--plan``), or the verdicts of the looks the runs in ``out`` (default
    results/claims-paper) reached and the next look, as text."""
    folder = Path(out) if out else claims_out(False, scale="paper")
    lines = []
    for paper in papers or available_claims():
        claims = load_claims(paper)  # unknown paper / bad file: one line
        if plan_only:
            lines += format_plan(plan(claims), claims)
        else:
            option = "" if out is None else f" --claims-out {folder}"
            lines += format_decision(decide(claims, folder), folder, option)
    return lines


def run_dirs(claims: ClaimsFile, scale: PaperScale | None = None) -> dict:
    """``(claim id, arm) -> folder name`` of each accuracy claim's arms at the paper's scale: one folder per recipe
    (config and overrides), the arm's name -- or ``<arm>-<claim>`` for an arm that an earlier claim trains with
    another recipe (SReT's loop2 without slicing)."""
    scale = scale or paper_scale(claims)
    names, dirs = {}, {}
    for claim in claims.claims:
        sc = scale.claims.get(claim.id)
        for a in sc.arms if sc else ():
            key = (a.config, a.overrides)
            if key not in dirs:
                dirs[key] = a.name if a.name not in dirs.values() else f"{a.name}-{claim.id}"
            names[(claim.id, a.name)] = dirs[key]
    return names


def look_runs(claims: ClaimsFile, out: Path, upto: dict) -> list:
    """The runs at the paper's scale of each claim of ``upto`` (claim id -> seeds per arm: its look), as
    :class:`results.claims.RunSpec` in ``<out>/runs/<paper>/<folder>/seed<k>`` (:func:`run_dirs`), each once."""
    scale = paper_scale(claims)
    names, specs = run_dirs(claims, scale), {}
    for cid, n in upto.items():
        for a in scale.claims[cid].arms:
            name = names[(cid, a.name)]
            for seed in range(scale.seeds_from, scale.seeds_from + n):
                overrides = [*a.overrides, f"seed={seed}", f"experiment='claims-{claims.paper}-{name}-paper'"]
                work_dir = Path(out) / "runs" / claims.paper / name / f"seed{seed}"
                specs.setdefault(work_dir, RunSpec(claims.paper, name, seed, a.config, overrides, work_dir))
    return list(specs.values())


@dataclass
class ScaleDecision:
    """What the runs of the looks done so far decide at the paper's scale (``claims PAPER --scale paper``)."""

    paper: str
    results: list  # ClaimResult per claim with a finished run (evaluate -> Holm, the file's family)
    next_look: dict  # claim id -> seeds per arm of its next look; None: decided, or its plan is done
    waiting: dict  # claim id -> finished seeds per arm, for claims whose first look is not complete yet
    next_runs: list  # the RunSpecs of the next looks that are not done (what `submit` sends)


def decide(claims: ClaimsFile, out: Path) -> ScaleDecision:
    """Read the runs ``submit --claims PAPER --scale paper`` wrote into ``out`` and decide with the reduced
    scale's code: each claim's effect at the looks its finished seeds reach (:func:`results.claims.evaluate`,
    Holm over the file's family -- its efficiency claims and claims without a paper recipe count as p = 1), at
    the paper-scale margins, spread and looks; a claim decided at alpha / m (:func:`results.claims.stop_decision`)
    trains no more seeds, an open one's next look is the plan's next."""
    scale = paper_scale(claims)
    design = replace(claims.design, look_every=scale.look_every, max_seeds=scale.max_seeds, seeds_from=scale.seeds_from)
    names = run_dirs(claims, scale)
    rows = {r.claim: r for r in plan(claims, [], []) if r.arms}
    planned = [c for c in claims.claims if c.id in rows]
    values = run_values(look_runs(claims, out, {c.id: rows[c.id].looks[-1] for c in planned}))
    scaled, plans, powers, waiting, next_look = [], {}, {}, {}, {}
    for claim in planned:
        sc, row = scale.claims[claim.id], rows[claim.id]
        at_scale = _at_scale(claim, sc, scale, names)
        arms = {a: values.get((claims.paper, a), {}) for a in at_scale.arm_names}
        done = len(set.intersection(*(set(v) for v in arms.values())))
        if done < row.looks[0]:
            waiting[claim.id], next_look[claim.id] = done, row.looks[0]
        if done:
            scaled.append((at_scale, design))
            plans[(claims.paper, claim.id)], powers[(claims.paper, claim.id)] = row.looks, row.power
        if done >= row.looks[0]:
            reached = [n for n in row.looks if n <= done]
            stop = cl.stop_decision(at_scale, design, arms, row.looks) if claim.tier == "confirmatory" else "one look"
            later = [n for n in row.looks if n > reached[-1]]
            next_look[claim.id] = None if stop or not later else later[0]
    results = cl.evaluate(scaled, values, plans, powers)
    upto = {cid: n for cid, n in next_look.items() if n}
    todo = [s for s in look_runs(claims, out, upto) if not cl.run_done(s) and not _running(s)]
    return ScaleDecision(claims.paper, results, next_look, waiting, todo)


def _running(spec) -> bool:
    """The run has started (its meta.json says running): submitted already, not to be submitted again."""
    try:
        return RunDir.open(spec.work_dir, writer=False).meta().get("status") == "running"
    except DepthbenchError:
        return False


def _at_scale(claim, sc: ScaleClaim, scale: PaperScale, names: dict):
    """The claim with its arms renamed to their run folders and the paper scale's margin and power inputs."""
    minus = {k: names[(claim.id, v)] for k, v in claim.minus.items()}
    return replace(
        claim,
        baseline=names[(claim.id, claim.baseline)],
        treatment=names[(claim.id, claim.treatment)],
        minus=minus,
        margin=sc.margin,
        power={"sd": scale.sd, "sd_from": scale.sd_from, "effect": sc.effect, "effect_from": sc.effect_from},
    )


def format_decision(d: ScaleDecision, out: Path, out_option: str = "") -> list[str]:
    """The decisions as text: a line per claim with runs (the reduced scale's summary), the claims still waiting
    for their first look, and what comes next with the ``submit`` command that trains it (``out_option``: its
    ``--claims-out DIR``, empty for the default folder)."""
    lines = [f"{d.paper} at the paper's scale (runs in {out}):"]
    lines += [f"  {r.summary()} [looks reached: {[lk['n'] for lk in r.looks] or 'none'}]" for r in d.results]
    lines += [
        f"  {cid}: {n} seed(s) finished in every arm, the first look needs {d.next_look[cid]}"
        for cid, n in d.waiting.items()
    ]
    decided = [cid for cid, n in d.next_look.items() if n is None]
    if decided:
        lines.append(f"  no more seeds: {', '.join(decided)} (decided, or at the plan's last look)")
    coming = {cid: n for cid, n in d.next_look.items() if n}
    if coming:
        looks = ", ".join(f"{cid} at {n} seeds" for cid, n in coming.items())
        lines.append(
            f"  next look: {looks}; {len(d.next_runs)} run(s) to train: `depthbench submit --claims {d.paper} "
            f"--scale paper{out_option}`"
            if d.next_runs
            else f"  next look: {looks}; its runs are all done or submitted: rerun this command once they finish"
        )
    return lines
