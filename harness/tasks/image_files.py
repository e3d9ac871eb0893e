"""Image files of a dataset, found, read and decoded under one set of rules -- the image folder, ``data pack`` and the
shard reader all use these functions, so a file that one of them refuses every one refuses.

- :func:`find_images`: an ImageFolder split in timm's order and labels (``find_images_and_targets``), walked by
  :func:`harness.core.files.walk_files` -- timm's walk follows every link, out of the root and round a loop.
- :func:`read_image_bytes`: a regular file (never a FIFO: opening one would block), at most :data:`MAX_IMAGE_BYTES`.
- :func:`decode_image_bytes` / :func:`decode_image`: one RGB image, at most :func:`pixel_budget` pixels, checked
  on the header before any pixel is decoded (a decompression bomb is a few hundred bytes); :func:`check_pixels` is
  that check alone, and the device pipeline bounds its batches by the same :func:`pixel_budget`.

Every refusal is one :class:`DataError` line naming the file (control characters stripped: a file name is data).
"""

from __future__ import annotations

import io
import os
import sys
import warnings
from pathlib import Path

from PIL import Image
from timm.data.readers.img_extensions import get_img_extensions
from timm.utils.misc import natural_key

from harness.core.errors import DataError
from harness.core.files import BadFile, open_file, printable, walk_files

# An encoded image (a file of a folder, a member of a shard) is never larger: a 9000 x 9000 JPEG is ~30 MB.
MAX_IMAGE_BYTES = 256 << 20


def find_images(root: str | Path, class_to_idx: dict | None = None) -> tuple[list[tuple[str, int]], dict]:
    """``(samples, class_to_idx)`` of the ImageFolder split ``root`` as timm's ``find_images_and_targets`` gives them
    (label: the leaf folder's name, classes and files in natural order; with ``class_to_idx``, images of other
    classes are left out), but never through a link out of ``root`` or round a link loop, and never past a FIFO,
    socket or device (refused, not skipped): one DataError line."""
    root = Path(root)
    types = get_img_extensions(as_set=True)
    try:
        files = [p for p in walk_files(root) if os.path.splitext(p.name)[1].lower() in types]
    except BadFile as e:
        raise DataError(printable(e)) from None
    labels = ["" if p.parent == root else p.parent.name for p in files]
    if class_to_idx is None:
        class_to_idx = {c: i for i, c in enumerate(sorted(set(labels), key=natural_key))}
    samples = [(str(p), class_to_idx[label]) for p, label in zip(files, labels) if label in class_to_idx]
    return sorted(samples, key=lambda sample: natural_key(sample[0])), class_to_idx


def read_image_bytes(path: str | Path) -> bytes:
    """The bytes of the image file ``path`` of a walked data root (:func:`find_images`, which already refused links
    out of the root, so a link inside it is resolved here): one DataError line for a FIFO, a device or a file over
    :data:`MAX_IMAGE_BYTES`."""
    try:
        with open_file(os.path.realpath(path), max_bytes=MAX_IMAGE_BYTES, what="image") as fh:
            return fh.read(MAX_IMAGE_BYTES)
    except BadFile as e:
        raise DataError(f"{printable(e)}; replace or remove it") from None


def pixel_budget() -> int:
    """The one pixel budget of every decoded image: Pillow's ``Image.MAX_IMAGE_PIXELS`` (89.5 Mpx by default, ~268 MB
    as RGB: far above any photograph a classifier trains on), enforced as a hard limit rather than Pillow's warning.
    Read at call time, so one setting governs every reader (folders, shards, data pack, the device pipeline)."""
    return int(Image.MAX_IMAGE_PIXELS or 0) or sys.maxsize


def check_pixels(width: int, height: int, name: str) -> None:
    """One DataError line when a ``width`` x ``height`` image is over the pixel budget."""
    if width * height > pixel_budget():
        raise DataError(
            f"{printable(name)}: the image does not decode ({width} x {height} pixels, more than the "
            f"{pixel_budget():,} depthbench decodes: a decompression bomb?); replace or remove it, or "
            f"set data.skip_bad_images=True to skip such images"
        )


def decode_image_bytes(data: bytes, name: str) -> Image.Image:
    """The RGB image encoded in ``data`` (named ``name`` in errors), decoded whole, within the pixel budget; one
    DataError line naming it when it does not decode."""
    try:
        with warnings.catch_warnings():  # Pillow's bomb warning: the budget below is the check
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))  # parses the header only
        check_pixels(*image.size, name)
        image.load()
        return image.convert("RGB")
    except DataError:
        raise
    except Exception as e:  # Pillow raises OSError, SyntaxError, ValueError, DecompressionBomb*, struct.error, ...
        reason = printable(f"{type(e).__name__}: {' '.join(str(e).split())[:160]}")
        raise DataError(
            f"{printable(name)}: the image does not decode ({reason}); replace or remove it, or set "
            f"data.skip_bad_images=True to skip such images"
        ) from None


def decode_image(path: str | Path) -> Image.Image:
    """The RGB image at ``path`` (:func:`read_image_bytes`, :func:`decode_image_bytes`)."""
    return decode_image_bytes(read_image_bytes(path), str(path))
