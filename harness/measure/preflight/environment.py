"""The environment checks each rank runs on itself -- ``versions`` (torch, CUDA, NCCL, driver), ``devices``,
``bf16`` (support, and its matmul rate against fp32's: on a CPU without bf16 units autocast is ~70x slower),
``memory`` (free GPU memory, or host memory) -- and, on rank 0, ``same-software`` over every rank's versions."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys

import psutil
import torch

from harness.measure.bench import bf16_supported, peak_matmul_gflops
from harness.measure.preflight.common import Check, Rank
from harness.measure.preflight.plan import Plan


def environment_checks(rank: Rank, requested: str, plans: list[Plan]) -> list[Check]:
    """``versions``, ``devices``, ``bf16`` and ``memory`` of this rank; ``requested``: the device asked for."""
    return [
        rank.guarded("versions", None, lambda: versions_check(rank, requested)),
        rank.guarded("devices", None, lambda: devices_check(rank, requested)),
        rank.guarded("bf16", None, lambda: bf16_check(rank, plans)),
        rank.guarded("memory", None, lambda: memory_check(rank)),
    ]


def versions_check(rank: Rank, requested: str) -> Check:
    nccl = None
    try:
        if torch.cuda.is_available():
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception:
        pass
    driver = driver_version()
    rank.versions = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": nccl,
        "driver": driver,
        "python": sys.version.split()[0],
    }
    text = (
        f"torch {torch.__version__}, CUDA {torch.version.cuda or '-'}, NCCL {nccl or '-'}, "
        f"driver {driver or '-'}, Python {rank.versions['python']}"
    )
    if requested == "cuda" and not torch.cuda.is_available():
        why = "torch has no CUDA build" if not torch.version.cuda else "no GPU visible to this rank"
        return rank.check("versions", "fail", f"{text}: {why}", **rank.versions)
    return rank.check("versions", "ok", text, **rank.versions)


def devices_check(rank: Rank, requested: str) -> Check:
    if rank.device == "cuda":
        count = torch.cuda.device_count()
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        rank.device_name = props.name
        text = (
            f"{count} GPU(s) visible, this rank on cuda:{index}: {props.name} (sm_{props.major}{props.minor}, "
            f"{props.multi_processor_count} SMs, {props.total_memory / 2**30:.1f} GiB)"
        )
        if rank.local_world > count:
            return rank.check(
                "devices",
                "fail",
                f"{text}; {rank.local_world} ranks on this node share "
                f"{count} GPU(s): one rank per GPU (--gpus-per-node)",
                count,
                "GPUs",
            )
        return rank.check("devices", "ok", text, count, "GPUs", device_name=props.name)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    rank.device_name = cpu_name()
    text = (
        f"CPU {rank.device_name}: {cores} core(s) for this rank, {torch.get_num_threads()} thread(s), "
        f"{rank.local_world} rank(s) on this node"
    )
    if requested == "cuda":
        return rank.check("devices", "fail", f"no GPU: {text}", 0, "GPUs")
    return rank.check("devices", "ok", text, cores, "cores", device_name=rank.device_name)


def bf16_check(rank: Rank, plans: list[Plan]) -> Check:
    cuda = rank.device == "cuda"
    n = 4096 if cuda else 256
    wants = [p.label for p in plans if p.precision in ("bf16", "fp16")]
    supported = bf16_supported(rank.device)
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False  # plain fp32, as the comparison means
    fp32 = peak_matmul_gflops(n, torch.float32, rank.device)
    rank.fp32_gflops = fp32
    if not supported:
        verdict = "fail" if (wants and cuda) else ("warn" if wants else "ok")
        return rank.check(
            "bf16",
            verdict,
            f"no bf16 support here (fp32 matmul {fp32:,.1f} GFLOP/s)"
            + (f"; {', '.join(wants)} train in {plans[0].precision}: use precision=fp32" if wants else ""),
            0,
            "x fp32",
            fp32_gflops=round(fp32, 1),
        )
    bf16 = peak_matmul_gflops(n, torch.bfloat16, rank.device)
    rank.bf16_gflops = bf16
    ratio = bf16 / fp32
    text = f"bf16 matmul {bf16:,.1f} GFLOP/s = {ratio:.2f}x fp32 ({fp32:,.1f}; n={n})"
    data = dict(bf16_gflops=round(bf16, 1), fp32_gflops=round(fp32, 1))
    if ratio < 1 and wants:
        return rank.check(
            "bf16",
            "warn",
            f"{text}: slower than fp32 here, yet {', '.join(wants)} use autocast; set precision=fp32 for this device",
            ratio,
            "x fp32",
            **data,
        )
    return rank.check("bf16", "ok", text, ratio, "x fp32", **data)


def memory_check(rank: Rank) -> Check:
    if rank.device == "cuda":
        free, total = torch.cuda.mem_get_info()
        rank.free_bytes = free
        text = f"GPU memory {free / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB"
        if free < 0.9 * total:
            return rank.check(
                "memory",
                "warn",
                f"{text}: another process holds {(total - free) / 2**30:.1f} GiB of this GPU",
                free / 2**30,
                "GiB free",
            )
        return rank.check("memory", "ok", text, free / 2**30, "GiB free", total_gib=round(total / 2**30, 2))
    vm = psutil.virtual_memory()
    rank.free_bytes = vm.available // max(1, rank.local_world)
    return rank.check(
        "memory",
        "ok",
        f"host memory {vm.available / 2**30:.1f} GiB available of "
        f"{vm.total / 2**30:.1f} GiB ({rank.local_world} rank(s) share it)",
        vm.available / 2**30,
        "GiB free",
        total_gib=round(vm.total / 2**30, 2),
    )


def same_software_check(gathered: list[dict]) -> list[Check]:
    """Rank 0, over every rank's versions: one torch/CUDA/NCCL build everywhere (fail), one driver (warn); []
    for one rank."""
    if len(gathered) <= 1:
        return []
    versions = {
        (g["versions"].get("torch"), g["versions"].get("cuda"), g["versions"].get("nccl"))
        for g in gathered
        if g["versions"]
    }
    drivers = {g["versions"].get("driver") for g in gathered if g["versions"]}
    if len(versions) > 1:
        return [
            Check(
                "same-software",
                "fail",
                f"ranks run different torch/CUDA/NCCL builds: "
                f"{sorted(versions, key=str)}; every node must use the same environment",
                len(versions),
                "builds",
            )
        ]
    if len(drivers) > 1:
        return [
            Check(
                "same-software",
                "warn",
                f"one torch/CUDA/NCCL build, but GPU drivers differ between nodes: {sorted(map(str, drivers))}",
                len(drivers),
                "drivers",
            )
        ]
    return [
        Check(
            "same-software",
            "ok",
            f"every rank runs torch {next(iter(versions))[0]} "
            f"(CUDA {next(iter(versions))[1] or '-'}, NCCL {next(iter(versions))[2] or '-'})",
            1,
            "builds",
        )
    ]


def driver_version() -> str | None:
    """The NVIDIA driver's version from ``nvidia-smi``; None without one."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.split()[0] if out.returncode == 0 and out.stdout.split() else None


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            return next(
                (line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), platform.machine()
            )
    except OSError:
        return platform.machine()
