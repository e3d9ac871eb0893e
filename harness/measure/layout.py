"""How the runs of a submission will be laid out: what ``depthbench submit --estimate`` costs them on and what
``depthbench preflight`` checks the allocation for."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Layout:
    """``nodes`` x ranks per node (one per GPU with ``gpus_per_node``, else ``ntasks_per_node``, else one), Slurm's
    ``--time`` limit and ``--signal=USR1@warning`` (they bound the checkpoint window and the requeues), how many
    array elements run at once and the partition (to match records made there). Each run's per-device batch
    follows from it (``batch_size`` is global). ``nodes`` None (preflight without a planned layout): the runs are
    planned as the allocation that checks them runs."""

    nodes: int | None = 1
    gpus_per_node: int = 0
    ntasks_per_node: int | None = None
    time_s: int | None = None
    warning_s: int = 120
    max_concurrent: int | None = None
    partition: str | None = None

    @property
    def planned(self) -> bool:
        return self.nodes is not None

    @property
    def ranks_per_node(self) -> int:
        return self.gpus_per_node or self.ntasks_per_node or 1

    @property
    def world(self) -> int:
        return (self.nodes or 1) * self.ranks_per_node

    @property
    def device(self) -> str:
        return "cuda" if self.gpus_per_node else "cpu"

    @property
    def unit(self) -> str:
        return "GPU-h" if self.gpus_per_node else "rank-h"
