"""The ranks together: they meet over gloo (which every node has) to agree on the record's folder, step and load
at once, and gather every rank's checks on rank 0. One rank needs no process group: each call answers for it."""

from __future__ import annotations

import datetime as _dt

import torch
import torch.distributed as dist


class Group:
    """The preflight's ranks over gloo: ``world`` ranks, ``timeout_s`` for meeting and for every collective."""

    def __init__(self, world: int, timeout_s: int):
        self.world, self.timeout_s = world, timeout_s
        self.started = False
        if world > 1 and not dist.is_initialized():
            dist.init_process_group("gloo", timeout=_dt.timedelta(seconds=timeout_s))
            self.started = True

    def barrier(self):
        if self.world > 1:
            dist.barrier()

    def broadcast(self, value):
        """Rank 0's ``value`` on every rank."""
        if self.world == 1:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, obj) -> list:
        """Every rank's ``obj`` in rank order on rank 0 (None elsewhere)."""
        if self.world == 1:
            return [obj]
        out = [None] * self.world if dist.get_rank() == 0 else None
        dist.gather_object(obj, out, dst=0)
        return out

    def all(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is true on every rank."""
        if self.world == 1:
            return bool(flag)
        t = torch.tensor([0.0 if flag else 1.0])
        dist.all_reduce(t)
        return t.item() == 0

    def close(self):
        if self.started:
            dist.destroy_process_group()
