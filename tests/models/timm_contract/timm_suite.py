"""Point timm's own model tests at depthbench's models.

timm's ``tests/test_models.py`` (from the sdist of the pinned timm, unpacked by ``make setup`` into
``~/.cache/depthbench/timm-tests/timm-<version>/tests/``; ``DEPTHBENCH_CACHE`` moves it) is imported here
*unchanged*. It picks its models at import time: every per-model test is parametrised with
``timm.list_models(filter, module, exclude_filters, ...)``. While the file is imported, ``timm.list_models``
and ``timm.list_pretrained`` are replaced by :func:`paper_list_models`, which answers every such call with
the *selected* depthbench models that timm's own filters would pick:

* name filters and exclusion lists apply as in timm (``fnmatch`` on the name). timm tells its sequence-output
  models (no spatial map) by name (``NON_STD_FILTERS``: ``'vit_*'``, ``'deit*'``, ...); a paper model that *is*
  a timm ``VisionTransformer`` (Steps-DeiT, the ScaleNet DeiTs, SReT-108, ...; checked with ``isinstance`` on
  the model built on the meta device, see :func:`model_kind`) is matched under a ``vit_`` alias, so timm
  classifies it as it classifies its own ViTs;
* a ``module=`` filter (timm's ``FEAT_INTER_FILTERS``: modules whose models implement
  ``forward_intermediates`` + ``features_only``) is taken to include depthbench's model modules: every paper
  model implements that API (that is what these tests check);
* everything else (``pretrained``, ``name_matches_cfg``, tags) is timm's own answer.

The selection is ``DEPTHBENCH_TIMM_MODELS``: unset = one representative per family (``REPRESENTATIVES``,
the run in ``make test``), ``all`` = every registered paper model (``make test-timm-all``), or a comma list
of names / fnmatch patterns (``DEPTHBENCH_TIMM_MODELS='transnext_*'``).

Like timm's ``EXCLUDE_JIT_FILTERS``/``EXCLUDE_FX_FILTERS``, ``EXCLUDE_JIT``/``EXCLUDE_FX`` list models whose
code cannot be scripted/traced by construction, each with its reason (docs/<paper>.md explains); their
TorchScript/FX tests are deselected, everything else runs. Two more exclusions follow from the models
themselves (:func:`model_kind`), not from names:

* models whose cfg ``input_size`` is not an image's ``(C, H, W)`` — the StepsNet language models
  (``steps_lm_*``, ``transformer_lm_*``: token ids in, ``input_size=(128,)``) — run none of timm's image-model
  tests (docs/stepsnet.md);
* models built with frozen parameters (``requires_grad=False``; the ScaleNet DeiT-B/Swin expansions, which
  train only adjustments + norms by the paper's recipe, ScaleNet §III-C) skip timm's two backward tests, which
  require a gradient on every parameter (docs/scalenet.md; ``trainable='all'`` builds pass them).
"""

from __future__ import annotations

import fnmatch
import functools
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import timm
from timm.models.vision_transformer import VisionTransformer

import models  # noqa: F401  (registers the paper models with timm)
from harness.engine.models import meta_build

MODULE_NAME = "timm_test_models"
SELECT_ENV = "DEPTHBENCH_TIMM_MODELS"
REPRESENTATIVES = (
    "transnext_micro",
    "SReT_T",
    "horesnet10_rk4",
    "steps_deit_tiny",
    "steps_swin_tiny",
    "steps_resnet18",
    "scalenet_deit_tiny_2x",
)

# {model pattern: why its TorchScript / FX tests cannot pass}. Keep the reasons in docs/<paper>.md too.
EXCLUDE_JIT: dict[str, str] = {
    "transnext_*": "forward reaches the official numbered stages (patch_embed1..4, block1..4, norm1..4, kept for the "
    "official checkpoints) by name and builds the per-input-size geometry in Python; "
    "TorchScript compiles neither (docs/transnext.md)",
}
EXCLUDE_FX: dict[str, str] = {}
JIT_TESTS = ("test_model_forward_torchscript", "test_model_forward_fx_torchscript")
FX_TESTS = ("test_model_forward_fx", "test_model_backward_fx", "test_model_forward_fx_torchscript")
BACKWARD_TESTS = ("test_model_backward", "test_model_backward_fx")
NOT_IMAGE_REASON = (
    "not an image model (token ids in, logits over a vocabulary out; cfg input_size is the sequence "
    "length, not (C, H, W)); timm's model tests feed images (docs/stepsnet.md)"
)
FROZEN_REASON = (
    "built with parameters frozen (requires_grad=False) by the paper's recipe (ScaleNet §III-C, Eq. 10: "
    "DeiT-B and Swin train only adjustments + norms); timm's backward tests need a gradient on every "
    "parameter; trainable='all' builds pass them (docs/scalenet.md)"
)

_real_list_models = timm.list_models


def paper_models() -> list[str]:
    """Every model registered by depthbench's ``models`` package."""
    return [n for n in _real_list_models() if timm.models.model_entrypoint(n).__module__.split(".")[0] == "models"]


def selected_models() -> list[str]:
    """The models of this run (see the module docstring); an unknown name is an error naming the choices."""
    every = paper_models()
    spec = os.environ.get(SELECT_ENV, "").strip()
    if not spec:
        wanted = list(REPRESENTATIVES)
    elif spec == "all":
        return every
    else:
        wanted = [w.strip() for w in spec.split(",") if w.strip()]
    chosen, unknown = [], []
    for w in wanted:
        hits = fnmatch.filter(every, w)
        if not hits:
            unknown.append(w)
        chosen += [h for h in hits if h not in chosen]
    if unknown:
        raise ValueError(
            f"{SELECT_ENV}: no paper model matches {', '.join(unknown)}; use 'all', or names/"
            f"patterns from `depthbench models` (e.g. transnext_micro, 'SReT_*')"
        )
    return chosen


@dataclass(frozen=True)
class ModelKind:
    """What timm's tests need to know about a model that timm itself reads from names."""

    image: bool  # cfg input_size is an image's (C, H, W)
    input_size: tuple
    sequence_output: bool  # a timm VisionTransformer: forward_features is (B, N, C), timm's NON_STD kind
    frozen: tuple[str, ...]  # parameters built with requires_grad=False


@functools.lru_cache(maxsize=None)
def model_kind(name: str) -> ModelKind:
    """Classify ``name`` from its cfg and from the model itself, built on the meta device (no weights: well under
    a second each)."""
    input_size = tuple(timm.models.get_pretrained_cfg_value(name, "input_size") or ())
    if len(input_size) != 3:
        return ModelKind(image=False, input_size=input_size, sequence_output=False, frozen=())
    with meta_build("meta"):
        model = timm.create_model(name, device="meta")
    frozen = tuple(n for n, p in model.named_parameters() if not p.requires_grad)
    return ModelKind(
        image=True, input_size=input_size, sequence_output=isinstance(model, VisionTransformer), frozen=frozen
    )


def timm_kind_name(arch: str) -> str:
    """The name timm's name filters see: ``vit_<name>`` for a timm ViT underneath, else the name itself."""
    kind = model_kind(arch)
    return f"vit_{arch}" if kind.sequence_output and not fnmatch.fnmatch(arch, "vit_*") else arch


def _patterns(value) -> list[str]:
    return [p for p in ([value] if isinstance(value, str) else list(value or ())) if p]


def make_list_models(selected: list[str]):
    selected = set(selected)

    def paper_list_models(
        filter="", module="", pretrained=False, exclude_filters="", name_matches_cfg=False, include_tags=None
    ):
        names = _real_list_models(pretrained=pretrained, name_matches_cfg=name_matches_cfg, include_tags=include_tags)
        include, exclude = _patterns(filter), _patterns(exclude_filters)
        picked = []
        for name in names:
            arch, _, tag = name.partition(".")
            if arch not in selected:
                continue
            alias = timm_kind_name(arch) + (f".{tag}" if tag else "")
            if include and not any(fnmatch.fnmatch(alias, f) or fnmatch.fnmatch(alias, f + ".*") for f in include):
                continue
            if any(fnmatch.fnmatch(alias, f) or fnmatch.fnmatch(alias, f + ".*") for f in exclude):
                continue
            picked.append(name)
        return picked

    def paper_list_pretrained(filter="", exclude_filters=""):
        return paper_list_models(filter, pretrained=True, exclude_filters=exclude_filters, include_tags=True)

    return paper_list_models, paper_list_pretrained


def timm_tests_file() -> Path:
    cache = Path(os.environ.get("DEPTHBENCH_CACHE", Path.home() / ".cache" / "depthbench"))
    return cache / "timm-tests" / f"timm-{timm.__version__}" / "tests" / "test_models.py"


def load_timm_tests():
    """Import timm's test_models.py (unchanged) as ``timm_test_models``, parametrised with our models."""
    if MODULE_NAME in sys.modules:
        return sys.modules[MODULE_NAME]
    path = timm_tests_file()
    if not path.exists():
        raise FileNotFoundError(
            f"timm {timm.__version__}'s test-suite is not at {path}; run `make setup` "
            f"(it unpacks it from the timm sdist on PyPI)"
        )
    list_models, list_pretrained = make_list_models(selected_models())
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    module = importlib.util.module_from_spec(spec)
    saved = timm.list_models, timm.list_pretrained
    timm.list_models, timm.list_pretrained = list_models, list_pretrained
    try:
        sys.modules[MODULE_NAME] = module
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(MODULE_NAME, None)
        raise
    finally:
        timm.list_models, timm.list_pretrained = saved
    return module


def exclusion(test_name: str, model_name: str) -> str | None:
    """Why ``test_name`` does not run for ``model_name`` (None when it runs)."""
    kind = model_kind(model_name)
    if not kind.image:
        return NOT_IMAGE_REASON
    if test_name in BACKWARD_TESTS and kind.frozen:
        return FROZEN_REASON
    for tests, table in ((JIT_TESTS, EXCLUDE_JIT), (FX_TESTS, EXCLUDE_FX)):
        if test_name in tests:
            for pattern, reason in table.items():
                if fnmatch.fnmatch(model_name, pattern):
                    return reason
    return None
