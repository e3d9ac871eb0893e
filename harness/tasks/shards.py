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
import zipfile
from pathlib import Path

import numpy as np
from torch.utils.data import Dataset

from harness.core.errors import DataError
from harness.core.files import (
    BadFile,
    atomic_dir,
    atomic_write,
    is_regular,
    open_file,
    printable,
    read_json,
    read_npy_from,
)
from harness.tasks.image_files import MAX_IMAGE_BYTES, decode_image_bytes, find_images, read_image_bytes

INFO_NAME = "_info.json"
# WebDataset's image keys that timm's reader decodes (``input_key='jpg;png;webp'``); any other format is re-encoded
PASS_THROUGH = {".jpg": "jpg", ".jpeg": "jpg", ".png": "png", ".webp": "webp"}
# the index's arrays and their kinds (numpy's dtype kinds: signed/unsigned integers, unicode strings)
INDEX_ARRAYS = {"shard": "iu", "offset": "iu", "size": "iu", "label": "iu", "path": "U", "shards": "U"}
MAX_INDEX_BYTES = 1 << 30  # ImageNet's train index is ~200 MB (its paths as fixed-width unicode)


def index_name(split: str) -> str:
    return f"{split}-index.npz"


def pack(folder: str | Path, out: str | Path, splits=("train", "val"), shard_size: int = 1000, progress=None) -> dict:
    """Write ``folder/<split>/<class>/<image>`` as tar shards plus index into ``out`` (which must not exist yet, or
    be empty); returns the ``_info.json`` written. Classes and samples are in timm's ImageFolder order, so the labels
    equal the folder reader's; the folder is walked and read as the folder reader does (harness/tasks/image_files.py:
    no link out of it, no loop, no FIFO)."""
    folder, out = Path(folder).expanduser(), Path(out).expanduser()
    present = [s for s in splits if (folder / s).is_dir()]
    if not present:
        raise DataError(
            f"{printable(folder)} has no split folder ({', '.join(map(printable, splits))}); expected the "
            f"ImageFolder layout {printable(folder)}/<split>/<class>/<image>"
        )
    if out.is_symlink() or (out.exists() and (not out.is_dir() or any(out.iterdir()))):
        raise DataError(f"{printable(out)} exists and is not an empty folder; choose a new folder for the shards")
    if shard_size < 1:
        raise DataError(f"--shard-size {shard_size} must be at least 1")

    class_to_idx = None
    info = {"name": folder.name, "splits": {}}
    if out.exists():
        out.rmdir()
    with atomic_dir(out) as tmp:
        tmp.mkdir(parents=True)
        for split in present:
            samples, class_to_idx = find_images(folder / split, class_to_idx=class_to_idx)
            if not samples:
                raise DataError(
                    f"{printable(folder / split)} holds no images; expected "
                    f"{printable(folder)}/{printable(split)}/<class>/<image>"
                )
            info["splits"][split] = _pack_split(tmp, split, folder / split, samples, shard_size, progress)
        info["class_to_idx"] = class_to_idx
        atomic_write(tmp / INFO_NAME, json.dumps(info, indent=1))
    return info


def _pack_split(out: Path, split: str, root: Path, samples: list, shard_size: int, progress) -> dict:
    names, lengths = [], []
    shard_of, offsets, sizes, labels, paths = [], [], [], [], []
    for shard, start in enumerate(range(0, len(samples), shard_size)):
        name = f"{split}-{shard:06d}.tar"
        chunk = samples[start : start + shard_size]

        def write(fh, chunk=chunk, start=start):
            with tarfile.open(fileobj=fh, mode="w", format=tarfile.USTAR_FORMAT) as tar:
                for number, (path, target) in enumerate(chunk, start):
                    data, ext = _image_bytes(Path(path))
                    key = f"{number:09d}"  # WebDataset keys end at the first dot: no file names (they hold dots)
                    _add(tar, f"{key}.{ext}", data)
                    _add(tar, f"{key}.cls", str(int(target)).encode())

        atomic_write(out / name, write)
        paths += [os.path.relpath(path, root) for path, _ in chunk]
        labels += [int(target) for _, target in chunk]
        with (
            open_file(out / name, inside=out, max_bytes=None, what="shard") as fh,
            tarfile.open(fileobj=fh) as tar,
        ):  # the offsets tarfile wrote (headers may be longer than one block)
            members = [m for m in tar.getmembers() if not m.name.endswith(".cls")]
        shard_of += [shard] * len(members)
        offsets += [m.offset_data for m in members]
        sizes += [m.size for m in members]
        names.append(name)
        lengths.append(len(chunk))
        if progress:
            progress(split, start + len(chunk), len(samples))
    arrays = dict(
        shard=np.asarray(shard_of, np.int32),
        offset=np.asarray(offsets, np.int64),
        size=np.asarray(sizes, np.int64),
        label=np.asarray(labels, np.int64),
        path=np.asarray(paths),
        shards=np.asarray(names),
    )
    atomic_write(out / index_name(split), lambda fh: np.savez(fh, **arrays))
    return {
        "name": split,
        "num_samples": len(samples),
        "filenames": names,
        "shard_lengths": lengths,
        "index": index_name(split),
    }


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    member = tarfile.TarInfo(name)
    member.size, member.mode, member.mtime = len(data), 0o444, 0  # mtime 0: the same folder packs to the same bytes
    tar.addfile(member, io.BytesIO(data))


def _image_bytes(path: Path) -> tuple[bytes, str]:
    """The file's bytes when WebDataset/timm decode its format as is, else the image re-encoded as PNG (lossless)."""
    ext = PASS_THROUGH.get(path.suffix.lower())
    data = read_image_bytes(path)
    if ext:
        return data, ext

    buffer = io.BytesIO()
    decode_image_bytes(data, str(path)).save(buffer, format="PNG")
    return buffer.getvalue(), "png"


def check_shards(root: Path, split: str) -> None:
    """One line when ``root`` holds no packed ``split`` (``_info.json`` and its index, regular files reached
    without a link)."""
    if not is_regular(root / INFO_NAME, inside=root) or not is_regular(root / index_name(split), inside=root):
        raise DataError(
            f"{printable(root)} holds no packed split {printable(repr(split))} ({INFO_NAME} and "
            f"{printable(index_name(split))}, regular files); make it with "
            f"`depthbench data pack IMAGEFOLDER {printable(root)}`"
        )


# The least a sample of a tar shard takes: one non-empty member, a 512-byte header and a 512-byte block.
MIN_SAMPLE_BYTES = 1024


def check_wds(root: Path, split: str) -> None:
    """``data.type='wds'`` (timm's WebDataset reader, which opens what it is told without asking) checked before any
    training starts, under the rules of the image folder and of our shards: the ``_info.json`` it reads is read by
    harness.core.files (no link, no FIFO, bounded, an object); every shard it names is a relative path inside
    ``root``, reached without a link, and a regular file (a FIFO blocks a loader worker for ever); and the sample
    count, which timm trusts as the epoch's length (it repeats the shards until the count is reached), is a
    non-negative integer -- the sum of the shard lengths where the info gives them -- that the shards' bytes can
    hold. One DataError line naming the file otherwise."""
    try:
        from webdataset.shardlists import expand_urls  # lazy: the GPU node has no webdataset; only wds data needs it
    except ImportError:
        raise DataError("data.type='wds' needs the webdataset package: pip install webdataset") from None

    info, info_name = {}, "info.json"
    for name in (INFO_NAME, "info.json"):  # timm's names, in its order
        try:
            info, info_name = read_json(root / name, inside=root, what="WebDataset info"), name
            break
        except FileNotFoundError:
            continue
        except BadFile as e:
            raise DataError(printable(e)) from None
    source = printable(root / info_name)
    spec, _, count = split.partition("|")
    if "tar" in split or ".." in split:  # timm's test for shards named in the split itself
        names, lengths = expand_urls(spec), None
        if count and not count.strip().isdigit():
            raise DataError(f"data split {printable(split)!r}: {printable(count)!r} after '|' is not a sample count")
        num_samples = int(count) if count else None
    else:
        entry = (info.get("splits") or {}).get(split) if isinstance(info.get("splits"), dict) else None
        if not isinstance(entry, dict):
            raise DataError(f"{source} names no split {printable(repr(split))}; {_WDS_LAYOUT}")
        names, lengths, num_samples = entry.get("filenames"), entry.get("shard_lengths"), entry.get("num_samples")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise DataError(f"{source}: split {printable(repr(split))} has no list of shard file names; {_WDS_LAYOUT}")
        if not isinstance(lengths, list) or len(lengths) != len(names) or not all(_count(n) for n in lengths):
            raise DataError(
                f"{source}: split {printable(repr(split))}'s shard_lengths is not one sample count per shard; "
                f"{_WDS_LAYOUT}"
            )
        if not _count(num_samples) or num_samples != sum(lengths):
            raise DataError(
                f"{source}: split {printable(repr(split))}'s num_samples {printable(num_samples)} is not the sum of "
                f"its shard_lengths ({sum(lengths)}); {_WDS_LAYOUT}"
            )
    total = 0
    for name in names:
        outside = os.path.isabs(name) or ".." in Path(name).parts or "\0" in name
        named_by_config = lengths is None and outside  # data.train_split=/data/x-{0..9}.tar: the user's own choice
        if outside and not named_by_config:
            raise DataError(
                f"{source} names the shard {printable(repr(name))}, not a file in {printable(root)}; a WebDataset "
                f"split names shards inside its root"
            )
        try:
            with open_file(root / name, inside=None if named_by_config else root, max_bytes=None, what="shard") as fh:
                total += os.fstat(fh.fileno()).st_size
        except FileNotFoundError:
            raise DataError(
                f"shard {printable(root / name)} is missing; copy it there or name only the shards there"
            ) from None
        except BadFile as e:
            raise DataError(printable(e)) from None
    if num_samples is not None and num_samples * MIN_SAMPLE_BYTES > total:
        raise DataError(
            f"{source if lengths is not None else 'data split ' + printable(repr(split))} claims {num_samples:,} "
            f"samples, but its {len(names)} shards hold {total:,} bytes (at most {total // MIN_SAMPLE_BYTES:,} "
            f"samples); give the real count"
        )


_WDS_LAYOUT = "expected timm's _info.json ({'splits': {NAME: {'filenames', 'shard_lengths', 'num_samples'}}})"


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _bad_index(path: Path, why: str) -> DataError:
    return DataError(
        f"shard index {printable(path)} {why}; it is not an index `depthbench data pack` wrote: repack the split"
    )


def load_index(root: Path, split: str) -> dict[str, np.ndarray]:
    """The arrays of ``split``'s index (an ``.npz``: a zip of ``.npy`` files), each typed and bounded before it is
    read (:func:`harness.core.files.read_npy_from`: no pickle, no allocation the file does not back), at most
    :data:`MAX_INDEX_BYTES` in all."""
    path = root / index_name(split)
    arrays = {}
    with open_file(path, inside=root, max_bytes=MAX_INDEX_BYTES, what="shard index") as fh:
        try:
            with zipfile.ZipFile(fh) as archive:
                members = {info.filename: info for info in archive.infolist()}
                if sum(info.file_size for info in members.values()) > MAX_INDEX_BYTES:
                    raise _bad_index(path, f"claims more than the {MAX_INDEX_BYTES:,} bytes depthbench reads")
                for key, kinds in INDEX_ARRAYS.items():
                    member = members.get(f"{key}.npy")
                    if member is None:
                        raise _bad_index(path, f"has no {key!r} array")
                    with archive.open(member) as data:
                        arrays[key] = read_npy_from(data, member.file_size, source=f"its {key!r} array", kinds=kinds)
        except BadFile as e:
            raise _bad_index(path, f"does not load ({e})") from None
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as e:  # not a zip, corrupt
            reason = printable(" ".join(str(e).split())[:120])
            raise _bad_index(path, f"does not load ({type(e).__name__}: {reason})") from None
    return arrays


def _check_index(path: Path, index: dict, shard_bytes: list[int], classes: int) -> None:
    """Every entry within its shard and the classes; one line for the first that is not."""
    n = len(index["label"])
    if any(len(index[key]) != n for key in ("shard", "offset", "size", "path")):
        raise _bad_index(path, "holds arrays of different lengths")
    shard, offset, size, label = (index[k].astype(np.int64) for k in ("shard", "offset", "size", "label"))
    problems = [
        ((shard < 0) | (shard >= len(shard_bytes)), f"names a shard outside its {len(shard_bytes)} shards"),
        (offset < 0, "holds a negative offset"),
        ((size < 0) | (size > MAX_IMAGE_BYTES), f"holds a size outside 0..{MAX_IMAGE_BYTES:,} bytes"),
        ((label < 0) | (label >= classes), f"holds a label outside the {classes} classes of {INFO_NAME}"),
    ]
    for bad, why in problems:
        if bad.any():
            raise _bad_index(path, f"{why} (entry {int(np.argmax(bad))})")
    end = offset + size  # both bounded above: no overflow
    past = end > np.asarray(shard_bytes, np.int64)[shard]
    if past.any():
        raise _bad_index(path, f"holds an image past the end of its shard (entry {int(np.argmax(past))})")


class ShardDataset(Dataset):
    """A packed split as a map-style dataset: ``(transform(RGB image), label)`` by index; :meth:`read` gives the
    stored bytes (the device pipeline decodes them on the GPU). Every file is data: ``_info.json``, the index and
    the shards are opened by harness.core.files (inside ``root``, no link, no FIFO), the index is typed and bounded
    (:func:`load_index`), each shard is a plain name in ``root`` and each entry lies inside its shard and classes --
    all checked here, before any training starts; images decode within the one pixel budget."""

    def __init__(self, root: str | Path, split: str, transform=None):
        self.root, self.split, self.transform = Path(root), split, transform
        check_shards(self.root, split)
        info = read_json(self.root / INFO_NAME, inside=self.root, what=INFO_NAME)
        self.class_to_idx = info.get("class_to_idx") or {}
        if not isinstance(self.class_to_idx, dict) or not all(isinstance(v, int) for v in self.class_to_idx.values()):
            raise DataError(
                f"{printable(self.root / INFO_NAME)}: class_to_idx is not an object of class indices; repack the split"
            )
        index = load_index(self.root, split)
        path = self.root / index_name(split)
        self.shards = [str(name) for name in index["shards"]]
        for name in self.shards:
            if name in ("", ".", "..") or os.path.basename(name) != name or "\0" in name:
                raise _bad_index(path, f"names the shard {printable(repr(name))}, not a file name in {printable(root)}")
        _check_index(path, index, [self._shard_bytes(name) for name in self.shards], len(self.class_to_idx))
        self.shard, self.offset, self.size = index["shard"], index["offset"], index["size"]
        self.targets, self.paths = index["label"], index["path"]
        self._handles, self._pid = {}, None

    def _open(self, name: str):
        return open_file(self.root / name, inside=self.root, max_bytes=None, what="shard")

    def _shard_bytes(self, name: str) -> int:
        try:
            with self._open(name) as fh:
                return os.fstat(fh.fileno()).st_size
        except FileNotFoundError:
            raise DataError(f"shard {printable(self.root / name)} is missing; repack the split") from None

    def __len__(self):
        return len(self.targets)

    def __getstate__(self):  # loader workers (spawn) open their own handles
        return {**self.__dict__, "_handles": {}, "_pid": None}

    def filename(self, index: int) -> str:
        return printable(f"{self.root / self.shards[self.shard[index]]}:{self.paths[index]}")

    def read(self, index: int) -> tuple[bytes, int]:
        """The image's stored bytes and its label."""
        if self._pid != os.getpid():  # a forked worker must not share the parent's file positions
            self._handles, self._pid = {}, os.getpid()
        shard = int(self.shard[index])
        handle = self._handles.get(shard)
        if handle is None:
            handle = self._handles[shard] = self._open(self.shards[shard])
        handle.seek(int(self.offset[index]))
        size = int(self.size[index])
        data = handle.read(size)
        if len(data) != size:
            raise DataError(
                f"{self.filename(index)}: the shard ends before the image does (it shrank after it was "
                f"packed); repack the split"
            )
        return data, int(self.targets[index])

    def __getitem__(self, index):
        data, target = self.read(index)
        image = decode_image_bytes(data, self.filename(index))
        return (self.transform(image) if self.transform else image), target
