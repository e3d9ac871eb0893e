"""Every model depthbench can build, with parameters and FLOPs (``depthbench models``, harness/commands/models.py).

Families are the five papers' model files under ``models/`` plus the timm baselines the papers compare
against. Counts come from ``harness.measure.flops`` on the meta device, at each model's default input size.
"""

from __future__ import annotations

import timm

import harness.measure.flops  # counts looked up when called (a test checks that cached ones are not counted again)
import models  # noqa: F401  (registers our models)
from harness.core.choices import FAMILIES
from harness.engine.models import build_model
from harness.measure.cache import MeasurementCache, count_key

BASELINES = [
    "resnet18",
    "resnet34",
    "resnet50",
    "deit_tiny_patch16_224",
    "deit_small_patch16_224",
    "deit_base_patch16_224",
    "swin_tiny_patch4_window7_224",
    "swin_small_patch4_window7_224",
    "swin_base_patch4_window7_224",
]


def registered() -> list[tuple[str, str]]:
    """(name, family) of every model, baselines first, then each paper's models in registration order."""
    rows = [(name, "baseline (timm)") for name in BASELINES]
    for family in FAMILIES:
        rows += [(name, family) for name in timm.list_models(module=family)]
    return rows


def default_input_size(name: str):
    cfg = timm.models.get_pretrained_cfg(name)
    return tuple(cfg.input_size) if cfg and cfg.input_size else (3, 224, 224)


def count_keys(name: str, with_flops: bool, cache) -> list[str]:
    """The cache keys of a model's counts (parameters, and FLOPs if ``with_flops``) at its default input size: the
    keys verify's audit uses for the same counts (:func:`harness.measure.cache.count_key`)."""
    kinds = ["params"] + (["flops"] if with_flops else [])
    return [count_key(cache, kind, name, {}, default_input_size(name)) for kind in kinds]


def uncounted(names: list[str], with_flops: bool = True, cache=None) -> list[str]:
    """The models among ``names`` whose counts :func:`describe` would have to measure (not in ``cache``)."""
    cache = cache if cache is not None else MeasurementCache()
    return [n for n in names if not all(cache.has(k) for k in count_keys(n, with_flops, cache))]


def describe(name: str, family: str, with_flops: bool = True, cache=None) -> dict:
    """A model's row: input size, parameters (M) and GFLOPs (MACs) at that size, or the error it raised when
    built. ``cache`` (a :class:`harness.measure.cache.MeasurementCache`): counts are read from it when the code
    that defines the model has not changed, and stored there otherwise."""
    cache = cache if cache is not None else MeasurementCache(enabled=False)
    input_size = default_input_size(name)
    entry = {"name": name, "family": family, "input_size": list(input_size)}
    built = {}

    def model():
        if "model" not in built:
            built["model"] = build_model(name)
        return built["model"]

    def params():
        return harness.measure.flops.count_params(model())

    def flops():
        return harness.measure.flops.count_flops(model(), input_size).total

    measured = [("params_m", params, 1e6)] + ([("flops_g", flops, 1e9)] if with_flops else [])
    for (column, fn, unit), key in zip(measured, count_keys(name, with_flops, cache)):
        value = cache.get(key, fn)
        if "error" in value:  # list the model anyway, with what went wrong (the first line, whole)
            entry.pop("params_m", None)
            entry["error"] = value["error"]
            break
        entry[column] = round(value["value"] / unit, 3)
    return entry
