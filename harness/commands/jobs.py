"""``depthbench jobs`` and ``depthbench cancel``: the runs ``depthbench submit`` sent to Slurm, followed and stopped.

    depthbench jobs [--paper P] [--json] [--why RUN|JOBID]
    depthbench cancel RUN|JOBID

    from harness.commands.jobs import run_jobs, run_cancel
    result = run_jobs(paper="horesnet")     # JobsResult(rows, root, problems, note); run_cancel(RUN|JOBID)

Job states, the runs' records and cancelling are slurm/jobs.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # slurm/ imported where used: the CLI imports every command module to build its parser
    from slurm.jobs import CancelResult, JobsResult

__all__ = ["run_jobs", "run_cancel", "add_parser", "jobs_main", "cancel_main"]


def add_parser(subparsers) -> None:
    j = subparsers.add_parser("jobs", help="submitted runs with their Slurm job ids, states and run directories")
    j.add_argument("--paper", help="only this paper's runs (stepsnet, sret, transnext, horesnet, scalenet)")
    j.add_argument("--json", action="store_true", help="one JSON object per run")
    j.add_argument(
        "--why",
        metavar="RUN|JOBID",
        help="why a run failed or restarted: each attempt, and where every rank was (its stack dumps)",
    )
    j.set_defaults(func=jobs_main)

    c = subparsers.add_parser("cancel", help="cancel a submitted run (scancel)")
    c.add_argument("target", metavar="RUN|JOBID", help="a run directory, or a job id (123 or array element 123_4)")
    c.set_defaults(func=cancel_main)


def run_jobs(*, paper: str | None = None) -> JobsResult:
    """Every submitted run (only ``paper``'s if given) with its job id, Slurm state and run status."""
    from slurm.jobs import jobs

    return jobs(paper)


def run_cancel(target: str | Path) -> CancelResult:
    """Cancel a submitted run, named by its run directory or its job id (``123``, ``123_4``)."""
    from slurm.jobs import cancel

    return cancel(str(target))


def jobs_main(args) -> int:
    from harness.core.files import printable

    if args.why:
        from slurm.jobs import why

        print(why(args.why))
        return 0
    result = run_jobs(paper=args.paper)
    for problem in result.problems:  # unreadable records and run directories: listed, the others still shown
        print(f"depthbench jobs: {printable(problem)}", file=sys.stderr)
    rows = result.rows
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return 0
    if not rows:
        print(
            f"no submitted runs under {result.root}"
            + (f" for {args.paper}" if args.paper else "")
            + " (depthbench submit ...)"
        )
        return 0
    header = ("JOB", "SLURM", "RUN", "BEST", "NAME", "FAILURES", "RUN DIRECTORY")
    table = [header] + [
        (
            r["job"],
            r["slurm_state"],
            r["status"],
            f"{r['best_metric']:.2f}" if isinstance(r["best_metric"], (int, float)) else "-",
            r["name"] or "-",
            printable(_failures(r)),
            printable(_short(r["work_dir"])),
        )
        for r in rows
    ]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header) - 1)]
    for row, r in zip(table, [None] + rows):
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)) + "  " + str(row[-1]))
        if r is not None and r.get("last_failure"):  # one line: the newest failure and what was done
            print(f"    last failure: {r['last_failure']}")
    if result.note:
        print(f"({result.note})")
    return 0


def _failures(row: dict) -> str:
    """``-``, or the number of failed attempts and the nodes excluded since (``2, excl n1,n3``)."""
    if not row.get("failures"):
        return "-"
    excluded = row.get("excluded") or []
    return f"{row['failures']}" + (f", excl {','.join(excluded)}" if excluded else "")


def cancel_main(args) -> int:
    from harness.core.files import printable

    result = run_cancel(args.target)
    what = f"job {result.job}" + (f" ({printable(_short(str(result.run_dir)))})" if result.run_dir else "")
    print(
        f"cancelled {what}; a run that had started checkpoints on SIGTERM (status preempted) and can be resumed "
        "with `depthbench train CONFIG --work-dir RUN --resume auto`"
    )
    return 0


def _short(path: str) -> str:
    """A path relative to the working directory when it is below it (shorter in a table), else as given."""
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path
