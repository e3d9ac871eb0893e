"""The run folder's checks. Rank 0 (the one that writes checkpoints): ``checkpoint`` -- write bandwidth of the
run folder's file system for a checkpoint of the model's size (written with the engine's own ``save_atomic``), and
whether finishing a step and writing it fit in the ``--warning`` window before the time limit; ``space`` -- free
space for the runs' checkpoints. Each other node's first rank: ``run-folder`` -- it can write the run folder too."""

from __future__ import annotations

import math
import os
import shutil
import time
from pathlib import Path

import torch

from harness.core.files import atomic_write
from harness.engine.checkpoint import checksum_path, save_atomic
from harness.measure.layout import Layout
from harness.measure.preflight.common import MIB, Check, Options, Rank, seconds_text, size_text
from harness.measure.preflight.plan import Plan


def checkpoint_checks(
    rank: Rank, plans: list[Plan], unique: list[Plan], measured: dict, run_path: Path, layout: Layout, opts: Options
) -> list[Check]:
    """The checkpoint window for each distinct plan, the free space for all of them. Adds each plan's
    ``checkpoint_bytes`` and ``checkpoint_write_s`` to ``measured`` (``{label: numbers}``)."""
    checks = []
    sizes = {p.label: p.checkpoint_bytes() for p in plans}
    largest = max(sizes.values(), default=2**30)  # no config: a 1 GiB checkpoint (capped by opts.disk_mib)
    result = rank.guarded("checkpoint", None, lambda: _write_bandwidth(run_path, largest, opts))
    if isinstance(result, Check):
        return [result]
    bandwidth, written = result
    base = (
        f"run folder {run_path.parent}: {bandwidth / 1e6:,.0f} MB/s writing a {written / MIB:,.0f} MiB "
        f"checkpoint (torch.save, SHA-256, fsync, rename)"
    )
    if not plans:
        checks.append(rank.check("checkpoint", "ok", base, bandwidth / 1e6, "MB/s"))
    for plan in unique:
        write_s = sizes[plan.label] / bandwidth
        step_ms = measured.get(plan.label, {}).get("step_ms")
        need = write_s + (step_ms or 0) / 1000
        measured.setdefault(plan.label, {}).update(
            checkpoint_bytes=sizes[plan.label], checkpoint_write_s=round(write_s, 3)
        )
        step = (
            f"a step ({seconds_text(step_ms / 1000)}) and the write need"
            if step_ms
            else "the write (the step was not measured) needs"
        )
        text = (
            f"{plan.label}: last.pth {size_text(sizes[plan.label])} in {seconds_text(write_s)} at "
            f"{bandwidth / 1e6:,.0f} MB/s; {step} {seconds_text(need)} of the {layout.warning_s} s --warning "
            f"window"
        )
        if layout.time_s is not None:
            text += f" before the {_duration(layout.time_s)} limit"
        interval = plan.cfg.ckpt.interval_minutes
        if interval:
            text += f"; every {interval} min that is {write_s / (60 * interval):.2%} of the run"
        if need <= 0.5 * layout.warning_s:
            verdict = "ok"
        elif need <= layout.warning_s:
            verdict, text = "warn", text + f": tight; raise --warning to {_round_up(2 * need)}"
        else:
            verdict, text = (
                "fail",
                (text + f": the run would be killed mid-write; raise --warning to {_round_up(2 * need)}"),
            )
        if layout.time_s is not None and layout.time_s < layout.warning_s + 60:
            verdict, text = "fail", text + "; --time leaves less than --warning + 60 s"
        checks.append(
            rank.check(
                "checkpoint",
                verdict,
                text,
                need,
                "s",
                plan.label,
                bandwidth_mbs=round(bandwidth / 1e6, 1),
                write_s=round(write_s, 3),
            )
        )
    free = shutil.disk_usage(run_path).free
    # during an atomic write the old and the new last.pth both exist; best.pth beside them
    need = sum(2 * sizes[p.label] + p.best_bytes() for p in plans)
    if plans:
        text = (
            f"{free / 2**30:,.1f} GiB free in {run_path.parent}; the {len(plans)} config(s)' checkpoints need "
            f"{size_text(need)} (last.pth twice while it is written + best.pth)"
        )
        verdict = "ok" if free >= 2 * need else ("warn" if free >= need else "fail")
        if verdict != "ok":
            text += ": " + (
                "little to spare"
                if verdict == "warn"
                else "not enough; free space or choose another runs folder (DEPTHBENCH_RUNS)"
            )
        checks.append(rank.check("space", verdict, text, free / 2**30, "GiB free", need_bytes=need))
    return checks


def run_folder_check(rank: Rank, run_path: Path) -> Check:
    """``run-folder``: this node can write the run folder (rank 0 may run here after a requeue)."""
    path = run_path / f".preflight-probe-{rank.node}-{os.getpid()}"
    try:
        atomic_write(path, os.urandom(MIB))
        path.unlink()
    except OSError as e:
        return rank.check(
            "run-folder",
            "fail",
            f"cannot write {run_path} from this node ({e.strerror}): the run "
            f"folder must be on a file system every node mounts (DEPTHBENCH_RUNS)",
        )
    return rank.check(
        "run-folder", "ok", f"{run_path} is writable from this node (rank 0 may run here after a requeue)"
    )


def _write_bandwidth(run_path: Path, nbytes: int, opts: Options) -> tuple[float, int]:
    """Bytes/s writing an incompressible checkpoint of ``nbytes`` (16 MiB to ``opts.disk_mib``) as training does,
    and the bytes written; the file is removed."""
    size = int(min(max(nbytes, 16 * MIB), opts.disk_mib * MIB))
    block = torch.rand(4 * MIB // 4, generator=torch.Generator().manual_seed(0))  # incompressible
    tensor = block.repeat(max(1, size // (4 * MIB)))
    path = run_path / ".preflight-checkpoint.pth"
    start = time.perf_counter()
    try:
        save_atomic({"model": tensor}, path)
        seconds = time.perf_counter() - start
    finally:
        path.unlink(missing_ok=True)
        checksum_path(path).unlink(missing_ok=True)
    written = tensor.numel() * 4
    return written / seconds, written


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    days, rest = divmod(seconds, 86400)
    text = f"{rest // 3600:{'02d' if days else 'd'}}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def _round_up(seconds: float) -> int:
    return int(math.ceil(max(seconds, 60) / 30) * 30)
