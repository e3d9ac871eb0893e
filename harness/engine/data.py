"""Datasets and loaders for ``depthbench train``: timm's readers and transforms, plus what no library does.

``data.type`` picks the layout (``configs/_base_/datasets/``):

- ``folder``  ImageNet-style ImageFolder: ``<root>/<train_split>/<class>/<image>`` and the same for ``val_split``
              (timm ``create_dataset``); CIFAR-10 exported as images uses this layout too.
- ``wds``     WebDataset shards in timm's layout (``<root>/_info.json`` naming the splits, or a split given as
              ``"train-{0000..1023}.tar|1281167"``), for multi-node runs that stream from a shared file system.
- ``cifar10`` CIFAR-10's standard python-pickle layout (``data_batch_1..5``, ``test_batch`` in ``<root>`` or in
              ``<root>/cifar-10-batches-py``).
- ``cifar100`` CIFAR-100's (``train``, ``test`` in ``<root>`` or ``<root>/cifar-100-python``; the 100 fine labels).
- ``digits``  the embedded default: scikit-learn's bundled handwritten digits (1,797 real 8×8 images, 10 classes),
              exported once to an ImageFolder cache at ``data.input_size`` with a fixed stratified 80/20 split,
              so everything runs on a fresh machine with no download.

``aug.pipeline`` picks the training transform: ``imagenet`` (timm ``create_transform``: RandomResizedCrop,
RandAugment, colour jitter, random erasing), ``cifar`` (random crop with padding, flip, torchvision's
AutoAugment CIFAR-10 policy) or ``none`` (resize + normalise only, the "raw data" recipe).

Exact resume: every training sample is augmented under RNGs seeded from (seed, epoch, slot), so a run resumed
mid-epoch sees the same augmented images as an uninterrupted one, whatever the number of loader workers.
"""
from __future__ import annotations

import contextlib
import math
import os
import random
import shutil
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from harness.config import ConfigError

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".JPEG", ".bmp", ".webp", ".tif", ".tiff", ".ppm")
CIFAR10_FILES = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
CIFAR100_FILES = ["train", "test"]
CIFAR10_MEAN, CIFAR10_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)


class DataError(ConfigError):
    """A missing or malformed dataset; the message names the path and the expected layout."""


# ----------------------------------------------------------------------------------------- embedded digits
def data_cache() -> Path:
    return Path(os.environ.get("DEPTHBENCH_DATA", "~/.cache/depthbench/data")).expanduser()


def export_digits(resolution: int = 32, root: str | Path | None = None) -> Path:
    """Export sklearn's digits once to ``<root>/digits-<resolution>/{train,val}/<class>/<n>.png`` (RGB).

    The split is stratified 80/20 with a fixed seed (1,437 train / 360 val images). Written to a temporary
    folder and renamed, so concurrent exporters (several ranks) and killed exports never leave a half cache.
    """
    root = Path(root) if root is not None else data_cache()
    target = root / f"digits-{resolution}"
    if (target / "val").is_dir():
        return target
    from PIL import Image
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    pixels = np.clip(digits.images * (255.0 / 16.0), 0, 255).round().astype(np.uint8)
    train_idx, val_idx = train_test_split(np.arange(len(pixels)), test_size=0.2, random_state=0,
                                          stratify=digits.target)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".digits-{resolution}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    for split, indices in (("train", train_idx), ("val", val_idx)):
        for i in indices:
            folder = tmp / split / str(digits.target[i])
            folder.mkdir(parents=True, exist_ok=True)
            image = Image.fromarray(pixels[i], mode="L")
            if resolution != image.width:
                image = image.resize((resolution, resolution), Image.BILINEAR)
            image.convert("RGB").save(folder / f"{i:04d}.png")
    try:
        os.rename(tmp, target)
    except OSError:  # another process finished first
        shutil.rmtree(tmp, ignore_errors=True)
    return target


# ----------------------------------------------------------------------------------------- layouts
def data_root(data) -> Path:
    """The dataset folder of ``data`` (for ``digits``: the exported cache, created on first use)."""
    if data.type == "digits":
        return export_digits(data.input_size, data.root)
    if not data.root:
        raise DataError(f"data.root is not set; point it at your {data.type} dataset (data.root=/path/to/data)")
    return Path(data.root).expanduser()


def check_data(data) -> Path:
    """Fail in one line, before any expensive work, when the dataset is missing or has the wrong layout."""
    from harness.lm import LM_DATA_TYPES, check_text_data

    if data.type in LM_DATA_TYPES:  # token data (harness/lm.py)
        return check_text_data(data)
    kinds = ("folder", "wds", "cifar10", "cifar100", "digits")
    if data.type not in kinds:
        raise DataError(f"data.type={data.type!r} is not one of {', '.join(kinds)}")
    root = data_root(data)
    if not root.is_dir():
        raise DataError(f"dataset path {root} does not exist; {_layout(data, root)}")
    if data.type in ("folder", "digits"):
        for split in (data.train_split, data.val_split):
            _check_image_folder(root, split, data)
    elif data.type in ("cifar10", "cifar100"):
        _cifar_folder(root, data.type)
    elif data.type == "wds":
        has_info = any((root / n).is_file() for n in ("_info.json", "info.json", "_info.yaml", "info.yaml"))
        for split in (data.train_split, data.val_split):
            if not has_info and ".tar" not in split:
                raise DataError(f"dataset path {root} has no _info.json and split {split!r} names no shards; "
                                f"{_layout(data, root)}")
    return root


def _layout(data, root) -> str:
    return _LAYOUTS[data.type].format(root=root, train=data.train_split, val=data.val_split)


_LAYOUTS = {
    "folder": "expected the ImageFolder layout {root}/{train}/<class>/<image> and {root}/{val}/<class>/<image>",
    "digits": "expected the ImageFolder layout {root}/{{train,val}}/<class>/<image>",
    "cifar10": f"expected CIFAR-10's python-pickle files ({', '.join(CIFAR10_FILES)}) in {{root}} or "
               "{root}/cifar-10-batches-py",
    "cifar100": "expected CIFAR-100's python-pickle files (train, test) in {root} or {root}/cifar-100-python",
    "wds": "expected WebDataset shards with timm's {root}/_info.json (splits, shard names, sample counts) or "
           "splits like 'train-{{0000..0099}}.tar|<num_samples>'",
}


def _check_image_folder(root: Path, split: str, data) -> None:
    folder = root / split
    if not folder.is_dir():
        raise DataError(f"dataset path {folder} does not exist; {_layout(data, root)}")
    classes = sorted(e.path for e in os.scandir(folder) if e.is_dir())
    if not classes:
        raise DataError(f"dataset path {folder} has no class folders; {_layout(data, root)}")
    with os.scandir(classes[0]) as entries:
        if not any(e.name.endswith(IMAGE_EXTENSIONS) for e in entries):
            raise DataError(f"class folder {classes[0]} holds no images ({', '.join(IMAGE_EXTENSIONS[:4])}, ...); "
                            f"{_layout(data, root)}")


def _cifar_folder(root: Path, kind: str = "cifar10") -> Path:
    files, sub = (CIFAR10_FILES, "cifar-10-batches-py") if kind == "cifar10" else (CIFAR100_FILES, "cifar-100-python")
    for folder in (root, root / sub):
        if all((folder / name).is_file() for name in files):
            return folder
    raise DataError(f"dataset path {root} is not {kind.upper().replace('R', 'R-')}; "
                    f"{_LAYOUTS[kind].format(root=root)}")


class CIFAR10Pickle(Dataset):
    """CIFAR-10 (or, ``kind="cifar100"``, CIFAR-100's fine labels) from its python-pickle batches (no checksum
    check, so re-packed copies load too)."""

    def __init__(self, root: Path, train: bool, transform=None, kind: str = "cifar10"):
        import pickle

        folder = _cifar_folder(Path(root), kind)
        if kind == "cifar10":
            names, key, classes = (CIFAR10_FILES[:5] if train else CIFAR10_FILES[5:]), "labels", 10
        else:
            names, key, classes = [CIFAR100_FILES[0 if train else 1]], "fine_labels", 100
        images, targets = [], []
        for name in names:
            with open(folder / name, "rb") as fh:
                batch = pickle.load(fh, encoding="latin1")
            images.append(np.asarray(batch["data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
            targets += list(batch[key])
        self.images, self.targets, self.transform = np.concatenate(images), targets, transform
        self.class_to_idx = {str(c): c for c in range(classes)}

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        from PIL import Image

        image = Image.fromarray(self.images[index])
        return (self.transform(image) if self.transform else image), self.targets[index]


# ----------------------------------------------------------------------------------------- transforms
def build_transform(data, aug, is_training: bool):
    """The training or evaluation transform of a recipe (see the module docstring for the pipelines)."""
    import torchvision.transforms as T
    from timm.data import create_transform

    size, pipeline = data.input_size, aug.pipeline
    if pipeline not in ("imagenet", "cifar", "none"):
        raise ConfigError(f"aug.pipeline={pipeline!r} is not one of imagenet, cifar, none")
    if pipeline == "imagenet":
        if is_training:
            return create_transform(size, is_training=True, auto_augment=aug.auto_augment,
                                    color_jitter=aug.color_jitter, re_prob=aug.reprob, re_mode=aug.remode,
                                    re_count=aug.recount, interpolation=data.interpolation, mean=data.mean,
                                    std=data.std, scale=aug.scale, ratio=aug.ratio, hflip=aug.hflip)
        return create_transform(size, is_training=False, interpolation=data.interpolation, crop_pct=data.crop_pct,
                                crop_mode=data.crop_mode, mean=data.mean, std=data.std)
    steps = [T.Resize((size, size))]
    if is_training and pipeline == "cifar":
        steps += [T.RandomCrop(size, padding=aug.crop_padding), T.RandomHorizontalFlip(aug.hflip)]
        if aug.auto_augment == "cifar10":
            steps.append(T.AutoAugment(T.AutoAugmentPolicy.CIFAR10))
        elif aug.auto_augment:
            raise ConfigError(f"aug.auto_augment={aug.auto_augment!r}: the cifar pipeline knows only 'cifar10' or None")
    return T.Compose(steps + [T.ToTensor(), T.Normalize(data.mean, data.std)])


# ----------------------------------------------------------------------------------------- datasets
def build_dataset(data, aug, split: str, is_training: bool):
    """The dataset of ``split`` with its transform; ``num_classes`` is checked against the labels found."""
    from harness.lm import LM_DATA_TYPES, build_token_dataset

    if data.type in LM_DATA_TYPES:  # packed token blocks (harness/lm.py)
        return build_token_dataset(data, split, is_training)
    root = data_root(data)
    transform = build_transform(data, aug, is_training)
    if data.type in ("cifar10", "cifar100"):
        dataset = CIFAR10Pickle(root, train=is_training, transform=transform, kind=data.type)
    else:
        from timm.data import create_dataset

        name = f"wds/{Path(root).name}" if data.type == "wds" else ""
        dataset = create_dataset(name, root=str(root), split=split, is_training=is_training and data.type == "wds",
                                 batch_size=1, input_img_mode="RGB")
        dataset.transform = transform
    classes = getattr(dataset, "class_to_idx", None) or getattr(getattr(dataset, "reader", None), "class_to_idx", None)
    if classes and len(classes) > data.num_classes:
        raise DataError(f"{root}/{split} has {len(classes)} classes but data.num_classes={data.num_classes}; "
                        f"set data.num_classes={len(classes)}")
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


class TrainSampler(Sampler):
    """This rank's share of a training epoch, from sample ``start`` on, as ``(index, seed, True)`` items.

    The order is torch's DistributedSampler (or timm's RepeatAugSampler with repeated augmentation), fixed by
    (seed, epoch); ``set_epoch(epoch, start)`` skips what a resumed run has already trained on.
    """

    def __init__(self, dataset, rank: int, world_size: int, seed: int, repeated_aug: bool = False,
                 num_repeats: int = 3):
        from timm.data.distributed_sampler import RepeatAugSampler
        from torch.utils.data.distributed import DistributedSampler

        if repeated_aug:
            self.order = RepeatAugSampler(dataset, num_replicas=world_size, rank=rank, num_repeats=num_repeats)
        else:
            self.order = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
        self.rank, self.world_size, self.seed, self.epoch, self.start = rank, world_size, seed, 0, 0

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        self.epoch, self.start = epoch, start
        self.order.set_epoch(epoch)

    def __iter__(self):
        for position, index in enumerate(self.order):
            if position >= self.start:
                yield index, sample_seed(self.seed, self.epoch, position * self.world_size + self.rank), True

    def __len__(self):
        return max(0, len(self.order) - self.start)


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


def build_loaders(cfg, rank: int, world_size: int, micro_batch: int):
    """``(train_loader, val_loader)``; call ``set_train_epoch(train_loader, epoch, start_batch)`` before each epoch."""
    data = cfg.data
    train_set = build_dataset(data, cfg.aug, data.train_split, is_training=True)
    generator = torch.Generator().manual_seed(cfg.seed)  # loader seeds must not consume the global torch RNG
    if isinstance(train_set, torch.utils.data.IterableDataset):
        train_set.set_loader_cfg(num_workers=data.workers)
        train = DataLoader(train_set, batch_size=micro_batch, drop_last=True, generator=generator, **_loader_args(data))
    else:
        sampler = TrainSampler(train_set, rank, world_size, cfg.seed, data.repeated_aug, data.num_repeats)
        train = DataLoader(SeededSamples(train_set), batch_size=micro_batch, sampler=sampler, drop_last=True,
                           generator=generator, **_loader_args(data))
    return train, build_eval_loader(cfg, rank, world_size, data.eval_batch_size or micro_batch)


def build_eval_loader(cfg, rank: int, world_size: int, batch_size: int) -> DataLoader:
    """The validation loader: every image once over all ranks (WebDataset: timm's per-rank shard split)."""
    data = cfg.data
    val_set = build_dataset(data, cfg.aug, data.val_split, is_training=False)
    if isinstance(val_set, torch.utils.data.IterableDataset):
        return DataLoader(val_set, batch_size=batch_size, **_loader_args(data))
    return DataLoader(SeededSamples(val_set), batch_size=batch_size, sampler=EvalSampler(val_set, rank, world_size),
                      **_loader_args(data))


def _loader_args(data) -> dict:
    return dict(num_workers=data.workers, pin_memory=bool(data.pin_memory and torch.cuda.is_available()),
                persistent_workers=data.workers > 0)


def set_train_epoch(loader: DataLoader, epoch: int, start_batch: int = 0) -> None:
    """Position the training loader at ``start_batch`` of ``epoch`` (WebDataset streams restart the epoch)."""
    if isinstance(loader.sampler, TrainSampler):
        loader.sampler.set_epoch(epoch, start_batch * loader.batch_size)
    elif hasattr(loader.dataset, "set_epoch"):
        loader.dataset.set_epoch(epoch)


def batches_per_epoch(loader: DataLoader) -> int:
    """Full-epoch length of the training loader in micro-batches (independent of the resume position)."""
    if isinstance(loader.sampler, TrainSampler):
        return len(loader.sampler.order) // loader.batch_size
    return len(loader)
