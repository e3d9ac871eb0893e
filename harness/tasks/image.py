"""The image-classification task: datasets, transforms, model, criterion (timm's, plus what no library does).

``data.type`` picks the layout (``configs/_base_/datasets/``):

- ``folder``  ImageNet-style ImageFolder: ``<root>/<train_split>/<class>/<image>`` and the same for ``val_split``
              (timm ``create_dataset``); CIFAR-10 exported as images uses this layout too.
- ``wds``     WebDataset shards in timm's layout (``<root>/_info.json`` naming the splits, or a split given as
              ``"train-{0000..1023}.tar|1281167"``), for multi-node runs that stream from a shared file system.
- ``shards``  tar shards with an index made by ``depthbench data pack`` (harness/tasks/shards.py): a map-style
              dataset, so the samplers give every rank the same samples whatever the number of ranks or workers.
- ``cifar10`` CIFAR-10's standard python-pickle layout (``data_batch_1..5``, ``test_batch`` in ``<root>`` or in
              ``<root>/cifar-10-batches-py``).
- ``cifar100`` CIFAR-100's (``train``, ``test`` in ``<root>`` or ``<root>/cifar-100-python``; the 100 fine labels).
- ``digits``  the embedded default: scikit-learn's bundled handwritten digits (1,797 real 8×8 images, 10 classes),
              exported once to an ImageFolder cache at ``data.input_size`` with a fixed stratified 80/20 split,
              so everything runs on a fresh machine with no download.
- ``glyphs``  the harder embedded set of the claims (harness/tasks/glyphs.py): 53 characters rendered from the
              typefaces of Debian's font packages, validation on held-out typefaces; rendered once per input size.

``loader.pipeline`` picks where images are decoded and augmented: ``cpu`` (timm's transforms in the loader workers)
or ``device`` (workers read bytes, the training device decodes and augments in batches: harness/tasks/image_device.py).

``aug.pipeline`` picks the training transform: ``imagenet`` (timm ``create_transform``: RandomResizedCrop,
RandAugment, colour jitter, random erasing), ``cifar`` (random crop with padding, flip, torchvision's
AutoAugment CIFAR-10 policy) or ``none`` (resize + normalise only, the "raw data" recipe).

"""

from __future__ import annotations

import functools
import math
import os
import pickle
import sys
from pathlib import Path

import numpy as np
import timm
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as TF
from PIL import Image
from timm.data import Mixup, create_dataset, create_transform
from timm.data.auto_augment import AugmentOp, posterize
from timm.data.random_erasing import RandomErasing
from timm.data.readers.img_extensions import get_img_extensions
from timm.loss import LabelSmoothingCrossEntropy, SoftTargetCrossEntropy
from torch import nn
from torch.utils.data import Dataset, default_collate

from harness.core.errors import ConfigError, DataError
from harness.core.files import atomic_dir, data_cache, open_file, printable
from harness.engine.checkpoint import load_weights
from harness.engine.evaluation import evaluate
from harness.tasks.losses import HardDistillationLoss, SoftLabelKDLoss, TrainingLoss
from harness.engine.models import config_model_on_meta, create_config_model
from harness.engine.tasks import Task
from harness.tasks import image_device
from harness.tasks.glyphs import DEFAULT_VARIANT, export_glyphs

# decode_image is imported from here too (protocols.py): it lives with the pixel budget in image_files
from harness.tasks.image_files import decode_image, find_images, read_image_bytes
from harness.tasks.shards import ShardDataset, check_shards, check_wds

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".JPEG", ".bmp", ".webp", ".tif", ".tiff", ".ppm")
CIFAR10_FILES = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
CIFAR100_FILES = ["train", "test"]
MAX_CIFAR_BYTES = 1 << 30  # CIFAR-100's train batch is 150 MB
CIFAR10_MEAN, CIFAR10_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)


# ----------------------------------------------------------------------------------------- embedded digits
def export_digits(resolution: int = 32, root: str | Path | None = None) -> Path:
    """Export sklearn's digits once to ``<root>/digits-<resolution>/{train,val}/<class>/<n>.png`` (RGB).

    The split is stratified 80/20 with a fixed seed (1,437 train / 360 val images). Written with
    :func:`harness.core.files.atomic_dir`, so concurrent exporters (several ranks) and killed exports never leave a
    half cache.
    """
    root = Path(root) if root is not None else data_cache()
    target = root / f"digits-{resolution}"
    with atomic_dir(target) as tmp:
        if tmp is None:
            return target
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        digits = load_digits()
        pixels = np.clip(digits.images * (255.0 / 16.0), 0, 255).round().astype(np.uint8)
        train_idx, val_idx = train_test_split(
            np.arange(len(pixels)), test_size=0.2, random_state=0, stratify=digits.target
        )
        for split, indices in (("train", train_idx), ("val", val_idx)):
            for i in indices:
                folder = tmp / split / str(digits.target[i])
                folder.mkdir(parents=True, exist_ok=True)
                image = Image.fromarray(pixels[i], mode="L")
                if resolution != image.width:
                    image = image.resize((resolution, resolution), Image.BILINEAR)
                image.convert("RGB").save(folder / f"{i:04d}.png")
    return target


# ----------------------------------------------------------------------------------------- layouts
def data_root(data) -> Path:
    """The dataset folder of ``data`` (for ``digits``/``glyphs``: the exported cache, created on first use).
    Generated data lives in the data cache ($DEPTHBENCH_DATA), whatever ``data.root`` a recipe it is swapped into
    names: a command line setting it is refused as unread (harness.engine.builders), and an ImageNet recipe's
    ``data/imagenet`` made the digits a folder there."""
    if data.type == "digits":
        return export_digits(data.input_size)
    if data.type == "glyphs":  # the embedded glyphs (harness/tasks/glyphs.py), rendered once at the input size
        return export_glyphs(data.input_size, variant=data.get("variant") or DEFAULT_VARIANT)
    if not data.root:
        raise DataError(f"data.root is not set; point it at your {data.type} dataset (data.root=/path/to/data)")
    return Path(data.root).expanduser()


def check_data(data) -> Path:
    """Fail in one line, before any expensive work, when the dataset is missing or has the wrong layout."""
    root = data_root(data)
    if not root.is_dir():
        raise DataError(f"dataset path {root} does not exist; {_layout(data, root)}")
    if data.type in ("folder", "digits", "glyphs"):
        for split in (data.train_split, data.val_split):
            _check_image_folder(root, split, data)
    elif data.type in ("cifar10", "cifar100"):
        _cifar_folder(root, data.type)
    elif data.type == "shards":
        for split in (data.train_split, data.val_split):
            check_shards(root, split)
    elif data.type == "wds":
        has_info = any((root / n).is_file() for n in ("_info.json", "info.json", "_info.yaml", "info.yaml"))
        for split in (data.train_split, data.val_split):
            if not has_info and ".tar" not in split:
                raise DataError(
                    f"dataset path {root} has no _info.json and split {split!r} names no shards; {_layout(data, root)}"
                )
            check_wds(root, split)
    return root


def _layout(data, root) -> str:
    return _LAYOUTS[data.type].format(root=root, train=data.train_split, val=data.val_split)


_LAYOUTS = {
    "folder": "expected the ImageFolder layout {root}/{train}/<class>/<image> and {root}/{val}/<class>/<image>",
    "digits": "expected the ImageFolder layout {root}/{{train,val}}/<class>/<image>",
    "glyphs": "expected the ImageFolder layout {root}/{{train,val}}/<class>/<image>",
    "cifar10": f"expected CIFAR-10's python-pickle files ({', '.join(CIFAR10_FILES)}) in {{root}} or "
    "{root}/cifar-10-batches-py",
    "cifar100": "expected CIFAR-100's python-pickle files (train, test) in {root} or {root}/cifar-100-python",
    "shards": "expected the shards of `depthbench data pack IMAGEFOLDER {root}`",
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
            raise DataError(
                f"class folder {classes[0]} holds no images ({', '.join(IMAGE_EXTENSIONS[:4])}, ...); "
                f"{_layout(data, root)}"
            )


def _cifar_folder(root: Path, kind: str = "cifar10") -> Path:
    files, sub = (CIFAR10_FILES, "cifar-10-batches-py") if kind == "cifar10" else (CIFAR100_FILES, "cifar-100-python")
    for folder in (root, root / sub):
        if all((folder / name).is_file() for name in files):
            return folder
    raise DataError(f"dataset path {root} is not {kind.upper().replace('R', 'R-')}; {_LAYOUTS[kind].format(root=root)}")


class _CifarUnpickler(pickle.Unpickler):
    """An unpickler for CIFAR's batch files that constructs nothing but dicts, lists, strings, bytes, numbers and
    numpy arrays: a dataset someone else made is data, and a crafted "batch" that pickles a callable is refused
    instead of executed (plain ``pickle.load`` would run it)."""

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("_codecs", "encode"),
    }

    def find_class(self, module, name):
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a CIFAR batch")


def load_cifar_batch(path: Path) -> dict:
    """One CIFAR batch file (a pickled dict of arrays and lists), through :class:`_CifarUnpickler`."""
    try:
        with open_file(path, max_bytes=MAX_CIFAR_BYTES, what="CIFAR batch file") as fh:
            batch = _CifarUnpickler(fh, encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as e:
        raise DataError(
            f"{path} is not a CIFAR batch file ({type(e).__name__}: {str(e)[:120]}); re-download the "
            f"dataset's python version"
        ) from None
    if not isinstance(batch, dict) or "data" not in batch:
        raise DataError(f"{path} is not a CIFAR batch file (no 'data' array); re-download the dataset's python version")
    return batch


def _cifar_images(batch: dict, key: str, classes: int, path: Path) -> np.ndarray:
    """A batch's images as (N, 32, 32, 3) uint8, checked against its labels: a wrongly shaped batch is one line."""
    why = None
    try:
        data = np.asarray(batch["data"])
    except (ValueError, TypeError):  # ragged lists
        data, why = None, "'data' is not an array"
    labels = batch.get(key)
    if why is None and (data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or data.dtype.kind not in "ui"):
        why = f"'data' is {data.dtype} of shape {data.shape}, not N x 3072 integers"
    elif why is None and not (isinstance(labels, (list, np.ndarray)) and len(labels) == len(data)):
        why = f"'{key}' is not a list of {len(data)} labels"
    elif why is None and not all(isinstance(t, (int, np.integer)) and 0 <= t < classes for t in labels):
        why = f"'{key}' holds values outside 0..{classes - 1}"
    if why:
        raise DataError(f"{path} is not a CIFAR batch file ({why}); re-download the dataset's python version")
    return data.astype(np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)


class CIFAR10Pickle(Dataset):
    """CIFAR-10 (or, ``kind="cifar100"``, CIFAR-100's fine labels) from its python-pickle batches (no checksum
    check, so re-packed copies load too)."""

    def __init__(self, root: Path, train: bool, transform=None, kind: str = "cifar10"):
        folder = _cifar_folder(Path(root), kind)
        if kind == "cifar10":
            names, key, classes = (CIFAR10_FILES[:5] if train else CIFAR10_FILES[5:]), "labels", 10
        else:
            names, key, classes = [CIFAR100_FILES[0 if train else 1]], "fine_labels", 100
        images, targets = [], []
        for name in names:
            batch = load_cifar_batch(folder / name)
            images.append(_cifar_images(batch, key, classes, folder / name))
            targets += [int(t) for t in batch[key]]
        self.images, self.targets, self.transform = np.concatenate(images), targets, transform
        self.class_to_idx = {str(c): c for c in range(classes)}

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        image = Image.fromarray(self.images[index])
        return (self.transform(image) if self.transform else image), self.targets[index]


# ----------------------------------------------------------------------------------------- transforms
PIPELINES = ("imagenet", "cifar", "none")


def eval_data_config(data, aug) -> dict:
    """The evaluation preprocessing of a recipe as timm's data config (``pretrained_cfg`` fields: input_size,
    interpolation, mean, std, crop_pct, crop_mode): the evaluation transform is ``timm.data.create_transform`` of
    exactly this, and ``depthbench export`` writes it into the export's config.json, so timm's standard
    ``resolve_data_config`` + ``create_transform`` on an export rebuilds the transform the run evaluated with.
    The ``cifar`` and ``none`` pipelines evaluate on the image squashed to the input size (bilinear, no crop: the
    CIFAR recipes' test transform), whatever ``data.crop_pct``/``crop_mode``/``interpolation`` say."""
    if aug.pipeline not in PIPELINES:
        raise ConfigError(f"aug.pipeline={aug.pipeline!r} is not one of {', '.join(PIPELINES)}")
    size = data.input_size
    config = dict(input_size=(3, size, size), mean=tuple(data.mean), std=tuple(data.std))
    if aug.pipeline == "imagenet":
        return dict(config, interpolation=data.interpolation, crop_pct=data.crop_pct, crop_mode=data.crop_mode)
    return dict(config, interpolation="bilinear", crop_pct=1.0, crop_mode="squash")


def build_transform(data, aug, is_training: bool):
    """The training or evaluation transform of a recipe (see the module docstring for the pipelines; evaluation:
    :func:`eval_data_config`)."""
    evaluation = eval_data_config(data, aug)  # checks the pipeline's name
    if not is_training:
        return create_transform(**evaluation, is_training=False)
    size, pipeline = data.input_size, aug.pipeline
    if pipeline == "imagenet":
        return black_zero_bit_posterize(
            create_transform(
                size,
                is_training=True,
                auto_augment=aug.auto_augment,
                color_jitter=aug.color_jitter,
                re_prob=aug.reprob,
                re_mode=aug.remode,
                re_count=aug.recount,
                interpolation=data.interpolation,
                mean=data.mean,
                std=data.std,
                scale=aug.scale,
                ratio=aug.ratio,
                hflip=aug.hflip,
            )
        )
    steps = [T.Resize((size, size))]
    if pipeline == "cifar":
        steps += [T.RandomCrop(size, padding=aug.crop_padding), T.RandomHorizontalFlip(aug.hflip)]
        if aug.auto_augment == "cifar10":
            steps.append(T.AutoAugment(T.AutoAugmentPolicy.CIFAR10))
        elif aug.auto_augment:
            raise ConfigError(f"aug.auto_augment={aug.auto_augment!r}: the cifar pipeline knows only 'cifar10' or None")
    return T.Compose(steps + [T.ToTensor(), T.Normalize(data.mean, data.std)])


def _posterize(img, bits_to_keep, **kwargs):
    """timm's posterize, where keeping 0 bits gives the black image that Pillow < 11 gave (DeiT's and timm's
    training ran so); Pillow 11+ raises instead."""
    if bits_to_keep <= 0:
        return Image.new(img.mode, img.size)
    return posterize(img, bits_to_keep, **kwargs)


def black_zero_bit_posterize(transform):
    """timm's RandAugment with increasing posterize (``-inc1``, DeiT's ``rand-m9-mstd0.5-inc1``) asks Pillow to keep
    0 bits when the jittered magnitude reaches its cap of 10 (~2 % of its posterize draws at m9, mstd 0.5; one image
    in 3,000 in a test, so hundreds per ImageNet epoch), and Pillow 11+ raises "bits must be between or equal to 1
    and 8": the run would end at its first such image. Those ops get :func:`_posterize` (every other draw, and every
    RNG call, is unchanged)."""
    for step in getattr(transform, "transforms", []):
        for op in getattr(step, "ops", []):
            if isinstance(op, AugmentOp) and op.aug_fn is posterize:
                op.aug_fn = _posterize
    return transform


# ----------------------------------------------------------------------------------------- datasets
# The decoded images a loader process keeps of a generated set (digits, glyphs) at most: 26,500 glyphs at 32x32 are
# 81 MB; at 64x64 and above they are decoded again each time, as any image folder is.
KEEP_DECODED_BYTES = 128 * 2**20


def build_dataset(data, aug, split: str, is_training: bool):
    """The dataset of ``split`` with its transform; ``num_classes`` is checked against the labels found."""
    root = data_root(data)
    transform = build_transform(data, aug, is_training)
    if data.type in ("cifar10", "cifar100"):
        dataset = CIFAR10Pickle(root, train=is_training, transform=transform, kind=data.type)
    elif data.type == "shards":
        dataset = ShardDataset(root, split, transform)
    elif data.type == "wds":
        dataset = create_dataset(
            f"wds/{Path(root).name}",
            root=str(root),
            split=split,
            is_training=is_training,
            batch_size=1,
            input_img_mode="RGB",
        )
        dataset.transform = transform
    else:
        dataset = ImageFolder(Path(root) / split, transform, skip_bad=bool(data.get("skip_bad_images")))
        if data.type in ImageTask.generated and len(dataset) * 3 * data.input_size**2 <= KEEP_DECODED_BYTES:
            dataset.decoded = {}  # our own small sets (rendered at the input size): decode each image once
    dataset.device_batches = functools.partial(device_batches, dataset)  # loader.device_normalize (engine data.py)
    dataset.encoded_batches = functools.partial(encoded_batches, dataset, data, aug, is_training)  # loader.pipeline
    classes = getattr(dataset, "class_to_idx", None) or getattr(getattr(dataset, "reader", None), "class_to_idx", None)
    if classes and len(classes) > data.num_classes:
        raise DataError(
            f"{root}/{split} has {len(classes)} classes but data.num_classes={data.num_classes}; "
            f"set data.num_classes={len(classes)}"
        )
    return dataset


class ImageFolder(Dataset):
    """An ImageFolder split as timm's ImageDataset reads it (labels: the leaf folder's name; classes and files in
    natural order), with two differences. The walk is :func:`harness.tasks.image_files.find_images`: timm's follows
    every link, so a folder with a link loop walked without end; here no link leads out of the root and none loops,
    and a FIFO, socket or device in it is refused, not skipped (timm's reader waited on a FIFO for ever). And an
    image that does not decode -- not an image, truncated (Pillow decodes lazily, so timm's ``convert`` raised it
    unnamed), over the pixel budget (harness/tasks/image_files.py) -- is one :class:`DataError` naming the file,
    where timm retried the next sample and, after ten, raised "Failed to load 10 consecutive samples" without a
    name. ``skip_bad`` (``data.skip_bad_images``): skipped instead, each skip a warning line naming the file and
    counting the skips of this loader process. ``class_to_idx``: timm's ``class_map`` (folder name -> label;
    images of other classes are left out). ``decoded = {}``: each image is decoded once per process and kept (the
    small generated sets, whose decoding was ~15 % of a glyphs training step); the transforms make new images, so
    every epoch sees the same pixels as when it decoded them again."""

    def __init__(self, root: Path, transform=None, skip_bad: bool = False, class_to_idx: dict | None = None):
        root = Path(root)
        self.root, self.transform, self.skip_bad, self.skipped = root, transform, skip_bad, 0
        self.decoded: dict[int, Image.Image] | None = None  # {} keeps each decoded image (see above)
        self.samples, self.class_to_idx = find_images(root, class_to_idx)
        if not self.samples:
            raise DataError(f"{printable(root)} holds no images ({', '.join(sorted(get_img_extensions()))})")

    def __len__(self):
        return len(self.samples)

    def filename(self, index: int) -> str:
        return self.samples[index][0]

    def filenames(self, basename: bool = False) -> list[str]:
        """Every sample's path (``basename``: its file name), as timm's ImageDataset gives them."""
        return [os.path.basename(path) if basename else path for path, _ in self.samples]

    def read(self, index: int) -> tuple[bytes, int]:
        """The compressed bytes of sample ``index`` and its label (``loader.pipeline='device'`` decodes them)."""
        path, target = self.samples[index]
        return read_image_bytes(path), target

    def __getitem__(self, index):
        if self.decoded is not None and index in self.decoded:
            return self._transformed(self.decoded[index], self.samples[index][1])
        for _ in range(len(self.samples)):
            path, target = self.samples[index]
            try:
                image = decode_image(path)
                if self.decoded is not None:
                    self.decoded[index] = image
                break
            except DataError as e:
                if not self.skip_bad:
                    raise
                self.skipped += 1
                print(
                    f"depthbench: warning: skipped {str(e).split('; replace')[0]} ({self.skipped} skipped by this "
                    f"loader process)",
                    file=sys.stderr,
                    flush=True,
                )
                index = (index + 1) % len(self.samples)
        else:
            raise DataError(f"{self.root}: no image decodes; check the dataset")
        return self._transformed(image, target)

    def _transformed(self, image: Image.Image, target: int):
        return (self.transform(image) if self.transform is not None else image), target


# ----------------------------------------------------------------------------------------- uint8 batches
# ``loader.device_normalize`` (timm's prefetcher): the workers stop before ToTensor and hand over uint8 images,
# which are collated, pinned and copied at a quarter of the float32 size; the device converts, normalises and
# pastes the random-erasing patches. The erasing is drawn in the worker, under the sample's seed, by timm's own
# RandomErasing code, so the device batch is the CPU batch: equal on a CPU, to rounding on a GPU.
class UInt8Images:
    """A batch of uint8 images (B, C, H, W) and the random-erasing patches drawn for it: ``patches`` lists
    ``(image, top, left, height, width, shape)`` (``shape``: the patch's values, (C, h, w) or (C, 1, 1) for one
    colour) whose values lie one after another in the flat float tensor ``values``."""

    def __init__(self, images: torch.Tensor, patches: list, values: torch.Tensor):
        self.images, self.patches, self.values = images, patches, values

    def pin_memory(self) -> "UInt8Images":  # DataLoader(pin_memory=True) calls this
        return UInt8Images(self.images.pin_memory(), self.patches, self.values.pin_memory())

    def to(self, device, non_blocking: bool = False) -> "UInt8Images":
        return UInt8Images(
            self.images.to(device, non_blocking=non_blocking),
            self.patches,
            self.values.to(device, non_blocking=non_blocking),
        )

    def __len__(self):
        return len(self.images)


class DeviceNormalize:
    """``UInt8Images`` on the device -> the float batch the CPU transform makes: ToTensor's ``float / 255``,
    Normalize's ``(x - mean) / std`` (the same float32 operations, in the same order), then the erasing patches."""

    def __init__(self, mean, std):
        self.mean = torch.as_tensor(mean, dtype=torch.float32).reshape(1, -1, 1, 1)
        self.std = torch.as_tensor(std, dtype=torch.float32).reshape(1, -1, 1, 1)

    def __call__(self, batch: UInt8Images) -> torch.Tensor:
        device = batch.images.device
        images = batch.images.to(torch.float32).div(255)
        images.sub_(self.mean.to(device)).div_(self.std.to(device))
        offset = 0
        for index, top, left, height, width, shape in batch.patches:
            size = math.prod(shape)
            images[index, :, top : top + height, left : left + width] = batch.values[offset : offset + size].view(shape)
            offset += size
        return images


class _ErasingPatches:
    """Stands in for the image tensor in timm's ``RandomErasing._erase``: keeps what it would have written."""

    def __init__(self):
        self.patches = []

    def __setitem__(self, key, value):
        _, rows, cols = key
        self.patches.append((rows.start, cols.start, rows.stop - rows.start, cols.stop - cols.start, value))


class UInt8Transform:
    """The PIL part of a transform, then uint8 (C, H, W), plus the random-erasing patches of this sample."""

    def __init__(self, pil_steps, erasing=None):
        self.pil_steps, self.erasing = pil_steps, erasing

    def __call__(self, image):
        image = self.pil_steps(image)
        pixels = TF.pil_to_tensor(image)  # what ToTensor computes, before its float conversion
        patches = []
        if self.erasing is not None:  # timm's own draw (RNG calls and values), under this sample's seed
            recorder = _ErasingPatches()
            self.erasing._erase(recorder, pixels.shape[0], pixels.shape[1], pixels.shape[2], torch.float32)
            patches = recorder.patches
        return pixels, patches

    def __repr__(self):
        return f"UInt8Transform({self.pil_steps}, erasing={self.erasing})"


def split_transform(transform):
    """``(pil_steps, normalize, erasing)`` of a ``[PIL steps..., ToTensor, Normalize, (RandomErasing)]`` Compose;
    ConfigError for any other shape (its batches cannot be finished on the device)."""
    steps = list(getattr(transform, "transforms", []))
    at = next((i for i, t in enumerate(steps) if type(t).__name__ in ("ToTensor", "MaybeToTensor")), None)
    tail = steps[at + 1 :] if at is not None else []
    if (
        at is None
        or not tail
        or not isinstance(tail[0], T.Normalize)
        or any(not isinstance(t, RandomErasing) for t in tail[1:])
        or len(tail) > 2
    ):
        raise ConfigError(
            f"loader.device_normalize=True needs a transform that ends in ToTensor, Normalize and at "
            f"most RandomErasing, not {transform}; set loader.device_normalize=False"
        )
    return T.Compose(steps[:at]), tail[0], (tail[1] if len(tail) == 2 else None)


def collate_uint8(batch) -> tuple:
    """``[((uint8 image, patches), target), ...]`` -> ``(UInt8Images, targets)``."""
    images = torch.stack([pixels for (pixels, _), _ in batch])
    patches, values = [], []
    for index, ((_, recorded), _) in enumerate(batch):
        for top, left, height, width, value in recorded:
            patches.append((index, top, left, height, width, tuple(value.shape)))
            values.append(value.reshape(-1))
    values = torch.cat(values) if values else torch.zeros(0)
    return UInt8Images(images, patches, values), default_collate([target for _, target in batch])


def device_batches(dataset) -> tuple:
    """Switch ``dataset`` to uint8 samples; returns ``(collate_fn, finish)`` for the engine's loader (finish runs
    on the device: :class:`DeviceNormalize`)."""
    if isinstance(dataset.transform, UInt8Transform):
        raise ConfigError("this dataset already yields uint8 samples")
    pil_steps, normalize, erasing = split_transform(dataset.transform)
    dataset.transform = UInt8Transform(pil_steps, erasing)
    return collate_uint8, DeviceNormalize(normalize.mean, normalize.std)


def encoded_batches(dataset, data, aug, is_training: bool) -> tuple:
    """``loader.pipeline='device'``: ``(dataset of encoded samples, collate_fn, finish)``
    (harness/tasks/image_device.py)."""
    transform = None
    if is_training and aug.pipeline == "imagenet":
        transform = build_transform(data, aug, is_training=True)
    return image_device.encoded_batches(dataset, data, aug, is_training, transform)


# ----------------------------------------------------------------------------------------- model and loss
def build_criterion(cfg, device=None, input_dtype=None):
    """``(mixup_fn, criterion)`` as DeiT: soft-target CE under mixup/cutmix, else label smoothing, else CE;
    wrapped in :class:`harness.tasks.losses.TrainingLoss`, which sums per-branch outputs (SReT mixed depth) and
    owns the distillation teacher (``distill.*``)."""
    a = cfg.aug
    mixup_fn = None
    if a.mixup > 0 or a.cutmix > 0 or a.cutmix_minmax is not None:
        mixup_fn = Mixup(
            mixup_alpha=a.mixup,
            cutmix_alpha=a.cutmix,
            cutmix_minmax=a.cutmix_minmax,
            prob=a.mixup_prob,
            switch_prob=a.mixup_switch_prob,
            mode=a.mixup_mode,
            label_smoothing=a.smoothing,
            num_classes=cfg.data.num_classes,
        )
        base = SoftTargetCrossEntropy()
    else:
        base = LabelSmoothingCrossEntropy(a.smoothing) if a.smoothing else nn.CrossEntropyLoss()
    distill = cfg.distill
    if not distill.teacher:
        return mixup_fn, TrainingLoss(base)
    kind = distill.get("kind", "soft")
    if kind == "soft":  # SReT Eq. 17
        distill_loss = SoftLabelKDLoss(temperature=distill.temperature)
    elif kind == "hard":  # DeiT's GT + hard distillation (SReT Table 3's comparison)
        distill_loss = HardDistillationLoss(base, alpha=distill.weight)
    else:
        raise ConfigError(f"distill.kind={kind!r} is not one of soft, hard")
    teacher = build_teacher(cfg, device, input_dtype)
    return mixup_fn, TrainingLoss(base, teacher=teacher, distill_loss=distill_loss, weight=distill.weight)


def build_teacher(cfg, device=None, input_dtype=None):
    """The frozen distillation teacher (``distill.teacher`` with ``distill.teacher_checkpoint``'s weights)."""
    distill = cfg.distill
    teacher = timm.create_model(distill.teacher, num_classes=cfg.data.num_classes, **distill.teacher_kwargs)
    load_weights(teacher, distill.teacher_checkpoint)
    return teacher.requires_grad_(False).eval().to(device, dtype=input_dtype)


class ImageTask(Task):
    """Image classification: timm models on the image layouts above; top-1/top-5/loss."""

    name = "image"
    data_types = ("folder", "shards", "wds", "cifar10", "cifar100", "digits", "glyphs")
    data_keys = ("root", "interpolation", "crop_pct", "crop_mode", "mean", "std", "variant", "skip_bad_images")
    generated = ("digits", "glyphs")  # exported once into the data cache ($DEPTHBENCH_DATA)
    reads_aug = True

    def reads_data_key(self, data_type: str, key: str) -> bool:
        only = {"variant": ("glyphs",), "skip_bad_images": ("folder",)}.get(key)
        return (only is None or data_type in only) and super().reads_data_key(data_type, key)

    def check_data(self, data) -> Path:
        return check_data(data)

    def check_model(self, cfg) -> None:
        """The model builds with the config's arguments and takes ``data.input_size`` images (meta device)."""
        model = config_model_on_meta(cfg)
        size = cfg.data.input_size
        try:
            with torch.no_grad():
                model.eval()(torch.empty(1, 3, size, size, device="meta"))
        except Exception as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ConfigError(
                f"model {cfg.model.name} does not take data.input_size={size} images ({first}); set "
                f"the model's input size, e.g. +model.img_size={size}"
            ) from None

    def build_dataset(self, data, aug, split: str, is_training: bool):
        return build_dataset(data, aug, split, is_training)

    def data_config(self, data, aug) -> dict:
        return eval_data_config(data, aug)

    def build_model(self, cfg, pretrained: bool = True):
        return create_config_model(cfg, pretrained)

    def build_criterion(self, cfg, device=None, input_dtype=None):
        return build_criterion(cfg, device, input_dtype)

    def evaluate(self, model, loader, backend) -> dict:
        """Top-1, top-5, loss, and ``pipeline``: which input pipeline made the batches. The device pipeline's
        resampling (roi_align, torch's bicubic) is not PIL's: on the embedded digits its top-1 differed from the CPU
        pipeline's by 0.3-0.6 points (docs/data.md), so a record says which one it is."""
        metrics = evaluate(model, loader, backend)
        finish = getattr(loader, "finish", None)
        metrics["pipeline"] = "device" if isinstance(finish, image_device.DeviceAugment) else "cpu"
        return metrics
