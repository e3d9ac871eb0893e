"""What a training run is made of, built from a config: checks, model, optimizer, schedule, loss, hooks.

:func:`check_config` validates everything cheap before anything is written; :func:`build_training` returns one
:class:`TrainingObjects` (model, optimizer, scheduler, EMA, criterion, mixup) on a backend. What depends on the
kind of data -- the dataset, the model, the criterion, the evaluator -- comes from the run's task
(harness/engine/tasks.py); nothing here branches on it. The inputs are the config (harness/core/config.py) and the
backend (harness/engine/backends.py), never command-line arguments.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import ConfigError
from harness.engine.hooks import growth_stages
from harness.engine.tasks import task_for


# ----------------------------------------------------------------------------------------- checks
def check_config(cfg, world_size: int, model: bool = True) -> None:
    """Every cheap check of a training config; raises ConfigError with one line. ``model=False`` skips the
    model checks (they import timm; a launcher leaves them to its processes, which run them before writing)."""
    if cfg.get("sweep"):
        raise ConfigError("this is a sweep definition; run one point as `depthbench train <its base config> "
                          "key=value ...` (harness.core.config.sweep_points lists them)")
    task = task_for(cfg.data.type)
    if cfg.engine not in ("accelerate", "deepspeed"):
        raise ConfigError(f"engine={cfg.engine!r} is not one of accelerate, deepspeed")
    if cfg.precision not in ("fp32", "bf16", "fp16"):
        raise ConfigError(f"precision={cfg.precision!r} is not one of fp32, bf16, fp16")
    check_ranges(cfg)
    check_schedule_length(cfg)
    metrics = best_metrics(cfg)
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
    if cfg.model.get("expand"):
        raise ConfigError("model.expand is now written model.grow (same keys: model.grow=dict(k=2, ...) expands "
                          "once after loading model.pretrained); see docs/training.md")
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
    for key, path in (("model.pretrained", cfg.model.get("pretrained")),
                      ("distill.teacher_checkpoint", cfg.distill.teacher_checkpoint if teacher else None)):
        if path and not Path(path).expanduser().is_file():
            raise ConfigError(f"{key}={path}: no such file")
    task.check_data(cfg.data)


# the known keys' types and ranges, as intervals; a key missing from a config is skipped (datasets and schedules
# add their own), None is allowed where the defaults use it as "off"
RANGES = {
    "epochs": ("int", "[1, inf)"), "batch_size": ("int", "[1, inf)"), "grad_accum": ("int", "[1, inf)"),
    "eval_interval": ("int", "[1, inf)"), "log_interval": ("int", "[1, inf)"), "seed": ("int", "[0, inf)"),
    "clip_grad": ("number", "(0, inf)"), "ckpt.interval_steps": ("int", "[0, inf)"),
    "ckpt.interval_minutes": ("number", "(0, inf)"), "ema.decay": ("number", "[0, 1)"),
    "deepspeed.zero_stage": ("int", "[0, 3]"), "data.workers": ("int", "[0, inf)"),
    "loader.prefetch_factor": ("int", "[1, inf)"),
    "data.input_size": ("int", "[1, inf)"),
    "data.num_classes": ("int", "[1, inf)"), "data.eval_batch_size": ("int", "[1, inf)"),
    "data.num_repeats": ("int", "[1, inf)"), "data.train_subset": ("int", "[1, inf)"),
    "data.val_subset": ("int", "[1, inf)"), "data.crop_pct": ("number", "(0, 1]"),
    "optim.lr": ("number", "(0, inf)"), "optim.weight_decay": ("number", "[0, inf)"),
    "optim.momentum": ("number", "[0, 1]"), "optim.eps": ("number", "(0, inf)"),
    "optim.lr_base_batch": ("number", "(0, inf)"), "sched.warmup_epochs": ("number", "[0, inf)"),
    "sched.warmup_lr": ("number", "[0, inf)"), "sched.min_lr": ("number", "[0, inf)"),
    "sched.decay_rate": ("number", "(0, inf)"), "sched.cooldown_epochs": ("number", "[0, inf)"),
    "aug.mixup": ("number", "[0, inf)"), "aug.cutmix": ("number", "[0, inf)"), "aug.mixup_prob": ("number", "[0, 1]"),
    "aug.mixup_switch_prob": ("number", "[0, 1]"), "aug.smoothing": ("number", "[0, 1)"),
    "aug.reprob": ("number", "[0, 1]"), "aug.hflip": ("number", "[0, 1]"), "aug.color_jitter": ("number", "[0, inf)"),
    "distill.temperature": ("number", "(0, inf)"), "distill.weight": ("number", "[0, 1]"),
    "model.drop_path_rate": ("number", "[0, 1)"), "model.drop_rate": ("number", "[0, 1)"),
    "hang.factor": ("number", "[1, inf)"), "hang.floor_s": ("number", "(0, inf)"),
    "hang.collective_timeout_s": ("number", "(0, inf)"),
}


COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def speed_options(cfg) -> dict:
    """The speed options of ``cfg`` with their defaults (configs written before issue 27 lack the keys)."""
    compile_ = {"enable": False, "mode": None, "backend": "inductor", "dynamic": False, **(cfg.get("compile") or {})}
    from harness.engine.data import loader_options

    loader = loader_options(cfg)
    optim = cfg.get("optim") or {}
    return {"compile": compile_, "channels_last": bool(cfg.get("channels_last")),
            "grad_checkpointing": bool(cfg.get("grad_checkpointing")), "fused": optim.get("fused"),
            "foreach": optim.get("foreach"), "loader": loader}


def describe_speed_options(cfg) -> str:
    """The speed options that are on, for the run's first log line ('' when none is)."""
    o = speed_options(cfg)
    parts = []
    if o["compile"]["enable"]:
        c = o["compile"]
        parts.append(f"compiled ({c['backend']}{', mode ' + c['mode'] if c['mode'] else ''})")
    named = (("channels-last", o["channels_last"]), ("grad checkpointing", o["grad_checkpointing"]),
             ("fused optimizer", o["fused"]), ("foreach optimizer", o["foreach"]),
             ("uint8 batches normalised on the device", o["loader"]["device_normalize"]))
    parts += [name for name, on in named if on]
    return ", ".join(parts)


def check_speed_options(cfg, model: bool = True) -> None:
    """``compile``, ``channels_last``, ``grad_checkpointing``, ``optim.fused``/``foreach`` and ``loader``: types,
    choices, and that torch and the model support them -- one line each, before anything is built."""
    o = speed_options(cfg)
    c = o["compile"]
    for key, value in (("compile.enable", c["enable"]), ("channels_last", cfg.get("channels_last")),
                       ("grad_checkpointing", cfg.get("grad_checkpointing")),
                       ("loader.device_normalize", o["loader"]["device_normalize"]),
                       ("loader.persistent_workers", o["loader"]["persistent_workers"])):
        if value is not None and not isinstance(value, bool):
            raise ConfigError(f"{key}={value!r}: it must be True or False")
    for key in ("fused", "foreach"):
        if o[key] is not None and not isinstance(o[key], bool):
            raise ConfigError(f"optim.{key}={o[key]!r}: it must be True, False or None (torch's default)")
    if c["mode"] not in COMPILE_MODES:
        raise ConfigError(f"compile.mode={c['mode']!r} is not one of {', '.join(map(str, COMPILE_MODES))}")
    if c["dynamic"] not in (None, True, False):
        raise ConfigError(f"compile.dynamic={c['dynamic']!r}: it must be True, False or None")
    if c["enable"]:
        import torch

        if c["backend"] not in torch._dynamo.list_backends(exclude_tags=()):
            raise ConfigError(f"compile.backend={c['backend']!r} is not a torch.compile backend here "
                              f"({', '.join(torch._dynamo.list_backends())})")
    if o["fused"] and o["foreach"]:
        raise ConfigError("optim.fused=True and optim.foreach=True exclude each other; set one of them")
    if o["fused"]:
        check_fused_optimizer(cfg.optim.get("opt", "sgd"))
    if o["grad_checkpointing"] and model:
        from harness.engine.models import config_model_on_meta

        if not callable(getattr(config_model_on_meta(cfg), "set_grad_checkpointing", None)):
            raise ConfigError(f"grad_checkpointing=True: model {cfg.model.name} has no set_grad_checkpointing(); "
                              f"train it with grad_checkpointing=False")


def check_fused_optimizer(opt: str) -> None:
    """``optim.fused=True`` needs a torch optimizer with a fused kernel for this device (AdamW, Adam, SGD, Adagrad
    on CPU and CUDA in torch 2.4+); tried on one parameter, so the answer is torch's own."""
    import inspect

    import torch
    from timm.optim import get_optimizer_class

    try:
        opt_class = get_optimizer_class(opt, bind_defaults=False)
    except (ValueError, KeyError, AssertionError):
        return  # an unknown optimizer is timm's error, at build time
    if "fused" not in inspect.signature(opt_class).parameters:
        raise ConfigError(f"optim.fused=True: optimizer {opt!r} ({opt_class.__module__}.{opt_class.__name__}) has no "
                          f"fused implementation; use adamw, adam, sgd/momentum or adagrad, or optim.fused=None")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    param = torch.zeros(2, device=device, requires_grad=True)
    param.grad = torch.zeros_like(param)
    try:
        opt_class([param], lr=0.1, fused=True).step()
    except (RuntimeError, ValueError) as e:
        raise ConfigError(f"optim.fused=True: torch {torch.__version__} has no fused {opt_class.__name__} on "
                          f"{device} ({str(e).splitlines()[0]}); set optim.fused=None") from None


def _lookup(cfg, key: str):
    node = cfg
    for part in key.split("."):
        if not hasattr(node, "get") or part not in node:
            return None
        node = node[part]
    return node


def in_interval(value: float, interval: str) -> bool:
    """``"[0, 1)"``-style interval notation: brackets include the bound, parentheses exclude it."""
    low, high = (float(b) for b in interval[1:-1].split(","))
    return ((value >= low) if interval[0] == "[" else (value > low)) and \
           ((value <= high) if interval[-1] == "]" else (value < high))


def check_ranges(cfg) -> None:
    """Every known key of the config has a value of its type and range (one line naming the key and the range):
    ``ema.decay=5.0`` would otherwise train to NaN EMA weights and a run marked done, ``data.workers=-1`` end in
    a library traceback."""
    for key, (kind, interval) in RANGES.items():
        value = _lookup(cfg, key)
        if value is None:
            continue
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or (kind == "int" and not isinstance(value, int)) or not in_interval(value, interval):
            raise ConfigError(f"{key}={value!r}: it must be {'an integer' if kind == 'int' else 'a number'} in "
                              f"{interval}")


def load_training_config(config, overrides=(), recipe=None):
    """``(cfg, schedule_changes)``: a training config with its ``key=value`` overrides, the schedule rescaled to an
    ``epochs`` override (:func:`rescale_schedule`). What every command that starts or checks training reads a
    config with; ``recipe``: the config already loaded without overrides (a caller checking many points of one
    file loads it once)."""
    import copy

    from harness.core.config import apply_overrides, load_config, parse_override

    recipe = recipe if recipe is not None else load_config(config)
    cfg = copy.deepcopy(recipe)
    apply_overrides(cfg, list(overrides))
    explicit = tuple(parse_override(o)[0] for o in overrides)
    changes = rescale_schedule(cfg, recipe.get("epochs"), explicit) if "epochs" in explicit else []
    return cfg, changes


def rescale_schedule(cfg, planned_epochs: int, explicit: tuple[str, ...] = ()) -> list[str]:
    """Make the schedule follow an ``epochs`` override: the recipe's fixed epoch counts (``sched.decay_milestones``,
    ``warmup_epochs``, ``cooldown_epochs``) are scaled by ``epochs / planned_epochs`` (timm's cosine/step schedules
    already end at the run's last epoch); keys the command line sets itself (``explicit``) are kept as given.
    Returns what changed, for the run's log and meta.json."""
    sched = cfg.get("sched")
    if not sched or not planned_epochs or cfg.epochs == planned_epochs:
        return []
    factor = cfg.epochs / planned_epochs
    changes = []
    if sched.get("decay_milestones") and "sched.decay_milestones" not in explicit:
        # a milestone that lands at or after the end would never fire: dropped (a 1-epoch run does not decay)
        scaled = sorted({m for m in (max(1, round(m * factor)) for m in sched.decay_milestones) if m < cfg.epochs})
        changes.append(f"sched.decay_milestones {list(sched.decay_milestones)} -> {scaled}")
        sched.decay_milestones = scaled
    for key in ("warmup_epochs", "cooldown_epochs"):
        value = sched.get(key)
        if value and f"sched.{key}" not in explicit:
            scaled = round(value * factor)
            changes.append(f"sched.{key} {value} -> {scaled}")
            sched[key] = scaled
    return changes


def check_schedule_length(cfg) -> None:
    """A schedule that cannot follow ``epochs`` (every decay milestone at or after the end, or a warm-up as long
    as the run -- e.g. set so on the command line) is one line naming the key to set."""
    sched = cfg.get("sched") or {}
    epochs = cfg.epochs
    milestones = list(sched.get("decay_milestones") or [])
    if sched.get("sched") == "multistep" and milestones and min(milestones) >= epochs:
        raise ConfigError(f"sched.decay_milestones={milestones} all lie at or beyond epochs={epochs}: the learning "
                          f"rate would never decay; set sched.decay_milestones for {epochs} epochs")
    warmup = sched.get("warmup_epochs") or 0
    if isinstance(warmup, (int, float)) and warmup >= epochs > 1:
        raise ConfigError(f"sched.warmup_epochs={warmup} is not shorter than epochs={epochs}: the run would end "
                          f"inside its warm-up; set sched.warmup_epochs")


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


def build_criterion(cfg, device=None, input_dtype=None):
    """``(mixup_fn, criterion)`` of the run's task."""
    return task_for(cfg.data.type).build_criterion(cfg, device, input_dtype)


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

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
    changed comes here again, so a grown model gets them too; its previous compilation is dropped (the
    optimization below compiles the model it returns)."""
    import torch

    o = speed_options(cfg)
    model._compiled_call_impl = None  # nn.Module.compile's slot: EMA's deepcopy must not copy a compiled forward
    if o["channels_last"] and getattr(backend, "channels_last_weights", True):
        model = model.to(memory_format=torch.channels_last)
    if o["grad_checkpointing"]:
        model.set_grad_checkpointing(True)
    return model


def build_optimization(model, cfg, backend, updates_per_epoch: int):
    """``(model, optimizer, scheduler, ema)`` for ``model`` on ``backend`` (wrapped by DDP/DeepSpeed); compiled
    last, in place (``compile.enable``), so the EMA copy and every state dict stay those of the eager module."""
    from timm.utils import ModelEmaV3

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
