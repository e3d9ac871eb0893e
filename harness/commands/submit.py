"""``depthbench submit``, ``depthbench jobs``, ``depthbench cancel``: configs and paper tables on a Slurm cluster.

    depthbench submit CONFIG [CONFIG ...] | --table PAPER:TABLE [--rows NAME,...]
                      | --claims PAPER[,PAPER...] [--seeds N] [--quick] [--scale paper] [--claims-out DIR]
                      [--nodes N] [--gpus-per-node G | --ntasks-per-node T] [--cpus-per-task C] [--mem M]
                      [--time T] [--warning S] [--partition P] [--account A] [--qos Q] [--constraint C]
                      [--exclusive] [--max-concurrent K] [--engine accelerate|deepspeed] [--dry-run]
                      [--max-restarts N] [--min-nodes M] [--estimate] [--preflight] [key=value ...]
    depthbench jobs [--paper P] [--json] [--why RUN|JOBID]
    depthbench cancel RUN|JOBID

    from harness.commands.submit import run_submit, run_jobs, run_cancel
    result = run_submit(["configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"], overrides=["batch_size=64"],
                        nodes=2, gpus_per_node=8, time="1-00:00:00")
    result.job_id, result.elements[0]["work_dir"]      # SubmitResult; run_jobs() -> JobsResult; run_cancel(...)

The submission is slurm/submit.py; job states and cancelling slurm/jobs.py. ``--estimate`` prints the runs' cost
(harness/measure/estimate.py) first; ``--preflight`` submits one ``depthbench preflight`` job instead (docs/slurm.md).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from harness.commands.claims import DEFAULT_SEEDS, default_out
from harness.core.errors import DepthbenchError

if TYPE_CHECKING:  # slurm/ imported where used: the CLI imports every command module to build its parser
    from harness.measure.estimate import Estimate
    from slurm.jobs import CancelResult, JobsResult
    from slurm.submit import SubmitResult

__all__ = ["run_submit", "run_jobs", "run_cancel", "add_parser", "submit_main", "jobs_main", "cancel_main"]


def add_parser(subparsers) -> None:
    from harness.core.choices import MIN_WARNING_S

    p = subparsers.add_parser("submit", help="submit configs, a sweep or a paper table to Slurm (sbatch)")
    p.add_argument(
        "configs",
        nargs="*",
        metavar="CONFIG|key=value",
        help="config file(s) (several: one job array), a sweep definition, then key=value overrides",
    )
    p.add_argument(
        "--table", metavar="PAPER:TABLE", help="every row of a paper table that has a config, e.g. stepsnet:1"
    )
    p.add_argument("--rows", action="append", metavar="NAME[,NAME...]", help="only these rows of --table")
    p.add_argument(
        "--claims",
        metavar="PAPER[,PAPER...]|all",
        help="the runs of these papers' claims that are not done (`depthbench claims` plans them; "
        "afterwards `depthbench claims` compares them): one job array",
    )
    p.add_argument("--seeds", type=int, metavar="N", help=f"with --claims: seeds per arm (default {DEFAULT_SEEDS})")
    p.add_argument("--quick", action="store_true", help="with --claims: one seed, the shortened schedules")
    p.add_argument(
        "--scale",
        choices=("reduced", "paper"),
        help="with --claims: paper = the first look on the "
        "papers' own recipes (planned by `depthbench claims PAPER --scale paper --plan`)",
    )
    p.add_argument(
        "--claims-out",
        metavar="DIR",
        help="with --claims: the folder `depthbench claims --out` reads (default results/claims, or "
        "results/claims-quick)",
    )
    p.add_argument("--nodes", type=int, default=1, metavar="N", help="nodes per run (default 1)")
    p.add_argument(
        "--gpus-per-node", type=int, default=0, metavar="G", help="GPUs per node, one rank each (default 0: CPU)"
    )
    p.add_argument("--ntasks-per-node", type=int, metavar="T", help="ranks per node on CPU partitions (default 1)")
    p.add_argument(
        "--cpus-per-task",
        type=int,
        metavar="C",
        help="CPU cores per rank (default: the config's data.workers + 1; a smaller value is warned about)",
    )
    p.add_argument(
        "--mem",
        metavar="SIZE",
        help="memory per node, e.g. 64G (default: the cluster's default, DefMemPerNode/CPU/GPU in its "
        "slurm.conf; where none is set Slurm gives each job all of a node's memory)",
    )
    p.add_argument(
        "--time", metavar="LIMIT", help="time limit per run: minutes, HH:MM:SS or D-HH:MM:SS (a requeue restarts it)"
    )
    p.add_argument(
        "--warning",
        type=int,
        default=120,
        metavar="SECONDS",
        help=f"seconds before the time limit when Slurm sends USR1 to checkpoint (>= {MIN_WARNING_S}, default 120)",
    )
    for name in ("partition", "account", "qos", "constraint"):
        p.add_argument(f"--{name}")
    p.add_argument("--exclusive", action="store_true", help="whole nodes")
    p.add_argument(
        "--max-restarts",
        type=int,
        default=3,
        metavar="N",
        help="requeues after a crashed or hung rank, each without the failed node (default 3; never for "
        "bad input or a step that fails the same way twice)",
    )
    p.add_argument(
        "--min-nodes",
        type=int,
        metavar="M",
        help="a requeue may continue the run on as few as M nodes when the partition has no others "
        "(elastic resume; default: --nodes)",
    )
    p.add_argument("--max-concurrent", type=int, metavar="K", help="array elements running at once (%%K)")
    p.add_argument("--job-name", metavar="NAME", help="default: db-<config>, db-<N>configs or db-<paper>-table<id>")
    p.add_argument(
        "--sbatch",
        action="append",
        default=[],
        metavar="OPTION",
        help="any other sbatch option, e.g. --sbatch=--reservation=x (repeatable)",
    )
    p.add_argument("--engine", choices=["accelerate", "deepspeed"], help="default: each config's `engine`")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the sbatch script and submit nothing (a dataset not found here is a warning: it may "
        "live only on the cluster); creates the script's log folder",
    )
    p.add_argument(
        "--estimate",
        action="store_true",
        help="print each run's steps, step time, GPU-hours, wall time and requeues first (stderr)",
    )
    p.add_argument(
        "--preflight",
        action="store_true",
        help="submit `depthbench preflight` of these runs on the same allocation instead of the runs",
    )
    p.set_defaults(func=submit_main, overrides=[])

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


# ----------------------------------------------------------------------------------------- the Python API
def run_submit(
    configs: Sequence[str | Path] = (),
    *,
    overrides: Sequence[str] = (),
    table: str | None = None,
    rows: Sequence[str] | None = None,
    claims: Sequence[str] | None = None,
    seeds: int = DEFAULT_SEEDS,
    quick: bool = False,
    claims_out: str | Path | None = None,
    scale: str = "reduced",
    nodes: int = 1,
    gpus_per_node: int = 0,
    ntasks_per_node: int | None = None,
    cpus_per_task: int | None = None,
    mem: str | None = None,
    time: str | None = None,
    warning: int = 120,
    partition: str | None = None,
    account: str | None = None,
    qos: str | None = None,
    constraint: str | None = None,
    exclusive: bool = False,
    max_concurrent: int | None = None,
    job_name: str | None = None,
    sbatch: Sequence[str] = (),
    engine: str | None = None,
    dry_run: bool = False,
    estimate: bool = False,
    preflight: bool = False,
    max_restarts: int = 3,
    min_nodes: int | None = None,
    show_estimate: Callable[[Estimate], None] | None = None,
) -> SubmitResult:
    """Submit config files (several, or a sweep definition: one job array) or the rows of a paper ``table``
    ("PAPER:TABLE"; only ``rows`` if given), each with the ``key=value`` ``overrides``, as one sbatch job -- or the
    runs of papers' ``claims`` (``[]``: all; ``seeds``, ``quick``, ``claims_out`` as ``depthbench claims`` takes
    them; ``scale="paper"``: the first look on the papers' recipes), in the run directories ``claims`` reads.

    The rest are ``depthbench submit``'s options (:class:`slurm.submit.SubmitOptions`): ``nodes``, ``gpus_per_node``
    (0: CPU) or ``ntasks_per_node``, ``time`` (minutes, HH:MM:SS, D-HH:MM:SS), ``warning`` (seconds of USR1 before
    the limit), ``sbatch`` (other sbatch options), ``engine``, ``dry_run`` (render the script, submit nothing),
    ``max_restarts`` (requeues after crashes and hangs), ``min_nodes`` (a requeue may continue on fewer nodes).
    ``estimate``: each run's cost (``result.estimate``, :mod:`harness.measure.estimate`) once the runs are checked,
    handed to ``show_estimate`` before anything is submitted. ``preflight``: one ``depthbench preflight`` job of
    the runs on the same allocation instead. Every run is checked as its ranks will load it before anything is
    submitted; bad input raises :class:`DepthbenchError`. Returns the script and, unless a dry run, the job id.
    """
    from slurm.submit import ClaimsRequest, SubmitOptions, parse_time, submit

    options = SubmitOptions(
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        ntasks_per_node=ntasks_per_node,
        cpus_per_task=cpus_per_task,
        mem=mem,
        time=time,
        warning=warning,
        partition=partition,
        account=account,
        qos=qos,
        constraint=constraint,
        exclusive=exclusive,
        max_concurrent=max_concurrent,
        job_name=job_name,
        sbatch=list(sbatch),
        engine=engine,
        dry_run=dry_run,
        preflight=preflight,
        max_restarts=max_restarts,
        min_nodes=min_nodes,
    )
    cost = []

    def estimate_runs(elements: list[dict]) -> None:
        from harness.measure.estimate import Layout, estimate as work_out, jobs_from_elements

        layout = Layout(
            nodes=nodes,
            gpus_per_node=gpus_per_node,
            ntasks_per_node=ntasks_per_node,
            time_s=parse_time(time) if time else None,
            warning_s=warning,
            max_concurrent=max_concurrent,
            partition=partition,
        )
        cost.append(work_out(jobs_from_elements(elements), layout))
        if show_estimate is not None:
            show_estimate(cost[0])

    request = None
    if claims is not None:
        request = ClaimsRequest(list(claims), str(claims_out or default_out(quick, scale=scale)), seeds, quick, scale)
    result = submit(
        [str(c) for c in configs],
        list(overrides),
        options,
        table=table,
        rows=list(rows) if rows else None,
        claims=request,
        before_submit=estimate_runs if estimate else None,
    )
    result.estimate = cost[0] if cost else None
    return result


def run_jobs(*, paper: str | None = None) -> JobsResult:
    """Every submitted run (only ``paper``'s if given) with its job id, Slurm state and run status."""
    from slurm.jobs import jobs

    return jobs(paper)


def run_cancel(target: str | Path) -> CancelResult:
    """Cancel a submitted run, named by its run directory or its job id (``123``, ``123_4``)."""
    from slurm.jobs import cancel

    return cancel(str(target))


# ----------------------------------------------------------------------------------------- the command line
def submit_main(args) -> int:
    # `key=value` words may come among the configs (argparse cannot tell them apart), and after the options
    configs = [c for c in args.configs if not ("=" in c and not c.endswith(".py"))]
    overrides = [c for c in args.configs if c not in configs] + list(args.overrides)
    if args.claims is None and (args.quick or args.claims_out or args.seeds is not None or args.scale):
        raise DepthbenchError("--seeds, --quick, --scale and --claims-out go with --claims PAPER")
    claims = (
        None
        if args.claims is None
        else [p.strip() for p in args.claims.split(",") if p.strip() and p.strip().lower() != "all"]
    )
    result = run_submit(
        configs,
        overrides=overrides,
        table=args.table,
        rows=args.rows,
        claims=claims,
        seeds=DEFAULT_SEEDS if args.seeds is None else args.seeds,
        quick=args.quick,
        claims_out=args.claims_out,
        scale=args.scale or "reduced",
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        ntasks_per_node=args.ntasks_per_node,
        cpus_per_task=args.cpus_per_task,
        mem=args.mem,
        time=args.time,
        warning=args.warning,
        partition=args.partition,
        account=args.account,
        qos=args.qos,
        constraint=args.constraint,
        exclusive=args.exclusive,
        max_concurrent=args.max_concurrent,
        job_name=args.job_name,
        sbatch=args.sbatch,
        engine=args.engine,
        dry_run=args.dry_run,
        estimate=args.estimate,
        preflight=args.preflight,
        max_restarts=args.max_restarts,
        min_nodes=args.min_nodes,
        show_estimate=_show_estimate,
    )
    for line in result.skipped:
        print(f"depthbench submit: not submitted: {line}", file=sys.stderr)
    for line in result.notes:
        print(f"depthbench submit: warning: {line}", file=sys.stderr)
    later = result.followup
    if result.job_id is None:
        print(result.script, end="")
        if later:
            print(f"\n# ---- the second job: {len(later.elements)} run(s) that start from the first job's weights\n")
            print(later.script, end="")
        print(
            f"depthbench submit: dry run, nothing submitted ({len(result.elements)} run(s)); submit the script "
            "above with `sbatch --parsable SCRIPT`"
            + (
                f", the second ({len(later.elements)} run(s)) with `sbatch --dependency=afterok:<first job id> SCRIPT2`"
                if later
                else ""
            ),
            file=sys.stderr,
        )
        return 0
    job_id, first = result.job_id, result.elements[0]
    if first["command"] == "preflight":
        print(
            f"submitted job {job_id}: depthbench preflight of the runs -> {first['work_dir']}/preflight.txt\n"
            f"  Slurm log {first['log']}"
        )
    elif len(result.elements) == 1:
        print(f"submitted job {job_id}: {first['name']} -> {first['work_dir']}\n  Slurm log {first['log']}")
    else:
        print(
            f"submitted job array {job_id} ({len(result.elements)} runs"
            + (f", at most {args.max_concurrent} at once" if args.max_concurrent else "")
            + "):"
        )
        for e in result.elements:
            print(f"  {e['job']}  {e['name']}  -> {e['work_dir']}")
        print(f"  Slurm logs {result.record_path.parent}/{result.job_name}-{job_id}_<index>.out")
    if later:
        runs = f"{len(later.elements)} run" + ("s that start" if len(later.elements) > 1 else " that starts")
        print(f"submitted job {later.job_id} ({runs} from job {job_id}'s weights; it waits for {job_id} to succeed):")
        for e in later.elements:
            print(f"  {e['job']}  {e['name']}  -> {e['work_dir']}")
    print(f"  script {result.script_path}; follow with `depthbench jobs`, stop with `depthbench cancel {job_id}`")
    if args.claims is not None:
        print(
            "  once the jobs are done, `depthbench claims "
            + " ".join(claims)
            + (" --quick" if args.quick else "")
            + (" --scale paper" if args.scale == "paper" else "")
            + (f" --out {args.claims_out}" if args.claims_out else "")
            + "` compares the runs (it trains nothing "
            "that is done)"
        )
    return 0


def _show_estimate(estimate: Estimate) -> None:
    """The cost table on stderr: stdout stays the sbatch script under --dry-run (`> job.sbatch`)."""
    from harness.measure.estimate import format_estimate

    print(format_estimate(estimate), file=sys.stderr, flush=True)


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
