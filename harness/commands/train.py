"""``depthbench train``: the command line and :func:`run`, its programmatic twin.

    depthbench train CONFIG [--engine accelerate|deepspeed] [--nproc N] [--resume auto|PATH] [--work-dir DIR]
                     [--compile [--compile-mode MODE]] [--channels-last] [--grad-checkpointing] [key=value ...]
                     [--allow-changes KEY ...]
    depthbench train --work-dir RUN --resume auto [--nproc N]      # continue a run with its own config

    from harness.commands.train import run
    result = run("configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py", work_dir="runs/x", resume="auto",
                 overrides=["epochs=2"])       # RunResult(status, exit_code, run_dir, best_metric)

Everything that can be wrong with the inputs (config keys, model name, dataset layout, batch vs. world size,
the run directory, the checkpoint to resume) is checked before anything is written or any process is started;
bad input raises :class:`harness.errors.DepthbenchError` (the command prints one line and exits 2).
``--nproc N`` starts N local processes (:mod:`harness.engine.launch`); under a launcher (torchrun, srun, ...) each
process finds its rank in the environment. Exit codes: 0 done, 1 failed (e.g. a non-finite loss), 2 bad input,
75 preempted (checkpointed; rerun with ``--resume auto``). The run itself is :mod:`harness.engine.runner`; see
docs/training.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.errors import DepthbenchError
from harness.core.schema import describe

if TYPE_CHECKING:
    from harness.engine.runner import RunResult

__all__ = ["run", "add_parser", "main"]


class HelpConfig(argparse.Action):
    """``--help-config [CONFIG]``: every config key with its default (or CONFIG's value), type, range and help
    (harness/core/schema.py)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs="?", metavar="CONFIG", default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        if values is None:
            print(describe())
            parser.exit()
        from harness.core.config import load_config

        print(describe(load_config(values), values))  # a bad CONFIG raises: harness/cli.py says it in one line
        parser.exit()


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("train", help="pretrain/fine-tune a model from a config (Accelerate or DeepSpeed)")
    p.add_argument(
        "--help-config",
        action=HelpConfig,
        help="list every config key with its default (with CONFIG: that config's value), type, range "
        "and help, and exit",
    )
    p.add_argument(
        "config",
        nargs="?",
        help="a config file, e.g. configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py (left out with "
        "--resume auto --work-dir RUN: the run's own config)",
    )
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="config overrides, e.g. optim.lr=1e-3 epochs=10 (+key=value adds a key)",
    )
    p.add_argument("--engine", choices=["accelerate", "deepspeed"], help="default: the config's `engine`")
    p.add_argument("--nproc", type=int, default=1, help="processes to start on this machine (default 1)")
    p.add_argument(
        "--resume",
        metavar="auto|PATH",
        help="auto: continue the run's last.pth if there is one; PATH: a checkpoint or run directory",
    )
    p.add_argument("--work-dir", help="the run directory (default results/runs/<experiment>/<run-id>)")
    p.add_argument(
        "--allow-changes",
        nargs="+",
        default=(),
        metavar="KEY",
        help="on a resume, accept these config keys differing from the run's (recorded in meta.json)",
    )
    speed = p.add_argument_group(
        "speed options (config keys compile.*, channels_last, grad_checkpointing; docs/training.md)"
    )
    speed.add_argument("--compile", action="store_true", help="torch.compile the training step (compile.enable=True)")
    speed.add_argument(
        "--compile-mode",
        metavar="MODE",
        help="torch.compile mode, e.g. max-autotune or reduce-overhead (implies --compile)",
    )
    speed.add_argument("--channels-last", action="store_true", help="NHWC weights and image batches")
    speed.add_argument(
        "--grad-checkpointing",
        action="store_true",
        help="recompute activations in backward (the model's set_grad_checkpointing)",
    )
    p.set_defaults(func=main)


def main(args) -> int:
    # `--allow-changes epochs optim.lr=1e-3`: nargs="+" also takes the overrides written after it
    allow = [key for key in args.allow_changes if "=" not in key]
    overrides = [*args.overrides, *(o for o in args.allow_changes if "=" in o)]
    config = args.config
    if config is not None and "=" in config and Path(config).suffix != ".py":  # `train --work-dir R epochs=3`
        config, overrides = None, [config, *overrides]
    return run(
        config,
        work_dir=args.work_dir,
        resume=args.resume,
        overrides=overrides,
        engine=args.engine,
        nproc=args.nproc,
        compile=args.compile,
        compile_mode=args.compile_mode,
        channels_last=args.channels_last,
        grad_checkpointing=args.grad_checkpointing,
        allow_changes=allow,
    ).exit_code


def speed_overrides(
    compile: bool = False,
    compile_mode: str | None = None,
    channels_last: bool = False,
    grad_checkpointing: bool = False,
) -> list[str]:
    """The ``key=value`` overrides the speed flags stand for (so ``--nproc`` passes them on unchanged)."""
    overrides = ["compile.enable=True"] if compile or compile_mode else []
    overrides += [f"compile.mode={compile_mode}"] if compile_mode else []
    overrides += ["channels_last=True"] if channels_last else []
    return overrides + (["grad_checkpointing=True"] if grad_checkpointing else [])


def run(
    config: str | Path | None,
    *,
    work_dir: str | Path | None = None,
    resume: str | Path | None = None,
    overrides=(),
    engine: str | None = None,
    nproc: int = 1,
    compile: bool = False,
    compile_mode: str | None = None,
    channels_last: bool = False,
    grad_checkpointing: bool = False,
    allow_changes=(),
) -> "RunResult":
    """Train from the config file ``config`` (with ``key=value`` ``overrides``) and return how it ended.

    ``work_dir``: the run directory (default: a new ``results/runs/<experiment>/<run-id>``); ``resume``:
    ``"auto"`` (continue the run's ``last.pth`` if there is one -- with no ``work_dir``, the experiment's newest
    unfinished run) or a checkpoint/run directory; ``engine``: accelerate or deepspeed (default: the config's);
    ``nproc``: processes to start on this machine; ``compile`` (``compile_mode``), ``channels_last``,
    ``grad_checkpointing``: the speed options (the same as their config keys). A run continued in its own directory
    keeps its config: a key that differs is refused unless named in ``allow_changes`` (recorded in meta.json);
    ``config`` None with ``work_dir``: the run's own config (its config.json). Bad input raises
    :class:`DepthbenchError` before anything is written; a failed or preempted run is a :class:`RunResult` (``status``
    failed/preempted).
    """
    from harness.engine.builders import load_training_config, load_run_config
    from harness.engine.launch import (
        configure_threads,
        die_with_launcher,
        distributed_env,
        launched,
        prepare_launcher,
        spawn,
    )
    from harness.engine.runner import RunResult, prepare_run, train_process

    die_with_launcher()
    if not isinstance(nproc, int) or isinstance(nproc, bool) or nproc < 1:
        raise DepthbenchError(f"--nproc {nproc}: give the number of processes to start, 1 or more")
    if nproc > 1 and launched():
        raise DepthbenchError("--nproc starts processes itself; under torchrun/srun/accelerate launch leave it out")
    if nproc > 1:
        prepare_launcher()  # the ranks will be forks of this process
    overrides = list(overrides) + speed_overrides(compile, compile_mode, channels_last, grad_checkpointing)
    config_given = config is not None
    if config_given:
        cfg, schedule_changes = load_training_config(config, overrides, engine=engine)
    else:
        config, recipe = load_run_config(work_dir, resume)
        cfg, schedule_changes = load_training_config(config, overrides, recipe=recipe, engine=engine)
    world_size = nproc if not launched() else int(distributed_env()["WORLD_SIZE"])
    # a launcher's ranks other than 0 keep quiet about bad input: rank 0 says it once
    try:
        plan = prepare_run(
            cfg,
            str(config),
            work_dir=work_dir,
            resume=resume,
            world_size=world_size,
            pick_new=not launched(),
            allow_changes=tuple(allow_changes),
        )
        plan.schedule_changes = schedule_changes
    except DepthbenchError as e:
        if distributed_env()["RANK"] != "0":
            raise SystemExit(e.exit_code) from None
        raise
    if nproc > 1:
        argv = [
            "train",
            *([str(config)] if config_given else []),
            *overrides,
            "--engine",
            cfg.engine,
            "--work-dir",
            str(plan.run_path),
        ]
        argv += ["--allow-changes", *allow_changes] if allow_changes else []
        argv += ["--resume", str(plan.resume_path)] if plan.resume_path is not None else []
        threads = configure_threads(nproc, cfg.data.workers, apply=False)
        preload = ["deepspeed"] if cfg.engine == "deepspeed" else []  # imported by every rank: once, here
        return RunResult.from_exit(spawn(nproc, argv, threads=threads, preload=preload), plan.run_path)
    configure_threads(int(distributed_env().get("LOCAL_WORLD_SIZE", world_size)), cfg.data.workers)
    code = train_process(cfg, plan)
    return RunResult.from_exit(code, plan.run_path)
