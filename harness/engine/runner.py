"""One process of a ``depthbench train`` run: check, build, open the run directory, resume, loop, checkpoint.

DeiT's ``main()`` body, below the command line: :func:`prepare_run` checks every input (config, run directory,
the checkpoint to resume) before anything is written; :func:`train_process` builds the training objects
(``harness/engine/builders.py``), opens the run directory (``harness/core/rundir.py``) and runs the epochs of
``harness/engine/loop.py``. Model-specific behaviour enters through the criterion
(``harness.tasks.losses.TrainingLoss``) and between-epoch hooks (``harness.engine.hooks.EpochHook``), never as branches here.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from harness.core import rundir
from harness.core.config import changed_keys
from harness.core.errors import EXIT_FAILED, EXIT_OK, EXIT_PREEMPTED, ConfigError, DepthbenchError
from harness.core.files import (
    MAX_LOG_BYTES,
    BadFile,
    atomic_write,
    check_writable_folder,
    is_regular,
    read_json,
    read_text,
)
from harness.core.rundir import RunDir, check_name, new_run_path, now, run_dir_in_use, slurm_meta
from harness.core.schema import per_device_batch
from harness.engine import checkpoint as ckpt, loop, switches, watchdog  # loop.stop_requested: per step (tests)
from harness.engine.backends import build_backend
from harness.engine.builders import (
    build_model,
    build_optimization,
    build_training,
    check_config,
    describe_speed_options,
    lower_is_better,
    seed_everything,
)
from harness.engine.checkpoint import (
    FORMAT,
    latest_run,
    load_checkpoint_weights,
    read_checkpoint,
    rng_state,
    run_checkpoint,
    save_atomic,
    set_rng_state,
)
from harness.engine.data import DeviceLoader, batches_per_epoch, build_loaders
from harness.engine.hooks import build_hooks
from harness.engine.launch import distributed_env_exported
from harness.engine.loop import NonFiniteLoss, RunLog, TrainState, install_stop_handlers, train_one_epoch
from harness.engine.tasks import task_for

STATUS_BY_EXIT = {EXIT_OK: "done", EXIT_PREEMPTED: "preempted"}


@dataclass
class RunResult:
    """How a training run ended: ``status`` done/failed/preempted, the command's ``exit_code``, its run
    directory and the best value of ``ckpt.best_metric`` (None before the first evaluation)."""

    status: str
    exit_code: int
    run_dir: Path
    best_metric: float | None = None

    @classmethod
    def from_exit(cls, exit_code: int, run_dir: Path) -> "RunResult":
        try:
            meta = read_json(Path(run_dir) / "meta.json", inside=run_dir, what="meta.json")
        except (OSError, BadFile):
            meta = {}
        return cls(STATUS_BY_EXIT.get(exit_code, "failed"), exit_code, Path(run_dir), meta.get("best_metric"))


@dataclass
class RunPlan:
    """The checked inputs of one run: where it writes and what it resumes."""

    config_file: str
    run_path: Path | None  # None: rank 0 of a launcher-started run picks a new one
    resume_path: Path | None  # the last.pth to continue from
    command: str = ""
    schedule_changes: list = field(default_factory=list)  # how an epochs override rescaled the schedule
    resume_note: str = ""  # what --resume auto decided (which run it continues, or why none)
    config_changes: list = field(default_factory=list)  # the allowed changes of a continued run's config


# ----------------------------------------------------------------------------------------- checks
def check_work_dir(work_dir: str | Path) -> Path:
    """``--work-dir``: a directory we can create and write, not a file."""
    return check_writable_folder(work_dir, "--work-dir", "the run")


def check_resume_checkpoint(path: Path, engine: str, world_size: int) -> None:
    """The checkpoint to resume is a readable depthbench training checkpoint this run can continue
    (memory-mapped: checks the file without reading its tensors)."""
    checkpoint = read_checkpoint(path, mmap=True)
    if checkpoint.get("format") != FORMAT:
        raise DepthbenchError(
            f"{path} is not a depthbench training checkpoint ({FORMAT}); to start from weights "
            f"only, set model.pretrained={path}"
        )
    if checkpoint.get("engine") != engine:
        raise DepthbenchError(
            f"{path} was written by the {checkpoint.get('engine')} engine; resume with "
            f"--engine {checkpoint.get('engine')}"
        )
    optimizer = checkpoint.get("optimizer") or {}
    saved = len(optimizer.get("partitions", ()))
    if engine == "deepspeed" and saved != world_size:
        # its ZeRO partitions are DeepSpeed's flat buffers of `saved` ranks, kept inside last.pth, not a DeepSpeed
        # checkpoint folder that deepspeed.checkpoint.ds_to_universal could convert; Accelerate runs are elastic
        raise DepthbenchError(
            f"{path} holds DeepSpeed ZeRO optimizer partitions of {saved} processes and this run "
            f"has {world_size}: resume on {saved} processes (e.g. submit --nodes with the same "
            f"ranks), or continue from its weights only with model.pretrained={path} in a new run"
        )
    partitions = optimizer.get("partitions", ()) if engine == "deepspeed" else ()
    if any(isinstance(v, dict) and "__object__" in v for p in partitions if isinstance(p, dict) for v in p.values()):
        # before issue 57, DeepSpeed's objects were stored as {"__object__": class, ...} records of our own
        raise DepthbenchError(
            f"{path} stores DeepSpeed's optimizer objects in the format of an earlier depthbench, which this "
            f"version does not read; resume it with that version, or continue from its weights only with "
            f"model.pretrained={path} in a new run"
        )


def check_config_unchanged(cfg, run_path: Path, allow_changes=()) -> list[dict]:
    """A run continued in its own directory keeps its config: every key whose effective value differs from the
    run's ``config.json`` is refused in one line (old -> new), unless named in ``allow_changes``; returns the
    allowed changes (for meta.json). A run with another config is another experiment."""
    saved = rundir.read_config_json(run_path)
    if saved is None:
        return []
    effective = json.loads(json.dumps(cfg.to_dict(), default=str))  # as config.json holds it
    changes = changed_keys(saved, effective)
    refused = [c for c in changes if c[0] not in allow_changes and c[0].split(".")[0] not in allow_changes]
    if refused:
        listed = "; ".join(f"{key} {old!r} -> {new!r}" for key, old, new in refused)
        raise DepthbenchError(
            f"the run {run_path} was trained with another config ({listed}); continue it with its "
            f"own settings (leave these overrides out), or accept the change explicitly with "
            f"--allow-changes {' '.join(dict.fromkeys(c[0] for c in refused))} (recorded in "
            f"meta.json)"
        )
    return [{"key": key, "old": old, "new": new, "time": now()} for key, old, new in changes]


def prepare_run(
    cfg, config_file: str, *, work_dir=None, resume=None, world_size: int = 1, pick_new: bool = True, allow_changes=()
) -> RunPlan:
    """Check the run's inputs and decide its directory and resume checkpoint; writes nothing. A run continued in its
    own directory must keep its config except the keys in ``allow_changes`` (:func:`check_config_unchanged`)."""
    check_name(cfg.experiment)
    check_config(cfg, world_size, model=world_size == 1 or pick_new is False)
    if resume is not None and not isinstance(resume, (str, Path)):
        raise DepthbenchError(f"resume={resume!r}: give 'auto' or a checkpoint path")
    run_path = check_work_dir(work_dir) if work_dir else None
    resume_path, note = None, ""
    if resume == "auto":
        if run_path is None:
            experiment_root = rundir.runs_root() / cfg.experiment
            run_path = latest_run(experiment_root)
            note = (
                f"--resume auto: continuing {run_path}, the newest unfinished run of {cfg.experiment}"
                if run_path is not None
                else f"--resume auto: no unfinished run of {cfg.experiment} with a checkpoint in {experiment_root}; "
                f"starting a new run"
            )
        if run_path is not None and run_checkpoint(run_path) is not None:
            resume_path = run_path / "last.pth"
        elif run_path is not None:
            note = f"--resume auto: {run_path} holds no checkpoint (last.pth) yet; starting the run from the beginning"
    elif resume:
        resume_path = Path(resume).expanduser()
        if resume_path.is_dir():
            resume_path = resume_path / "last.pth"
        if not resume_path.is_file():
            raise DepthbenchError(f"--resume {resume}: no checkpoint at {resume_path}")
        if run_path is None and is_regular(resume_path.parent / "meta.json"):
            run_path = resume_path.parent  # continue that run in its own directory
    elif run_path is not None and os.path.lexists(run_path / "last.pth"):
        raise DepthbenchError(
            f"--work-dir {work_dir} already holds a checkpoint; add --resume auto to continue it "
            f"or choose another directory"
        )
    changes = []
    if resume_path is not None:
        check_resume_checkpoint(resume_path, cfg.engine, world_size)
        if run_path is not None and resume_path.parent == run_path:
            changes = check_config_unchanged(cfg, run_path, allow_changes)
    if run_path is not None and (holder := run_dir_in_use(run_path)):
        raise DepthbenchError(
            f"the run directory {run_path} is in use by {holder}; wait for it to finish, or give another --work-dir"
        )
    if run_path is None and pick_new:
        run_path = new_run_path(cfg.experiment)
    return RunPlan(
        str(config_file), run_path, resume_path, " ".join(sys.argv), resume_note=note, config_changes=changes
    )


def check_epoch_length(cfg, train_loader) -> None:
    """An epoch must hold at least one optimizer step (small data, a large batch or repeated augmentation's
    rounding would otherwise train nothing and report "done")."""
    batches = batches_per_epoch(train_loader)
    if batches < cfg.grad_accum:
        hint = (
            " (data.repeated_aug rounds an epoch down to a multiple of 256 images: set it False for small data)"
            if cfg.data.repeated_aug
            else ""
        )
        raise ConfigError(
            f"an epoch has {batches} batches of {train_loader.batch_size} images per process, "
            f"no optimizer step (grad_accum={cfg.grad_accum}); lower batch_size or train on more "
            f"images{hint}"
        )


# ----------------------------------------------------------------------------------------- one process
def train_process(cfg, plan: RunPlan) -> int:
    """One process of a training run (rank/world from the environment); returns the exit code."""
    with (
        distributed_env_exported(single_process_group=cfg.engine == "deepspeed") as env,
        deterministic_as_configured(cfg.deterministic),
    ):
        return _train_process(cfg, plan, env)


@contextlib.contextmanager
def deterministic_as_configured(deterministic: bool):
    """torch's process-wide switches for the run, and the cores the backend binds the process to (the GPU's
    NUMA-local ones), put back when it returns: a deterministic run left the switches on for whatever ran next in
    the process (the GPU check's benchmarks after its deterministic runs: slower kernels, cuDNN not tuned), and the
    binding held a later run, or the processes it spawned, to one GPU's cores."""
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cudnn.benchmark,
    )
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    torch.use_deterministic_algorithms(deterministic, warn_only=True)
    torch.backends.cudnn.benchmark = not deterministic
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.backends.cudnn.benchmark = before[2]
        if cores is not None:
            with contextlib.suppress(OSError):  # a core taken away meanwhile (cgroups): the run's outcome stands
                os.sched_setaffinity(0, cores)


def _train_process(cfg, plan: RunPlan, env: dict) -> int:
    """:func:`train_process` with this process's distributed variables in ``os.environ`` (``env``)."""
    install_stop_handlers(announce=env["RANK"] == "0")
    micro_batch = per_device_batch(cfg.batch_size, int(env["WORLD_SIZE"]), cfg.grad_accum)
    backend = build_backend(cfg, micro_batch)
    try:
        seed_everything(cfg.seed + backend.rank)
        loaders = [
            DeviceLoader(loader, backend.device, channels_last=bool(cfg.get("channels_last")))
            for loader in build_loaders(cfg, backend.rank, backend.world_size, micro_batch)
        ]
        check_epoch_length(cfg, loaders[0])
        updates_per_epoch = batches_per_epoch(loaders[0]) // cfg.grad_accum
        # everything that can still be wrong with the inputs is found here, before the run directory is touched
        checkpoint, objects, hooks = build_or_resume(cfg, plan, backend, updates_per_epoch)
        run = open_run(cfg, plan, backend)
        watchdog.start(cfg, run.path, backend.rank)
        switches.start(cfg, backend.rank, backend.world_size)
        try:
            return fit(cfg, plan, backend, run, objects, hooks, checkpoint, *loaders)
        except KeyboardInterrupt:  # a second Ctrl-C (the first one checkpoints and stops as a preemption)
            run.finish(
                "failed", error="stopped at once by a second Ctrl-C; the last checkpoint is the last periodic one"
            )
            raise
        except BaseException as e:  # a crash: say so in meta.json (SIGKILL leaves "running")
            watchdog.record_error(run.path, backend.rank, e, watchdog.last_step())
            run.finish("failed", error=f"{type(e).__name__}: {e}")
            raise
    finally:
        watchdog.stop()
        switches.stop()
        backend.close()


def build_or_resume(cfg, plan: RunPlan, backend, updates_per_epoch: int):
    """The training objects, with the model at the architecture and weights it resumes from."""
    checkpoint = read_checkpoint(plan.resume_path) if plan.resume_path else None
    model = build_model(cfg, pretrained=checkpoint is None)
    hooks = build_hooks(cfg)
    # the architecture at the start point: a fresh run's epoch 0, or what the checkpoint was saved from (a
    # checkpoint written at an epoch's end precedes that epoch's hooks, which the loop then runs)
    epoch = 0 if checkpoint is None else checkpoint["epoch"] - (checkpoint["batch_in_epoch"] == 0)
    for hook in hooks:
        model = hook.before_epoch(model, epoch) or model
    if checkpoint is not None:
        # strict: a checkpoint of another model (or other model arguments) is refused, naming every key
        load_checkpoint_weights(model, {"model": checkpoint["model"]}, str(plan.resume_path))
        for hook in hooks:
            hook.after_load(model)
    return checkpoint, build_training(model, cfg, backend, updates_per_epoch), hooks


def open_run(cfg, plan: RunPlan, backend):
    """Rank 0's run directory (the plan's, or a new one under a launcher); all ranks agree on it."""
    path = None
    if backend.is_main:
        path = str(plan.run_path or new_run_path(cfg.experiment))
    path = Path(backend.broadcast_object(path))
    plan.run_path = path
    hosts = backend.gather_object(os.uname().nodename)
    fields = dict(
        engine=backend.name,
        world_size=backend.world_size,
        hosts=sorted(set(hosts or [])),
        config_file=plan.config_file,
        command=plan.command,
        **slurm_meta(),
    )
    if plan.schedule_changes:
        fields["schedule_rescaled"] = plan.schedule_changes
    if os.path.lexists(path / "meta.json"):  # RunDir.open refuses one that is a link or a FIFO
        run = RunDir.open(path, writer=backend.is_main)
        if plan.config_changes:  # allowed explicitly (--allow-changes): the run says it changed, and when
            fields["config_changes"] = run.meta().get("config_changes", []) + plan.config_changes
        run.update_meta(status="running", **fields)
    else:
        run = RunDir.create(cfg.experiment, path=path, writer=backend.is_main, **fields)
    backend.barrier()
    return run


# ----------------------------------------------------------------------------------------- checkpoints
def save_checkpoint(path, state, cfg_text, backend, objects, micro_batch: int) -> None:
    """Write ``last.pth`` (collective: every rank calls it, rank 0 writes)."""
    checkpoint = {
        "format": FORMAT,
        "engine": backend.name,
        "world_size": backend.world_size,
        **asdict(state),
        # the position as a GLOBAL count of the epoch's samples consumed (TrainSampler): any world size resumes it
        "samples_in_epoch": state.batch_in_epoch * micro_batch * backend.world_size,
        "model": backend.model_state(objects.model),
        "optimizer": backend.optimizer_state(objects.optimizer),
        "scheduler": objects.scheduler.state_dict(),
        "scaler": backend.scaler_state(),
        "ema": objects.ema.module.state_dict() if objects.ema is not None else None,
        "rng": backend.gather_object(rng_state()),
        "config": cfg_text,
    }
    if backend.is_main:
        save_atomic(checkpoint, path)
    backend.barrier()


def restore(checkpoint: dict, same_run: bool, backend, objects, micro_batch: int, seed: int):
    """Restore the optimizer, schedule, scaler, EMA and RNG states of a ``last.pth`` (the model weights were
    loaded before wrapping); returns the TrainState to continue from.

    Elastic: a checkpoint of N ranks continues on M. Model, optimizer, schedule, scaler and EMA are the same on
    every rank (DDP); the sample position is a global count (``samples_in_epoch``), so the epoch continues with
    the samples not yet seen, in the same order (TrainSampler); ranks below N take their own RNG states, the others
    a fresh seed from (seed, rank, step) -- dropout and mixup draws cannot be bit-identical on another rank count."""
    backend.load_model_state(objects.model, checkpoint["model"])
    backend.load_optimizer_state(objects.optimizer, checkpoint["optimizer"])
    objects.scheduler.load_state_dict(checkpoint["scheduler"])
    backend.load_scaler_state(checkpoint["scaler"])
    if objects.ema is not None and checkpoint["ema"] is not None:
        objects.ema.module.load_state_dict(checkpoint["ema"])
    state = TrainState(**{k: checkpoint[k] for k in TrainState.__dataclass_fields__})
    samples = checkpoint.get("samples_in_epoch")  # absent in checkpoints written before issue 41: same world size
    if samples is not None:
        per_step = micro_batch * backend.world_size
        if samples % per_step:
            raise DepthbenchError(
                f"the checkpoint stopped {samples} samples into epoch {state.epoch}, not a whole "
                f"number of micro-batches of {per_step} (batch_size / grad_accum changed?); "
                f"resume with the batch_size and grad_accum it was trained with"
            )
        state.batch_in_epoch = samples // per_step
    saved = len(checkpoint["rng"])
    if backend.rank < saved:
        set_rng_state(checkpoint["rng"][backend.rank])
    else:
        seed_everything(seed + backend.rank + 7919 * state.global_step)
    if not same_run:  # a new run directory: its metrics.jsonl starts empty
        state.records = 0
    return state, saved


# ----------------------------------------------------------------------------------------- the loop
def fit(cfg, plan: RunPlan, backend, run, objects, hooks, checkpoint, train_loader, val_loader) -> int:
    """Resume, train and evaluate: the body of the run."""
    cfg_text = cfg.pretty_text
    run.write_config(cfg_text, cfg.to_dict())
    task = task_for(cfg.data.type)
    evaluate = task.evaluate
    sign = -1 if lower_is_better(cfg, cfg.ckpt.best_metric) else 1  # best.pth keeps the largest sign * value
    updates_per_epoch = batches_per_epoch(train_loader) // cfg.grad_accum
    state, saved_ranks = TrainState(), backend.world_size
    if checkpoint is not None:
        state, saved_ranks = restore(
            checkpoint, plan.resume_path.parent == run.path, backend, objects, train_loader.batch_size, cfg.seed
        )
        record = {
            "time": now(),
            "from": str(plan.resume_path),
            "epoch": state.epoch,
            "global_step": state.global_step,
            "ranks": backend.world_size,
            "from_ranks": saved_ranks,
        }
        run.update_meta(resumes=run.meta().get("resumes", []) + [record])
        del checkpoint
    if backend.is_main:  # drop what a killed run logged after its checkpoint (all of it when starting over)
        ckpt.remove_stale_temporaries(run.path)
        state.records = _trim_lines(run.file("metrics.jsonl"), state.records)
    log = RunLog(
        run,
        state,
        backend.is_main,
        cfg.log.tensorboard,
        cfg.ckpt.interval_minutes,
        unit=task.unit,
        epochs=cfg.epochs,
        steps_per_epoch=updates_per_epoch,
    )
    described = "; ".join(filter(None, (hook.describe() for hook in hooks)))
    speed = describe_speed_options(cfg)
    # the parameter count beside the registry name: a preset may shrink a registered architecture (the KJV preset
    # builds a 1.3M-parameter transformer_lm_30m)
    params = sum(
        getattr(p, "ds_numel", p.numel())  # ZeRO-3 partitions a parameter: ds_numel is its whole size
        for p in backend.unwrap(objects.model).parameters()
    )
    log.info(
        f"{cfg.experiment}: {cfg.model.name} ({params / 1e6:.2f}M parameters"
        f"{f'; {described}' if described else ''}) on {cfg.data.type}, "
        f"{backend.name} x{backend.world_size} ({backend.precision}), batch {cfg.batch_size} = "
        f"{train_loader.batch_size}/process x {backend.world_size} x {cfg.grad_accum} accum, "
        f"{updates_per_epoch} steps/epoch, {torch.get_num_threads()} threads/process, "
        + (f"{speed}, " if speed else "")
        + f"run dir {run.path}"
        + (f", resumed at epoch {state.epoch} batch {state.batch_in_epoch}" if state.global_step else "")
    )
    if saved_ranks != backend.world_size:
        log.info(
            f"resumed on {backend.world_size} ranks from {saved_ranks}: same samples in the same order from "
            f"epoch {state.epoch} batch {state.batch_in_epoch}; dropout/mixup draws differ from a run on "
            f"{saved_ranks}"
        )
    if plan.schedule_changes:
        log.info(f"epochs={cfg.epochs}: the schedule follows ({'; '.join(plan.schedule_changes)})")
    if plan.resume_note:
        log.info(plan.resume_note)
    if plan.config_changes:
        log.info(
            "config changed on resume (--allow-changes): "
            + "; ".join(f"{c['key']} {c['old']!r} -> {c['new']!r}" for c in plan.config_changes)
        )

    def save_last():
        save_checkpoint(run.file("last.pth"), state, cfg_text, backend, objects, train_loader.batch_size)
        log.checkpoint_written()

    try:
        for epoch in range(state.epoch, cfg.epochs):
            state.epoch = epoch
            if state.batch_in_epoch == 0:
                for hook in hooks:
                    changed = hook.before_epoch(backend.unwrap(objects.model), epoch)
                    if changed is not None:
                        log.info(f"epoch {epoch}: model {hook.change}; optimizer and schedule rebuilt")
                        objects.model, objects.optimizer, objects.scheduler, objects.ema = build_optimization(
                            changed.to(backend.device), cfg, backend, updates_per_epoch
                        )
            watchdog.resume(state.global_step)
            outcome = train_one_epoch(objects, train_loader, backend, state, cfg, log, checkpoint=save_last)
            watchdog.pause()  # evaluation and the epoch's checkpoint: bounded by the collectives' timeout
            if outcome == "preempted":
                return _preempted(save_last, run, log, state, backend.world_size)
            if (epoch + 1) % cfg.eval_interval == 0 or epoch + 1 == cfg.epochs:
                with backend.eager():  # a compiled model evaluates eagerly: no graph for eval mode or its shapes
                    metrics = evaluate(backend.unwrap(objects.model), val_loader, backend)
                    if objects.ema is not None:
                        metrics.update(
                            {
                                f"ema_{k}": v
                                for k, v in evaluate(objects.ema.module, val_loader, backend).items()
                                if k != "images"
                            }
                        )
                log.metrics("eval", **metrics)
                log.info(
                    f"epoch {epoch}: top-1 {metrics['top1']:.2f}  top-5 {metrics['top5']:.2f}  "
                    f"loss {metrics['loss']:.4f}"
                    + (f"  EMA top-1 {metrics['ema_top1']:.2f}" if objects.ema is not None else "")
                    + (f"  perplexity {metrics['ppl']:.2f}" if "ppl" in metrics else "")
                )
                value = metrics[cfg.ckpt.best_metric]
                if state.best_metric is None or sign * value > sign * state.best_metric:
                    state.best_metric, state.best_epoch = value, epoch
                    _save_best(run, state, cfg_text, backend, objects)
            for hook in hooks:
                hook.after_epoch(backend.unwrap(objects.model), log)
            state.epoch, state.batch_in_epoch = epoch + 1, 0
            save_last()
            if backend.any_rank(loop.stop_requested()):
                return _preempted(None, run, log, state, backend.world_size)
    except NonFiniteLoss as e:
        log.info(f"depthbench train: error: {e}; the run (its last good checkpoint, last.pth): {run.path}")
        run.finish("failed", error=str(e))
        return EXIT_FAILED
    finally:
        log.close()
    run.finish("done", best_metric=state.best_metric, best_epoch=state.best_epoch, global_step=state.global_step)
    best = f"{state.best_metric:.2f}" if state.best_metric is not None else "-"
    log.info(f"done: best {cfg.ckpt.best_metric} {best} at epoch {state.best_epoch}; {run.path}")
    return EXIT_OK


def _preempted(save_last, run, log, state, world_size: int) -> int:
    if save_last is not None:
        save_last()
    log.info(
        f"preempted: checkpoint at epoch {state.epoch} batch {state.batch_in_epoch} (step {state.global_step}); "
        f"continue with: {continue_command(run.path, world_size)}"
    )
    run.finish("preempted", global_step=state.global_step)
    return EXIT_PREEMPTED


def continue_command(run_path: Path, world_size: int = 1) -> str:
    """The command line that continues the run in ``run_path`` (its config is the run's own config.json)."""
    nproc = f" --nproc {world_size}" if world_size > 1 else ""
    return f"depthbench train --work-dir {shlex.quote(str(run_path))} --resume auto{nproc}"


def _save_best(run, state, cfg_text, backend, objects) -> None:
    weights = backend.model_state(objects.model)  # collective under ZeRO-3
    if backend.is_main:
        save_atomic(
            {
                "model": weights,
                "ema": objects.ema.module.state_dict() if objects.ema is not None else None,
                "epoch": state.epoch,
                "global_step": state.global_step,
                "metric": state.best_metric,
                "config": cfg_text,
            },
            run.file("best.pth"),
        )


# records that other commands append to a run (``depthbench eval``); a resumed training run must not drop them
FOREIGN_KINDS = ("eval_suite",)


def _trim_lines(path: Path, keep: int) -> int:
    """Drop the training records after the first ``keep`` lines, keep foreign records; return the line count."""
    lines = (
        read_text(path, inside=path.parent, what="metrics file", max_bytes=MAX_LOG_BYTES).splitlines(keepends=True)
        if os.path.lexists(path)
        else []
    )
    if len(lines) > keep:
        lines = lines[:keep] + [line for line in lines[keep:] if _kind(line) in FOREIGN_KINDS]
        atomic_write(path, "".join(lines))
    return len(lines)


def _kind(line: str):
    try:
        return json.loads(line).get("kind")
    except (ValueError, AttributeError):  # a torn line of a killed run
        return None
