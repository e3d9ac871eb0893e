"""Run timm's own ``tests/test_models.py`` (pinned timm's sdist, unchanged) on depthbench's models.

How it is wired (details in timm_suite.py):
* ``test_timm_models.py`` imports timm's file with ``timm.list_models`` answering from the selected paper
  models, and re-exports its tests and fixtures, so pytest collects them under
  ``tests/models/timm_contract/test_timm_models.py::<timm test>[<model>-<batch>]``.
* Here: timm's markers are registered (base, cfg, forward, backward, features, torchscript, fxforward,
  fxbackward; select with ``-m``), and every collected timm test that is not about a selected paper model
  (timm's tests of its own named models, e.g. ``test_gcvit_batch_consistency``) or that a model is excluded
  from (``EXCLUDE_JIT``/``EXCLUDE_FX``) is deselected; the exclusions and their reasons are printed in the
  header.

The default run (``make test``: one representative per family) runs what timm's own CI runs — the tests that
carry one of timm's CI markers; the two unmarked ones (``test_prune_intermediate_layers_contract``, "slow,
excluded from CI" in timm's file, and ``test_model_forward_fx_torchscript``) run when models are named with
``DEPTHBENCH_TIMM_MODELS`` (``make test-timm-all`` included).

Usage: ``make test`` runs the representatives; ``make test-timm-all`` every paper model;
``DEPTHBENCH_TIMM_MODELS=transnext_micro .venv/bin/python -m pytest tests/models/timm_contract`` one model
(``-m "not torchscript and not fxforward and not fxbackward"`` for the core contract only).
"""

from __future__ import annotations

import os
from pathlib import Path

import timm_suite

TIMM_MARKERS = {
    "base": "timm: basic model tests",
    "cfg": "timm: model config / API contract tests",
    "cfg_nonstd": "timm: config tests of non-standard (sequence-output) models",
    "forward": "timm: per-model forward tests",
    "backward": "timm: per-model backward tests",
    "features": "timm: feature extraction (features_only, forward_intermediates) tests",
    "torchscript": "timm: TorchScript tests",
    "fxforward": "timm: torch.fx forward tests",
    "fxbackward": "timm: torch.fx backward tests",
    "timeout": "pytest-timeout: per-test time limit (timm's tests set it)",
}
CI_MARKERS = {"base", "cfg", "forward", "backward", "features", "torchscript", "fxforward", "fxbackward"}
SUITE_FILE = Path(__file__).with_name("test_timm_models.py")


def pytest_configure(config):
    for name, text in TIMM_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


def pytest_report_header(config):
    lines = [
        f"timm contract: models {', '.join(timm_suite.selected_models())} "
        f"(set {timm_suite.SELECT_ENV}=all|names to change)"
    ]
    for kind, table in (("TorchScript", timm_suite.EXCLUDE_JIT), ("FX", timm_suite.EXCLUDE_FX)):
        lines += [f"timm contract: no {kind} tests for {pattern}: {reason}" for pattern, reason in table.items()]
    # the exclusions the models themselves decide (timm_suite.model_kind)
    kinds = {name: timm_suite.model_kind(name) for name in timm_suite.selected_models()}
    not_image = [name for name, kind in kinds.items() if not kind.image]
    frozen = [name for name, kind in kinds.items() if kind.image and kind.frozen]
    if not_image:
        lines.append(f"timm contract: no tests for {', '.join(not_image)}: {timm_suite.NOT_IMAGE_REASON}")
    if frozen:
        lines.append(
            f"timm contract: no {', '.join(timm_suite.BACKWARD_TESTS)} for {', '.join(frozen)}: "
            f"{timm_suite.FROZEN_REASON}"
        )
    return lines


def pytest_collection_modifyitems(config, items):
    selected = set(timm_suite.selected_models())
    ci_only = not os.environ.get(timm_suite.SELECT_ENV, "").strip()
    keep, drop = [], []
    for item in items:
        if Path(str(item.fspath)) != SUITE_FILE:
            keep.append(item)
            continue
        params = getattr(getattr(item, "callspec", None), "params", {})
        model = str(params.get("model_name", "")).partition(".")[0]
        test = item.originalname or item.name
        in_ci = bool(CI_MARKERS & {m.name for m in item.iter_markers()})
        if model in selected and timm_suite.exclusion(test, model) is None and (in_ci or not ci_only):
            keep.append(item)
        else:
            drop.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
