"""``depthbench claims``: the papers' central claims at reduced scale, tested with a pre-registered sequential design.

    depthbench claims [PAPER ...] [--seeds N] [--quick] [--out DIR] [--jobs J] [--device cpu|cuda] [--status]
                      [--efficiency] [--tier confirmatory] [--pilot] | PAPER ... --scale paper [--plan]

    from harness.commands.claims import run
    report = run(["horesnet"])                   # ClaimsReport(results, out, ...); report.results[0].verdict

Each paper's claims live beside its tables (``results/tables/claims/<paper>.yaml``: the paper's sentence, table,
rows and numbers, what it claims, the arms' configs under ``configs/claims/`` and the design). Before anything is
trained, every claim's arms are checked to be a fair comparison (the same data, epochs, batch, optimizer budget
and augmentation: only the model differs, unless the claim names a key) and, where the claim says so, audited
equal in parameters/FLOPs with the one FLOP counter. Then the arms are trained look by look
(:func:`results.claims_run.run_claims`): the first look's evaluation seeds, a decision per claim at alpha/m, m the
file's confirmatory family (:func:`results.claims.stop_decision`), the next look's seeds for
the claims still open -- each run a plain ``depthbench train CONFIG key=value ... --work-dir
<out>/runs/<paper>/<arm>/seed<k> --resume auto`` (so a second call reuses finished runs and continues interrupted
ones, and the same command lines can go to Slurm), ``--jobs`` at a time, one thread each, each forked from one
process that imported the stack once (:func:`harness.engine.forked.start_forked`), with the machine it ran on
beside it (``seed<k>.hardware.txt``). The verdicts are :func:`results.claims.evaluate` (repeated intervals, Holm over
each file's family; descriptive claims get an interval and no verdict),
written to ``<out>/claims.json`` (the one source of ``--status``, claims.md and the HTML Claims page) and
``<out>/claims.md`` with a figure per claim (both arms' learning curves with seed bands, and the interval at each
look). ``--quick``: one seed, the claims files' shortened schedules, no verdicts (CI). Everything is at reduced
scale and says so: never the paper's setting. ``--tier confirmatory``: only the confirmatory claims' arms train
(:func:`results.claims_run.run_claims`); ``--pilot``: the arms at the designs' pilot seeds, the spreads and the
``power:`` blocks to paste, no verdicts (:mod:`results.claims_pilot`); ``--scale paper``: the verdicts of the
looks the paper-scale runs reached and the next look (:func:`results.claims_scale.decide`).
"""

from __future__ import annotations

from pathlib import Path

from harness.core.choices import CLAIMS_EFFICIENCY_OUT, CLAIMS_OUT, CLAIMS_PILOT_OUT, claims_out
from harness.core.errors import DepthbenchError

__all__ = ["run", "add_parser", "main"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "claims",
        help="test the papers' central claims at reduced scale (a pre-registered "
        "sequential design, Holm-corrected verdicts)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("papers", nargs="*", metavar="PAPER", help="papers (default: every paper with claims)")
    p.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="cap on seeds per arm to train (default: the design's plan; the plan's boundaries stay; --quick: 1; "
        "--pilot: the pilot's seeds, default 10, --quick 2)",
    )
    p.add_argument("--quick", action="store_true", help="one seed, shortened schedules, no verdicts (minutes)")
    p.add_argument("--out", help=f"folder for runs and the report (default {CLAIMS_OUT}, or {CLAIMS_OUT}-quick)")
    p.add_argument("--jobs", type=int, help="runs at a time (default: one per core, one thread each; cuda: 1)")
    p.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        help="where the runs train (default: the engine's choice, a GPU where one is visible)",
    )
    p.add_argument("--status", action="store_true", help="only summarise the folder's report: a line per paper")
    p.add_argument(
        "--scale",
        choices=("reduced", "paper"),
        default="reduced",
        help="reduced (default: the glyphs recipes, trained here) or paper: the verdicts of the looks the "
        "runs of `submit --claims PAPER --scale paper` reached (in --out, default results/claims-paper) and "
        "the next look's submit command; with --plan the plan",
    )
    p.add_argument(
        "--plan",
        action="store_true",
        help="with --scale paper: print each claim's arms, seeds per look "
        "and GPU-hours (submit --estimate's machinery); train nothing",
    )
    p.add_argument(
        "--efficiency",
        action="store_true",
        help=f"only the efficiency claims (throughput, memory of the papers' own models, measured by "
        f"bench: minutes, nothing trained; Holm counts the file's other claims as p = 1; default "
        f"--out {CLAIMS_EFFICIENCY_OUT})",
    )
    p.add_argument(
        "--tier",
        choices=("all", "confirmatory"),
        default="all",
        help="confirmatory: train only the confirmatory claims' arms (descriptive claims whose runs are "
        "already in --out are reported, the others listed with their cost)",
    )
    p.add_argument(
        "--pilot",
        action="store_true",
        help=f"train the arms at the designs' pilot_seeds (50-59, --seeds of them) into --out (default "
        f"{CLAIMS_PILOT_OUT}) and write each claim's spread and the power: block to paste; no verdicts",
    )
    p.set_defaults(func=main)


def main(args) -> int:
    if args.scale == "paper" or args.plan:
        print("\n".join(plan_paper_scale(args.papers or None, args.scale, args.plan, args.out)))
        return 0
    if args.pilot and (args.status or args.efficiency or args.tier != "all"):
        raise DepthbenchError("--pilot trains the accuracy claims' arms: drop --status, --efficiency and --tier")
    report = run(
        args.papers or None,
        seeds=args.seeds,
        quick=args.quick,
        out=args.out,
        jobs=args.jobs,
        status=args.status,
        device=args.device,
        efficiency=args.efficiency,
        tier=args.tier,
        pilot=args.pilot,
    )
    if args.pilot:
        print(f"pilot: {report.out / 'pilot.md'} ({len(report.rows)} claims, {len(report.runs)} runs; no verdicts)")
        return 0
    if not args.status:
        for result in report.results:
            print(result.summary())
    print("\n".join(report.status))
    if report.files:
        print(f"report: {report.out / 'claims.md'} (figures in {report.out / 'figures'})")
    return 0


def plan_paper_scale(
    papers: list[str] | None = None, scale: str = "paper", plan: bool = True, out: str | Path | None = None
) -> list[str]:
    """``--scale paper --plan``: per paper, its claims on the paper's own recipes; ``--scale paper``: the verdicts
    of the looks the runs in ``out`` reached and the next look (results/claims_scale.py)."""
    if scale != "paper":
        raise DepthbenchError("--plan goes with --scale paper (the plan of the claims at the papers' own scale)")
    from results.claims_scale import plan_papers

    return plan_papers(papers, plan, out)


def run(
    papers: list[str] | None = None,
    *,
    seeds: int | None = None,
    quick: bool = False,
    out: str | Path | None = None,
    jobs: int | None = None,
    status: bool = False,
    device: str | None = None,
    efficiency: bool = False,
    tier: str = "all",
    pilot: bool = False,
):
    """Check, train (what is not trained yet, look by look), compare and report the claims of ``papers`` (see
    the module docstring; the work is :func:`results.claims_run.run_claims`). ``seeds``: a cap on seeds per arm
    (default: each claim's planned looks; the plan's boundaries stay). ``status``: read the report ``out`` holds,
    train nothing. ``efficiency``: only the files' efficiency claims (measured, nothing trained; the family's size
    stays the file's, its other members counted as p = 1). ``tier="confirmatory"``: only the confirmatory claims'
    arms train. ``pilot``: train at the designs' pilot seeds and write the spreads (no verdicts; returns a
    :class:`results.claims_pilot.PilotReport`). Returns a :class:`results.claims_status.ClaimsReport`."""
    from results import claims_status as cs

    cap = None if pilot else cs.seeds_per_arm(seeds, quick)
    if tier not in ("all", "confirmatory"):
        raise DepthbenchError(f"--tier {tier!r}: give all or confirmatory")
    if jobs is not None and (not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1):
        raise DepthbenchError(f"--jobs {jobs}: give the number of runs at a time, 1 or more")
    if device not in (None, "cpu", "cuda"):
        raise DepthbenchError(f"--device {device!r}: give cpu or cuda")
    out = Path(out) if out else claims_out(quick, efficiency, pilot=pilot)
    files = cs.claims_files(papers, efficiency)  # unknown paper / bad file: one line
    if status:  # reads the report: no engine (tests/results/test_claims.py)
        return cs.read_status(files, out)
    from results.claims_run import run_claims  # lazy: the engine and torch, which --status does without

    if pilot:
        from results import claims_pilot  # lazy: the engine and torch, which --status does without

        return claims_pilot.run_pilot(
            files, out, claims_pilot.pilot_seed_count(seeds, quick, files), quick, jobs, device
        )

    return run_claims(files, out, cap, quick, jobs, device, tier)
