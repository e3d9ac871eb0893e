"""``depthbench submit``: configs, sweeps, paper tables and claims runs on a Slurm cluster.

    depthbench submit CONFIG [CONFIG ...] | --table PAPER:TABLE [--rows NAME,...]
                      | --claims PAPER[,PAPER...] [--seeds N] [--quick] [--scale paper] [--claims-out DIR]
                      [--nodes N] [--gpus-per-node G | --ntasks-per-node T] [--cpus-per-task C] [--mem M]
                      [--time T] [--warning S] [--partition P] [--account A] [--qos Q] [--constraint C]
                      [--exclusive] [--max-concurrent K] [--engine accelerate|deepspeed] [--dry-run]
                      [--max-restarts N] [--min-nodes M] [--estimate] [--preflight] [key=value ...]

    from harness.commands.submit import run_submit
    result = run_submit(["configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"], overrides=["batch_size=64"],
                        nodes=2, gpus_per_node=8, time="1-00:00:00")
    result.job_id, result.elements[0]["work_dir"]      # SubmitResult

The submission is slurm/submit.py; ``depthbench jobs`` and ``depthbench cancel`` (harness/commands/jobs.py) follow
and stop the jobs. ``--estimate`` prints the runs' cost (harness/measure/estimate.py) first; ``--preflight`` submits
one ``depthbench preflight`` job instead (docs/slurm.md).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from harness.core.choices import CLAIMS_SEEDS, MIN_WARNING_S
from harness.core.errors import DepthbenchError

if TYPE_CHECKING:  # slurm/ imported where used: the CLI imports every command module to build its parser
    from harness.measure.estimate import Estimate
    from slurm.submit import SubmitResult

__all__ = ["run_submit", "add_parser", "submit_main"]


def add_parser(subparsers) -> None:
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
    p.add_argument("--seeds", type=int, metavar="N", help=f"with --claims: seeds per arm (default {CLAIMS_SEEDS})")
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


# ----------------------------------------------------------------------------------------- the Python API
def run_submit(
    configs: Sequence[str | Path] = (),
    *,
    overrides: Sequence[str] = (),
    table: str | None = None,
    rows: Sequence[str] | None = None,
    claims: Sequence[str] | None = None,
    seeds: int = CLAIMS_SEEDS,
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
    from slurm.submit import SubmitOptions, submit_runs

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
    return submit_runs(
        configs,
        overrides,
        options,
        table=table,
        rows=rows,
        claims=claims,
        seeds=seeds,
        quick=quick,
        claims_out=claims_out,
        scale=scale,
        estimate=estimate,
        show_estimate=show_estimate,
    )


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
        seeds=CLAIMS_SEEDS if args.seeds is None else args.seeds,
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
    from slurm.submit import claims_command, dry_run_text, submitted_text

    for line in result.skipped:
        print(f"depthbench submit: not submitted: {line}", file=sys.stderr)
    for line in result.notes:
        print(f"depthbench submit: warning: {line}", file=sys.stderr)
    if result.job_id is None:
        script, note = dry_run_text(result)
        print(script, end="")
        print(note, file=sys.stderr)
        return 0
    follow = None if args.claims is None else claims_command(claims, args.quick, args.claims_out, args.scale)
    print(submitted_text(result, args.max_concurrent, follow))
    return 0


def _show_estimate(estimate: Estimate) -> None:
    """The cost table on stderr: stdout stays the sbatch script under --dry-run (`> job.sbatch`)."""
    from harness.measure.estimate import format_estimate

    print(format_estimate(estimate), file=sys.stderr, flush=True)
