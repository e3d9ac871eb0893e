"""Loaders for ``depthbench train``: exact-resume sampling around any task's dataset (harness/engine/tasks.py).

Exact resume: every training sample is loaded (augmented) under RNGs seeded from (seed, epoch, slot), so a run
resumed mid-epoch sees the same augmented samples as an uninterrupted one, whatever the number of loader
workers. The dataset of a split comes from the run's task (``data.type``), which also checks the data.

Batches reach the training device through :class:`DeviceLoader` (timm's ``PrefetchLoader``): on CUDA the next
batch is copied (from pinned memory) and finished on a side stream while the current one trains. With
``loader.device_normalize`` a dataset that offers it (``dataset.device_batches()``, the image task's) leaves its
workers as uint8 images, collated and pinned as uint8 -- a quarter of the float32 bytes -- and is normalised (and
randomly erased, with the patches its workers drew) on the device: the same numbers as the CPU path. With
``loader.pipeline='device'`` an image dataset is replaced by its encoded form (``dataset.encoded_batches()``:
workers read bytes and draw the augmentation parameters; the device decodes and augments, docs/data.md).
"""

from __future__ import annotations

import contextlib
import math
import random
import signal
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from harness.core.errors import ConfigError
from harness.core.schema import with_defaults
from harness.engine.tasks import task_for


def check_data(data) -> Path:
    """Fail in one line, before any expensive work, when the dataset is missing or has the wrong layout."""
    return task_for(data.type).check_data(data)


def build_dataset(data, aug, split: str, is_training: bool):
    """The task's dataset of ``split``; ``data.train_subset``/``val_subset`` keep a fixed random subset."""
    dataset = task_for(data.type).build_dataset(data, aug, split, is_training)
    subset = data.train_subset if is_training else data.val_subset
    if subset and not isinstance(dataset, torch.utils.data.IterableDataset) and subset < len(dataset):
        keep = np.sort(np.random.RandomState(0).permutation(len(dataset))[:subset])
        dataset = torch.utils.data.Subset(dataset, keep.tolist())
    return dataset


# ----------------------------------------------------------------------------------------- exact-resume sampling
def sample_seed(seed: int, epoch: int, slot: int) -> int:
    """A well-mixed 63-bit seed for one training sample (splitmix64 of seed, epoch and global slot)."""
    x = (seed * 0x9E3779B97F4A7C15 + epoch * 0xBF58476D1CE4E5B9 + slot) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (x ^ (x >> 31)) >> 1


def seed_all(seed: int) -> None:
    """Seed python's, numpy's and torch's (CPU) global RNGs for one sample's augmentation."""
    random.seed(seed)
    np.random.seed(seed & 0xFFFFFFFF)
    torch.default_generator.manual_seed(seed)  # torch.manual_seed would also reseed every device: 50x slower


@contextlib.contextmanager
def preserved_rng():
    """In the main process (no loader workers), restore the global RNGs afterwards: the model's dropout and
    mixup draw from them. In a worker nothing needs restoring."""
    if torch.utils.data.get_worker_info() is not None:
        yield
        return
    saved = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        yield
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])
        torch.set_rng_state(saved[2])


class SeededSamples(Dataset):
    """Wraps a dataset: items are ``(index, seed, valid)`` from our samplers; each sample is loaded right after
    :func:`seed_all` (``seed``), and invalid (padding) items get target -1. Batches are fetched together
    (``__getitems__``), so the main process saves and restores its RNG states once per batch."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, item):
        return self.__getitems__([item])[0]

    def __getitems__(self, items):
        with preserved_rng():
            return [self._load(*item) for item in items]

    def _load(self, index, seed, valid):
        if seed is not None:
            seed_all(seed)
        image, target = self.dataset[index]
        if valid:
            return image, target
        return image, (torch.full_like(target, -1) if torch.is_tensor(target) else -1)  # per-token targets (LM)


REPEAT_ROUND = 256  # timm's RepeatAugSampler keeps N // 256 * 256 samples of an epoch (its selected_round)


def epoch_order(length: int, seed: int, epoch: int, repeated_aug: bool = False, num_repeats: int = 3) -> torch.Tensor:
    """The epoch's GLOBAL order of dataset indices: a function of (seed, epoch) only, never of the number of ranks.

    Plain: torch's DistributedSampler permutation (``randperm`` seeded with ``seed + epoch``), without its padding.
    Repeated augmentation: that permutation with each index repeated ``num_repeats`` times and cut to
    ``N // 256 * 256`` samples (``N`` below 256: ``N``), the samples timm's RepeatAugSampler selects on any number
    of ranks. Written here because neither sampler has an order independent of the world size (both pad to a
    multiple of it, RepeatAugSampler also cuts per rank), which an elastic resume needs."""
    generator = torch.Generator()
    generator.manual_seed(seed + epoch)
    order = torch.randperm(length, generator=generator)
    if repeated_aug:
        order = order.repeat_interleave(num_repeats)[: epoch_samples(length, repeated_aug)]
    return order


def epoch_samples(length: int, repeated_aug: bool = False) -> int:
    """The length of :func:`epoch_order` (all ranks together), without drawing it."""
    return length // REPEAT_ROUND * REPEAT_ROUND if repeated_aug and length >= REPEAT_ROUND else length


def steps_per_epoch(
    length: int, world_size: int, micro_batch: int, grad_accum: int = 1, repeated_aug: bool = False
) -> int:
    """Optimizer steps of a whole epoch of ``length`` samples on each rank: the rank's :class:`TrainSampler` share in
    whole micro-batches (the loader drops the last partial one), in whole accumulation rounds. What a run counts
    (:func:`batches_per_epoch`: its micro-batches, ``grad_accum=1``) and what ``submit --estimate`` costs."""
    return epoch_samples(length, repeated_aug) // world_size // micro_batch // grad_accum


class TrainSampler(Sampler):
    """This rank's share of a training epoch, as ``(index, seed, True)`` items: the interface of every
    training dataset that is not a stream (image folders, CIFAR, the shard datasets).

    The epoch's global order is :func:`epoch_order` (seed, epoch); rank ``r`` of ``W`` takes its global positions
    ``r, r + W, r + 2W, ...`` (DistributedSampler's split), so the ``k``-th micro-batch of all ranks together is
    always global positions ``[k * G, (k + 1) * G)`` with ``G = micro_batch * W`` -- the same samples whatever
    ``W`` is, as long as ``G`` (``batch_size / grad_accum``) is. The tail that does not fill ``W`` positions is
    left out (no padding, no duplicates). Each sample is augmented under ``sample_seed(seed, epoch, global
    position)``.

    ``set_epoch(epoch, start)``: ``start`` is the GLOBAL number of samples of the epoch's order already consumed (by
    all ranks together, a multiple of ``W``); the rank continues at global position ``start + rank``. A run
    checkpointed on N ranks resumes on M with exactly the samples not yet seen, in the same order.
    """

    def __init__(
        self, dataset, rank: int, world_size: int, seed: int, repeated_aug: bool = False, num_repeats: int = 3
    ):
        self.length, self.rank, self.world_size, self.seed = len(dataset), rank, world_size, seed
        self.repeated_aug, self.num_repeats = repeated_aug, num_repeats
        self.epoch, self.start = 0, 0
        self.total = epoch_samples(self.length, repeated_aug) // world_size * world_size

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        if start % self.world_size:
            raise ValueError(f"start {start} is not a whole number of rounds of {self.world_size} ranks")
        self.epoch, self.start = epoch, start

    def __iter__(self):
        order = epoch_order(self.length, self.seed, self.epoch, self.repeated_aug, self.num_repeats).tolist()
        for position in range(self.start + self.rank, self.total, self.world_size):
            yield order[position], sample_seed(self.seed, self.epoch, position), True

    def __len__(self):
        return max(0, (self.total - self.start) // self.world_size)


class EvalSampler(Sampler):
    """Every sample exactly once over all ranks; ranks are padded to equal length with invalid items."""

    def __init__(self, dataset, rank: int, world_size: int):
        self.indices = list(range(rank, len(dataset), world_size))
        self.length = math.ceil(len(dataset) / world_size)

    def __iter__(self):
        for i in range(self.length):
            yield (self.indices[i], None, True) if i < len(self.indices) else (0, None, False)

    def __len__(self):
        return self.length


def loader_options(cfg) -> dict:
    """``cfg.loader`` with the schema's defaults (a config written before the section existed has none)."""
    return with_defaults(cfg, "loader")


def build_loaders(cfg, rank: int, world_size: int, micro_batch: int):
    """``(train_loader, val_loader)``; call ``set_train_epoch(train_loader, epoch, start_batch)`` before each epoch.
    With ``loader.device_normalize`` the loaders' ``finish`` attribute turns a batch that reached the device into
    the model's input (:class:`DeviceLoader` calls it)."""
    data = cfg.data
    train_set = build_dataset(data, cfg.aug, data.train_split, is_training=True)
    train_set, collate_fn, finish = _device_batches(cfg, train_set)
    generator = torch.Generator().manual_seed(cfg.seed)  # loader seeds must not consume the global torch RNG
    if isinstance(train_set, torch.utils.data.IterableDataset):
        train_set.set_loader_cfg(num_workers=data.workers)
        train = DataLoader(
            train_set,
            batch_size=micro_batch,
            drop_last=True,
            generator=generator,
            collate_fn=collate_fn,
            **_loader_args(cfg),
        )
    else:
        sampler = TrainSampler(train_set, rank, world_size, cfg.seed, data.repeated_aug, data.num_repeats)
        train = DataLoader(
            SeededSamples(train_set),
            batch_size=micro_batch,
            sampler=sampler,
            drop_last=True,
            generator=generator,
            collate_fn=collate_fn,
            **_loader_args(cfg),
        )
    train.finish = finish
    return train, build_eval_loader(cfg, rank, world_size, data.eval_batch_size or micro_batch, device_finish=True)


def build_eval_loader(cfg, rank: int, world_size: int, batch_size: int, device_finish: bool = False) -> DataLoader:
    """The validation loader: every image once over all ranks (WebDataset: timm's per-rank shard split).
    ``device_finish``: honour ``loader.device_normalize`` (the caller iterates through :class:`DeviceLoader`)."""
    data = cfg.data
    val_set = build_dataset(data, cfg.aug, data.val_split, is_training=False)
    val_set, collate_fn, finish = _device_batches(cfg, val_set) if device_finish else (val_set, None, None)
    if isinstance(val_set, torch.utils.data.IterableDataset):
        loader = DataLoader(val_set, batch_size=batch_size, collate_fn=collate_fn, **_loader_args(cfg))
    else:
        loader = DataLoader(
            SeededSamples(val_set),
            batch_size=batch_size,
            sampler=EvalSampler(val_set, rank, world_size),
            collate_fn=collate_fn,
            **_loader_args(cfg),
        )
    loader.finish = finish
    return loader


def _device_batches(cfg, dataset) -> tuple:
    """``(dataset, collate_fn, finish)`` of a dataset switched to device-side finishing (``loader.pipeline='device'``:
    decode and augment; ``loader.device_normalize``: normalise), or ``(dataset, None, None)``: torch's collation,
    batches ready on the CPU."""
    options = loader_options(cfg)
    if options["pipeline"] not in ("cpu", "device"):
        raise ConfigError(f"loader.pipeline={options['pipeline']!r} is not one of 'cpu', 'device'")
    if options["pipeline"] == "cpu" and not options["device_normalize"]:
        return dataset, None, None
    outer, inner = None, dataset
    while not hasattr(inner, "device_batches") and hasattr(inner, "dataset"):  # through Subset
        outer, inner = inner, inner.dataset
    if options["pipeline"] == "device":
        if not hasattr(inner, "encoded_batches"):
            raise ConfigError(
                f"loader.pipeline='device': data.type={cfg.data.type} datasets are not images; set "
                f"loader.pipeline='cpu'"
            )
        encoded, collate_fn, finish = inner.encoded_batches()
        if outer is None:
            return encoded, collate_fn, finish
        outer.dataset = encoded
        return dataset, collate_fn, finish
    if not hasattr(inner, "device_batches"):
        raise ConfigError(
            f"loader.device_normalize=True: data.type={cfg.data.type} datasets have no uint8 mode "
            f"(image datasets do); set loader.device_normalize=False"
        )
    return (dataset, *inner.device_batches())


def _loader_args(cfg) -> dict:
    data, options = cfg.data, loader_options(cfg)
    workers = data.workers
    args = dict(
        num_workers=workers,
        pin_memory=bool(data.pin_memory and torch.cuda.is_available()),
        persistent_workers=bool(workers > 0 and options["persistent_workers"]),
        worker_init_fn=_ignore_stop_signals if workers else None,
    )
    if workers and options["prefetch_factor"]:
        args["prefetch_factor"] = options["prefetch_factor"]
    return args


class DeviceLoader:
    """A loader's batches on ``device``, finished there: timm's ``PrefetchLoader``.

    Each batch is moved with ``non_blocking`` copies (from pinned memory when the loader pins), then the loader's
    ``finish`` runs on the device (uint8 -> normalised float, :func:`_device_batches`), then 4-D inputs are made
    channels-last when asked. On CUDA this happens on a side stream one batch ahead, so the copy and the
    normalisation overlap the previous step; elsewhere in order. Every other attribute (``sampler``,
    ``batch_size``, ``dataset``) is the wrapped loader's, so sampling, resume and epoch lengths are unchanged.
    """

    def __init__(self, loader, device, channels_last: bool = False):
        self.loader, self.device, self.channels_last = loader, torch.device(device), channels_last
        self.finish = getattr(loader, "finish", None)

    def __getattr__(self, name):
        if name == "loader":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.loader, name)

    def __len__(self):
        return len(self.loader)

    def _to_device(self, inputs, targets):
        inputs = inputs.to(self.device, non_blocking=True)
        targets = targets.to(self.device, non_blocking=True)
        if self.finish is not None:
            inputs = self.finish(inputs)
        if self.channels_last and inputs.dim() == 4:
            inputs = inputs.contiguous(memory_format=torch.channels_last)
        return inputs, targets

    def __iter__(self):
        if self.device.type != "cuda":
            for inputs, targets in self.loader:
                yield self._to_device(inputs, targets)
            return
        feed = getattr(self.finish, "background_batches", None)
        if feed is not None:  # the device pipeline: its own thread and stream (harness/tasks/image_device.py)
            yield from feed(self.loader, self.device, self.channels_last)
            return
        stream = torch.cuda.Stream(device=self.device)
        ready = None
        for inputs, targets in self.loader:
            with torch.cuda.stream(stream):
                upcoming = self._to_device(inputs, targets)
            if ready is not None:
                yield ready
            current = torch.cuda.current_stream(self.device)
            current.wait_stream(stream)
            for tensor in upcoming:  # made on the side stream, used on this one: not reused before it is done
                tensor.record_stream(current)
            ready = upcoming
        if ready is not None:
            yield ready


def _ignore_stop_signals(worker_id: int) -> None:
    """Loader workers leave Ctrl-C and SIGTERM to the training process: a terminal's Ctrl-C (and Slurm's SIGTERM)
    reach every process of the job, and a worker that died of it would turn the checkpoint-and-stop of a
    preemption into a "DataLoader worker exited unexpectedly" error. Workers still end with their process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def set_train_epoch(loader: DataLoader, epoch: int, start_batch: int = 0) -> None:
    """Position the training loader at micro-batch ``start_batch`` of ``epoch``: all ranks together have consumed
    ``start_batch * batch_size * world_size`` samples of the epoch's global order (WebDataset streams restart the
    epoch)."""
    if isinstance(loader.sampler, TrainSampler):
        loader.sampler.set_epoch(epoch, start_batch * loader.batch_size * loader.sampler.world_size)
    elif hasattr(loader.dataset, "set_epoch"):
        loader.dataset.set_epoch(epoch)


def batches_per_epoch(loader: DataLoader) -> int:
    """Full-epoch length of the training loader in micro-batches (independent of the resume position)."""
    sampler = loader.sampler
    if isinstance(sampler, TrainSampler):
        return steps_per_epoch(sampler.length, sampler.world_size, loader.batch_size, 1, sampler.repeated_aug)
    return len(loader)
