"""``depthbench finetune`` and ``depthbench test``: detection/segmentation with the stock MMEngine Runner.

    depthbench finetune CONFIG [--nproc N] [--resume auto|PATH] [--work-dir DIR] [--verbose] [key=value ...]
    depthbench test CONFIG CHECKPOINT [--tta] [--work-dir DIR] [--json] [--verbose] [key=value ...]

    from harness.commands.finetune import run_finetune, run_test
    result = run_finetune("configs/det/mask-rcnn_steps-resnet18-w32_fpn_500it_embedded-coco.py",
                          overrides=["train_cfg.max_iters=100"], work_dir="runs/det")  # RunResult
    metrics = run_test(config, "runs/det/last.pth").metrics                        # {"coco/bbox_mAP": ...}

CONFIG is an MMDetection 3 / MMSegmentation 1 config (configs/det, configs/seg); the MMEngine side (config
loading, the checks, the Runner) is :mod:`downstream.finetune`. Every input is checked before anything is written;
bad input raises :class:`DepthbenchError` (the command prints one line and exits 2). ``--nproc N`` starts N local
processes (gloo on CPU); under torchrun/srun each process finds its rank in the environment. The console shows a
header and a progress bar; MMEngine's own log goes to the run's log file (``--verbose``: to the console too).
Exit codes: 0 done, 1 failed, 2 bad input, 75 preempted (SIGUSR1, SIGTERM or Ctrl-C; continue with
``--resume auto``). See docs/downstream.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.errors import DepthbenchError

if TYPE_CHECKING:
    from downstream.finetune import TestResult
    from harness.engine.runner import RunResult

__all__ = ["run_finetune", "run_test", "add_parser", "main", "test_main"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("finetune", help="fine-tune a detector/segmentor (MMDetection/MMSegmentation config)")
    p.add_argument("config", help="e.g. configs/det/mask-rcnn_steps-resnet18-w32_fpn_500it_embedded-coco.py")
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="config overrides, e.g. train_cfg.max_iters=100 data_root=data/coco/ (+key=value adds)",
    )
    p.add_argument("--nproc", type=int, default=1, help="processes to start on this machine (default 1)")
    p.add_argument(
        "--resume",
        metavar="auto|PATH",
        help="auto: continue the run's newest checkpoint if there is one; PATH: an MMEngine checkpoint",
    )
    p.add_argument("--work-dir", help="the run directory (default results/runs/<experiment>/<run-id>)")
    p.add_argument(
        "--verbose",
        action="store_true",
        help="MMEngine's full log on the console too (it is always in the run's log file)",
    )
    p.set_defaults(func=main)

    t = subparsers.add_parser("test", help="evaluate a detector/segmentor checkpoint (bbox/segm AP or mIoU)")
    t.add_argument("config")
    t.add_argument("checkpoint", help="an MMEngine checkpoint, e.g. <run dir>/last.pth")
    t.add_argument("overrides", nargs="*", metavar="key=value")
    t.add_argument("--tta", action="store_true", help="test-time augmentation (the config's tta_model/tta_pipeline)")
    t.add_argument(
        "--work-dir",
        help="where to write the test's logs (default beside the checkpoint's run: <run>-test-<checkpoint>)",
    )
    t.add_argument("--json", action="store_true", help="print the metrics as JSON")
    t.add_argument("--verbose", action="store_true", help="MMEngine's full log on the console too")
    t.set_defaults(func=test_main)


def main(args) -> int:
    """``depthbench finetune``."""
    return run_finetune(
        args.config,
        overrides=args.overrides,
        nproc=args.nproc,
        resume=args.resume,
        work_dir=args.work_dir,
        verbose=args.verbose,
    ).exit_code


def test_main(args) -> int:
    """``depthbench test``: the numeric metrics on one line (or as JSON), printed by the main process only."""
    result = run_test(
        args.config,
        args.checkpoint,
        overrides=args.overrides,
        tta=args.tta,
        work_dir=args.work_dir,
        verbose=args.verbose,
    )
    if result.is_main:
        print(
            json.dumps(result.metrics)
            if args.json
            else "  ".join(f"{k} {v:.4f}" for k, v in result.metrics.items()) + f"  ({result.run_dir})"
        )
    return 0


def run_finetune(
    config: str | Path,
    *,
    overrides=(),
    nproc: int = 1,
    resume: str | Path | None = None,
    work_dir: str | Path | None = None,
    verbose: bool = False,
) -> "RunResult":
    """Fine-tune the detector/segmentor of ``config`` (with ``key=value`` ``overrides``) and return how it ended.

    ``nproc``: processes to start on this machine; ``resume``: ``"auto"`` (the run's newest checkpoint, if any --
    with no ``work_dir``, the experiment's newest unfinished run) or an MMEngine checkpoint; ``work_dir``: the run
    directory (default a new ``results/runs/<experiment>/<run-id>``); ``verbose``: MMEngine's log on the console
    too. Bad input raises :class:`DepthbenchError` before anything is written; a preempted run is a RunResult with
    ``status`` preempted (exit code 75).
    """
    # checked before MMEngine and torch are imported (seconds): a wrong flag is answered at once
    if not isinstance(nproc, int) or isinstance(nproc, bool) or nproc < 1:
        raise DepthbenchError(f"--nproc {nproc}: give the number of processes to start, 1 or more")
    from harness.engine.launch import launched, prepare_launcher, spawn

    if nproc > 1 and launched():
        raise DepthbenchError("--nproc starts processes itself; under torchrun/srun leave it out")
    if nproc > 1:
        prepare_launcher()  # the ranks will be forks of this process
    from downstream.finetune import finetune_process, prepare_finetune
    from harness.engine.runner import RunResult

    resume = str(resume) if resume is not None else None
    plan = prepare_finetune(config, list(overrides), resume=resume, work_dir=work_dir)
    if nproc > 1:  # each rank is this command again, in the directory just checked
        argv = ["finetune", str(config), *overrides, "--work-dir", str(plan.work_dir)]
        code = spawn(nproc, argv + (["--resume", resume] if resume else []) + (["--verbose"] if verbose else []))
    else:
        code = finetune_process(plan, config_file=str(config), verbose=verbose)
    return RunResult.from_exit(code, plan.work_dir)


def run_test(
    config: str | Path,
    checkpoint: str | Path,
    *,
    overrides=(),
    tta: bool = False,
    work_dir: str | Path | None = None,
    verbose: bool = False,
) -> "TestResult":
    """Evaluate the MMEngine ``checkpoint`` (read weights-only) on ``config``'s test split (``tta``: the config's
    test-time augmentation); returns its numeric metrics and the run directory the logs went to (default beside
    the checkpoint's run, ``<run>-test-<checkpoint name>``; beside the file for a checkpoint outside any run).
    Bad input raises :class:`DepthbenchError` before anything is written."""
    from downstream.finetune import evaluate

    return evaluate(config, checkpoint, overrides=list(overrides), tta=tta, work_dir=work_dir, verbose=verbose)
