"""``depthbench env``: what this environment has — versions, devices, and whether mmcv's ops load.

    from harness.commands.env import run
    report = run()     # {"python", "platform", "packages", "cuda", "cpu_threads", "mmcv_ops"}

Exit code 1 when mmcv's compiled ops do not load (``make setup`` builds them).
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import json
import platform
import sys

from harness.core.errors import EXIT_FAILED, EXIT_OK

__all__ = ["run", "add_parser", "main"]

PACKAGES = [
    "torch",
    "torchvision",
    "timm",
    "mmcv",
    "mmengine",
    "mmdet",
    "mmsegmentation",
    "accelerate",
    "deepspeed",
    "numpy",
    "pandas",
    "matplotlib",
]


def run() -> dict:
    """The environment report: Python, package versions, CUDA devices, CPU threads and whether mmcv's compiled
    ops load (``report["mmcv_ops"]["loaded"]``). Never raises for a broken install: it reports it."""
    import torch

    report: dict = {"python": sys.version.split()[0], "platform": platform.platform()}
    report["packages"] = {}
    for dist in PACKAGES:
        try:
            report["packages"][dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            report["packages"][dist] = None
    report["cuda"] = {
        "torch_cuda": torch.version.cuda,
        "available": torch.cuda.is_available(),
        "devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "bf16": bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported()),
    }
    report["cpu_threads"] = torch.get_num_threads()
    try:
        ops = importlib.import_module("mmcv.ops")
        from mmcv.utils import ext_loader

        ext = ext_loader.load_ext("_ext", ["nms", "roi_align_forward"])
        report["mmcv_ops"] = {"loaded": True, "cuda_ops": _mmcv_has_cuda(ext), "path": ops.__file__}
    except Exception as e:  # report, never crash: this command is what people run when things are broken
        report["mmcv_ops"] = {"loaded": False, "error": f"{type(e).__name__}: {e}"}
    return report


def _mmcv_has_cuda(ext) -> bool:
    try:
        from mmcv.utils import get_compiling_cuda_version

        return get_compiling_cuda_version() not in ("not available", "")
    except Exception:
        return False


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("env", help="versions, devices, and whether mmcv's compiled ops load")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=main)


def main(args) -> int:
    report = run()
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        # one column for every label, as wide as the longest (mmsegmentation) plus a gap
        width = max(len(label) for label in [*report["packages"], "cpu threads"]) + 2
        print(f"{'python':<{width}}{report['python']}  ({report['platform']})")
        for dist, version in report["packages"].items():
            print(f"{dist:<{width}}{version or 'NOT INSTALLED'}")
        cuda = report["cuda"]
        gpus = ", ".join(cuda["devices"]) or "none visible"
        print(
            f"{'cuda':<{width}}torch built for {cuda['torch_cuda']}; available: {cuda['available']}; GPUs: {gpus}"
            + (f"; bf16: {cuda['bf16']}" if cuda["available"] else "")
        )
        print(f"{'cpu threads':<{width}}{report['cpu_threads']}")
        ops = report["mmcv_ops"]
        print(
            f"{'mmcv ops':<{width}}"
            + (
                f"loaded (CUDA kernels: {'yes' if ops['cuda_ops'] else 'no, CPU only'})"
                if ops["loaded"]
                else f"NOT LOADED: {ops['error']} — run `make setup`"
            )
        )
    return EXIT_OK if report["mmcv_ops"]["loaded"] else EXIT_FAILED
