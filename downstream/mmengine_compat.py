"""MMEngine 0.10.7 on torch >= 2.6: every checkpoint MMEngine loads is read weights-only, with an allow-list.

torch 2.6 made ``torch.load(weights_only=True)`` the default. MMEngine 0.10.7 calls ``torch.load`` without
the argument, so resuming a run fails on the objects its own checkpoints hold; the upstream fix (mmengine #1670)
loads them with ``weights_only=False``, which lets any file a user receives run code. Here instead the
local-file checkpoint loader passes ``weights_only=True`` for every file -- resume, ``load_from``, ``depthbench
test``, ``init_cfg`` -- with :data:`safe_globals` allowed besides tensors and plain values: exactly the types an
MMEngine checkpoint holds (``torch.serialization.get_unsafe_globals_in_checkpoint`` of a real depthbench
fine-tune: its message hub's ``HistoryBuffer``, numpy arrays, dtypes and scalars, and ``getattr``, through which
pickle names ``HistoryBuffer.min``/``max``/``current``/``mean``). ``getattr`` and ``HistoryBuffer`` are stand-ins
that admit only those (a file cannot reach any other attribute or plant other functions in the buffers'
statistics table). Nothing about a file's location or a run directory's contents grants more trust.

Importing this module registers the loader and ``DepthbenchRunner``; downstream configs do so with
``custom_imports = dict(imports=['downstream'], allow_failed_imports=False)``.
"""

from __future__ import annotations

import itertools
import logging
import os.path as osp
import pickle
from contextlib import contextmanager

import numpy as np
import torch
from mmengine.config import Config
from mmengine.logging.history_buffer import HistoryBuffer
from mmengine.registry import RUNNERS, DefaultScope
from mmengine.runner import Runner
from mmengine.runner.checkpoint import CheckpointLoader

from downstream.embedded import resolve_embedded_roots
from harness.core.files import BadFile, is_regular, read_bytes

_STATISTICS = ("min", "max", "current", "mean")  # HistoryBuffer's own statistics methods (its pickled state)


def _history_buffer_method(owner, name):
    """``getattr`` as a checkpoint may call it: only ``HistoryBuffer.<statistic>`` (pickle protocol 2 writes a
    method of a class as ``getattr(class, name)``; the class loads as :class:`_CheckedHistoryBuffer`)."""
    if owner in (HistoryBuffer, _CheckedHistoryBuffer) and name in _STATISTICS:
        return getattr(HistoryBuffer, name)
    raise pickle.UnpicklingError(
        f"getattr({getattr(owner, '__name__', type(owner).__name__)}, {name!r}) is not allowed"
    )


class _CheckedHistoryBuffer(HistoryBuffer):
    """What the name ``mmengine...HistoryBuffer`` resolves to while loading: its state is checked (numeric
    histories, only HistoryBuffer's own statistics methods), then the object becomes a plain HistoryBuffer. Errors
    are UnpicklingErrors, as torch's own refusals are."""

    def __setstate__(self, state):
        if not isinstance(state, dict):
            raise pickle.UnpicklingError("HistoryBuffer state is not a dict")
        methods = state.get("statistics_methods", {})
        own = {name: getattr(HistoryBuffer, name) for name in _STATISTICS}
        if not isinstance(methods, dict) or any(own.get(k) is not v for k, v in methods.items()):
            raise pickle.UnpicklingError("HistoryBuffer state names statistics methods other than its own")
        for key in ("_log_history", "_count_history"):
            value = state.get(key)
            if value is not None and not (isinstance(value, np.ndarray) and value.dtype.kind in "biuf"):
                raise pickle.UnpicklingError(f"HistoryBuffer {key} is not a numeric array")
        super().__setstate__(state)
        self.__class__ = HistoryBuffer


def _numpy_globals() -> list:
    core = getattr(np, "_core", None) or np.core
    multiarray = core.multiarray
    found = [np.ndarray, np.dtype]
    # numpy 1 wrote these as numpy.core.multiarray.*, numpy 2 as numpy._core.multiarray.*
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        found += [(multiarray.scalar, f"{module}.scalar"), (multiarray._reconstruct, f"{module}._reconstruct")]
    # np.dtype('f8', ...) returns a Float64DType, whose state is then set: numeric and bool dtypes only
    found += sorted({type(np.dtype(code)) for code in "?bBhHiIlLqQefdg"}, key=lambda t: t.__name__)
    return found


safe_globals = [
    (_CheckedHistoryBuffer, "mmengine.logging.history_buffer.HistoryBuffer"),
    (_history_buffer_method, "builtins.getattr"),
    *_numpy_globals(),
]


def load_mmengine_checkpoint(filename, map_location=None):
    """``torch.load(weights_only=True)`` with :data:`safe_globals` allowed (a file that pickles anything else
    raises ``pickle.UnpicklingError`` and runs nothing)."""
    with torch.serialization.safe_globals(safe_globals):
        return torch.load(filename, map_location=map_location, weights_only=True)


def load_local_checkpoint(filename: str, map_location=None):
    """MMEngine's local loader, weights-only with the allow-list."""
    filename = osp.expanduser(filename)
    if not osp.isfile(filename):
        raise FileNotFoundError(f"{filename} can not be found.")
    return load_mmengine_checkpoint(filename, map_location=map_location)


CheckpointLoader.register_scheme(prefixes="", loader=load_local_checkpoint, force=True)


def checkpoint_in_work_dir(work_dir) -> str | None:
    """The checkpoint MMEngine's ``last_checkpoint`` file names, looked up inside ``work_dir`` only: MMEngine writes
    an absolute path, which a copied or planted file could point anywhere; its file name is what counts. None
    when there is no pointer or it names no regular file in the work directory."""
    try:  # never through a link, never a FIFO (it would block the open)
        name = osp.basename(
            read_bytes(osp.join(work_dir, "last_checkpoint"), inside=work_dir, max_bytes=4096).decode().strip()
        )
    except (OSError, BadFile, UnicodeDecodeError):
        return None
    path = osp.join(work_dir, name)
    return path if name and is_regular(path, inside=work_dir) else None


def use_default_scope(scope: str) -> None:
    """MMEngine's ``init_default_scope`` without its warning on every change of scope (finetune/test and the
    audit enter scopes only through this): verify measures detection and segmentation rows in one process, so it
    moves between mmdet's and mmseg's scope by design. As there, a change is a new (the current) instance under a
    unique name."""
    current = DefaultScope.get_current_instance()
    if current is None or current.scope_name != scope:
        DefaultScope.get_instance(f"{scope}-{next(_scope_names)}", scope_name=scope)


_scope_names = itertools.count()


_console = {"quiet": False}


@contextmanager
def quiet_console(quiet: bool = True):
    """Runners built inside this block log to their log file only (errors still reach the console);
    ``depthbench finetune``/``test`` show a header and a progress bar instead (``--verbose`` leaves MMEngine's
    console log on)."""
    previous = _console["quiet"]
    _console["quiet"] = quiet
    try:
        yield
    finally:
        _console["quiet"] = previous


class FormattedOnceConfig(Config):
    """MMEngine's Config whose ``pretty_text`` is formatted once per content: yapf takes ~0.5 s of CPU a call and a
    Runner asks six times for the same text (its log, config.py twice, the message hub, every checkpoint's meta),
    which was half the CPU of a short fine-tune. The text is the same, byte for byte."""

    @property
    def pretty_text(self) -> str:
        key = repr(self.to_dict())  # what Config.pretty_text formats
        cached = self.__dict__.get("_formatted")
        if cached is None or cached[0] != key:
            cached = (key, super().pretty_text)
            object.__setattr__(self, "_formatted", cached)  # Config's own __setattr__ would set a config key
        return cached[1]

    @classmethod
    def of(cls, cfg):
        if not isinstance(cfg, Config):  # a plain dict, as Runner.from_cfg accepts too
            return cfg
        return cls(cfg.to_dict(), cfg_text=cfg.text, filename=cfg.filename, env_variables=cfg.env_variables)


@RUNNERS.register_module()
class DepthbenchRunner(Runner):
    """MMEngine's Runner; its checkpoints load weights-only on any torch (see the module docstring), ``embedded://``
    data roots are generated/resolved (downstream/embedded.py), so stock tools/train.py runs too, and inside
    :func:`quiet_console` its log goes to the log file only."""

    @classmethod
    def from_cfg(cls, cfg):
        resolve_embedded_roots(cfg)
        return super().from_cfg(FormattedOnceConfig.of(cfg))

    def load_or_resume(self) -> None:
        """``resume=True`` without ``load_from`` (stock tools' ``--resume``): the work directory's newest checkpoint,
        found inside it (:func:`checkpoint_in_work_dir`), never where a ``last_checkpoint`` file points."""
        if self._resume and self._load_from is None and not self._has_loaded:
            self._load_from = checkpoint_in_work_dir(self.work_dir)
            if self._load_from is None:  # nothing to resume: start from scratch, as MMEngine does
                self._resume = False
        return super().load_or_resume()

    def build_logger(self, *args, **kwargs):
        logger = super().build_logger(*args, **kwargs)
        if _console["quiet"]:  # before the Runner logs the environment and the whole config
            for handler in logger.handlers:
                if type(handler) is logging.StreamHandler:
                    handler.setLevel(logging.ERROR)
        return logger
