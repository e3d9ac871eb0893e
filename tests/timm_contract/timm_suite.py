"""Point timm's own model tests at depthbench's models.

timm's ``tests/test_models.py`` (from the sdist of the pinned timm, unpacked by ``make setup`` into
``~/.cache/depthbench/timm-tests/timm-<version>/tests/``; ``DEPTHBENCH_CACHE`` moves it) is imported here
*unchanged*. It picks its models at import time: every per-model test is parametrised with
``timm.list_models(filter, module, exclude_filters, ...)``. While the file is imported, ``timm.list_models``
and ``timm.list_pretrained`` are replaced by :func:`paper_list_models`, which answers every such call with
the *selected* depthbench models that timm's own filters would pick:

* name filters and exclusion lists apply as in timm (``fnmatch`` on the name). Models that are timm ViTs
  underneath (sequence output, no spatial map) are matched under a ``vit_`` alias, so timm's
  ``NON_STD_FILTERS`` (``'vit_*'``) classify them as it classifies its own ViTs (see ``TIMM_KIND_ALIASES``);
* a ``module=`` filter (timm's ``FEAT_INTER_FILTERS``: modules whose models implement
  ``forward_intermediates`` + ``features_only``) is taken to include depthbench's model modules: every paper
  model implements that API (that is what these tests check);
* everything else (``pretrained``, ``name_matches_cfg``, tags) is timm's own answer.

The selection is ``DEPTHBENCH_TIMM_MODELS``: unset = one representative per family (``REPRESENTATIVES``,
the run in ``make test``), ``all`` = every registered paper model (``make test-timm-all``), or a comma list
of names / fnmatch patterns (``DEPTHBENCH_TIMM_MODELS='transnext_*'``).

Like timm's ``EXCLUDE_JIT_FILTERS``/``EXCLUDE_FX_FILTERS``, ``EXCLUDE_JIT``/``EXCLUDE_FX`` list models whose
code cannot be scripted/traced by construction, each with its reason (docs/<paper>.md explains); their
TorchScript/FX tests are deselected, everything else runs.
"""
from __future__ import annotations

import fnmatch
import importlib.util
import os
import sys
from pathlib import Path

import timm

import models  # noqa: F401  (registers the paper models with timm)

MODULE_NAME = "timm_test_models"
SELECT_ENV = "DEPTHBENCH_TIMM_MODELS"
REPRESENTATIVES = ("transnext_micro", "SReT_T", "horesnet10_rk4", "steps_deit_tiny", "steps_swin_tiny",
                   "steps_resnet18", "scalenet_deit_tiny_2x")
# timm classifies its models by name pattern; these are timm ViTs underneath and are matched as 'vit_<name>'
TIMM_KIND_ALIASES = {"SReT_108": "vit_SReT_108", "SReT_108_mixed_depth": "vit_SReT_108_mixed_depth"}

# {model pattern: why its TorchScript / FX tests cannot pass}. Keep the reasons in docs/<paper>.md too.
EXCLUDE_JIT: dict[str, str] = {
    "transnext_*": "forward reaches the official numbered stages (patch_embed1..4, block1..4, norm1..4, kept for the "
                   "official checkpoints) by name and builds the per-input-size geometry in Python; "
                   "TorchScript compiles neither (docs/transnext.md)",
    "SReT_*": "the block applications are scheduled in Python (one shared block at several ModuleList slots, a "
              "permutation callback per application, keyword-forwarding LRC blocks, tuple/NamedTuple outputs "
              "of the distillation and mixed-depth heads); not ported to TorchScript (docs/sret.md)",
    "deit_tiny_naive_recursive": "the recursion indexes the block list with a loop variable, which TorchScript "
                                 "cannot compile (docs/sret.md)",
    "mixer_b16_224_recursive*": "the recursion is a Python loop over a shared block; not ported to TorchScript "
                                "(docs/sret.md)",
}
EXCLUDE_FX: dict[str, str] = {}
JIT_TESTS = ("test_model_forward_torchscript", "test_model_forward_fx_torchscript")
FX_TESTS = ("test_model_forward_fx", "test_model_backward_fx", "test_model_forward_fx_torchscript")

_real_list_models = timm.list_models


def paper_models() -> list[str]:
    """Every model registered by depthbench's ``models`` package."""
    return [n for n in _real_list_models()
            if timm.models.model_entrypoint(n).__module__.split(".")[0] == "models"]


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
        raise ValueError(f"{SELECT_ENV}: no paper model matches {', '.join(unknown)}; use 'all', or names/"
                         f"patterns from `depthbench models` (e.g. transnext_micro, 'SReT_*')")
    return chosen


def _patterns(value) -> list[str]:
    return [p for p in ([value] if isinstance(value, str) else list(value or ())) if p]


def make_list_models(selected: list[str]):
    selected = set(selected)

    def paper_list_models(filter="", module="", pretrained=False, exclude_filters="", name_matches_cfg=False,
                          include_tags=None):
        names = _real_list_models(pretrained=pretrained, name_matches_cfg=name_matches_cfg,
                                  include_tags=include_tags)
        include, exclude = _patterns(filter), _patterns(exclude_filters)
        picked = []
        for name in names:
            arch, _, tag = name.partition(".")
            if arch not in selected:
                continue
            alias = TIMM_KIND_ALIASES.get(arch, arch) + (f".{tag}" if tag else "")
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
        raise FileNotFoundError(f"timm {timm.__version__}'s test-suite is not at {path}; run `make setup` "
                                f"(it unpacks it from the timm sdist on PyPI)")
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
    for tests, table in ((JIT_TESTS, EXCLUDE_JIT), (FX_TESTS, EXCLUDE_FX)):
        if test_name in tests:
            for pattern, reason in table.items():
                if fnmatch.fnmatch(model_name, pattern):
                    return reason
    return None
