"""MMEngine 0.10.7 on torch >= 2.6: explicit ``weights_only`` for every checkpoint MMEngine loads.

torch 2.6 made ``torch.load(weights_only=True)`` the default. MMEngine 0.10.7 calls ``torch.load`` without
the argument, so resuming a run fails on the objects its own checkpoints hold (``HistoryBuffer`` in the
message hub, numpy arrays; ``HistoryBuffer`` even pickles bound methods through ``getattr``, which no
allow-list can admit safely). The upstream fix (mmengine #1670) is unreleased.

What we do instead of setting ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` for everything:

- the local-file checkpoint loader is replaced by one that passes ``weights_only`` explicitly: ``True``
  for everything (pretrained backbones via ``init_cfg``, ``load_from``), so a foreign file can never
  execute code;
- ``DepthbenchRunner`` (``runner_type='DepthbenchRunner'``) loads with ``weights_only=False`` only inside
  ``resume()``, i.e. only for the run's own checkpoints in its work_dir, which are trusted.

Importing this module registers both; downstream configs do so with
``custom_imports = dict(imports=['downstream'], allow_failed_imports=False)``.
"""
from __future__ import annotations

import os.path as osp
import threading
from contextlib import contextmanager

import torch
from mmengine.registry import RUNNERS
from mmengine.runner import Runner
from mmengine.runner.checkpoint import CheckpointLoader

_state = threading.local()


@contextmanager
def trusted_checkpoint_loading():
    """Within this block MMEngine loads local checkpoints with ``weights_only=False``."""
    previous = getattr(_state, "trusted", False)
    _state.trusted = True
    try:
        yield
    finally:
        _state.trusted = previous


def load_local_checkpoint(filename: str, map_location=None):
    """MMEngine's local loader with an explicit ``weights_only`` (False only inside a trusted block)."""
    filename = osp.expanduser(filename)
    if not osp.isfile(filename):
        raise FileNotFoundError(f"{filename} can not be found.")
    return torch.load(filename, map_location=map_location, weights_only=not getattr(_state, "trusted", False))


CheckpointLoader.register_scheme(prefixes="", loader=load_local_checkpoint, force=True)


@RUNNERS.register_module()
class DepthbenchRunner(Runner):
    """MMEngine's Runner; resuming its own checkpoints works on torch >= 2.6 (see module docstring), and
    ``embedded://`` data roots are generated/resolved (downstream/embedded.py), so stock tools/train.py runs too."""

    @classmethod
    def from_cfg(cls, cfg):
        from downstream.embedded import resolve_embedded_roots

        resolve_embedded_roots(cfg)
        return super().from_cfg(cfg)

    def resume(self, filename, *args, **kwargs):
        with trusted_checkpoint_loading():
            return super().resume(filename, *args, **kwargs)
