"""Models by name: the registry lookup (timm's, with depthbench's models registered), building on the meta device,
and a config's model arguments. Every command that builds a model by name or from a config goes through here.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import sys
from pathlib import Path

import timm
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

import models  # noqa: F401  (registers depthbench's models with timm)
from harness.core.config import load_config
from harness.core.errors import ConfigError, DepthbenchError
from harness.engine.checkpoint import load_weights
from harness.engine.hooks import build_hooks

MODEL_BUILD_KEYS = ("name", "pretrained", "grow")  # model.* keys that are not timm.create_model arguments


class UnknownModelError(DepthbenchError):
    """A model name that neither timm nor depthbench registers; the message suggests close names."""


def require_registered(name: str, what: str = "model") -> None:
    """Raise :class:`UnknownModelError` (one line, with close names) unless ``name`` is a registered model."""
    if not name or not timm.is_model(name):
        names = timm.list_models()
        close = difflib.get_close_matches(name or "", names, n=3, cutoff=0.6) or timm.list_models(f"*{name}*")[:3]
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise UnknownModelError(f"unknown {what} {name!r}; {hint}(`depthbench models` lists them)")


# in-place value ops of weight initialisation (none changes a shape), and torch.nn.init's functions: those reach
# the mode as one call (what they do inside is not seen by it)
_INIT_OPS = frozenset(
    {
        "uniform_",
        "normal_",
        "zero_",
        "fill_",
        "erfinv_",
        "mul_",
        "add_",
        "sub_",
        "div_",
        "clamp_",
        "clamp_min_",
        "clamp_max_",
        "copy_",
        "exp_",
        "log_",
        "sqrt_",
        "neg_",
        "abs_",
        "random_",
        "bernoulli_",
        "exponential_",
        "log_normal_",
        "cauchy_",
        "geometric_",
        "fill_diagonal_",
        "trunc_normal_",
        "constant_",
        "ones_",
        "zeros_",
        "xavier_uniform_",
        "xavier_normal_",
        "kaiming_uniform_",
        "kaiming_normal_",
        "orthogonal_",
        "sparse_",
        "eye_",
        "dirac_",
    }
)


class SkipInitOnMeta(TorchFunctionMode):
    """Inside a meta-device build: in-place value ops on meta tensors are skipped. Weight initialisation has no data
    to write there, and the meta kernels of the random fills (``trunc_normal_`` is five of them) run in Python: a
    deep model's build took 2-4 times as long with them."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") in _INIT_OPS:
            target = args[0] if args else kwargs.get("tensor")  # torch.nn.init passes its tensor by keyword
            if isinstance(target, torch.Tensor) and target.is_meta:
                return target
        return func(*args, **kwargs)


def meta_build(device: str | torch.device):
    """The context a model is built in: ``device``'s, with :class:`SkipInitOnMeta` on the meta device."""
    if torch.device(device).type != "meta":
        return torch.device(device)
    stack = contextlib.ExitStack()
    stack.enter_context(torch.device(device))
    stack.enter_context(SkipInitOnMeta())
    return stack


def build_model(name: str, device: str | torch.device = "meta", **kwargs) -> nn.Module:
    """Build a registered model (ours or timm's) without weights when ``device='meta'``."""
    require_registered(name)
    with meta_build(device):
        return timm.create_model(name, **kwargs)


def model_kwargs(cfg) -> dict:
    """The ``timm.create_model`` arguments of ``cfg.model`` (every key but name/pretrained/grow)."""
    kwargs = {k: v for k, v in cfg.model.items() if k not in MODEL_BUILD_KEYS}
    kwargs.setdefault("num_classes", cfg.data.num_classes)
    return kwargs


_config_model_kwargs = model_kwargs  # for build_trained_model, whose own argument is model_kwargs


def parse_model_kwargs(items, option: str = "--model-kwargs") -> dict:
    """timm's ``--model-kwargs k=v ...``: values are Python literals, anything else a string."""
    kwargs = {}
    for text in items or ():
        key, sep, raw = str(text).partition("=")
        if not sep or not key.strip().isidentifier():
            raise DepthbenchError(
                f"{option} {text!r} is not key=value with a Python name as key "
                f"(e.g. {option} width=32 drop_path_rate=0.1)"
            )
        try:
            kwargs[key.strip()] = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            kwargs[key.strip()] = raw.strip()
    return kwargs


def build_trained_model(
    config: str | Path | None = None,
    overrides=(),
    *,
    name: str | None = None,
    model_kwargs: dict | None = None,
    device=None,
):
    """The architecture a run trained, without weights, for commands that rebuild it (diagnose, bench, eval).

    From a training ``config`` (with its ``key=value`` overrides -- e.g. the digits preset's ``model.width=32``):
    ``model.name``, every ``model.*`` argument, ``data.num_classes``, and its ``model.grow`` stages applied (the
    final depth). Or from a registered ``name``. ``model_kwargs`` (timm's ``--model-kwargs``) are added last.
    ``device``: build there (``"meta"``: no memory). Load weights with :func:`harness.checkpoint.load_weights`.
    """
    hooks = []
    if config is not None:
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
        with meta_build(device) if device is not None else contextlib.nullcontext():
            model = timm.create_model(name, **kwargs)
            for hook in hooks:
                model = hook.before_epoch(model, 2**31) or model  # every stage: the final architecture
    except DepthbenchError:
        raise
    except Exception as e:  # a keyword the model does not take, a bad value, ...
        detail = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise DepthbenchError(f"model {name} does not build with {kwargs}: {type(e).__name__}: {detail}") from None
    return model


def config_model_on_meta(cfg) -> nn.Module:
    """The model of a training config built on the meta device (no memory, no compute), its name (and a
    distillation teacher's) checked first: one line for an unknown name or arguments the model does not take."""
    name = cfg.model.name
    if not name:
        raise ConfigError("model.name is not set; `depthbench models` lists the registered models")
    require_registered(name)
    if cfg.distill.teacher:
        require_registered(cfg.distill.teacher, "teacher model")
    kwargs = model_kwargs(cfg)
    try:
        return build_model(name, device="meta", **kwargs)
    except Exception as e:
        raise ConfigError(f"model {name} does not build with {kwargs}: {type(e).__name__}: {e}") from None


def create_config_model(cfg, pretrained: bool = True) -> nn.Module:
    """``timm.create_model`` (after ``import models``) with the config's arguments, then ``model.pretrained``
    through :func:`harness.engine.checkpoint.load_weights` (only the classifier may differ; what it skipped is
    said)."""
    model = timm.create_model(cfg.model.name, **model_kwargs(cfg))
    if pretrained and cfg.model.get("pretrained"):
        report = load_weights(model, cfg.model.pretrained, ignore_classifier=True)
        if report.excused:
            print(f"depthbench: model.pretrained: {report.summary()}", file=sys.stderr)
    return model
