"""Training configs: MMEngine Python configs with ``_base_`` inheritance, plus ``key=value`` overrides.

Every key the engine reads has a default in ``configs/_base_/default_runtime.py`` (generated from the schema,
harness/core/schema.py); recipes override them. A command-line override may only name a key that exists
(``optim.lr=1e-3``, ``model.name=resnet18``); a typo fails in one line naming the key and its closest matches.
Prefix a key with ``+`` to add one that the config does not have (``+model.img_size=32`` passes ``img_size`` to
the model). Values are Python literals (numbers, strings, tuples, lists, ``None``, ``True``); anything that does
not parse as a literal is taken as a string.

A *sweep definition* is a config with a ``sweep`` dict (``axes``: ``{key: [values]}``); :func:`sweep_points`
expands it into named override lists, one per run (the HO-ResNet learning-rate robustness sweep is one).
"""

from __future__ import annotations

import ast
import difflib
import itertools
from pathlib import Path

import mmengine.config.utils as config_utils
from mmengine import Config

from harness.core.config_paths import CONFIG_RULE, CONFIGS_DIR, REPO, config_named_by  # part of this interface
from harness.core.errors import ConfigError
from harness.core.schema import check_values, lookup, section_keys


def resolve_config_path(path) -> Path:
    """The config file ``path`` names: as given (against the working directory), else -- a relative path -- against
    this repository, so ``depthbench train configs/...`` works from any directory. A file in neither is one line
    saying where it looked, with the closest configs of the repository."""
    given = Path(path).expanduser()
    tried = [given if given.is_absolute() else Path.cwd() / given]
    if not given.is_absolute():
        tried.append(REPO / given)
    for candidate in tried:
        if candidate.is_file():
            return candidate if candidate != tried[0] else given
    where = " and ".join(str(c) for c in dict.fromkeys(tried))
    raise ConfigError(f"config file {path} does not exist (tried {where}){_similar_configs(given)}")


def _similar_configs(path: Path) -> str:
    """'; did you mean ...' from the repository's configs (a typo is the usual cause), else where configs live."""
    root = CONFIGS_DIR
    known = {str(p.relative_to(root.parent)): p.name for p in root.rglob("*.py") if "_base_" not in p.parts}
    names = difflib.get_close_matches(path.name, set(known.values()), n=2, cutoff=0.8)
    hits = [rel for rel, name in sorted(known.items()) if name in names]
    if hits:  # named from the repository, where the working directory is not the checkout
        here = Path.cwd().resolve() == REPO.resolve()
        return "; did you mean " + " or ".join(h if here else str(REPO / h) for h in hits[:2]) + "?"
    return (
        "; pretraining recipes live under configs/<paper>/, detection/segmentation under configs/det/ and "
        "configs/seg/, demo presets under configs/demo/"
    )


PACKAGE_PREFIXES = ("mmdet::", "mmseg::")


def load_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()):
    """The config at ``path`` (``_base_`` resolved) with ``overrides`` (``key=value`` strings) applied: a file,
    or a stock config of an installed package (``mmdet::mask_rcnn/...py``). The one way depthbench reads a
    config (a config is code: only files the user names, or the packages' own, are read this way)."""
    if str(path).startswith(PACKAGE_PREFIXES):  # a stock config of an installed OpenMMLab package
        from mmengine.hub import get_config  # lazy: it imports MMEngine's runner (torch, DeepSpeed: seconds)

        _memoize_package_config_index()
        try:
            cfg = get_config(str(path))
        except Exception as e:
            raise ConfigError(f"cannot load config {path}: {type(e).__name__}: {str(e).splitlines()[0]}") from None
        apply_overrides(cfg, overrides)
        check_values(cfg)
        return cfg
    path = resolve_config_path(path)
    _memoize_package_config_index()
    try:
        cfg = Config.fromfile(str(path))
    except Exception as e:  # syntax errors, a missing _base_ file, ...
        raise ConfigError(f"cannot load config {path}: {type(e).__name__}: {str(e).splitlines()[0]}") from None
    apply_overrides(cfg, overrides)
    check_values(cfg)  # every value in its type and range (schema), before any command does work with it
    if cfg.get("experiment") is None:
        cfg.experiment = path.stem
    return cfg


def parse_override(text: str) -> tuple[str, object, bool]:
    """``"optim.lr=1e-3"`` -> ``("optim.lr", 0.001, False)``; the flag says whether the key is new (``+key``)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key.lstrip("+"):
        raise ConfigError(f"override {text!r} is not key=value (e.g. optim.lr=1e-3)")
    add = key.startswith("+")
    try:
        value = ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError):
        value = raw.strip()
    return key.lstrip("+"), value, add


def flat_keys(tree, prefix: str = "") -> list[str]:
    """Every dotted key of a nested dict (``optim``, ``optim.lr``, ...)."""
    keys = []
    for name, value in tree.items():
        key = f"{prefix}{name}"
        keys.append(key)
        if isinstance(value, dict):
            keys += flat_keys(value, key + ".")
    return keys


MISSING = "(absent)"


def changed_keys(old: dict, new: dict, prefix: str = "") -> list[tuple[str, object, object]]:
    """``(dotted key, old value, new value)`` for every leaf that differs between two config trees (a key only in
    one has the value :data:`MISSING` in the other): what a resumed run would change of the run it continues."""
    changes = []
    for name in dict.fromkeys([*old, *new]):
        key, a, b = f"{prefix}{name}", old.get(name, MISSING), new.get(name, MISSING)
        if isinstance(a, dict) and isinstance(b, dict):
            changes += changed_keys(a, b, key + ".")
        elif a != b:
            changes.append((key, a, b))
    return changes


def apply_overrides(cfg, overrides) -> None:
    """Apply ``key=value`` strings to ``cfg`` in place, validating every key and value type first."""
    if not overrides:
        return
    known = flat_keys(cfg.to_dict())
    updates = {}
    for text in overrides:
        key, value, add = parse_override(text)
        parent, _, leaf = key.rpartition(".")
        if add and key not in known:
            if parent and parent not in known:
                raise ConfigError(f"cannot add {key}: {parent} is not a section of the config")
        elif key not in known:
            close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else "; prefix it with + to add a new key"
            raise ConfigError(f"unknown config key {key!r}{hint}")
        else:
            _check_type(key, lookup(cfg, key), value)
        updates[key] = value
    try:
        cfg.merge_from_dict(updates)
    except (TypeError, KeyError, ValueError) as e:  # e.g. a dict merged over a key that is None in the config
        raise ConfigError(
            f"cannot apply overrides {', '.join(overrides)}: {type(e).__name__}: {e}; set the "
            f"inner keys one by one (e.g. a.b.c=value) or check the key's type"
        ) from None


def _check_type(key: str, old, new) -> None:
    """An override keeps the kind of value it replaces: a section (a dict) takes a dict, or None to switch it off;
    a value takes a value of its kind (None accepts anything)."""
    if isinstance(old, dict):
        if new is None or isinstance(new, dict):
            return
        keys = list(old) or section_keys(key)
        example = f"{key}.{keys[0]}=..." if keys else f"{key}=dict(...)"
        raise ConfigError(
            f"{key}={new!r}: {key} is a section, not a value; it takes the keys "
            f"{', '.join(keys) or '(none yet)'}: set one of them (e.g. {example})"
        )
    if old is None or new is None:
        return
    numbers = (int, float)
    if isinstance(old, bool) or isinstance(new, bool):
        ok = isinstance(old, bool) == isinstance(new, bool)
    elif isinstance(old, numbers):
        ok = isinstance(new, numbers) and not (isinstance(old, int) and isinstance(new, float) and not new.is_integer())
    elif isinstance(old, (list, tuple)):
        ok = isinstance(new, (list, tuple))
    else:
        ok = isinstance(new, type(old))
    if not ok:
        raise ConfigError(f"{key}={new!r}: expected a value like {old!r} ({type(old).__name__})")


def sweep_points(cfg) -> list[tuple[str, list[str]]]:
    """``(name, overrides)`` for every point of a sweep definition (the product of ``sweep.axes``)."""
    sweep = cfg.get("sweep")
    if not sweep or not sweep.get("axes"):
        raise ConfigError("this config has no sweep.axes; a sweep definition sets sweep = dict(axes={key: [values]})")
    keys = list(sweep["axes"])
    known = flat_keys(cfg.to_dict())
    for key in keys:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(f"sweep axis {key!r} is not a config key{hint}")
    points = []
    for values in itertools.product(*(sweep["axes"][k] for k in keys)):
        overrides = [f"{k}={v!r}" for k, v in zip(keys, values)]
        name = "_".join(f"{k.rsplit('.', 1)[-1]}-{v}" for k, v in zip(keys, values))
        points.append((name, overrides))
    return points


def _memoize_package_config_index() -> None:
    """MMEngine 0.10.7 parses every metafile of mmdet/mmseg (~50 YAML files, ~1 s) for each ``mmdet::``/``mmseg::``
    base a config names (and then falls back to the plain path: its lookup never matches a name given with
    ``.py``). The files belong to the installed package, so each is parsed once per process here."""
    if getattr(config_utils.load, "memoized", False):
        return
    parse, parsed = config_utils.load, {}

    def load(file, *args, **kwargs):
        if args or kwargs or not isinstance(file, str) or ".mim" not in file:
            return parse(file, *args, **kwargs)
        if file not in parsed:
            parsed[file] = parse(file)
        return parsed[file]

    load.memoized = True
    config_utils.load = load
