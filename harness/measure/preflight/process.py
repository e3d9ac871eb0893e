"""One rank of ``depthbench preflight`` (:func:`preflight_process`): the checks in their order, the ranks meeting
between them, and rank 0 writing the record."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Callable

import torch

from harness.core.errors import DepthbenchError
from harness.engine.launch import configure_threads, export_distributed_env
from harness.measure.preflight.allreduce import allreduce_sweep
from harness.measure.layout import Layout
from harness.measure.preflight.common import Check, Options, Rank, Report, Target
from harness.measure.preflight.environment import environment_checks
from harness.measure.preflight.group import Group
from harness.measure.preflight.loader import loader_check
from harness.measure.preflight.plan import distinct, make_plan
from harness.measure.preflight.record import new_record_path, write_report
from harness.measure.preflight.run_folder import checkpoint_checks, run_folder_check
from harness.measure.preflight.step import step_check


def preflight_process(
    targets: list[Target],
    layout: Layout,
    options: Options,
    work_dir: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """Run every check on this rank; rank 0 gathers, renders and writes ``preflight.json`` into ``work_dir``
    (default ``<runs>/preflight/<run id>``) and returns the :class:`Report`; other ranks return one without checks
    or record, with the exit code rank 0 decided."""
    env = export_distributed_env()
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    local_rank, local_world = int(env.get("LOCAL_RANK", 0)), int(env.get("LOCAL_WORLD_SIZE", world))
    say = progress if (progress and rank == 0) else (lambda line: None)
    planned = layout.world if layout.planned else world
    try:
        plans = [make_plan(t, planned) for t in targets]  # config errors: one line, before any work
    except DepthbenchError as e:
        if rank != 0:  # rank 0 says it once
            raise SystemExit(e.exit_code) from None
        raise
    workers = max([p.cfg.data.workers for p in plans] or [0])
    configure_threads(local_world, workers)
    device = options.device or ("cuda" if torch.cuda.is_available() else "cpu")
    opts = options.resolved(device)
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    group = Group(world, opts.timeout_s)
    try:
        if world > 1 and rank == 0:
            say(f"depthbench preflight: {world} ranks met")
        cuda_ready = device == "cuda" and torch.cuda.is_available() and torch.cuda.device_count() > 0
        if cuda_ready:
            torch.cuda.set_device(local_rank % torch.cuda.device_count())
        run_path = Path(group.broadcast(str(work_dir or new_record_path())))
        mine = Rank(rank, local_rank, local_world, node, device if cuda_ready or device == "cpu" else "cpu")
        checks: list[Check] = []
        say("depthbench preflight: versions, devices, bf16, memory")
        checks += environment_checks(mine, device, plans)
        measured: dict[str, dict] = {}
        unique, same = distinct(plans)  # a sweep's points differ in the learning rate: one measurement for all
        for plan in unique:
            group.barrier()  # every rank steps at once (shared nodes, shared links), then loads at once
            say(f"depthbench preflight: {plan.label}: training step at batch {plan.micro_batch}, {plan.precision}")
            check, numbers = step_check(mine, plan, opts)
            checks.append(check)
            measured[plan.label] = numbers
            group.barrier()
            say(f"depthbench preflight: {plan.label}: loader ({plan.cfg.data.type}, workers {plan.cfg.data.workers})")
            check, loader = loader_check(mine, plan, opts, numbers.get("step_ms"))
            checks.append(check)
            measured[plan.label].update(loader)
        say("depthbench preflight: all-reduce bandwidth")
        nccl = group.all(cuda_ready)  # every rank asks (a collective), NCCL only when every rank has its GPU
        collective = allreduce_sweep(group, opts, unique, nccl)
        if rank == 0:
            run_path.mkdir(parents=True, exist_ok=True)
        group.barrier()
        say("depthbench preflight: checkpoint write, free space")
        if rank == 0:
            checks += checkpoint_checks(mine, plans, unique, measured, run_path, layout, opts)
        elif local_rank == 0:
            checks.append(run_folder_check(mine, run_path))
        for label, first in same.items():
            measured[label] = dict(measured.get(first, {}))
        gathered = group.gather(
            {
                "rank": rank,
                "local_rank": local_rank,
                "node": node,
                "checks": checks,
                "measured": measured,
                "versions": mine.versions,
                "device_name": mine.device_name,
            }
        )
        report = None
        code = 0
        if rank == 0:
            report = write_report(gathered, collective, plans, same, layout, opts, run_path, world)
            code = report.exit_code
        code = group.broadcast(code)
        # a rank other than 0 shows nothing itself; it exits with the code rank 0 decided
        return report if rank == 0 else Report([], {}, None, "", code)
    finally:
        group.close()
