"""``depthbench claims --pilot``: the spread the power analysis needs, measured before an evaluated run.

A pilot trains the arms of the claims files' accuracy claims at the design's ``pilot_seeds`` (50-59: disjoint from
the tuning seeds the recipes were tuned on and from the evaluation seeds from ``seeds_from``), in its own folder
(``results/claims-pilot``, the same ``runs/<paper>/<arm>/seed<k>`` layout and stale check as ``depthbench
claims``), and writes per claim the pilot's mean and between-seed sd per arm, the spread of one seed's difference
(:func:`results.claims.difference_sd`: paired, the sd of the per-seed differences; Welch, both arms' sds
combined), the ``power:`` block to paste into the claims file before the evaluated run, and the seeds the plan
would then need. It never issues a verdict: a pilot's seeds plan the test, they are not evidence for it.

There is no alternative-recipe mechanism in the claims files (one recipe per arm), so choosing a recipe by its
spread is reading the per-arm table: mean and between-seed sd side by side.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from harness.core.errors import DepthbenchError
from harness.core.files import atomic_write, check_writable_folder
from results import claims as cl
from results import claims_run


@dataclass(frozen=True)
class PilotRow:
    """One claim's pilot: per arm ``{arm: {mean, sd, n}}``, the difference's spread and what it plans."""

    paper: str
    claim: str
    tier: str
    test: str
    arms: dict
    seeds: tuple
    sd: float | None  # one seed's difference (None below two seeds)
    power: dict = field(default_factory=dict)  # the block to paste: sd, sd_from, effect, effect_from
    looks: tuple = ()  # the plan's looks at the pilot's sd (the design's budget)
    plan_power: float | None = None
    seeds_needed: int | None = None  # without the budget's cap (None: more than 60)
    file_sd: float | None = None  # power.sd the claims file has now


@dataclass
class PilotReport:
    rows: list
    out: Path
    runs: list = field(default_factory=list)
    written: list = field(default_factory=list)


def pilot_seed_count(seeds: int | None, quick: bool, files) -> int:
    """``--seeds`` for a pilot: default 10 (2 under ``--quick``: the fewest that give a spread), at most the
    design's ``pilot_seeds``."""
    n = seeds if seeds is not None else (2 if quick else 10)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise DepthbenchError(f"--seeds {seeds}: give the pilot's seeds per arm, 1 or more")
    for f in files:
        if n > len(f.design.pilot_seeds):
            raise DepthbenchError(
                f"--seeds {n}: {f.paper}'s design has {len(f.design.pilot_seeds)} pilot_seeds; give at most that"
            )
    return n


def run_pilot(
    files, out: Path, seeds: int, quick: bool, jobs: int | None = None, device: str | None = None
) -> PilotReport:
    """Train the accuracy claims' arms of ``files`` at their first ``seeds`` pilot seeds into ``out`` (what is done
    is reused; ``jobs``, ``device`` as :func:`results.claims_run.run_claims`), then write ``out``/pilot.json and
    pilot.md (:func:`pilot_rows`)."""
    jobs, env = claims_run.run_slots(jobs, device)
    if (out / "claims.json").exists():
        raise DepthbenchError(
            f"--out {out} holds an evaluated claims report; a pilot's runs are not evidence: give the pilot its "
            "own folder (default results/claims-pilot)"
        )
    check_writable_folder(out, "--out", "the pilot's runs and its table")
    files = [replace(f, claims=tuple(c for c in f.claims if not c.measure)) for f in files]
    files = [f for f in files if f.claims]
    if not files:
        raise DepthbenchError("the papers given have no accuracy claims: a pilot trains nothing for efficiency claims")
    datasets = claims_run.check_and_list_data(files, quick)
    specs = [s for f in files for s in cl.plan_runs(f, seeds, quick, out, pilot=True)]
    cl.check_not_stale(specs, "move them away (or use another --out) and they are trained again")
    claims_run.prepare_data(datasets, jobs)
    claims_run.train_runs(specs, jobs, env)
    rows = pilot_rows(files, claims_run.run_values(specs), quick)
    written = write_pilot(rows, out, quick)
    return PilotReport(rows, out, specs, written)


def pilot_rows(files, values: dict, quick: bool = False, date: str | None = None) -> list[PilotRow]:
    """Per accuracy claim of ``files``: the pilot's arms and spread (``values``: (paper, arm) -> {seed: top-1})
    and the plan at that spread."""
    date = date or datetime.now(timezone.utc).strftime("%d %b %Y")
    rows = []
    for f in files:
        for claim in [c for c in f.claims if not c.measure]:
            arms = {a: values.get((claim.paper, a), {}) for a in claim.arm_names}
            sd, n = cl.difference_sd(claim, arms)
            seeds = tuple(sorted(set.intersection(*(set(v) for v in arms.values()))))
            stats = {}
            for a, v in arms.items():
                s = cl.arm_stats(a, [v[k] for k in seeds]) if seeds else None
                stats[a] = {"mean": s.mean if s else None, "sd": s.std if s and s.n > 1 else None, "n": len(seeds)}
            row = PilotRow(claim.paper, claim.id, claim.tier, claim.test, stats, seeds, sd, file_sd=claim.power["sd"])
            if sd is not None:
                what = (
                    f"per-seed {_versus(claim)} differences"
                    if claim.test == "paired"
                    else f"{claim.treatment} and {claim.baseline} between-seed sds combined (Welch)"
                )
                block = {
                    "sd": round(sd, 2),
                    "sd_from": f"pilot: {what}, seeds {_seed_range(seeds)}, depthbench claims --pilot"
                    + (" --quick" if quick else "")
                    + f", {date}",
                    "effect": claim.power["effect"],
                    "effect_from": claim.power["effect_from"],
                }
                planned = replace(claim, power={**claim.power, "sd": sd})
                looks, power = cl.plan_looks(replace(planned, tier="confirmatory"), f.design)
                row = replace(
                    row,
                    power=block,
                    looks=looks,
                    plan_power=power,
                    seeds_needed=cl.seeds_needed(planned, f.design, sd=sd),
                )
            rows.append(row)
    return rows


def _versus(claim) -> str:
    pair = f"{claim.treatment} − {claim.baseline}"
    return f"({pair}) − ({claim.minus['treatment']} − {claim.minus['baseline']})" if claim.minus else pair


def _seed_range(seeds) -> str:
    seeds = list(seeds)
    contiguous = seeds == list(range(seeds[0], seeds[-1] + 1))
    return f"{seeds[0]}-{seeds[-1]}" if contiguous and len(seeds) > 2 else ", ".join(map(str, seeds))


def write_pilot(rows: list[PilotRow], out: Path, quick: bool) -> list[Path]:
    """``out``/pilot.json (the rows) and pilot.md: per paper and claim the per-arm table, the spread, the plan and
    the ``power:`` block to paste."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "pilot.json", out / "pilot.md"]
    atomic_write(written[0], json.dumps([asdict(r) for r in rows], indent=1, default=str))
    lines = [
        "# Claims pilot (depthbench claims --pilot)",
        "",
        "The pilot seeds' spread, to fix each claim's power analysis before its evaluated run. **No verdicts**: "
        "the pilot plans the test and is never evidence for it (its seeds are disjoint from the tuning and the "
        "evaluation seeds). Paste a claim's `power:` block into its claims file before the evaluated run starts; "
        "after that the design is fixed."
        + (" `--quick`: the shortened schedules -- the spreads say nothing about the real recipes." if quick else ""),
        "",
    ]
    for paper in dict.fromkeys(r.paper for r in rows):
        lines += [f"## {paper}", ""]
        for r in [r for r in rows if r.paper == paper]:
            lines += [f"### {r.claim} ({r.tier}, {r.test}), seeds {_seed_range(r.seeds) if r.seeds else 'none'}", ""]
            lines += ["| arm | mean top-1 | between-seed sd | seeds |", "|---|---|---|---|"]
            for arm, s in r.arms.items():
                mean = "—" if s["mean"] is None else f"{s['mean']:.2f}"
                sd = "—" if s["sd"] is None else f"{s['sd']:.2f}"
                lines.append(f"| {arm} | {mean} | {sd} | {s['n']} |")
            lines.append("")
            if r.sd is None:
                lines += ["Spread: — (fewer than two seeds in every arm: run more pilot seeds).", ""]
                continue
            plan = (
                f"the design's looks would be {list(r.looks)} seeds per arm (power {r.plan_power:.0%})"
                if r.plan_power is not None
                else f"the design's looks {list(r.looks)}"
            )
            lines += [
                f"Spread of one seed's difference: {r.sd:.2f} (the file has {r.file_sd:g}); {plan}; "
                f"without the budget's cap {r.seeds_needed or 'more than 60'} seeds per arm"
                + (" (descriptive: as if confirmatory)" if r.tier == "descriptive" else "")
                + ".",
                "",
                "```yaml",
                "    power: {"
                + ", ".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in r.power.items())
                + "}",
                "```",
                "",
            ]
    atomic_write(written[1], "\n".join(lines))
    return written
