"""What a training run is made of, built from a config: checks, model, optimizer, schedule, loss, hooks.

:func:`check_config` validates everything cheap before anything is written; :func:`build_training` returns one
:class:`TrainingObjects` (model, optimizer, scheduler, EMA, criterion, mixup) on a backend. Nothing here reads
command-line arguments: the inputs are the config (``harness/config.py``) and the backend (``harness/engine.py``).
"""
from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass
from pathlib import Path

from harness.config import ConfigError
from harness.errors import DepthbenchError
from harness.losses import TrainingLoss

MODEL_BUILD_KEYS = ("name", "pretrained", "grow")  # model.* keys that are not timm.create_model arguments
LOWER_IS_BETTER = ("loss", "ppl")  # eval metrics whose best value is the smallest (ckpt.best_metric)


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
        if not isinstance(cfg[key], int) or isinstance(cfg[key], bool) or cfg[key] < 1:
            raise ConfigError(f"{key}={cfg[key]!r}: it must be a positive integer")
    metrics = ("top1", "top5") + (("ema_top1", "ema_top5") if cfg.ema.enable else ()) + LOWER_IS_BETTER[:1]
    if is_lm(cfg):
        metrics += LOWER_IS_BETTER[1:]
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
        check_model(cfg)
    if cfg.data.type == "alpaca":  # a Hugging Face Llama's checkpoint directory (harness/alpaca.py)
        from harness.alpaca import check_llama_run

        check_llama_run(cfg)
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
    import torch

    from harness.flops import build_model as build_on_meta
    from harness.flops import require_registered

    if cfg.data.type == "alpaca":  # a Hugging Face Llama, not a timm model (harness/alpaca.py)
        from harness.alpaca import check_llama_model

        return check_llama_model(cfg)
    name = cfg.model.name
    if not name:
        raise ConfigError("model.name is not set; `depthbench models` lists the registered models")
    require_registered(name)
    if cfg.distill.teacher:
        require_registered(cfg.distill.teacher, "teacher model")
    kwargs = model_kwargs(cfg)
    try:
        model = build_on_meta(name, device="meta", **kwargs)
    except Exception as e:
        raise ConfigError(f"model {name} does not build with {kwargs}: {type(e).__name__}: {e}") from None
    if is_lm(cfg):  # the embedding must cover the tokenizer's ids, and the blocks fit the model's positions
        vocab, seq_len = getattr(model, "vocab_size", None), getattr(model, "seq_len", None)
        if vocab is None:
            raise ConfigError(f"model {name} is not a language model (no vocab_size); data.type={cfg.data.type} "
                              f"needs one, e.g. transformer_lm_30m or steps_lm_30m")
        if cfg.data.vocab_size > vocab:
            raise ConfigError(f"data.vocab_size={cfg.data.vocab_size} is larger than model {name}'s vocab_size="
                              f"{vocab}; set model.vocab_size={cfg.data.vocab_size}")
        if seq_len is not None and cfg.data.seq_len > seq_len:
            raise ConfigError(f"data.seq_len={cfg.data.seq_len} is longer than model {name}'s seq_len={seq_len}")
        return
    size = cfg.data.input_size
    try:  # on the meta device: no memory, no compute
        with torch.no_grad():
            model.eval()(torch.empty(1, 3, size, size, device="meta"))
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"model {name} does not take data.input_size={size} images ({first}); set the model's "
                          f"input size, e.g. +model.img_size={size}") from None


def is_lm(cfg) -> bool:
    """A language-model run (token data, harness/lm.py)."""
    from harness.lm import LM_DATA_TYPES

    return cfg.data.type in LM_DATA_TYPES


def model_kwargs(cfg) -> dict:
    """The ``timm.create_model`` arguments of ``cfg.model`` (every key but name/pretrained/grow)."""
    kwargs = {k: v for k, v in cfg.model.items() if k not in MODEL_BUILD_KEYS}
    kwargs.setdefault("num_classes", cfg.data.num_classes)
    return kwargs


_config_model_kwargs = model_kwargs  # for build_trained_model, whose own argument is model_kwargs


# ----------------------------------------------------------------------------------------- model
def build_model(cfg, pretrained: bool = True):
    """``timm.create_model`` (after ``import models``) with the config's arguments, then ``model.pretrained``
    through :func:`harness.checkpoint.load_weights` (only the classifier may differ; what it skipped is said).
    Depth growth (ScaleNet) is not applied here: it is a :class:`GrowthHook`."""
    import sys

    import timm

    import models  # noqa: F401
    from harness.checkpoint import load_weights

    if cfg.data.type == "alpaca":  # a Hugging Face Llama, not a timm model (harness/alpaca.py)
        from harness.alpaca import build_llama_model

        return build_llama_model(cfg, pretrained)
    model = timm.create_model(cfg.model.name, **model_kwargs(cfg))
    if pretrained and cfg.model.get("pretrained"):
        report = load_weights(model, cfg.model.pretrained, ignore_classifier=True)
        if report.excused:
            print(f"depthbench: model.pretrained: {report.summary()}", file=sys.stderr)
    return model


def parse_model_kwargs(items, option: str = "--model-kwargs") -> dict:
    """timm's ``--model-kwargs k=v ...``: values are Python literals, anything else a string."""
    import ast

    kwargs = {}
    for text in items or ():
        key, sep, raw = str(text).partition("=")
        if not sep or not key.strip().isidentifier():
            raise DepthbenchError(f"{option} {text!r} is not key=value with a Python name as key "
                                  f"(e.g. {option} width=32 drop_path_rate=0.1)")
        try:
            kwargs[key.strip()] = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            kwargs[key.strip()] = raw.strip()
    return kwargs


def build_trained_model(config: str | Path | None = None, overrides=(), *, name: str | None = None,
                        model_kwargs: dict | None = None, device=None):
    """The architecture a run trained, without weights, for commands that rebuild it (diagnose, bench, eval).

    From a training ``config`` (with its ``key=value`` overrides -- e.g. the digits preset's ``model.width=32``):
    ``model.name``, every ``model.*`` argument, ``data.num_classes``, and its ``model.grow`` stages applied (the
    final depth). Or from a registered ``name``. ``model_kwargs`` (timm's ``--model-kwargs``) are added last.
    ``device``: build there (``"meta"``: no memory). Load weights with :func:`harness.checkpoint.load_weights`.
    """
    import timm
    import torch

    import models  # noqa: F401
    from harness.flops import require_registered

    hooks = []
    if config is not None:
        from harness.config import load_config

        cfg = load_config(config, list(overrides))
        name = cfg.model.get("name")
        if not name:
            raise ConfigError(f"config {config} sets no model.name")
        kwargs = _config_model_kwargs(cfg)
        hooks = build_hooks(cfg)
    elif name is None:
        raise DepthbenchError("give a registered model name or a training config")
    else:
        kwargs = {}
    kwargs.update(model_kwargs or {})
    require_registered(name)
    try:
        with torch.device(device) if device is not None else contextlib.nullcontext():
            model = timm.create_model(name, **kwargs)
            for hook in hooks:
                model = hook.before_epoch(model, 2**31) or model  # every stage: the final architecture
    except DepthbenchError:
        raise
    except Exception as e:  # a keyword the model does not take, a bad value, ...
        detail = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise DepthbenchError(f"model {name} does not build with {kwargs}: {type(e).__name__}: {detail}") from None
    return model


# ----------------------------------------------------------------------------------------- between-epoch hooks
class EpochHook:
    """Model-specific behaviour between epochs, outside the generic loop.

    The loop calls :meth:`before_epoch` at the start of every epoch (and once before the optimizer is first
    built, with the epoch training starts or resumes at). Returning a model means the architecture changed:
    the loop rebuilds the optimizer, schedule and EMA for it. :meth:`after_load` runs after a checkpoint was
    loaded into the model. :meth:`after_epoch` runs at the end of every epoch (after its evaluation, before
    last.pth is written) with the run's log: ``log.metrics(kind, **values)`` appends a metrics.jsonl record.
    ``change`` is how the log describes a change.
    """
    change = "changed"

    def before_epoch(self, model, epoch: int):
        return None

    def after_load(self, model) -> None:
        pass

    def after_epoch(self, model, log) -> None:
        pass

    def describe(self) -> str:
        return ""


def growth_stages(cfg) -> list[dict]:
    grow = cfg.model.get("grow")
    if not grow:
        return []
    grow = dict(grow)
    return [dict(s) for s in grow["stages"]] if "stages" in grow else [grow]


class GrowthHook(EpochHook):
    """ScaleNet depth expansion (WSPT) and its growth baselines: ``model.grow`` in a config, applied by
    ``models.scalenet.GrowthSchedule`` (each stage at the start of its epoch; epoch 0 = expand once, after
    ``model.pretrained`` is loaded, which is the paper's setting)."""
    change = "grown"

    def __init__(self, config: dict):
        from models.scalenet import GrowthSchedule

        try:
            self.schedule = GrowthSchedule.from_config(dict(config))
        except (ValueError, TypeError) as e:
            raise ConfigError(f"model.grow: {e}") from None

    def before_epoch(self, model, epoch: int):
        grown, changed = self.schedule.maybe_grow(model, epoch)
        return grown if changed else None

    def after_load(self, model) -> None:
        from models.scalenet import assert_tied

        if getattr(model, "scalenet", None) is not None:
            assert_tied(model)  # weight tying must survive loading a checkpoint

    def describe(self) -> str:
        return "grown " + "; ".join(", ".join(f"{k}={v}" for k, v in s.items()) for s in self.schedule.stages)


class CoefficientLogHook(EpochHook):
    """Logs a model's learnable scalar coefficients once per epoch, for their evolution plot: a model that has
    them exposes ``lrc_coefficients() -> {module: {role: value}}`` (SReT's learnable residual coefficients,
    ``models.sret.SlicedRecursiveTransformer.lrc_coefficients``; read by results.figures.sret_lrc). One
    ``{"kind": "lrc", "epoch": E, "global_step": S, "coefficients": {...}}`` record per epoch, the values at the
    end of epoch E. Any other model logs nothing."""

    def after_epoch(self, model, log) -> None:
        read = getattr(model, "lrc_coefficients", None)
        if read is None:
            return
        try:
            coefficients = read()
        except (RuntimeError, ValueError):  # parameters sharded away from this process (ZeRO-3): nothing to plot
            return
        if coefficients:
            log.metrics("lrc", coefficients=coefficients)


def build_hooks(cfg) -> list[EpochHook]:
    hooks = [GrowthHook(cfg.model.grow)] if cfg.model.get("grow") else []
    return hooks + [CoefficientLogHook()]


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
    """``(mixup_fn, criterion)`` as DeiT: soft-target CE under mixup/cutmix, else label smoothing, else CE;
    wrapped in :class:`harness.losses.TrainingLoss`, which sums per-branch outputs (SReT mixed depth) and owns
    the distillation teacher (``distill.*``)."""
    from timm.data import Mixup
    from timm.loss import LabelSmoothingCrossEntropy, SoftTargetCrossEntropy
    from torch import nn

    if is_lm(cfg):  # next-token cross-entropy; no mixup or teacher for token data
        from harness.lm import NextTokenLoss

        return None, TrainingLoss(NextTokenLoss())
    a = cfg.aug
    mixup_fn = None
    if a.mixup > 0 or a.cutmix > 0 or a.cutmix_minmax is not None:
        mixup_fn = Mixup(mixup_alpha=a.mixup, cutmix_alpha=a.cutmix, cutmix_minmax=a.cutmix_minmax, prob=a.mixup_prob,
                         switch_prob=a.mixup_switch_prob, mode=a.mixup_mode, label_smoothing=a.smoothing,
                         num_classes=cfg.data.num_classes)
        base = SoftTargetCrossEntropy()
    else:
        base = LabelSmoothingCrossEntropy(a.smoothing) if a.smoothing else nn.CrossEntropyLoss()
    distill = cfg.distill
    if not distill.teacher:
        return mixup_fn, TrainingLoss(base)
    from harness.losses import HardDistillationLoss, SoftLabelKDLoss

    kind = distill.get("kind", "soft")
    if kind == "soft":  # SReT Eq. 17
        distill_loss = SoftLabelKDLoss(temperature=distill.temperature)
    elif kind == "hard":  # DeiT's GT + hard distillation (SReT Table 3's comparison)
        distill_loss = HardDistillationLoss(base, alpha=distill.weight)
    else:
        raise ConfigError(f"distill.kind={kind!r} is not one of soft, hard")
    teacher = build_teacher(cfg, device, input_dtype)
    return mixup_fn, TrainingLoss(base, teacher=teacher, distill_loss=distill_loss, weight=distill.weight)


def build_evaluator(cfg):
    """``evaluate(model, loader, backend) -> metrics`` of the run's task: the engine's top-1/top-5/loss, plus
    perplexity for language models (harness/lm.py)."""
    if is_lm(cfg):
        from harness.lm import evaluate_lm

        return evaluate_lm
    from harness.engine import evaluate

    return evaluate


def build_teacher(cfg, device=None, input_dtype=None):
    """The frozen distillation teacher (``distill.teacher`` with ``distill.teacher_checkpoint``'s weights)."""
    import timm

    from harness.checkpoint import load_weights

    distill = cfg.distill
    teacher = timm.create_model(distill.teacher, num_classes=cfg.data.num_classes, **distill.teacher_kwargs)
    load_weights(teacher, distill.teacher_checkpoint)
    return teacher.requires_grad_(False).eval().to(device, dtype=input_dtype)


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


def build_optimization(model, cfg, backend, updates_per_epoch: int):
    """``(model, optimizer, scheduler, ema)`` for ``model`` on ``backend`` (wrapped by DDP/DeepSpeed)."""
    from timm.utils import ModelEmaV3

    optimizer = build_optimizer(model, cfg)
    model, optimizer = backend.prepare(model, optimizer)
    scheduler = build_scheduler(optimizer, cfg, updates_per_epoch)
    ema = ModelEmaV3(backend.unwrap(model), decay=cfg.ema.decay, use_warmup=cfg.ema.warmup) if cfg.ema.enable else None
    return model, optimizer, scheduler, ema


def build_training(model, cfg, backend, updates_per_epoch: int) -> TrainingObjects:
    model, optimizer, scheduler, ema = build_optimization(model.to(backend.device), cfg, backend, updates_per_epoch)
    # after prepare(): DeepSpeed's fp16/bf16 weight modes set the input dtype the teacher must share
    mixup_fn, criterion = build_criterion(cfg, backend.device, backend.input_dtype)
    return TrainingObjects(model, optimizer, scheduler, ema, criterion, mixup_fn)
