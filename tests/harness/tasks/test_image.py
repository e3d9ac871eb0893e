"""harness.tasks.image: image folders and CIFAR batches that do not decode are one line naming the file; a link loop
is read once."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.files import in_time as _in_time
from fixtures.images import image_folder as _image_folder
import os
import pickle
import numpy as np
from harness.core.errors import DepthbenchError


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
