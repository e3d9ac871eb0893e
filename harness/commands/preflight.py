"""``depthbench preflight``: before a long run, check the allocation it will get -- rank by rank -- and keep a record.

    depthbench preflight [CONFIG ...] [key=value ...] [--config CONFIG [key=value ...]]...
                         [--nodes N] [--gpus-per-node G | --ntasks-per-node T] [--nproc P]
                         [--time LIMIT] [--warning S] [--device cpu|cuda] [--steps N] [--loader-seconds S]
                         [--work-dir DIR] [--json]

    from harness.commands.preflight import run
    report = run(["configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"], overrides=["batch_size=32"])
    report.exit_code, report.path, [(c.check, c.verdict, c.value) for c in report.checks]

Every rank (one process here, ``--nproc P`` local ones, or each ``srun`` task of ``depthbench submit --preflight``)
checks its software, device, bf16, memory, each CONFIG's training step (time, peak memory, whether it fits) and
loader (images/s against the step's), then all ranks together measure all-reduce bandwidth and each model's
gradient synchronisation, and rank 0 the run folder (checkpoint write time against ``--warning``, free space).
One line per check with its verdict (ok / warn / fail) and number; ``<runs>/preflight/<run id>/preflight.json``
keeps it all for ``depthbench submit --estimate``. Exit 0 when nothing failed, 1 when a check failed, 2 for bad
input. The checks are harness/measure/preflight/ (a module per check); docs/preflight.md explains each.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from harness.core.errors import DepthbenchError

if TYPE_CHECKING:
    from harness.measure.preflight import Report

__all__ = ["run", "add_parser", "main"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "preflight",
        help="check nodes before a long run: versions, devices, step time and memory, loader, "
        "all-reduce bandwidth, checkpoint write; keeps preflight.json",
        description="Checks this allocation (every rank) for the runs CONFIG... will make; one line per check "
        "with its verdict and number. key=value words override every CONFIG; --config CONFIG k=v "
        "gives one config overrides of its own.",
    )
    p.add_argument(
        "configs",
        nargs="*",
        metavar="CONFIG|key=value",
        help="training configs to check, then key=value overrides for all of them",
    )
    p.add_argument(
        "--config",
        dest="groups",
        action="append",
        nargs="+",
        default=[],
        metavar=("CONFIG", "key=value"),
        help="one more config with overrides of its own (repeatable)",
    )
    p.add_argument("--nodes", type=int, metavar="N", help="nodes the runs will use (default: as this runs)")
    p.add_argument(
        "--gpus-per-node",
        type=int,
        default=0,
        metavar="G",
        help="GPUs per node the runs will use, one rank each (default 0; sets --device cuda)",
    )
    p.add_argument("--ntasks-per-node", type=int, metavar="T", help="ranks per node on CPU partitions")
    p.add_argument("--nproc", type=int, default=1, help="processes to start on this machine (default 1)")
    p.add_argument("--time", metavar="LIMIT", help="the runs' time limit (Slurm --time), for the checkpoint window")
    p.add_argument(
        "--warning",
        type=int,
        default=120,
        metavar="SECONDS",
        help="seconds between Slurm's USR1 and the time limit (default 120, as submit)",
    )
    p.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when visible (or --gpus-per-node)")
    p.add_argument("--steps", type=int, metavar="N", help="timed training steps per config (default 10 CUDA, 3 CPU)")
    p.add_argument(
        "--loader-seconds", type=float, metavar="S", help="how long each loader is timed (default 20 CUDA, 10 CPU)"
    )
    p.add_argument("--work-dir", metavar="DIR", help="where preflight.json goes (default results/runs/preflight/<id>)")
    p.add_argument("--json", action="store_true", help="print the record as JSON")
    p.set_defaults(func=main, overrides=[])


def main(args) -> int:
    from harness.core.files import printable

    # `key=value` words may come among the configs (argparse cannot tell them apart), and after the options
    configs = [c for c in args.configs if not ("=" in c and not c.endswith(".py"))]
    overrides = [c for c in args.configs if c not in configs] + list(args.overrides)
    groups = [(group[0], group[1:]) for group in args.groups]
    report = run(
        configs,
        overrides=overrides,
        with_overrides=groups,
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        ntasks_per_node=args.ntasks_per_node,
        nproc=args.nproc,
        time=args.time,
        warning=args.warning,
        device=args.device,
        steps=args.steps,
        loader_seconds=args.loader_seconds,
        work_dir=args.work_dir,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    if report.record and not report.shown:  # rank 0 (under --nproc its own process showed it)
        print(
            json.dumps(report.record, indent=1, default=str) if args.json else printable(report.text, newlines=True),
            flush=True,
        )
    return report.exit_code


def run(
    configs: Sequence[str | Path] = (),
    *,
    overrides: Sequence[str] = (),
    with_overrides: Sequence[tuple[str | Path, Sequence[str]]] = (),
    nodes: int | None = None,
    gpus_per_node: int = 0,
    ntasks_per_node: int | None = None,
    nproc: int = 1,
    time: str | None = None,
    warning: int = 120,
    device: str | None = None,
    steps: int | None = None,
    loader_seconds: float | None = None,
    work_dir: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Check this allocation for the runs of ``configs`` (each with the ``key=value`` ``overrides``) and of
    ``with_overrides`` (``(config, its own overrides)`` pairs), planned on ``nodes`` x ``gpus_per_node`` (or
    ``ntasks_per_node``) ranks with Slurm's ``time`` limit and ``warning`` (default: the layout this runs on).

    ``nproc``: start that many local ranks; under a launcher (srun, torchrun) every process calls this and finds its
    rank itself. ``device``: cpu or cuda (default cuda when visible, or when ``gpus_per_node``). ``steps`` /
    ``loader_seconds``: how long the step and loader are timed. The record goes to ``work_dir`` (default
    ``<runs>/preflight/<run id>``). Bad input raises :class:`DepthbenchError` before any check; on rank 0 returns a
    :class:`~harness.measure.preflight.Report` (checks, record, path, text, exit code 0 or 1 when a check
    failed), on other ranks one without checks.
    """
    from harness.engine.launch import launched, prepare_launcher
    from harness.measure.preflight import Layout, Options, Target, preflight_process

    for option, value, least in (
        ("--nodes", nodes, 1),
        ("--gpus-per-node", gpus_per_node, 0),
        ("--ntasks-per-node", ntasks_per_node, 1),
        ("--nproc", nproc, 1),
        ("--warning", warning, 1),
        ("--steps", steps, 1),
        ("--loader-seconds", loader_seconds, 0.1),
    ):
        if value is not None and (isinstance(value, bool) or value < least):
            raise DepthbenchError(f"{option} must be at least {least}, not {value}")
    if gpus_per_node and ntasks_per_node and ntasks_per_node != gpus_per_node:
        raise DepthbenchError(
            f"--ntasks-per-node {ntasks_per_node} with --gpus-per-node {gpus_per_node}: one rank "
            f"per GPU; leave --ntasks-per-node out on GPU partitions"
        )
    if device not in (None, "cpu", "cuda"):
        raise DepthbenchError(f"--device {device!r}: choose cpu or cuda")
    if nproc > 1 and launched():
        raise DepthbenchError("--nproc starts processes itself; under torchrun/srun leave it out")
    if nproc > 1:
        prepare_launcher()  # the ranks will be forks of this process
    time_s = _seconds(time)
    targets = [Target(str(c), tuple(overrides)) for c in configs]
    targets += [Target(str(c), tuple(own)) for c, own in with_overrides]
    labels = [t.label for t in targets]
    if len(set(labels)) < len(labels):
        twice = next(x for x in labels if labels.count(x) > 1)
        raise DepthbenchError(f"a config is named twice with the same overrides ({twice}); name each once")
    stems = [Path(t.config).stem for t in targets]
    for t, stem in zip(targets, stems):  # the report names a config by its file alone where that is unambiguous
        if stems.count(stem) == 1:
            t.label = stem
    layout = Layout(  # not planned (nodes None) when neither nodes nor ranks per node are given
        nodes=nodes or (1 if gpus_per_node or ntasks_per_node else None),
        gpus_per_node=gpus_per_node or 0,
        ntasks_per_node=ntasks_per_node,
        time_s=time_s,
        warning_s=warning,
    )
    if device is None and gpus_per_node:
        device = "cuda"
    options = Options(device=device, steps=steps, loader_seconds=loader_seconds)
    if nproc > 1:
        return _spawned(targets, layout, options, nproc, nodes, gpus_per_node, ntasks_per_node, time, warning, work_dir)
    return preflight_process(targets, layout, options, work_dir, progress)


def _seconds(time: str | None) -> int | None:
    if time is None:
        return None
    from slurm.submit import parse_time  # Slurm's --time formats, as submit reads them

    return parse_time(str(time))


def _spawned(targets, layout, options, nproc, nodes, gpus_per_node, ntasks_per_node, time, warning, work_dir) -> Report:
    """``--nproc P``: P local ranks of ``depthbench preflight``; rank 0's process prints the report."""
    from harness.core.files import BadFile, printable, read_json, read_text
    from harness.engine.launch import spawn
    from harness.measure.preflight import RECORD, Check, Report, make_plan, new_record_path

    for t in targets:
        make_plan(t, 1)
    path = Path(work_dir) if work_dir else new_record_path()
    argv = ["preflight", "--work-dir", str(path), "--warning", str(warning)]
    for t in targets:
        argv += ["--config", t.config, *t.overrides]
    for option, value in (
        ("--nodes", nodes),
        ("--gpus-per-node", gpus_per_node or None),
        ("--ntasks-per-node", ntasks_per_node),
        ("--time", time),
        ("--device", options.device),
        ("--steps", options.steps),
        ("--loader-seconds", options.loader_seconds),
    ):
        if value is not None:
            argv += [option, str(value)]
    code = spawn(nproc, argv)
    try:
        record = read_json(path / RECORD, inside=path, what="preflight record")
        text = printable(read_text(path / "preflight.txt", inside=path), newlines=True).rstrip("\n")
        checks = [Check(**c) for c in record.get("checks", [])]
    except (OSError, BadFile, TypeError):
        raise DepthbenchError(
            f"the {nproc} preflight processes ended (exit {code}) without a record in {path}; "
            f"their output above says why",
            exit_code=1,
        ) from None
    return Report(checks, record, path / RECORD, text, code if code else 0, shown=True)
