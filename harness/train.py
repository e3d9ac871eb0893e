"""``depthbench train`` and ``depthbench eval``: DeiT's ``main.py`` shape — parse, check, build, resume, loop.

    depthbench train CONFIG [--engine accelerate|deepspeed] [--nproc N] [--resume auto|PATH] [--work-dir DIR]
                     [key=value ...]
    depthbench eval CONFIG --checkpoint PATH [--ema] [--input-size N] [key=value ...]

Everything that can be wrong with the inputs (config keys, model name, dataset layout, batch vs. world size)
is checked before anything is written or any process is started. ``--nproc N`` starts N local processes
(:mod:`harness.launch`); under a launcher (torchrun, srun, ...) each process finds its rank in the environment.
Exit codes: 0 done, 1 failed (e.g. a non-finite loss), 2 bad input, 75 preempted (checkpointed; rerun with
``--resume auto``). See docs/training.md.
"""
from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

from harness.config import ConfigError, load_config
from harness.launch import EXIT_PREEMPTED, distributed_env, launched, spawn

EXIT_FAILED, EXIT_BAD_INPUT = 1, 2


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("train", help="pretrain/fine-tune a model from a config (Accelerate or DeepSpeed)")
    p.add_argument("config", help="a config file, e.g. configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="config overrides, e.g. optim.lr=1e-3 epochs=10 (+key=value adds a key)")
    p.add_argument("--engine", choices=["accelerate", "deepspeed"], help="default: the config's `engine`")
    p.add_argument("--nproc", type=int, default=1, help="processes to start on this machine (default 1)")
    p.add_argument("--resume", metavar="auto|PATH",
                   help="auto: continue the run's last.pth if there is one; PATH: a checkpoint or run directory")
    p.add_argument("--work-dir", help="the run directory (default results/runs/<experiment>/<run-id>)")
    p.set_defaults(func=main)

    e = subparsers.add_parser("eval", help="top-1/top-5 of a checkpoint on the config's validation set")
    e.add_argument("config")
    e.add_argument("overrides", nargs="*", metavar="key=value")
    e.add_argument("--checkpoint", required=True, help="last.pth/best.pth of a run, or any weights file")
    e.add_argument("--ema", action="store_true", help="evaluate the EMA weights")
    e.add_argument("--input-size", type=int, help="evaluation resolution (default: the config's data.input_size)")
    e.add_argument("--json", action="store_true", help="print the result as JSON")
    e.set_defaults(func=eval_main)


# ----------------------------------------------------------------------------------------- checks
def check_config(cfg, world_size: int, model: bool = True) -> None:
    """Every cheap check of a training config; raises ConfigError with one line. ``model=False`` skips the
    model checks (they import timm; a launcher leaves them to its processes, which run them before writing)."""
    from harness.data import check_data

    if cfg.get("sweep"):
        raise ConfigError("this is a sweep definition; run one point as `depthbench train <its base config> "
                          "key=value ...` (harness.config.sweep_points lists them)")
    if cfg.engine not in ("accelerate", "deepspeed"):
        raise ConfigError(f"engine={cfg.engine!r} is not one of accelerate, deepspeed")
    if cfg.precision not in ("fp32", "bf16", "fp16"):
        raise ConfigError(f"precision={cfg.precision!r} is not one of fp32, bf16, fp16")
    for key in ("epochs", "batch_size", "grad_accum", "eval_interval", "log_interval"):
        if not isinstance(cfg[key], int) or cfg[key] < 1:
            raise ConfigError(f"{key}={cfg[key]!r}: it must be a positive integer")
    metrics = ("top1", "top5") + (("ema_top1", "ema_top5") if cfg.ema.enable else ())
    if cfg.ckpt.best_metric not in metrics:
        raise ConfigError(f"ckpt.best_metric={cfg.ckpt.best_metric!r} is not one of {', '.join(metrics)}"
                          + ("" if cfg.ema.enable else " (ema_* metrics need ema.enable=True)"))
    per_step = world_size * cfg.grad_accum
    if cfg.batch_size % per_step:
        raise ConfigError(f"batch_size={cfg.batch_size} (global) is not divisible by {world_size} processes x "
                          f"grad_accum={cfg.grad_accum}; use a multiple of {per_step}")
    micro_batch = cfg.batch_size // per_step
    if (cfg.aug.mixup or cfg.aug.cutmix) and micro_batch % 2:
        raise ConfigError(f"mixup/cutmix need an even batch per process, got {micro_batch}; change batch_size")
    if cfg.engine == "deepspeed" and cfg.model.get("grow"):
        raise ConfigError("model.grow (growth during training) is supported on the accelerate engine only")
    if cfg.engine == "deepspeed" and cfg.deepspeed.zero_stage == 3 and cfg.ema.enable:
        raise ConfigError("model EMA needs full weights on every rank; use ZeRO stage 1/2 or ema.enable=False")
    if model:
        check_model(cfg)
    teacher = cfg.distill.teacher
    if teacher and not cfg.distill.teacher_checkpoint:
        raise ConfigError("distill.teacher_checkpoint is not set; distillation needs trained teacher weights")
    for key, path in (("model.pretrained", cfg.model.get("pretrained")),
                      ("distill.teacher_checkpoint", cfg.distill.teacher_checkpoint if teacher else None)):
        if path and not Path(path).expanduser().is_file():
            raise ConfigError(f"{key}={path}: no such file")
    check_data(cfg.data)


def check_model(cfg) -> None:
    """The model name is registered (else suggest close names) and builds with the config's arguments."""
    from harness.flops import UnknownModelError, require_registered
    from harness.flops import build_model as build_on_meta

    name = cfg.model.name
    if not name:
        raise ConfigError("model.name is not set; `depthbench models` lists the registered models")
    try:
        require_registered(name)
        if cfg.distill.teacher:
            require_registered(cfg.distill.teacher, "teacher model")
    except UnknownModelError as e:
        raise ConfigError(str(e)) from None
    kwargs = model_kwargs(cfg)
    try:
        model = build_on_meta(name, device="meta", **kwargs)
    except Exception as e:
        raise ConfigError(f"model {name} does not build with {kwargs}: {type(e).__name__}: {e}") from None
    size = cfg.data.input_size
    try:  # on the meta device: no memory, no compute
        import torch

        with torch.no_grad():
            model.eval()(torch.empty(1, 3, size, size, device="meta"))
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"model {name} does not take data.input_size={size} images ({first}); set the model's "
                          f"input size, e.g. +model.img_size={size}") from None


def model_kwargs(cfg) -> dict:
    kwargs = {k: v for k, v in cfg.model.items() if k not in ("name", "pretrained", "expand", "grow")}
    kwargs.setdefault("num_classes", cfg.data.num_classes)
    return kwargs


def check_work_dir(args) -> None:
    if args.resume and args.resume != "auto":
        from harness.checkpoint import find_resume

        find_resume(args.resume, None)  # FileNotFoundError when there is no checkpoint there
    if args.work_dir and not args.resume and (Path(args.work_dir) / "last.pth").exists():
        raise ConfigError(f"--work-dir {args.work_dir} already holds a checkpoint; add --resume auto to continue it "
                          f"or choose another directory")


# ----------------------------------------------------------------------------------------- building blocks
def build_model(cfg, pretrained: bool = True):
    """``timm.create_model`` (after ``import models``), pretrained weights, and ScaleNet's depth expansion."""
    import timm

    import models  # noqa: F401

    model = timm.create_model(cfg.model.name, **model_kwargs(cfg))
    if pretrained and cfg.model.get("pretrained"):
        load_pretrained(model, cfg.model.pretrained)
    if cfg.model.get("expand"):
        from models.scalenet import expand

        model = expand(model, **cfg.model.expand) or model
    return model


def load_pretrained(model, path) -> None:
    """``model.pretrained``: :func:`harness.checkpoint.load_weights`; only the classifier may differ (another
    number of classes), and what was left out is said."""
    from harness.checkpoint import load_weights

    report = load_weights(model, path, ignore_classifier=True)
    if report.excused:
        print(f"depthbench train: {report.summary()}", file=sys.stderr)


def build_optimizer(model, cfg):
    """timm's ``create_optimizer_v2`` with the linearly scaled lr (timm leaves frozen parameters out)."""
    from timm.optim import create_optimizer_v2

    o = {k: v for k, v in cfg.optim.items() if v is not None}
    lr = o.pop("lr") * (cfg.batch_size / o.pop("lr_base_batch") if "lr_base_batch" in o else 1.0)
    return create_optimizer_v2(model, lr=lr, **o)


def build_scheduler(optimizer, cfg, updates_per_epoch: int):
    """timm's ``create_scheduler_v2``. ``decay_milestones`` mean what PyTorch's MultiStepLR means (the epoch, or
    update, from which the lr is decayed: [100] keeps epochs 0-99 at the base lr); timm applies a milestone one
    step early, so they are shifted by one here."""
    from timm.scheduler import create_scheduler_v2

    args = {k: v for k, v in cfg.sched.items() if v is not None}
    if args.get("decay_milestones"):
        args["decay_milestones"] = [int(m) + 1 for m in args["decay_milestones"]]
    scheduler, _ = create_scheduler_v2(optimizer, num_epochs=cfg.epochs, updates_per_epoch=updates_per_epoch, **args)
    return scheduler


def build_criterion(cfg):
    """(mixup_fn, criterion) as DeiT: soft-target CE under mixup/cutmix, else label smoothing, else CE."""
    from timm.data import Mixup
    from timm.loss import LabelSmoothingCrossEntropy, SoftTargetCrossEntropy
    from torch import nn

    a = cfg.aug
    if a.mixup > 0 or a.cutmix > 0 or a.cutmix_minmax is not None:
        mixup_fn = Mixup(mixup_alpha=a.mixup, cutmix_alpha=a.cutmix, cutmix_minmax=a.cutmix_minmax, prob=a.mixup_prob,
                         switch_prob=a.mixup_switch_prob, mode=a.mixup_mode, label_smoothing=a.smoothing,
                         num_classes=cfg.data.num_classes)
        return mixup_fn, SoftTargetCrossEntropy()
    return None, (LabelSmoothingCrossEntropy(a.smoothing) if a.smoothing else nn.CrossEntropyLoss())


def build_teacher(cfg, backend):
    """SReT's soft-label distillation: the frozen teacher and the KD loss, or (None, None)."""
    distill = cfg.distill
    if not distill.teacher:
        return None, None
    import timm

    from harness.checkpoint import load_weights
    from harness.losses import SoftLabelKDLoss

    teacher = timm.create_model(distill.teacher, num_classes=cfg.data.num_classes, **distill.teacher_kwargs)
    load_weights(teacher, distill.teacher_checkpoint)
    teacher.requires_grad_(False).eval().to(backend.device, dtype=backend.input_dtype)
    return teacher, SoftLabelKDLoss(temperature=distill.temperature)


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def open_run(cfg, args, backend):
    """Rank 0 picks the run directory (``--work-dir``, the run being resumed, or a new one); all ranks agree."""
    from harness.checkpoint import latest_run
    from harness.rundir import DEFAULT_ROOT, RunDir, new_run_path, slurm_meta

    path = None
    if backend.is_main:
        if args.work_dir:
            path = Path(args.work_dir)
        elif args.resume == "auto":
            path = latest_run(DEFAULT_ROOT / cfg.experiment)
        elif args.resume and (Path(args.resume).parent / "meta.json").is_file():
            path = Path(args.resume).parent if Path(args.resume).is_file() else Path(args.resume)
        path = str(path or new_run_path(cfg.experiment))
    path = Path(backend.broadcast_object(path))
    hosts = backend.gather_object(os.uname().nodename)
    fields = dict(engine=backend.name, world_size=backend.world_size, hosts=sorted(set(hosts or [])),
                  config_file=str(args.config), command=" ".join(sys.argv), **slurm_meta())
    if (path / "meta.json").is_file():
        run = RunDir.open(path, writer=backend.is_main)
        run.update_meta(status="running", **fields)
    else:
        run = RunDir.create(cfg.experiment, path=path, writer=backend.is_main, **fields)
    backend.barrier()
    return run


# ----------------------------------------------------------------------------------------- checkpoints
def save_checkpoint(path, state, cfg_text, backend, model, optimizer, scheduler, ema) -> None:
    """Write ``last.pth`` (collective: every rank calls it, rank 0 writes)."""
    from dataclasses import asdict

    from harness.checkpoint import FORMAT, rng_state, save_atomic

    checkpoint = {
        "format": FORMAT, "engine": backend.name, "world_size": backend.world_size, **asdict(state),
        "model": backend.model_state(model), "optimizer": backend.optimizer_state(optimizer),
        "scheduler": scheduler.state_dict(), "scaler": backend.scaler_state(),
        "ema": ema.module.state_dict() if ema is not None else None,
        "rng": backend.gather_object(rng_state()), "config": cfg_text,
    }
    if backend.is_main:
        save_atomic(checkpoint, path)
    backend.barrier()


def resume(checkpoint: dict, same_run: bool, backend, model, optimizer, scheduler, ema):
    """Restore everything from a ``last.pth`` dict; returns the TrainState to continue from."""
    from harness.checkpoint import FORMAT, set_rng_state
    from harness.engine import TrainState

    if checkpoint.get("format") != FORMAT:
        raise ConfigError(f"the resume checkpoint is not a depthbench training checkpoint ({FORMAT})")
    if checkpoint["engine"] != backend.name:
        raise ConfigError(f"the checkpoint was written by the {checkpoint['engine']} engine; resume with "
                          f"--engine {checkpoint['engine']}")
    backend.load_model_state(model, checkpoint["model"])
    backend.load_optimizer_state(optimizer, checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    backend.load_scaler_state(checkpoint["scaler"])
    if ema is not None and checkpoint["ema"] is not None:
        ema.module.load_state_dict(checkpoint["ema"])
    state = TrainState(**{k: checkpoint[k] for k in TrainState.__dataclass_fields__})
    if len(checkpoint["rng"]) == backend.world_size:
        set_rng_state(checkpoint["rng"][backend.rank])
    elif backend.is_main:
        print(f"depthbench train: checkpoint from {len(checkpoint['rng'])} processes, now {backend.world_size}: "
              "training continues, but not bit-identically", file=sys.stderr)
    if not same_run:  # a new run directory: its metrics.jsonl starts empty
        state.records = 0
    return state


# ----------------------------------------------------------------------------------------- main
def main(args) -> int:
    env = distributed_env()  # a launcher's RANK/WORLD_SIZE, or an srun step's SLURM_* variables
    try:
        cfg = load_config(args.config, args.overrides)
        if args.engine:
            cfg.engine = args.engine
        if args.nproc > 1 and launched():
            raise ConfigError("--nproc starts processes itself; under torchrun/srun/accelerate launch leave it out")
        world_size = args.nproc if not launched() else int(env["WORLD_SIZE"])
        check_config(cfg, world_size, model=args.nproc == 1)
        check_work_dir(args)
    except (ConfigError, FileNotFoundError) as e:
        if env["RANK"] == "0":  # one line, not one per process
            print(f"depthbench train: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.nproc > 1:
        argv = ["train", args.config, *args.overrides, "--engine", cfg.engine]
        argv += ["--resume", args.resume] if args.resume else []
        argv += ["--work-dir", args.work_dir] if args.work_dir else []
        return spawn(args.nproc, argv)
    try:
        return train(cfg, args)
    except ConfigError as e:  # found late: weights that do not fit, a checkpoint from another setup
        print(f"depthbench train: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT


def train(cfg, args) -> int:
    """One process of a training run (rank/world from the environment)."""
    import torch

    from harness.data import build_loaders
    from harness.engine import build_backend, install_stop_handlers
    from harness.launch import export_distributed_env

    install_stop_handlers()
    env = export_distributed_env(single_process_group=cfg.engine == "deepspeed")
    micro_batch = cfg.batch_size // (int(env["WORLD_SIZE"]) * cfg.grad_accum)
    torch.use_deterministic_algorithms(cfg.deterministic, warn_only=True)
    torch.backends.cudnn.benchmark = not cfg.deterministic
    backend = build_backend(cfg, micro_batch)
    seed_everything(cfg.seed + backend.rank)
    loaders = build_loaders(cfg, backend.rank, backend.world_size, micro_batch)
    check_epoch_length(cfg, loaders[0])
    run = open_run(cfg, args, backend)
    try:
        return fit(cfg, args, backend, run, *loaders)
    except BaseException as e:  # a crash or Ctrl-C: say so in meta.json (SIGKILL leaves "running")
        run.finish("failed", error=f"{type(e).__name__}: {e}")
        raise
    finally:
        backend.close()


def check_epoch_length(cfg, train_loader) -> None:
    """An epoch must hold at least one optimizer step (small data, a large batch or repeated augmentation's
    rounding would otherwise train nothing and report "done")."""
    from harness.data import batches_per_epoch

    batches = batches_per_epoch(train_loader)
    if batches < cfg.grad_accum:
        hint = (" (data.repeated_aug rounds an epoch down to a multiple of 256 images: set it False for small data)"
                if cfg.data.repeated_aug else "")
        raise ConfigError(f"an epoch has {batches} batches of {train_loader.batch_size} images per process, "
                          f"no optimizer step (grad_accum={cfg.grad_accum}); lower batch_size or train on more "
                          f"images{hint}")


def fit(cfg, args, backend, run, train_loader, val_loader) -> int:
    """Build, resume, train and evaluate: the body of the run."""
    import torch
    from timm.utils import ModelEmaV3

    from harness import checkpoint as ckpt
    from harness.data import batches_per_epoch
    from harness.engine import NonFiniteLoss, RunLog, TrainState, evaluate, stop_requested, train_one_epoch
    from harness.rundir import now

    cfg_text = cfg.pretty_text
    run.write_config(cfg_text)
    resume_path = ckpt.find_resume(args.resume, run.path)
    checkpoint = ckpt.read_checkpoint(resume_path) if resume_path else None
    updates_per_epoch = batches_per_epoch(train_loader) // cfg.grad_accum
    model = build_model(cfg, pretrained=checkpoint is None)
    grower = None
    if cfg.model.get("grow"):
        from models.scalenet import GrowthSchedule

        grower = GrowthSchedule.from_config(cfg.model.grow)
        if checkpoint is not None:  # replay the growth that happened before the checkpoint
            model, _ = grower.maybe_grow(model, checkpoint["epoch"])
    model.to(backend.device)
    mixup_fn, criterion = build_criterion(cfg)

    def optimization(model):
        optimizer = build_optimizer(model, cfg)
        model, optimizer = backend.prepare(model, optimizer)
        scheduler = build_scheduler(optimizer, cfg, updates_per_epoch)
        ema = None
        if cfg.ema.enable:
            ema = ModelEmaV3(backend.unwrap(model), decay=cfg.ema.decay, use_warmup=cfg.ema.warmup)
        return model, optimizer, scheduler, ema

    model, optimizer, scheduler, ema = optimization(model)
    teacher, distill_loss = build_teacher(cfg, backend)
    state = TrainState()
    if checkpoint is not None:
        state = resume(checkpoint, resume_path.parent == run.path, backend, model, optimizer, scheduler, ema)
        _check_scalenet_ties(backend.unwrap(model))
        record = {"time": now(), "from": str(resume_path), "epoch": state.epoch, "global_step": state.global_step}
        run.update_meta(resumes=run.meta().get("resumes", []) + [record])
        del checkpoint
    if backend.is_main:  # drop what a killed run logged after its checkpoint (all of it when starting over)
        ckpt.remove_stale_temporaries(run.path)
        _trim_lines(run.file("metrics.jsonl"), state.records)
    log = RunLog(run, state, backend.is_main, cfg.log.tensorboard, cfg.ckpt.interval_minutes)
    model_desc = cfg.model.name + (f" expanded ({', '.join(f'{k}={v}' for k, v in cfg.model.expand.items())})"
                                   if cfg.model.get("expand") else "")
    log.info(f"{cfg.experiment}: {model_desc} on {cfg.data.type}, {backend.name} x{backend.world_size} "
             f"({backend.precision}), batch {cfg.batch_size} = {train_loader.batch_size}/process x "
             f"{backend.world_size} x {cfg.grad_accum} accum, {updates_per_epoch} steps/epoch, run dir {run.path}"
             + (f", resumed at epoch {state.epoch} batch {state.batch_in_epoch}" if state.global_step else ""))

    def save_last():
        save_checkpoint(run.file("last.pth"), state, cfg_text, backend, model, optimizer, scheduler, ema)
        log.checkpoint_written()

    try:
        for epoch in range(state.epoch, cfg.epochs):
            state.epoch = epoch
            if grower is not None and state.batch_in_epoch == 0:
                grown, changed = grower.maybe_grow(backend.unwrap(model), epoch)
                if changed:
                    log.info(f"epoch {epoch}: model grown; optimizer and schedule rebuilt")
                    model, optimizer, scheduler, ema = optimization(grown.to(backend.device))
            outcome = train_one_epoch(model, criterion, train_loader, optimizer, scheduler, backend, state, cfg, log,
                                      mixup_fn=mixup_fn, ema=ema, teacher=teacher, distill_loss=distill_loss,
                                      checkpoint=save_last)
            if outcome == "preempted":
                return _preempted(save_last, run, log, state)
            if (epoch + 1) % cfg.eval_interval == 0 or epoch + 1 == cfg.epochs:
                metrics = evaluate(backend.unwrap(model), val_loader, backend)
                if ema is not None:
                    metrics.update({f"ema_{k}": v for k, v in evaluate(ema.module, val_loader, backend).items()
                                    if k != "images"})
                log.metrics("eval", **metrics)
                log.info(f"epoch {epoch}: top-1 {metrics['top1']:.2f}  top-5 {metrics['top5']:.2f}  "
                         f"loss {metrics['loss']:.4f}" + (f"  EMA top-1 {metrics['ema_top1']:.2f}" if ema else ""))
                value = metrics[cfg.ckpt.best_metric]
                if state.best_metric is None or value > state.best_metric:
                    state.best_metric, state.best_epoch = value, epoch
                    _save_best(run, state, cfg_text, backend, model, ema)
            state.epoch, state.batch_in_epoch = epoch + 1, 0
            save_last()
            zero = torch.zeros((), device=backend.device)
            if backend.agree(zero, zero, stop_requested())[2]:
                return _preempted(None, run, log, state)
    except NonFiniteLoss as e:
        log.info(f"depthbench train: error: {e}")
        run.finish("failed", error=str(e))
        return EXIT_FAILED
    finally:
        log.close()
    run.finish("done", best_metric=state.best_metric, best_epoch=state.best_epoch, global_step=state.global_step)
    best = f"{state.best_metric:.2f}" if state.best_metric is not None else "-"
    log.info(f"done: best {cfg.ckpt.best_metric} {best} at epoch {state.best_epoch}; {run.path}")
    return 0


def _preempted(save_last, run, log, state) -> int:
    if save_last is not None:
        save_last()
    log.info(f"preempted: checkpoint at epoch {state.epoch} batch {state.batch_in_epoch} (step {state.global_step}); "
             f"continue with --resume auto --work-dir {run.path}")
    run.finish("preempted", global_step=state.global_step)
    return EXIT_PREEMPTED


def _save_best(run, state, cfg_text, backend, model, ema) -> None:
    from harness.checkpoint import save_atomic

    weights = backend.model_state(model)  # collective under ZeRO-3
    if backend.is_main:
        save_atomic({"model": weights, "ema": ema.module.state_dict() if ema is not None else None,
                     "epoch": state.epoch, "global_step": state.global_step, "metric": state.best_metric,
                     "config": cfg_text}, run.file("best.pth"))


def _check_scalenet_ties(model) -> None:
    """After loading a checkpoint into a ScaleNet-expanded model, its weight tying must have survived."""
    if getattr(model, "scalenet", None) is not None:
        from models.scalenet import assert_tied

        assert_tied(model)


def _trim_lines(path: Path, keep: int) -> None:
    from harness.rundir import atomic_write

    lines = path.read_text().splitlines(keepends=True) if path.exists() else []
    if len(lines) > keep:
        atomic_write(path, "".join(lines[:keep]))


# ----------------------------------------------------------------------------------------- eval
def eval_main(args) -> int:
    from harness.checkpoint import load_weights
    from harness.data import check_data

    cfg = load_config(args.config, args.overrides)
    if args.input_size:
        cfg.data.input_size = args.input_size
    check_model(cfg)
    check_data(cfg.data)
    model = build_model(cfg, pretrained=False)
    load_weights(model, args.checkpoint, ema=args.ema)
    from harness.data import build_eval_loader
    from harness.engine import AccelerateBackend, evaluate
    from harness.launch import export_distributed_env

    export_distributed_env()
    backend = AccelerateBackend(cfg.precision, 1)
    val_loader = build_eval_loader(cfg, backend.rank, backend.world_size, cfg.data.eval_batch_size or 64)
    metrics = evaluate(model.to(backend.device), val_loader, backend)
    metrics.update(checkpoint=str(args.checkpoint), model=cfg.model.name, ema=args.ema, input_size=cfg.data.input_size)
    if backend.is_main:
        print(json.dumps(metrics) if args.json else
              f"{cfg.model.name} {'EMA ' if args.ema else ''}@{cfg.data.input_size}: top-1 {metrics['top1']:.2f}  "
              f"top-5 {metrics['top5']:.2f}  loss {metrics['loss']:.4f}  ({metrics['images']} images)")
    return 0
