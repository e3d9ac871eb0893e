"""Tasks: what a kind of data brings to the engine, so the engine never branches on it.

A task (image classification, language modelling, instruction tuning) supplies, for the ``data.type`` values it
declares, the dataset of a split, the checks of its data and model, the model, the criterion and the evaluator.
The engine (builders, runner, loop) asks :func:`task_for` and calls these; nothing in the engine names a task.

The built-in tasks live in the ``harness.tasks`` package, whose ``register()`` the engine calls by name on first
use (a plugin entry point: the engine depends on the interface below, not on any task's code); a new task is a
module there (or anywhere) that subclasses :class:`Task` and calls :func:`register_task` -- see README,
"Architecture".
"""

from __future__ import annotations

import importlib
from pathlib import Path

from harness.core.choices import not_one_of
from harness.core.errors import DataError

BUILTIN_TASKS = "harness.tasks"


# the data.* keys the engine itself reads for every data type (harness/engine/data.py, models.py, estimate.py)
ENGINE_DATA_KEYS = (
    "type",
    "train_split",
    "val_split",
    "workers",
    "pin_memory",
    "eval_batch_size",
    "repeated_aug",
    "num_repeats",
    "train_subset",
    "val_subset",
    "num_classes",
    "input_size",
)


class Task:
    """The interface of a task; subclasses override what their data needs."""

    name = ""
    data_types: tuple[str, ...] = ()
    data_keys: tuple[str, ...] = ()  # the data.* keys the task reads besides ENGINE_DATA_KEYS
    generated: tuple[str, ...] = ()  # data types it generates into the cache: they read no data.root
    reads_aug = False  # whether the aug.* section means anything to it
    metrics: tuple[str, ...] = ("top1", "top5", "loss")  # what evaluate() returns (ckpt.best_metric choices)
    lower_is_better: tuple[str, ...] = ("loss",)
    unit = "img"  # what a training sample is, for throughput lines ("img/s", "seq/s")

    def reads_data_key(self, data_type: str, key: str) -> bool:
        """Whether ``data.<key>`` changes anything for ``data_type`` (a setting that does nothing is refused)."""
        if key == "root" and data_type in self.generated:
            return False
        return key in ENGINE_DATA_KEYS or key in self.data_keys

    def check_data(self, data) -> Path:
        """Fail in one line, before any expensive work, when the data is missing or malformed; return its root."""
        raise NotImplementedError

    def check_model(self, cfg) -> None:
        """The model of ``cfg`` builds for this data (on the meta device: no memory, no compute)."""

    def check_run(self, cfg) -> None:
        """What training needs on disk besides the data (e.g. a checkpoint directory to start from)."""

    def build_dataset(self, data, aug, split: str, is_training: bool):
        raise NotImplementedError

    def build_model(self, cfg, pretrained: bool = True):
        raise NotImplementedError

    def data_config(self, data, aug) -> dict | None:
        """The preprocessing a model is evaluated with, as timm's data config (``pretrained_cfg`` fields), for
        ``depthbench export``; None where the task's inputs are not images."""
        return None

    def build_criterion(self, cfg, device=None, input_dtype=None):
        """``(mixup_fn or None, criterion)``; the criterion is called as ``criterion(inputs, outputs, targets)``."""
        raise NotImplementedError

    def evaluate(self, model, loader, backend) -> dict:
        """The run's evaluation metrics (at least ``metrics``) over the evaluation set, summed over ranks; the
        engine's top-1/top-5/loss is :func:`harness.engine.evaluation.evaluate`."""
        raise NotImplementedError


_TASKS: dict[str, Task] = {}


def register_task(task: Task) -> Task:
    """Make ``task`` the one that handles each of its ``data_types``."""
    for data_type in task.data_types:
        _TASKS[data_type] = task
    return task


def data_types() -> list[str]:
    _load_builtin()
    return sorted(_TASKS)


def task_for(data_type: str) -> Task:
    """The task of a ``data.type``; an unknown type is one line listing the known ones."""
    _load_builtin()
    if data_type not in _TASKS:
        raise DataError(not_one_of("data.type", data_type, sorted(_TASKS)))
    return _TASKS[data_type]


def _load_builtin() -> None:
    if not _TASKS:
        importlib.import_module(BUILTIN_TASKS).register()
