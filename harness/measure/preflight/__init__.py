"""The checks behind ``depthbench preflight`` (harness/commands/preflight.py): is this allocation ready for the runs
it is about to get, and what will they cost on it?

Every rank of the allocation runs :func:`preflight_process` (process.py; one process locally, each ``srun`` task
under Slurm, the ranks found as ``depthbench train`` finds them, harness/engine/launch.py). Each check gives one
:class:`Check` -- a verdict (ok / warn / fail), the number behind it and one line of text -- and lives in a module
of its own:

- environment.py, per rank: ``versions`` (torch, CUDA, NCCL, driver), ``devices``, ``bf16`` (support, and its
  matmul rate against fp32's), ``memory`` (free GPU memory, or host memory); over all ranks: ``same-software``;
- step.py, per rank and CONFIG: ``step`` -- a training step of the config's model at its per-device batch and
  precision (plan.py sizes it for the planned layout), timed with ``depthbench bench``'s code, its peak memory and
  whether it fits;
- loader.py, per rank and CONFIG: ``loader`` -- the images/s the config's training loader delivers on this rank,
  against the images/s the step consumes, with the ``data.workers`` that would feed it;
- allreduce.py, all ranks: ``all-reduce`` (nccl-tests' bus bandwidth over message sizes; NCCL between GPUs, gloo
  between CPUs), ``transport`` (from NCCL's log), ``node-bandwidth`` (a node under half its peers' median fails)
  and ``grad-sync`` (each config's gradient all-reduce against its step);
- run_folder.py: ``checkpoint`` and ``space`` on rank 0 (the one that writes checkpoints), ``run-folder`` on each
  other node's first rank.

Checks never raise: an exception becomes a ``fail`` line naming it (:meth:`Rank.guarded`), so one broken check
never hides the others and no rank leaves a collective the others wait in. The ranks meet over gloo (group.py,
which every node has); NCCL is used for the bandwidth only when every rank has its GPU. Rank 0 gathers every rank's
checks, renders them node by node and keeps a machine-readable record, ``preflight.json`` (:data:`FORMAT`), in
``<runs>/preflight/<run id>/`` (record.py): ``depthbench submit --estimate`` (harness/measure/estimate.py) reads the
step times it measured with :func:`read_records`.
"""

from harness.measure.preflight.allreduce import (
    SLOW_NODE_FRACTION,
    allreduce_checks,
    allreduce_sweep,
    nccl_transport,
    pair_checks,
    slow_nodes,
    transport_check,
)
from harness.measure.layout import Layout
from harness.measure.preflight.common import MIB, VERDICTS, Check, Options, Rank, Report, Target
from harness.measure.preflight.environment import driver_version, environment_checks, same_software_check
from harness.measure.preflight.loader import loader_check
from harness.measure.preflight.plan import Plan, distinct, make_plan
from harness.measure.preflight.process import preflight_process
from harness.measure.preflight.record import (
    EXPERIMENT,
    FORMAT,
    RECORD,
    checked_record,
    new_record_path,
    read_records,
    render,
    write_report,
)
from harness.measure.preflight.run_folder import checkpoint_checks, run_folder_check
from harness.measure.preflight.step import step_check

__all__ = [
    "EXPERIMENT",
    "FORMAT",
    "MIB",
    "RECORD",
    "SLOW_NODE_FRACTION",
    "VERDICTS",
    "Check",
    "Layout",
    "Options",
    "Plan",
    "Rank",
    "Report",
    "Target",
    "allreduce_checks",
    "allreduce_sweep",
    "checked_record",
    "checkpoint_checks",
    "distinct",
    "driver_version",
    "environment_checks",
    "loader_check",
    "make_plan",
    "nccl_transport",
    "new_record_path",
    "pair_checks",
    "preflight_process",
    "read_records",
    "render",
    "run_folder_check",
    "same_software_check",
    "slow_nodes",
    "step_check",
    "transport_check",
    "write_report",
]
