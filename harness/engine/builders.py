"""What a training run is made of, built from a config: checks, model, optimizer, schedule, loss, hooks.

:func:`check_config` validates everything cheap before anything is written; :func:`build_training` returns one
:class:`TrainingObjects` (model, optimizer, scheduler, EMA, criterion, mixup) on a backend. What depends on the
kind of data -- the dataset, the model, the criterion, the evaluator -- comes from the run's task
(harness/engine/tasks.py); nothing here branches on it. The inputs are the config (harness/core/config.py) and the
backend (harness/engine/backends.py), never command-line arguments.
"""

from __future__ import annotations

import copy
import inspect
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from mmengine import Config
from timm.optim import create_optimizer_v2, get_optimizer_class
from timm.scheduler import create_scheduler_v2
from timm.utils import ModelEmaV3

from harness.core.config import apply_overrides, load_config, parse_override
from harness.core.errors import ConfigError, DepthbenchError
from harness.core.rundir import RunDir, checkpoint_run, read_config_json
from harness.core.schema import check_values, lookup, per_device_batch, with_defaults
from harness.engine.hooks import growth_stages
from harness.engine.models import config_model_on_meta
from harness.engine import switches
from harness.engine.schedule import rescale_schedule
from harness.engine.tasks import data_types, task_for


# ----------------------------------------------------------------------------------------- checks
# what every training config must have, from its _base_ files or itself (the runtime defaults give the rest)
REQUIRED_KEYS = ("model.name", "data.type", "sched", "aug")


def check_config(cfg, world_size: int, model: bool = True) -> None:
    """Every cheap check of a training config; raises ConfigError with one line. ``model=False`` skips the
    model checks (they import timm; a launcher leaves them to its processes, which run them before writing)."""
    if cfg.get("sweep"):
        raise ConfigError(
            "this is a sweep definition; run one point as `depthbench train <its base config> "
            "key=value ...` (harness.core.config.sweep_points lists them)"
        )
    missing = [key for key in REQUIRED_KEYS if lookup(cfg, key) is None]
    if missing:
        raise ConfigError(
            f"the config sets no {', '.join(missing)}: a training config starts from a dataset and a "
            f"schedule (_base_ = ['../_base_/datasets/<data>.py', '../_base_/schedules/<sched>.py']); "
            f"copy a preset from configs/ (docs/config.md)"
        )
    task = task_for(cfg.data.type)
    check_values(cfg)  # every key's type and range (harness/core/schema.py), engine and precision included
    switches.check(cfg)
    check_schedule_length(cfg)
    metrics = best_metrics(cfg)
    if cfg.ckpt.best_metric not in metrics:
        raise ConfigError(
            f"ckpt.best_metric={cfg.ckpt.best_metric!r} is not one of {', '.join(metrics)}"
            + ("" if cfg.ema.enable else " (ema_* metrics need ema.enable=True)")
        )
    micro_batch = per_device_batch(cfg.batch_size, world_size, cfg.grad_accum)
    if (cfg.aug.mixup or cfg.aug.cutmix) and micro_batch % 2:
        raise ConfigError(f"mixup/cutmix need an even batch per process, got {micro_batch}; change batch_size")
    if cfg.model.get("expand"):
        raise ConfigError(
            "model.expand is now written model.grow (same keys: model.grow=dict(k=2, ...) expands "
            "once after loading model.pretrained); see docs/training.md"
        )
    if cfg.engine == "deepspeed" and any(stage.get("epoch", 0) > 0 for stage in growth_stages(cfg)):
        raise ConfigError("model.grow stages after epoch 0 (growth during training) need the accelerate engine")
    if cfg.engine == "deepspeed" and cfg.deepspeed.zero_stage == 3 and cfg.ema.enable:
        raise ConfigError("model EMA needs full weights on every rank; use ZeRO stage 1/2 or ema.enable=False")
    if model:
        task.check_model(cfg)
    check_speed_options(cfg, model)
    task.check_run(cfg)
    teacher = cfg.distill.teacher
    if teacher and not cfg.distill.teacher_checkpoint:
        raise ConfigError("distill.teacher_checkpoint is not set; distillation needs trained teacher weights")
    for key, path in (
        ("model.pretrained", cfg.model.get("pretrained")),
        ("distill.teacher_checkpoint", cfg.distill.teacher_checkpoint if teacher else None),
    ):
        if path and not Path(path).expanduser().is_file():
            raise ConfigError(f"{key}={path}: no such file")
    task.check_data(cfg.data)


def speed_options(cfg) -> dict:
    """The speed options of ``cfg`` with their defaults (configs written before issue 27 lack the keys)."""
    compile_ = with_defaults(cfg, "compile")
    loader = with_defaults(cfg, "loader")
    optim = cfg.get("optim") or {}
    return {
        "compile": compile_,
        "channels_last": bool(cfg.get("channels_last")),
        "grad_checkpointing": bool(cfg.get("grad_checkpointing")),
        "fused": optim.get("fused"),
        "foreach": optim.get("foreach"),
        "loader": loader,
    }


def describe_speed_options(cfg) -> str:
    """The speed options that are on, for the run's first log line ('' when none is)."""
    o = speed_options(cfg)
    parts = []
    if o["compile"]["enable"]:
        c = o["compile"]
        parts.append(f"compiled ({c['backend']}{', mode ' + c['mode'] if c['mode'] else ''})")
    named = (
        ("channels-last", o["channels_last"]),
        ("grad checkpointing", o["grad_checkpointing"]),
        ("fused optimizer", o["fused"]),
        ("foreach optimizer", o["foreach"]),
        ("uint8 batches normalised on the device", o["loader"]["device_normalize"]),
        ("images decoded and augmented on the device", o["loader"]["pipeline"] == "device"),
    )
    parts += [name for name, on in named if on]
    return ", ".join(parts)


def check_speed_options(cfg, model: bool = True) -> None:
    """``compile``, ``optim.fused``/``foreach`` and ``grad_checkpointing``: that torch and the model support them
    -- one line each, before anything is built (their types and choices are the schema's, :func:`check_values`)."""
    o = speed_options(cfg)
    c = o["compile"]
    if c["enable"]:
        if c["backend"] not in torch._dynamo.list_backends(exclude_tags=()):
            raise ConfigError(
                f"compile.backend={c['backend']!r} is not a torch.compile backend here "
                f"({', '.join(torch._dynamo.list_backends())})"
            )
        # a CUDA-graph replay writes its gradients into the graph's static memory, over those of the micro-batches
        # before it (a known torch.compile limitation): accumulation would silently train on the last micro-batch
        if c["mode"] == "reduce-overhead" and cfg.grad_accum > 1:
            raise ConfigError(
                f"compile.mode='reduce-overhead' with grad_accum={cfg.grad_accum}: CUDA graphs overwrite "
                f"the accumulated gradients; use compile.mode=None (or max-autotune-no-cudagraphs) "
                f"with accumulation, or grad_accum=1"
            )
    if o["fused"] and o["foreach"]:
        raise ConfigError("optim.fused=True and optim.foreach=True exclude each other; set one of them")
    if o["fused"]:
        check_fused_optimizer(optimizer_name(cfg))
    if o["grad_checkpointing"] and model:
        if not callable(getattr(config_model_on_meta(cfg), "set_grad_checkpointing", None)):
            raise ConfigError(
                f"grad_checkpointing=True: model {cfg.model.name} has no set_grad_checkpointing(); "
                f"train it with grad_checkpointing=False"
            )


def check_fused_optimizer(opt: str) -> None:
    """``optim.fused=True`` needs a torch optimizer with a fused kernel: AdamW, Adam, SGD and Adagrad, whose fused
    kernels torch 2.14 (the pinned version) has on CPU and CUDA alike; built with ``fused=True`` on one CPU
    parameter, so torch's constructor judges the options. Never on CUDA and never stepped: the check runs before the
    rank's device is chosen, and a CUDA tensor -- or ``step()``, whose CUDA-graph health check asks for the current
    CUDA stream whenever CUDA is available -- made a CUDA context on GPU 0 in every rank."""
    try:
        opt_class = get_optimizer_class(opt, bind_defaults=False)
    except (ValueError, KeyError, AssertionError):
        return  # an unknown optimizer is timm's error, at build time
    if "fused" not in inspect.signature(opt_class).parameters:
        raise ConfigError(
            f"optim.fused=True: optimizer {opt!r} ({opt_class.__module__}.{opt_class.__name__}) has no "
            f"fused implementation; use adamw, adam, sgd/momentum or adagrad, or optim.fused=None"
        )
    try:
        opt_class([torch.zeros(2, requires_grad=True)], lr=0.1, fused=True)
    except (RuntimeError, ValueError) as e:
        raise ConfigError(
            f"optim.fused=True: torch {torch.__version__} has no fused {opt_class.__name__} "
            f"({str(e).splitlines()[0]}); set optim.fused=None"
        ) from None


def load_training_config(config, overrides=(), recipe=None, engine: str | None = None):
    """``(cfg, schedule_changes)``: a training config with its ``key=value`` overrides, the schedule rescaled to an
    ``epochs`` override (:func:`rescale_schedule`). What every command that starts or checks training reads a
    config with; ``recipe``: the config already loaded without overrides (a caller checking many points of one
    file loads it once)."""
    recipe = recipe if recipe is not None else load_config(config)
    cfg = copy.deepcopy(recipe)
    apply_overrides(cfg, list(overrides))
    if engine:  # --engine: the run's engine, before the settings it reads are checked
        cfg.engine = engine
    check_values(cfg)  # a runaway value (epochs=10**30, data.workers=10**6) is one line before anything else
    explicit = tuple(parse_override(o)[0] for o in overrides)
    check_settings_read(cfg, explicit)
    changes = rescale_schedule(cfg, recipe.get("epochs"), explicit) if "epochs" in explicit else []
    return cfg, changes


def load_run_config(work_dir, resume) -> tuple[str, Config]:
    """``(config file, recipe)`` of the run a ``train`` without a config continues: the run directory ``work_dir``
    (or the one ``resume`` names) and its resolved config as data (``config.json``; never its config.py, which would
    be code), with the config file the run was started from (meta.json) as its name."""
    run = work_dir or (resume if resume not in (None, "auto") else None)
    run_path = checkpoint_run(run) if run else None
    if run_path is None:
        raise DepthbenchError(
            "give a config file (depthbench train CONFIG [key=value ...]), or continue a run with "
            "its own config: depthbench train --work-dir RUN --resume auto"
            + (f" ({run} is not a run directory: no meta.json)" if run else "")
        )
    saved = read_config_json(run_path)
    if saved is None:
        raise DepthbenchError(
            f"{run_path} holds no config.json (the run's resolved config); give its config file: "
            f"depthbench train CONFIG --work-dir {run_path} --resume auto"
        )
    config_file = RunDir(run_path, writer=False).meta().get("config_file") or str(run_path / "config.json")
    return str(config_file), Config(saved)


# the schedule keys only some of timm's schedules read (create_scheduler_v2's docstring says which)
SCHEDULES_READING = {"decay_milestones": ("multistep",), "decay_rate": ("step", "multistep", "plateau", "poly")}


def unread_setting(cfg, key: str) -> str | None:
    """Why setting ``key`` would change nothing in the run of ``cfg`` -- the dataset type, the engine or an
    option that is off does not read it -- naming what reads it; None when it is read."""
    section, _, leaf = key.partition(".")
    leaf = leaf.split(".")[0]
    data_type = cfg.data.type
    task = task_for(data_type)
    if section == "data" and leaf and not task.reads_data_key(data_type, leaf):
        readers = [t for t in data_types() if task_for(t).reads_data_key(t, leaf)]
        why = (
            " (its data is generated into the data cache, $DEPTHBENCH_DATA; docs/training.md)"
            if leaf == "root" and data_type in task.generated
            else ""
        )
        return f"data.type={data_type!r} does not read data.{leaf}{why}; " + (
            f"data.{leaf} is read by data.type {', '.join(readers)}: set data.type too, or leave the key out"
            if readers
            else f"no data type reads data.{leaf}: leave it out"
        )
    sched = (cfg.get("sched") or {}).get("sched")
    if section == "sched" and leaf in SCHEDULES_READING and sched not in SCHEDULES_READING[leaf]:
        return (
            f"sched.sched={sched!r} does not read sched.{leaf}; it is read by sched.sched "
            f"{', '.join(SCHEDULES_READING[leaf])} (timm's create_scheduler_v2)"
        )
    if section == "aug" and leaf and not task.reads_aug:
        return f"data.type={data_type!r} ({task.name}) has no augmentation; aug.* is read by the image data types"
    off = {
        "deepspeed": (cfg.get("engine") != "deepspeed", "the deepspeed engine (engine=deepspeed, --engine deepspeed)"),
        "ema": (leaf != "enable" and not (cfg.get("ema") or {}).get("enable"), "ema.enable=True"),
        "distill": (leaf != "teacher" and not (cfg.get("distill") or {}).get("teacher"), "distill.teacher set"),
        "compile": (
            leaf != "enable" and not with_defaults(cfg, "compile")["enable"],
            "compile.enable=True (--compile)",
        ),
    }
    if section in off and leaf and off[section][0]:
        return f"{key} is read only with {off[section][1]}; this run would ignore it"
    return None


def check_settings_read(cfg, keys) -> None:
    """Every key set on the command line (``keys``) is read by this run: ``data.root=/data/imagenet`` on a digits
    config would train on digits and exit 0; refused in one line naming the key and what reads it."""
    if not isinstance(cfg.get("data"), dict) or "type" not in cfg.data:
        return  # not a depthbench training config (an MMDetection one: submit reads both)
    for key in keys:
        why = unread_setting(cfg, key)
        if why:
            raise ConfigError(f"{key}={lookup(cfg, key)!r}: {why}")


def check_schedule_length(cfg) -> None:
    """A schedule that cannot follow ``epochs`` (every decay milestone at or after the end, or a warm-up as long
    as the run -- e.g. set so on the command line) is one line naming the key to set."""
    sched = cfg.get("sched") or {}
    epochs = cfg.epochs
    milestones = list(sched.get("decay_milestones") or [])
    if milestones and min(milestones) < epochs <= max(milestones):
        raise ConfigError(
            f"sched.decay_milestones={milestones}: each must lie inside the run, 1 <= m < epochs={epochs}"
        )
    if sched.get("sched") == "multistep" and milestones and min(milestones) >= epochs:
        raise ConfigError(
            f"sched.decay_milestones={milestones} all lie at or beyond epochs={epochs}: the learning "
            f"rate would never decay; set sched.decay_milestones for {epochs} epochs"
        )
    warmup = sched.get("warmup_epochs") or 0
    if isinstance(warmup, (int, float)) and warmup >= epochs > 1:
        raise ConfigError(
            f"sched.warmup_epochs={warmup} is not shorter than epochs={epochs}: the run would end "
            f"inside its warm-up; set sched.warmup_epochs"
        )


def check_model(cfg) -> None:
    """The run's model builds for its data (the task's check, on the meta device)."""
    task_for(cfg.data.type).check_model(cfg)


def best_metrics(cfg) -> tuple[str, ...]:
    """The evaluation metrics a run reports (``ckpt.best_metric`` choices): the task's, and EMA's twins."""
    metrics = task_for(cfg.data.type).metrics
    ema = tuple(f"ema_{m}" for m in metrics if m.startswith("top")) if cfg.ema.enable else ()
    return metrics + ema


def lower_is_better(cfg, metric: str) -> bool:
    return metric in task_for(cfg.data.type).lower_is_better


# ----------------------------------------------------------------------------------------- model
def build_model(cfg, pretrained: bool = True):
    """The run's model, from its task (``model.pretrained`` loaded when ``pretrained``). Depth growth (ScaleNet)
    is not applied here: it is a :class:`harness.engine.hooks.GrowthHook`."""
    return task_for(cfg.data.type).build_model(cfg, pretrained)


# ----------------------------------------------------------------------------------------- optimisation
def optimizer_name(cfg) -> str:
    """The timm optimizer :func:`build_optimizer` builds: ``optim.opt``, else ``create_optimizer_v2``'s default."""
    return cfg.optim.get("opt") or inspect.signature(create_optimizer_v2).parameters["opt"].default


def build_optimizer(model, cfg):
    """timm's ``create_optimizer_v2`` with the linearly scaled lr (timm leaves frozen parameters out)."""
    o = {k: v for k, v in cfg.optim.items() if v is not None}
    lr = o.pop("lr") * (cfg.batch_size / o.pop("lr_base_batch") if "lr_base_batch" in o else 1.0)
    return create_optimizer_v2(model, lr=lr, **o)


def build_scheduler(optimizer, cfg, updates_per_epoch: int):
    """timm's ``create_scheduler_v2``. ``decay_milestones`` mean what PyTorch's MultiStepLR means (the epoch, or
    update, from which the lr is decayed: [100] keeps epochs 0-99 at the base lr); timm applies a milestone one
    step early, so they are shifted by one here."""
    args = {k: v for k, v in cfg.sched.items() if v is not None}
    if args.get("decay_milestones"):
        args["decay_milestones"] = [int(m) + 1 for m in args["decay_milestones"]]
    scheduler, _ = create_scheduler_v2(optimizer, num_epochs=cfg.epochs, updates_per_epoch=updates_per_epoch, **args)
    return scheduler


def build_criterion(cfg, device=None, input_dtype=None):
    """``(mixup_fn, criterion)`` of the run's task."""
    return task_for(cfg.data.type).build_criterion(cfg, device, input_dtype)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


@dataclass
class TrainingObjects:
    """Everything the loop updates; rebuilt (except the criterion) when a hook changes the architecture."""

    model: object
    optimizer: object
    scheduler: object
    ema: object | None
    criterion: object
    mixup_fn: object | None


def prepare_model(model, cfg, backend=None):
    """The model-side speed options, before the optimizer and the engine see the model: channels-last weights
    and activation checkpointing (the model's own ``set_grad_checkpointing``). A model that an epoch hook
    changed comes here again, so a grown model gets them too (the optimization below compiles it again)."""
    o = speed_options(cfg)
    if o["channels_last"] and getattr(backend, "channels_last_weights", True):
        model = model.to(memory_format=torch.channels_last)
    if o["grad_checkpointing"]:
        model.set_grad_checkpointing(True)
    return model


def build_optimization(model, cfg, backend, updates_per_epoch: int):
    """``(model, optimizer, scheduler, ema)`` for ``model`` on ``backend`` (wrapped by DDP/DeepSpeed); compiled
    last, in place (``compile.enable``), so every state dict stays that of the eager module. The EMA is timm's
    ``ModelEmaV3``, a deep copy: torch's ``nn.Module.__getstate__`` leaves an in-place compiled forward out of
    copies, so the EMA of a model a hook changed after compilation runs its own weights, eagerly."""
    model = prepare_model(model, cfg, backend)
    optimizer = build_optimizer(model, cfg)
    model, optimizer = backend.prepare(model, optimizer)
    scheduler = build_scheduler(optimizer, cfg, updates_per_epoch)
    ema = ModelEmaV3(backend.unwrap(model), decay=cfg.ema.decay, use_warmup=cfg.ema.warmup) if cfg.ema.enable else None
    c = speed_options(cfg)["compile"]
    if c["enable"]:
        backend.compile(model, backend=c["backend"], mode=c["mode"], dynamic=c["dynamic"])
    return model, optimizer, scheduler, ema


def build_training(model, cfg, backend, updates_per_epoch: int) -> TrainingObjects:
    model, optimizer, scheduler, ema = build_optimization(model.to(backend.device), cfg, backend, updates_per_epoch)
    # after prepare(): DeepSpeed's fp16/bf16 weight modes set the input dtype the teacher must share
    mixup_fn, criterion = build_criterion(cfg, backend.device, backend.input_dtype)
    return TrainingObjects(model, optimizer, scheduler, ema, criterion, mixup_fn)
