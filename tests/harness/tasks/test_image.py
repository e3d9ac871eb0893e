"""harness.tasks.image: image folders and CIFAR batches that do not decode are one line naming the file; a link loop
is read once."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.files import in_time as _in_time
from fixtures.files import refused as _refused
from fixtures.images import image_folder as _image_folder
import os
import pickle
import numpy as np
from harness.core.errors import DepthbenchError
import torch
from harness.core.errors import ConfigError
from harness.tasks import image_files
from harness.tasks.image import CIFAR10Pickle, build_transform, export_digits
from fixtures.configs import digits_cfg, imagenet_digits_cfg


def _truncated_jpeg(path: Path):
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), (1, 2, 3)).save(buffer, "JPEG")
    path.write_bytes(buffer.getvalue()[:200])


def _bomb_png(path: Path):
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    side = 20000  # 400 Mpx > 2 x Image.MAX_IMAGE_PIXELS (89.5 Mpx): DecompressionBombError; a few hundred bytes
    rows = zlib.compress(b"\0" * (side + 1) * 64)  # only the first rows: the header alone trips the check
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", rows)
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("kind", ["truncated", "not-an-image", "bomb"])
def test_an_image_that_does_not_decode_is_one_line_naming_it(tmp_path, kind):
    from harness.core.errors import DataError
    from harness.tasks.image import ImageFolder

    root = _image_folder(tmp_path)
    bad = root / "train" / "b" / "bad.jpg"
    {
        "truncated": _truncated_jpeg,
        "bomb": lambda p: _bomb_png(p.with_suffix(".png")),
        "not-an-image": lambda p: p.write_text("<html>not found</html>"),
    }[kind](bad)
    bad = bad.with_suffix(".png") if kind == "bomb" else bad
    dataset = ImageFolder(root / "train")
    index = next(i for i, (path, _) in enumerate(dataset.samples) if path == str(bad))
    with pytest.raises(DataError) as error:
        dataset[index]
    assert str(error.value).startswith(f"{bad}: the image does not decode") and "\n" not in str(error.value)
    skipping = ImageFolder(root / "train", skip_bad=True)
    image, target = skipping[index]
    assert image.size == (8, 8) and skipping.skipped == 1


def test_a_loader_worker_s_decode_error_is_one_line_naming_the_file(tmp_path):
    from torch.utils.data import DataLoader

    from harness.core.errors import DataError
    from harness.tasks.image import ImageFolder

    root = _image_folder(tmp_path)
    (root / "train" / "a" / "0.png").write_bytes(b"\x89PNG broken")
    loader = DataLoader(ImageFolder(root / "train", transform=lambda image: 0), batch_size=6, num_workers=1)
    with pytest.raises(DataError) as error:
        next(iter(loader))
    assert str(error.value).startswith(f"{root / 'train' / 'a' / '0.png'}: the image does not decode")
    assert "Traceback" not in str(error.value)


def test_an_image_folder_with_a_link_loop_is_read_once(tmp_path):
    from harness.tasks.image import ImageFolder

    root = _image_folder(tmp_path)
    (root / "train" / "a" / "again").symlink_to(root / "train")
    dataset = _in_time(lambda: ImageFolder(root / "train"))
    assert len(dataset) == 6 and sorted(dataset.class_to_idx) == ["a", "b"]


def test_a_fifo_in_an_image_folder_is_refused_before_any_image_is_read(tmp_path):
    """Training's folders and the evaluation protocols' (timm's walk kept a FIFO named like an image and its reader
    then waited on it forever; a non-image name was skipped without a word)."""
    from harness.tasks.image import ImageFolder
    from harness.tasks.protocols import image_folder

    root = _image_folder(tmp_path)
    for name in ("fifo.png", "notes"):
        fifo = root / "train" / "b" / name
        os.mkfifo(fifo)
        for build in (lambda: ImageFolder(root / "train"), lambda: image_folder(root / "train", None, "imagenet-v2")):
            _refused(build, f"{fifo} in the data root {root / 'train'} is a FIFO, not a regular file", "remove it")
        fifo.unlink()
    (root / "train" / "b" / "out.png").symlink_to(tmp_path / "elsewhere.png")
    _refused(lambda: image_folder(root / "train", None, "imagenet-real"), "symbolic link out of the data root")


@pytest.mark.parametrize("data", [None, "shape", "labels"])
def test_a_wrongly_shaped_cifar_batch_is_one_line(tmp_path, data):
    import pickle

    import numpy as np

    from harness.core.errors import DataError
    from harness.tasks.image import CIFAR10_FILES, CIFAR10Pickle

    good = {"data": np.zeros((2, 3072), dtype=np.uint8), "labels": [0, 1]}
    bad = {
        None: {"data": np.zeros((2, 100), dtype=np.uint8), "labels": [0, 1]},
        "shape": {"data": [[1, 2], [3]], "labels": [0, 1]},
        "labels": {"data": np.zeros((2, 3072), dtype=np.uint8), "labels": [0]},
    }[data]
    for name in CIFAR10_FILES:
        (tmp_path / name).write_bytes(pickle.dumps(bad if name == "data_batch_2" else good))
    with pytest.raises(DataError, match="data_batch_2 is not a CIFAR batch file"):
        CIFAR10Pickle(tmp_path, train=True)


class _Evil:
    """Unpickling it runs os.system(touch <marker>)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


# ------------------------------------------------------------------------------------------------ datasets
def test_a_crafted_cifar_batch_is_refused_and_runs_nothing(tmp_path):
    from harness.tasks.image import CIFAR10_FILES, CIFAR10Pickle

    marker = tmp_path / "pwned"
    folder = tmp_path / "cifar"
    folder.mkdir()
    good = {"data": np.zeros((2, 3072), dtype=np.uint8), "labels": [0, 1]}
    for name in CIFAR10_FILES:
        (folder / name).write_bytes(pickle.dumps(good))
    assert len(CIFAR10Pickle(folder, train=True)) == 10  # a real batch layout loads
    (folder / "data_batch_3").write_bytes(pickle.dumps({"data": _Evil(marker), "labels": [0]}))
    with pytest.raises(DepthbenchError, match="data_batch_3 is not a CIFAR batch file"):
        CIFAR10Pickle(folder, train=True)
    assert not marker.exists()


def write_fake_cifar(folder: Path, per_batch: int = 4):
    folder.mkdir(parents=True)
    rng = np.random.RandomState(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        labels = rng.randint(0, 10, per_batch).tolist()
        data = rng.randint(0, 256, (per_batch, 3072)).astype(np.uint8)
        with open(folder / name, "wb") as fh:
            pickle.dump({"data": data, "labels": labels}, fh)
    return data, labels  # the test batch


def test_digits_export_is_the_documented_split(tmp_path):
    root = export_digits(16, tmp_path)
    counts = {split: sum(1 for _ in (root / split).rglob("*.png")) for split in ("train", "val")}
    # sklearn's digits has 1,797 images; a stratified 80/20 split leaves 360 for validation
    assert counts == {"train": 1437, "val": 360}
    assert sorted(p.name for p in (root / "train").iterdir()) == [str(c) for c in range(10)]
    from PIL import Image

    image = Image.open(next((root / "val" / "3").iterdir()))
    assert image.size == (16, 16) and image.mode == "RGB"
    # a second call reuses the cache; no temporary folders are left behind
    mtime = (root / "val").stat().st_mtime
    assert export_digits(16, tmp_path) == root and (root / "val").stat().st_mtime == mtime
    assert [p.name for p in tmp_path.iterdir()] == ["digits-16"]


def test_cifar10_pickle_layout(tmp_path):
    data, labels = write_fake_cifar(tmp_path / "cifar-10-batches-py")
    train, test = CIFAR10Pickle(tmp_path, train=True), CIFAR10Pickle(tmp_path, train=False)
    assert len(train) == 20 and len(test) == 4
    image, label = test[2]
    # CIFAR rows are 1024 red, then green, then blue values, row-major
    assert label == labels[2] and image.size == (32, 32)
    assert image.getpixel((5, 1)) == tuple(int(data[2][c * 1024 + 1 * 32 + 5]) for c in range(3))


def test_transform_pipelines(tmp_path):
    cfg = digits_cfg(tmp_path, input_size=16)
    from PIL import Image

    image = Image.new("RGB", (8, 8), (255, 0, 0))
    for pipeline in ("cifar", "none"):
        cfg.aug.pipeline = pipeline
        assert build_transform(cfg.data, cfg.aug, is_training=True)(image).shape == (3, 16, 16)
    cfg.aug.pipeline = "imagenet"
    cfg.aug.auto_augment = "rand-m9-mstd0.5-inc1"
    assert build_transform(cfg.data, cfg.aug, is_training=True)(image).shape == (3, 16, 16)
    cfg.aug.pipeline = "fancy"
    with pytest.raises(ConfigError, match="aug.pipeline"):
        build_transform(cfg.data, cfg.aug, is_training=True)


def test_device_normalize_refuses_a_transform_it_cannot_split(tmp_path):
    import torchvision.transforms as T

    from harness.tasks.image import split_transform

    steps, normalize, erasing = split_transform(
        build_transform(imagenet_digits_cfg(tmp_path).data, imagenet_digits_cfg(tmp_path).aug, True)
    )
    assert isinstance(normalize, T.Normalize) and erasing is not None and "RandAugment" in repr(steps)
    with pytest.raises(ConfigError, match="loader.device_normalize=True needs a transform"):
        split_transform(T.Compose([T.ToTensor(), T.Normalize((0.5,), (0.5,)), T.GaussianBlur(3)]))


def test_randaugment_posterize_keeping_zero_bits_gives_black_instead_of_raising(tmp_path):
    """DeiT's rand-m9-mstd0.5-inc1 reaches posterize(0 bits) now and then; Pillow 11+ raises there (a crashed run),
    Pillow < 11 gave a black image, which the image task's transform reproduces. Every other draw is timm's."""
    from PIL import Image
    from timm.data import create_transform

    from harness.engine.data import seed_all
    from harness.tasks.image import _posterize, black_zero_bit_posterize

    image = Image.new("RGB", (6, 6), (100, 150, 200))
    assert _posterize(image, 0).getextrema() == ((0, 0),) * 3
    assert _posterize(image, 2).getpixel((0, 0)) == (64, 128, 192)
    timm_t = create_transform(16, is_training=True, auto_augment="rand-m9-mstd0.5-inc1")
    ours = black_zero_bit_posterize(create_transform(16, is_training=True, auto_augment="rand-m9-mstd0.5-inc1"))
    image = Image.new("RGB", (20, 20), (100, 150, 200))
    raised = 0
    for seed in range(200):
        seed_all(seed)
        try:
            want = timm_t(image)
        except ValueError:  # Pillow's "bits must be between or equal to 1 and 8"
            want, raised = None, raised + 1
        seed_all(seed)
        got = ours(image)
        assert want is None or torch.equal(got, want)
    assert raised < 10
    cfg = imagenet_digits_cfg(tmp_path)
    steps = build_transform(cfg.data, cfg.aug, is_training=True).transforms
    ops = [op for step in steps for op in getattr(step, "ops", []) if op.name == "PosterizeIncreasing"]
    assert ops and all(op.aug_fn is _posterize for op in ops)


def test_a_generated_set_decodes_each_image_once_and_gives_the_same_samples(tmp_path, monkeypatch):
    """The small generated sets keep their decoded images (decoding was ~15 % of a glyphs step): a second epoch
    decodes nothing, and every sample, augmentation included, is the one a fresh decode gives."""
    from harness.engine.data import seed_all
    from harness.tasks import image

    cfg = digits_cfg(tmp_path, input_size=16)
    kept = image.build_dataset(cfg.data, cfg.aug, "train", is_training=True)
    plain = image.build_dataset(cfg.data, cfg.aug, "train", is_training=True)
    plain.decoded = None
    assert kept.decoded == {} and len(kept) == 1437
    decodes = []
    monkeypatch.setattr(image, "decode_image", lambda path: decodes.append(path) or image_files.decode_image(path))
    for epoch in range(2):
        for index in (0, 5, 1436):
            seed_all(epoch * 10_000 + index)
            ours, target = kept[index]
            seed_all(epoch * 10_000 + index)
            theirs, their_target = plain[index]
            assert torch.equal(ours, theirs) and target == their_target
    assert len(decodes) == 3 + 6  # the kept set decoded three images once; the plain one decoded every time
    assert sorted(kept.decoded) == [0, 5, 1436]


def test_a_generated_set_at_a_large_size_keeps_nothing(tmp_path, monkeypatch):
    from harness.tasks import image

    monkeypatch.setattr(image, "KEEP_DECODED_BYTES", 1437 * 3 * 16**2 - 1)  # one byte short of the train split
    cfg = digits_cfg(tmp_path, input_size=16)
    assert image.build_dataset(cfg.data, cfg.aug, "train", is_training=True).decoded is None
    assert image.build_dataset(cfg.data, cfg.aug, "val", is_training=False).decoded == {}  # 360 images fit


def test_generated_data_lives_in_the_data_cache_whatever_root_the_recipe_names(tmp_path, monkeypatch):
    """Digits swapped into an ImageNet recipe (``data.type='digits'`` over its ``root='data/imagenet'``, as the GPU
    check does) are exported into the data cache, not into a ``data/imagenet`` folder under the working directory:
    the root is not read for generated data (a command line setting it is refused as unread)."""
    from mmengine.config import ConfigDict

    from harness.tasks.image import data_root

    monkeypatch.setenv("DEPTHBENCH_DATA", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    root = data_root(ConfigDict(type="digits", root="data/imagenet", input_size=8))
    assert root == tmp_path / "cache" / "digits-8" and (root / "train").is_dir()
    assert not (tmp_path / "data").exists()
