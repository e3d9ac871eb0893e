"""Image shards for clusters: ``depthbench data pack IMAGEFOLDER OUT`` and the map-style reader
(``data.type='shards'``).

An ImageFolder of 1.28 M small files is what shared cluster file systems serve worst (a metadata lookup per image);
a few hundred tar files of ~1,000 images each are read in large sequential pieces. The layout is WebDataset's
(``<split>-000000.tar`` holding ``<key>.jpg`` and ``<key>.cls`` per sample) with timm's ``_info.json`` (splits, shard
names, shard lengths), so timm's ``wds/`` reader and WebDataset read the shards too (``data.type='wds'``).

Our reader does not stream: ``<split>-index.npz`` next to the shards holds every member's shard, byte offset, size
and label, so :class:`ShardDataset` is a map-style dataset (random access by index). The engine's samplers
(``TrainSampler``/``EvalSampler``) then drive it exactly as they drive a folder: every rank gets the same number of
batches whatever the shard sizes (streaming readers hang when ranks get unequal shards), and the sample order is a
function of (seed, epoch) only -- not of the number of ranks or loader workers -- and resumes mid-epoch through the
ordinary resume path. File handles are opened lazily, once per shard and process (loader workers fork).
"""
from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import numpy as np
from PIL import Image
from timm.data.readers.reader_image_folder import find_images_and_targets
from torch.utils.data import Dataset

from harness.core.errors import DataError
from harness.core.files import atomic_dir

INFO_NAME = "_info.json"
# WebDataset's image keys that timm's reader decodes (``input_key='jpg;png;webp'``); any other format is re-encoded
PASS_THROUGH = {".jpg": "jpg", ".jpeg": "jpg", ".png": "png", ".webp": "webp"}


def index_name(split: str) -> str:
    return f"{split}-index.npz"


def pack(folder: str | Path, out: str | Path, splits=("train", "val"), shard_size: int = 1000,
         progress=None) -> dict:
    """Write ``folder/<split>/<class>/<image>`` as tar shards plus index into ``out`` (which must not exist yet, or
    be empty); returns the ``_info.json`` written. Classes and samples are in timm's ImageFolder order, so the labels
    equal the folder reader's."""
    folder, out = Path(folder).expanduser(), Path(out).expanduser()
    present = [s for s in splits if (folder / s).is_dir()]
    if not present:
        raise DataError(f"{folder} has no split folder ({', '.join(splits)}); expected the ImageFolder layout "
                        f"{folder}/<split>/<class>/<image>")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise DataError(f"{out} exists and is not an empty folder; choose a new folder for the shards")
    if shard_size < 1:
        raise DataError(f"--shard-size {shard_size} must be at least 1")

    class_to_idx = None
    info = {"name": folder.name, "splits": {}}
    if out.exists():
        out.rmdir()
    with atomic_dir(out) as tmp:
        tmp.mkdir(parents=True)
        for split in present:
            samples, class_to_idx = find_images_and_targets(str(folder / split), class_to_idx=class_to_idx)
            if not samples:
                raise DataError(f"{folder / split} holds no images; expected {folder}/{split}/<class>/<image>")
            info["splits"][split] = _pack_split(tmp, split, folder / split, samples, shard_size, progress)
        info["class_to_idx"] = class_to_idx
        (tmp / INFO_NAME).write_text(json.dumps(info, indent=1))
    return info


def _pack_split(out: Path, split: str, root: Path, samples: list, shard_size: int, progress) -> dict:
    names, lengths = [], []
    shard_of, offsets, sizes, labels, paths = [], [], [], [], []
    for shard, start in enumerate(range(0, len(samples), shard_size)):
        name = f"{split}-{shard:06d}.tar"
        chunk = samples[start:start + shard_size]
        with tarfile.open(out / name, "w", format=tarfile.USTAR_FORMAT) as tar:
            for number, (path, target) in enumerate(chunk, start):
                data, ext = _image_bytes(Path(path))
                key = f"{number:09d}"  # WebDataset keys end at the first dot: no file names (they hold dots)
                _add(tar, f"{key}.{ext}", data)
                _add(tar, f"{key}.cls", str(int(target)).encode())
                paths.append(os.path.relpath(path, root))
                labels.append(int(target))
        with tarfile.open(out / name) as tar:  # the offsets tarfile wrote (headers may be longer than one block)
            members = [m for m in tar.getmembers() if not m.name.endswith(".cls")]
        shard_of += [shard] * len(members)
        offsets += [m.offset_data for m in members]
        sizes += [m.size for m in members]
        names.append(name)
        lengths.append(len(chunk))
        if progress:
            progress(split, start + len(chunk), len(samples))
    np.savez(out / index_name(split), shard=np.asarray(shard_of, np.int32), offset=np.asarray(offsets, np.int64),
             size=np.asarray(sizes, np.int64), label=np.asarray(labels, np.int64), path=np.asarray(paths),
             shards=np.asarray(names))
    return {"name": split, "num_samples": len(samples), "filenames": names, "shard_lengths": lengths,
            "index": index_name(split)}


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    member = tarfile.TarInfo(name)
    member.size, member.mode, member.mtime = len(data), 0o444, 0  # mtime 0: the same folder packs to the same bytes
    tar.addfile(member, io.BytesIO(data))


def _image_bytes(path: Path) -> tuple[bytes, str]:
    """The file's bytes when WebDataset/timm decode its format as is, else the image re-encoded as PNG (lossless)."""
    ext = PASS_THROUGH.get(path.suffix.lower())
    data = path.read_bytes()
    if ext:
        return data, ext

    buffer = io.BytesIO()
    with Image.open(io.BytesIO(data)) as image:
        image.save(buffer, format="PNG")
    return buffer.getvalue(), "png"


def check_shards(root: Path, split: str) -> None:
    """One line when ``root`` holds no packed ``split`` (``_info.json`` and its index)."""
    if not (root / INFO_NAME).is_file() or not (root / index_name(split)).is_file():
        raise DataError(f"{root} holds no packed split {split!r} ({INFO_NAME} and {index_name(split)}); make it with "
                        f"`depthbench data pack IMAGEFOLDER {root}`")


class ShardDataset(Dataset):
    """A packed split as a map-style dataset: ``(transform(RGB image), label)`` by index; :meth:`read` gives the
    stored bytes (the device pipeline decodes them on the GPU)."""

    def __init__(self, root: str | Path, split: str, transform=None):
        self.root, self.split, self.transform = Path(root), split, transform
        check_shards(self.root, split)
        with np.load(self.root / index_name(split)) as index:
            self.shard, self.offset, self.size = index["shard"], index["offset"], index["size"]
            self.targets, self.paths, self.shards = index["label"], index["path"], index["shards"]
        info = json.loads((self.root / INFO_NAME).read_text())
        self.class_to_idx = info.get("class_to_idx") or {}
        self._handles, self._pid = {}, None

    def __len__(self):
        return len(self.targets)

    def __getstate__(self):  # loader workers (spawn) open their own handles
        return {**self.__dict__, "_handles": {}, "_pid": None}

    def filename(self, index: int) -> str:
        return f"{self.root / self.shards[self.shard[index]]}:{self.paths[index]}"

    def read(self, index: int) -> tuple[bytes, int]:
        """The image's stored bytes and its label."""
        if self._pid != os.getpid():  # a forked worker must not share the parent's file positions
            self._handles, self._pid = {}, os.getpid()
        shard = int(self.shard[index])
        handle = self._handles.get(shard)
        if handle is None:
            handle = self._handles[shard] = open(self.root / self.shards[shard], "rb")
        handle.seek(int(self.offset[index]))
        return handle.read(int(self.size[index])), int(self.targets[index])

    def __getitem__(self, index):
        data, target = self.read(index)
        try:
            image = Image.open(io.BytesIO(data)).convert("RGB")
        except Exception as e:
            raise DataError(f"{self.filename(index)} is not a readable image ({type(e).__name__}: {e}); repack the "
                            f"split from a good copy") from None
        return (self.transform(image) if self.transform else image), target
