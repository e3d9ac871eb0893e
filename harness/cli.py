"""``depthbench``: the one command line of depthbench.

Each sub-command lives in its own module with an ``add_parser(subparsers)`` function; this file only
collects them. Modules are imported when the command line is parsed, so keep their top-level imports light.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from harness.errors import DepthbenchError

# module (under harness/) for each sub-command, in the order `depthbench --help` lists them
COMMANDS = ["demo", "env_report", "model_list", "verify", "bench", "train", "evaluate_cmd", "finetune", "diagnose",
            "results_cmd", "submit"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="depthbench",
        description="Reproduce and benchmark StepsNet, SReT, TransNeXt, HO-ResNet and ScaleNet.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"harness.{name}").add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    # DeepSpeed probes for an accelerator when mmengine/accelerate import it; on a CPU machine say so up front.
    os.environ.setdefault("DS_ACCELERATOR", "cpu" if not _has_cuda_device() else "cuda")
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # `key=value` overrides may also follow the options (train/eval)
        if not hasattr(args, "overrides") or any(a.startswith("-") or "=" not in a for a in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.overrides += extra
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except DepthbenchError as e:  # the one place bad input becomes one line and an exit code
        print(f"depthbench {args.command}: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("depthbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `depthbench models | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _has_cuda_device() -> bool:
    return os.path.exists("/dev/nvidiactl") or bool(os.environ.get("CUDA_VISIBLE_DEVICES"))


if __name__ == "__main__":
    sys.exit(main())
