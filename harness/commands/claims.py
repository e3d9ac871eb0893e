"""``depthbench claims``: the papers' central claims at reduced scale, tested with a pre-registered sequential design.

    depthbench claims [PAPER ...] [--seeds N] [--quick] [--out DIR] [--jobs J] [--device cpu|cuda] [--status]
                      [--efficiency] | PAPER ... --scale paper --plan

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
scale and says so: never the paper's setting.
"""

from __future__ import annotations

from pathlib import Path

from harness.core.choices import CLAIMS_EFFICIENCY_OUT, CLAIMS_OUT, claims_out
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
        help="cap on seeds per arm to train (default: the design's plan; the plan's boundaries stay; --quick: 1)",
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
        help="reduced (default: the glyphs recipes, trained here) or paper: the same claims on the papers' "
        "own recipes, with --plan (or `submit --claims PAPER --scale paper`)",
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
    p.set_defaults(func=main)


def main(args) -> int:
    if args.scale == "paper" or args.plan:
        print("\n".join(plan_paper_scale(args.papers or None, args.scale, args.plan)))
        return 0
    report = run(
        args.papers or None,
        seeds=args.seeds,
        quick=args.quick,
        out=args.out,
        jobs=args.jobs,
        status=args.status,
        device=args.device,
        efficiency=args.efficiency,
    )
    if not args.status:
        for result in report.results:
            print(result.summary())
    print("\n".join(report.status))
    if report.files:
        print(f"report: {report.out / 'claims.md'} (figures in {report.out / 'figures'})")
    return 0


def plan_paper_scale(papers: list[str] | None = None, scale: str = "paper", plan: bool = True) -> list[str]:
    """``--scale paper --plan``: per paper, its claims on the paper's own recipes (results/claims_scale.py)."""
    if scale != "paper" or not plan:
        raise DepthbenchError(
            "--scale paper goes with --plan (training at the paper's scale is `depthbench submit "
            "--claims PAPER --scale paper`); --plan goes with --scale paper"
        )
    from results.claims_scale import plan_papers

    return plan_papers(papers)


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
):
    """Check, train (what is not trained yet, look by look), compare and report the claims of ``papers`` (see
    the module docstring; the work is :func:`results.claims_run.run_claims`). ``seeds``: a cap on seeds per arm
    (default: each claim's planned looks; the plan's boundaries stay). ``status``: read the report ``out`` holds,
    train nothing. ``efficiency``: only the files' efficiency claims (measured, nothing trained; the family's size
    stays the file's, its other members counted as p = 1). Returns a :class:`results.claims_status.ClaimsReport`."""
    from results import claims_status as cs

    cap = cs.seeds_per_arm(seeds, quick)
    if jobs is not None and (not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1):
        raise DepthbenchError(f"--jobs {jobs}: give the number of runs at a time, 1 or more")
    if device not in (None, "cpu", "cuda"):
        raise DepthbenchError(f"--device {device!r}: give cpu or cuda")
    out = Path(out) if out else claims_out(quick, efficiency)
    files = cs.claims_files(papers, efficiency)  # unknown paper / bad file: one line
    if status:  # reads the report: no engine (tests/results/test_claims_stats.py)
        return cs.read_status(files, out)
    from results.claims_run import run_claims  # lazy: the engine and torch, which --status does without

    return run_claims(files, out, cap, quick, jobs, device)
