"""The device image pipeline (``loader.pipeline='device'``): workers read bytes, the GPU decodes and augments.

timm's pipeline decodes (PIL) and augments in the loader workers: ~210 images/s per CPU core, so an 8-GPU node is
loader-bound (docs/benchmarks.md). Here a worker only reads the compressed bytes, parses the image header (PIL,
no decode) and draws the sample's random parameters *with timm's own code* (``RandomResizedCropAndInterpolation.
get_params``, the flip, ``RandAugment``'s op choice, magnitude noise and level functions, torchvision's
``ColorJitter.get_params``, ``RandomErasing._erase``), under the sample's seed (exact resume). The device then
works on the whole batch at once (:class:`DeviceAugment`):

1. decode: ``torchvision.io.decode_jpeg(list, device=...)`` -- nvJPEG's batched decode on CUDA, libjpeg on CPU (CI),
   of views into the batch's one packed bytes tensor. Non-JPEG files (and CMYK JPEGs) were decoded by the worker with
   PIL; a JPEG the batched decode rejects is decoded alone on the CPU, its file named once. An image over the pixel
   budget (harness/tasks/image_files.py ``pixel_budget``, every image reader's) is refused in one line from its header, in the
   worker, before anything is decoded.
2. crop + resize with ``torchvision.ops.roi_align``, one call per bucket of same-size images (the worker's collate
   plans the buckets): a box per image (the random crop, or the eval resize-and-centre-crop mapped back onto the
   original image) into ``input_size``². roi_align, not ``interpolate``/``grid_sample``: it averages
   ``ceil(box/out)`` bilinear samples per output pixel, i.e. it antialiases downscaling as PIL's resize does, and it
   takes a box per image. No image is padded to another's size, so a batch's memory is bounded by the pixel budget,
   not by its largest image times its size (docs/data.md).
3. flip, then RandAugment (or colour jitter): each of timm's 15 ``rand-*-inc1`` ops is a batched tensor op on the
   images that drew it (:data:`OPS`; a loop over ops and layers, never over samples), with PIL's arithmetic
   (uint8 rounding, Pillow's blend, equalize and autocontrast look-up tables, bicubic affine with timm's fill).
4. ``/255``, normalise, random erasing (the boxes timm drew; noise from a per-batch seed).

No library does this: Kornia (not installed on the GPU nodes) has a RandAugment whose ops and magnitude ranges are
not timm's, and DALI is a heavy wheel. Mixup/CutMix stay in the training loop as before. On CUDA the device part
runs in two background threads, decode and augmentation, on streams of their own (:class:`BackgroundFeeder`).
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
import random
import sys
import threading
from queue import Empty, Full, Queue

import numpy as np
import torch
from PIL import Image
from timm.data.auto_augment import AugmentOp, RandAugment
from torch.utils.data import default_collate
from torchvision.io import ImageReadMode, decode_jpeg

from harness.core.errors import ConfigError, DataError
from harness.tasks.image_files import pixel_budget  # the one budget of every image reader

JPEG_MAGIC = b"\xff\xd8"
GEOMETRIC = ("Rotate", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel", "TranslateX", "TranslateY")


# ------------------------------------------------------------------------------------------- worker side
class EncodedSample:
    """One sample as the worker hands it over: the compressed bytes (or PIL-decoded pixels), its size and the
    random parameters drawn for it."""

    __slots__ = ("data", "pixels", "height", "width", "name", "box", "flip", "ops", "erase", "noise_seed")

    def __init__(self, **fields):
        for key in self.__slots__:
            setattr(self, key, fields.get(key))


class _OpRecorder:
    """Stands in for an ``AugmentOp``'s image function: keeps the op's name and its level arguments."""

    def __init__(self, name, log):
        self.name, self.log = name, log

    def __call__(self, img, *args, **kwargs):
        resample = kwargs.get("resample")
        if self.name in GEOMETRIC and isinstance(resample, (list, tuple)):
            resample = random.choice(resample)  # timm's _check_args_tf: one RNG call, as on the CPU
        self.log.append((self.name, tuple(float(a) for a in args)))
        return img


class ParameterDraw:
    """Walks a timm transform (``create_transform``'s list) and draws, for one image size, every random parameter
    the CPU transform would draw, in its order and with its code; raises ConfigError for a step it cannot map."""

    def __init__(self, transform, size: int):
        self.steps, self.size, self.log = list(copy.deepcopy(transform).transforms), size, []
        known = (
            "RandomResizedCropAndInterpolation",
            "RandomResizedCrop",
            "RandomHorizontalFlip",
            "RandAugment",
            "ColorJitter",
            "MaybeToTensor",
            "ToTensor",
            "Normalize",
            "RandomErasing",
        )
        for step in self.steps:
            if type(step).__name__ not in known:
                raise ConfigError(
                    f"loader.pipeline='device' has no device version of {type(step).__name__} "
                    f"(it maps {', '.join(known[:6])}, normalise, random erasing); set "
                    f"loader.pipeline='cpu'"
                )
            if isinstance(step, RandAugment):
                for op in step.ops:
                    if isinstance(op, AugmentOp):
                        if op.name not in OPS:
                            raise ConfigError(
                                f"loader.pipeline='device' has no device version of RandAugment's "
                                f"{op.name}; set loader.pipeline='cpu'"
                            )
                        op.aug_fn = _OpRecorder(op.name, self.log)

    def __call__(self, header_image) -> dict:
        params = {"box": None, "flip": False, "ops": [], "erase": []}
        width, height = header_image.size
        del self.log[:]
        for step in self.steps:
            kind = type(step).__name__
            if kind.startswith("RandomResizedCrop"):
                top, left, h, w = step.get_params(header_image, step.scale, step.ratio)
                if isinstance(step.interpolation, (list, tuple)):
                    random.choice(step.interpolation)
                params["box"] = (left, top, left + w, top + h)
            elif kind == "RandomHorizontalFlip":
                params["flip"] = bool(torch.rand(1) < step.p)
            elif kind == "RandAugment":
                step(header_image)  # timm's op choice, skip probability, magnitude noise, level functions
                params["ops"] = list(self.log)
            elif kind == "ColorJitter":
                order, b, c, s, hue = step.get_params(step.brightness, step.contrast, step.saturation, step.hue)
                factors = {0: ("Brightness", b), 1: ("Contrast", c), 2: ("Color", s)}
                params["ops"] = [
                    (factors[i][0], (float(factors[i][1]),))
                    for i in order.tolist()
                    if i in factors and factors[i][1] is not None
                ]
            elif kind == "RandomErasing":
                recorder = _ErasingBoxes()
                step._erase(recorder, 3, self.size, self.size, torch.float32)
                params["erase"] = recorder.boxes
        if params["box"] is None:
            params["box"] = (0, 0, width, height)
        return params


class _ErasingBoxes:
    """Stands in for the image tensor in timm's ``RandomErasing._erase``: keeps the boxes it would erase."""

    def __init__(self):
        self.boxes = []

    def __setitem__(self, key, value):
        _, rows, cols = key
        self.boxes.append((rows.start, cols.start, rows.stop - rows.start, cols.stop - cols.start))


class EvalBox:
    """The "draw" of evaluation: timm's eval transform (resize the shorter side to floor(size / crop_pct), centre-crop
    ``size``; 'squash': resize to a square first) as one box in the original image's coordinates, computed in the
    worker from the header so the device never waits on the host for it."""

    def __init__(self, size: int, crop_pct: float, crop_mode: str):
        if crop_mode not in ("center", "squash"):
            raise ConfigError(
                f"loader.pipeline='device' knows data.crop_mode 'center' and 'squash', not "
                f"{crop_mode!r}; set loader.pipeline='cpu'"
            )
        self.size, self.crop_pct, self.crop_mode = size, crop_pct, crop_mode

    def __call__(self, header_image) -> dict:
        width, height = header_image.size
        return {
            "box": eval_box(height, width, self.size, self.crop_pct, self.crop_mode),
            "flip": False,
            "ops": [],
            "erase": [],
        }


class EncodedImages(torch.utils.data.Dataset):
    """An image dataset (:class:`~harness.tasks.image.ImageFolder` or :class:`~harness.tasks.shards.ShardDataset`)
    as encoded samples: ``(EncodedSample, target)``; ``draw``: :class:`ParameterDraw` (training) or :class:`EvalBox` (evaluation).

    A sample holds ``bytes`` and numpy arrays, never tensors: a tensor crossing the worker boundary is one
    shared-memory segment, and :func:`collate_encoded` packs the whole batch into one bytes tensor instead."""

    def __init__(self, dataset, draw=None):
        self.dataset, self.draw = dataset, draw

    def __len__(self):
        return len(self.dataset)

    def _read(self, index):
        source = self.dataset
        if hasattr(source, "read"):  # ShardDataset, our ImageFolder
            data, target = source.read(index)
            return data, target, source.filename(index)
        handle, target, *_ = source.reader[index]  # timm's readers: an open file (folder) or file-like (tar)
        with handle:
            data = handle.read()
        return data, (-1 if target is None else target), source.filename(index, absolute=True)

    def __getitem__(self, index):
        data, target, name = self._read(index)
        try:
            header = Image.open(io.BytesIO(data))  # parses the header only
        except Exception as e:
            raise DataError(f"{name} is not a readable image ({type(e).__name__}: {e}); remove or replace it") from None
        width, height = header.size
        if width * height > pixel_budget():  # refused from the header, before anything is decoded
            raise DataError(
                f"{name} is {width}x{height} ({width * height / 1e6:.1f} Mpx), over the pixel budget of "
                f"{pixel_budget() / 1e6:.1f} Mpx (PIL.Image.MAX_IMAGE_PIXELS, as every image reader); "
                f"downscale or remove it"
            )
        pixels = None
        if not data.startswith(JPEG_MAGIC) or header.mode not in ("RGB", "L"):  # PNG, CMYK JPEG, ...: PIL
            try:
                pixels = np.ascontiguousarray(np.asarray(header.convert("RGB")).transpose(2, 0, 1))
            except Exception as e:
                raise DataError(
                    f"{name} is not a readable image ({type(e).__name__}: {e}); remove or replace it"
                ) from None
        params = self.draw(header) if self.draw is not None else {"box": None, "flip": False, "ops": [], "erase": []}
        sample = EncodedSample(
            data=None if pixels is not None else bytes(data),
            pixels=pixels,
            height=height,
            width=width,
            name=name,
            noise_seed=random.getrandbits(62),
            **params,
        )
        return sample, target


# ------------------------------------------------------------------------------------------- the batch
MAX_PACKED_BYTES = 2**31 - 1  # int32 offsets


class EncodedBatch:
    """A collated batch, made in the loader worker: every image's bytes (JPEG, or the pixels PIL decoded) in ONE
    uint8 tensor with int32 offsets, the per-sample parameters as a few small tensors, and the device's plan as
    plain Python (pickled, not shared memory): so a batch crosses the worker boundary as 11 tensors whatever its
    size, and the device never waits on the host to group samples.

    The plan (:meth:`_plan`) orders images by size: ``order`` (int32) lists batch positions so that images of one
    size are adjacent; ``chunks`` are runs of one size (a ``roi_align`` each: no image is padded to another's size)
    and ``groups`` are runs of chunks decoded together. Each group and each chunk holds at most
    :func:`pixel_budget` pixels unless it is a single image, which bounds a batch's device memory (docs/data.md)."""

    TENSORS = (
        "data",
        "offsets",
        "boxes",
        "flip",
        "op_index",
        "op_args",
        "erase",
        "erased",
        "noise_seeds",
        "order",
        "restore",
    )
    ON_DEVICE = ("boxes", "flip", "op_index", "op_args", "erase", "erased", "noise_seeds", "order", "restore")

    def __init__(self, samples):
        self.sizes = [(s.height, s.width) for s in samples]
        self.names = [s.name for s in samples]
        self.raw = [s.pixels is not None for s in samples]
        chunks = [
            s.pixels.reshape(-1) if s.pixels is not None else np.frombuffer(s.data, dtype=np.uint8) for s in samples
        ]
        lengths = np.array([len(c) for c in chunks], dtype=np.int64)
        if lengths.sum() > MAX_PACKED_BYTES:
            raise DataError(
                f"a batch of {len(samples)} images holds {lengths.sum() / 2**30:.1f} GiB of encoded bytes, "
                f"over the 2 GiB of one packed batch; lower the batch size or store the images as JPEG"
            )
        self.data = torch.from_numpy(np.concatenate(chunks) if chunks else np.zeros(0, np.uint8))
        self.offsets = torch.from_numpy(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
        self.boxes = torch.tensor(
            [s.box if s.box is not None else (0, 0, w, h) for s, (h, w) in zip(samples, self.sizes)],
            dtype=torch.float32,
        ).reshape(-1, 4)
        self.flip = torch.tensor([bool(s.flip) for s in samples], dtype=torch.bool)
        # RandAugment's ops, grouped by (layer, op) on this CPU: one int32 index run and its arguments per group
        indices, args, self.op_layers = [], [], []
        for layer in range(max([len(s.ops) for s in samples] + [0])):
            groups = {}
            for i, s in enumerate(samples):
                if layer < len(s.ops):
                    name, op_args = s.ops[layer]
                    groups.setdefault(name, []).append((i, op_args[0] if op_args else 0.0))
            runs = []
            for name, members in groups.items():
                runs.append((name, len(indices), len(indices) + len(members)))
                indices += [i for i, _ in members]
                args += [a for _, a in members]
            self.op_layers.append(runs)
        self.op_index = torch.tensor(indices, dtype=torch.int32)
        self.op_args = torch.tensor(args, dtype=torch.float64)
        # random erasing: ``erased`` (int32) the batch positions of the images with a box, ``erase`` the boxes as
        # (slot in ``erased``, top, left, height, width), ``noise_seeds`` those images' seeds: the noise is made for
        # them alone, not for the whole batch
        erased = [i for i, s in enumerate(samples) if s.erase]
        self.erase = torch.tensor(
            [(slot, *box) for slot, i in enumerate(erased) for box in samples[i].erase], dtype=torch.int32
        ).reshape(-1, 5)
        self.erased = torch.tensor(erased, dtype=torch.int32)
        self.noise_seeds = torch.tensor([samples[i].noise_seed for i in erased], dtype=torch.int64)
        order, self.chunks, self.groups = self._plan(self.sizes, pixel_budget())
        self.order_list = order
        self.order = torch.tensor(order, dtype=torch.int32)
        self.restore = torch.tensor(np.argsort(order, kind="stable") if order else [], dtype=torch.int32)
        self.device = torch.device("cpu")

    @staticmethod
    def _plan(sizes, budget):
        """``(order, chunks, groups)``: batch positions sorted by size; ``chunks``: ``(start, stop)`` runs of
        ``order`` of one size and at most ``budget`` pixels (or one image); ``groups``: ``(first chunk, stop
        chunk)`` runs of chunks of at most ``budget`` pixels (or one chunk), decoded together. Size buckets rather
        than a packed atlas: roi_align then reads each bucket as an (n, 3, H, W) tensor as it is, with no copy into
        an atlas and no edge handling of neighbours; ImageNet's few common sizes make the buckets large."""
        order = sorted(range(len(sizes)), key=lambda i: sizes[i])
        chunks = []
        for position, i in enumerate(order):
            height, width = sizes[i]
            if chunks:
                start, _ = chunks[-1]
                same = sizes[order[start]] == sizes[i]
                if same and (position - start + 1) * height * width <= budget:
                    chunks[-1] = (start, position + 1)
                    continue
            chunks.append((position, position + 1))
        groups, pixels = [], 0
        for k, (start, stop) in enumerate(chunks):
            height, width = sizes[order[start]]
            chunk_pixels = (stop - start) * height * width
            if groups and pixels + chunk_pixels <= budget:
                groups[-1] = (groups[-1][0], k + 1)
                pixels += chunk_pixels
            else:
                groups.append((k, k + 1))
                pixels = chunk_pixels
        return order, chunks, groups

    def _replace(self, moved):
        batch = copy.copy(self)
        for key, value in moved.items():
            setattr(batch, key, value)
        return batch

    def pin_memory(self):
        # nvJPEG reads its input bytes from pageable memory itself; only the bytes of images decoded on the host
        # (copied to the device as pixels, non_blocking) need pinning: pin ``data`` only when there are any
        keys = [key for key in self.TENSORS if key != "data" or any(self.raw)]
        return self._replace({key: getattr(self, key).pin_memory() for key in keys})

    def to(self, device, non_blocking: bool = False):
        """The parameters on ``device`` (from pinned memory: asynchronous copies); the bytes stay on the host, where
        ``decode_jpeg`` reads them."""
        moved = {key: getattr(self, key).to(device, non_blocking=non_blocking) for key in self.ON_DEVICE}
        moved["device"] = torch.device(device)
        return self._replace(moved)

    def __len__(self):
        return len(self.sizes)


def collate_encoded(batch):
    return EncodedBatch([sample for sample, _ in batch]), default_collate([target for _, target in batch])


# ------------------------------------------------------------------------------------------- device side
_warned = set()


def decode_group(batch: EncodedBatch, positions: list, device) -> list:
    """The images at batch ``positions`` as uint8 (3, H, W) tensors on ``device``: one batched ``decode_jpeg`` of
    the JPEGs among them (views of the packed bytes: no copy on the host)."""
    offsets = batch.offsets.tolist()  # a host tensor: no device sync
    images = {}
    jpegs = []
    for i in positions:
        view = batch.data[offsets[i] : offsets[i + 1]]
        if batch.raw[i]:
            height, width = batch.sizes[i]
            images[i] = view.view(3, height, width).to(device, non_blocking=True)
            _warn_once(batch.names[i], "is not a baseline RGB/grey JPEG; decoded on the CPU")
        else:
            jpegs.append((i, view))
    if jpegs:
        try:
            decoded = _decode_jpegs([view for _, view in jpegs], device)
        except RuntimeError:
            decoded = [_decode_one(batch.names[i], view, device) for i, view in jpegs]  # rare: find the bad one(s)
        for (i, _), image in zip(jpegs, decoded):
            images[i] = image
    return [images[i] for i in positions]


_DECODE_STREAMS = {}  # device -> the stream whose allocator pool decode outputs come from (see _decode_jpegs)


def _decode_stream(device):
    if device not in _DECODE_STREAMS:
        _DECODE_STREAMS[device] = torch.cuda.Stream(device=device)
    return _DECODE_STREAMS[device]


def _decode_jpegs(data, device):
    """``decode_jpeg(data, RGB, device)``, on CUDA from a decode stream's memory pool.

    torchvision's CUDA decode allocates its outputs from the caller's current stream's pool but writes them on a
    private nvJPEG stream that never waits for the caller's stream: a block whose last readers are still queued
    there (freed intermediates of the previous batch) could be overwritten by the decode (pytorch/vision#9606).
    Only the feeder's copies and decodes run on the decode stream and every block it hands out is
    ``record_stream``-ed by the stream that uses it next (after waiting for it), so a block it reuses has no reader
    or writer still queued; the caller's stream then waits for the decode stream (which torchvision made wait for
    nvJPEG's) and owns the images (``record_stream``). In the feeder's decode thread the caller's stream is the
    decode stream itself (both steps are then no-ops) and the images are handed on with an event."""
    if device.type != "cuda":
        return decode_jpeg(data, mode=ImageReadMode.RGB, device=device)
    side, pool = torch.cuda.current_stream(device), _decode_stream(device)
    with torch.cuda.stream(pool):
        decoded = decode_jpeg(data, mode=ImageReadMode.RGB, device=device)
    side.wait_stream(pool)
    for image in decoded if isinstance(decoded, list) else [decoded]:
        image.record_stream(side)
    return decoded


def _decode_one(name, data, device):
    try:
        return _decode_jpegs(data, device)
    except RuntimeError:
        _warn_once(name, "was rejected by the batched JPEG decode; decoded on the CPU (PIL)")
        try:
            image = Image.open(io.BytesIO(data.numpy().tobytes())).convert("RGB")
        except Exception as e:
            raise DataError(f"{name} is not a readable image ({type(e).__name__}: {e}); remove or replace it") from None
        return torch.from_numpy(np.asarray(image)).permute(2, 0, 1).contiguous().to(device, non_blocking=True)


NAMED_FILES = 5  # a dataset of PNGs would otherwise name every file


def _warn_once(name, what):
    """Name a file the batched decode could not take, once per file and process, the first few only."""
    if name in _warned or len(_warned) > NAMED_FILES:
        return
    _warned.add(name)
    if len(_warned) > NAMED_FILES:
        print(
            "depthbench: more files are decoded on the CPU (not named); convert them to baseline RGB JPEG "
            "for the device pipeline",
            file=sys.stderr,
        )
    else:
        print(f"depthbench: {name} {what}", file=sys.stderr)


def roi_resize(images: torch.Tensor, boxes: torch.Tensor, size: int) -> torch.Tensor:
    """Each box (x1, y1, x2, y2 in pixel-edge coordinates) of the same-size images (n, 3, H, W) resized to
    ``size``², as float (n, 3, S, S) in [0, 255]; see the module docstring for why roi_align. The compiled kernel is
    called directly: torchvision's Python wrapper replaces it under ``torch.use_deterministic_algorithms(True)`` on
    CUDA by a pure-Python version that materialises every sample of every pixel -- a guard for the kernel's
    *backward* (atomic adds); the forward kernel computes each output from its own samples in a fixed order, so it
    is deterministic, and nothing here is differentiated."""
    rois = torch.cat([torch.arange(len(images), device=images.device, dtype=torch.float32)[:, None], boxes], dim=1)
    return torch.ops.torchvision.roi_align(images.float(), rois, 1.0, size, size, -1, True)


def decode_groups(batch: EncodedBatch):
    """The batch's images decoded a plan group at a time: yields each group's images (uint8 (3, H, W) on the
    batch's device, in plan order), so a group is decoded only when its resizing asks for it."""
    for first, stop in batch.groups:
        start, end = batch.chunks[first][0], batch.chunks[stop - 1][1]
        yield decode_group(batch, [batch.order_list[k] for k in range(start, end)], batch.device)


def crop_resize(batch: EncodedBatch, size: int, decoded=None) -> torch.Tensor:
    """Every image's box resized to ``size``², float (B, 3, S, S) in [0, 255], in batch order.

    The batch's plan (:class:`EncodedBatch`) decodes a group of images at a time and resizes one bucket of
    same-size images per ``roi_align``: nothing is padded to the batch's largest image, and at any time the device
    holds at most one group's decoded bytes (<= 3 x pixel budget, or one image), one bucket as float (<= 12 x
    pixel budget) and the output: the batch's memory bound (docs/data.md). A sample's pixels do not depend on the
    batch it came in (the same numbers for any number of ranks). ``decoded``: the groups' images as
    :func:`decode_groups` yields them (the feeder decodes in another thread); by default decoded here."""
    boxes = batch.boxes.index_select(0, batch.order)  # in plan order (device tensors: no host sync)
    outputs = []
    decoded = decode_groups(batch) if decoded is None else decoded
    for (first, stop), images in zip(batch.groups, decoded):  # zip takes no group beyond the plan's
        start = batch.chunks[first][0]
        for chunk_start, chunk_stop in batch.chunks[first:stop]:
            bucket = images[chunk_start - start : chunk_stop - start]
            stacked = bucket[0][None] if len(bucket) == 1 else torch.stack(bucket)
            outputs.append(roi_resize(stacked, boxes[chunk_start:chunk_stop], size))
        del images
    return torch.cat(outputs).index_select(0, batch.restore)


def eval_box(height: int, width: int, size: int, crop_pct: float, crop_mode: str) -> tuple:
    """timm's eval transform of one image as a box in its coordinates (:class:`EvalBox`)."""
    scale_size = math.floor(size / crop_pct)
    if crop_mode == "squash":
        new_h = new_w = scale_size
    elif width <= height:  # torchvision Resize(int): the shorter side to scale_size, the other truncated
        new_w, new_h = scale_size, int(scale_size * height / width)
    else:
        new_h, new_w = scale_size, int(scale_size * width / height)
    top, left = int(round((new_h - size) / 2.0)), int(round((new_w - size) / 2.0))
    sy, sx = height / new_h, width / new_w
    return (left * sx, top * sy, (left + size) * sx, (top + size) * sy)


# ------------------------------------------------------------------------------------------- batched ops
# Each op takes float (n, 3, H, W) images holding integers 0..255 and (n,) float64 arguments (timm's level
# arguments), and returns the same: PIL's uint8 arithmetic, batched.
def _blend(degenerate, image, factor):
    """Pillow's Image.blend on uint8: degenerate + factor * (image - degenerate), clipped, truncated."""
    factor = factor.to(image.dtype).view(-1, 1, 1, 1)
    return (degenerate + factor * (image - degenerate)).clamp(0, 255).floor()


def _grey(image):
    """Pillow's RGB -> L: (19595 R + 38470 G + 7471 B + 0x8000) >> 16."""
    r, g, b = image[:, 0:1], image[:, 1:2], image[:, 2:3]
    return torch.floor((r * 19595 + g * 38470 + b * 7471 + 32768) / 65536)


def _lut(image, table):
    """Apply per-(image, channel) look-up tables (n, 3, 256)."""
    n, c, h, w = image.shape
    flat = image.reshape(n, c, h * w).long()
    return torch.gather(table, 2, flat).reshape(n, c, h, w).to(image.dtype)


def _histogram(image):
    n, c, h, w = image.shape
    counts = torch.zeros(n, c, 256, device=image.device)
    return counts.scatter_add_(2, image.reshape(n, c, -1).long(), torch.ones(n, c, h * w, device=image.device))


def auto_contrast(image, _):
    hist = _histogram(image)
    levels = torch.arange(256, device=image.device, dtype=torch.float64)
    present = hist > 0
    lo = torch.where(present, levels, torch.full_like(levels, 256)).amin(2, keepdim=True)
    hi = torch.where(present, levels, torch.full_like(levels, -1)).amax(2, keepdim=True)
    scale = 255.0 / (hi - lo).clamp_min(1)
    table = torch.trunc(levels * scale - lo * scale).clamp(0, 255)
    table = torch.where(hi > lo, table, levels.expand_as(table))
    return _lut(image, table.to(image.dtype))


def equalize(image, _):
    hist = _histogram(image).double()
    levels = torch.arange(256, device=image.device, dtype=torch.float64)
    last = torch.where(hist > 0, levels, torch.full_like(levels, -1)).amax(2, keepdim=True).long()
    step = torch.floor((hist.sum(2, keepdim=True) - torch.gather(hist, 2, last)) / 255)
    before = torch.cumsum(hist, 2) - hist
    table = torch.floor((torch.floor(step / 2) + before) / step.clamp_min(1)).clamp(max=255)
    nonzero_bins = (hist > 0).sum(2, keepdim=True)
    table = torch.where((step > 0) & (nonzero_bins > 1), table, levels.expand_as(table))
    return _lut(image, table.to(image.dtype))


def invert(image, _):
    return 255 - image


def posterize(image, bits):
    shift = (8 - bits).clamp(0, 8).view(-1, 1, 1, 1).to(image.dtype)  # 0 bits: black (see image.black_zero_bit_...)
    step = torch.pow(2.0, shift)
    return torch.where(bits.view(-1, 1, 1, 1) >= 8, image, torch.floor(image / step) * step)


def solarize(image, threshold):
    return torch.where(image < threshold.view(-1, 1, 1, 1).to(image.dtype), image, 255 - image)


def solarize_add(image, add, threshold=128):
    return torch.where(image < threshold, (image + add.view(-1, 1, 1, 1).to(image.dtype)).clamp(max=255), image)


def color(image, factor):
    return _blend(_grey(image).expand_as(image), image, factor)


def contrast(image, factor):
    mean = torch.floor(_grey(image).mean((1, 2, 3), keepdim=True) + 0.5)
    return _blend(mean.expand_as(image), image, factor)


def brightness(image, factor):
    return _blend(torch.zeros_like(image), image, factor)


def sharpness(image, factor):
    """Pillow's ImageFilter.SMOOTH (3x3, centre 5, sum 13; the border pixels kept) blended with the image."""
    kernel = torch.ones(3, 3, device=image.device, dtype=image.dtype)
    kernel[1, 1] = 5
    smooth = torch.nn.functional.conv2d(image.reshape(-1, 1, *image.shape[2:]), (kernel / 13)[None, None])
    smooth = torch.floor(smooth + 0.5).reshape(image.shape[0], 3, image.shape[2] - 2, image.shape[3] - 2)
    degenerate = image.clone()
    degenerate[:, :, 1:-1, 1:-1] = smooth
    return _blend(degenerate, image, factor)


def affine(image, matrices, fill):
    """Pillow's ``Image.transform(AFFINE)``: output pixel centre (x, y) samples the input at ``matrix @ (x, y, 1)``
    (bicubic), outside the image: ``fill`` (a (3,) tensor); ``matrices`` (n, 2, 3) in pixel units, on the image's
    device."""
    n, _, h, w = image.shape
    ys, xs = torch.meshgrid(
        torch.arange(h, device=image.device, dtype=torch.float64) + 0.5,
        torch.arange(w, device=image.device, dtype=torch.float64) + 0.5,
        indexing="ij",
    )
    m = matrices
    src_x = m[:, 0, 0, None, None] * xs + m[:, 0, 1, None, None] * ys + m[:, 0, 2, None, None]
    src_y = m[:, 1, 0, None, None] * xs + m[:, 1, 1, None, None] * ys + m[:, 1, 2, None, None]
    inside = (src_x >= 0) & (src_x < w) & (src_y >= 0) & (src_y < h)
    grid = torch.stack([src_x / w * 2 - 1, src_y / h * 2 - 1], dim=-1).to(image.dtype)
    sampled = (
        torch.nn.functional.grid_sample(image, grid, mode="bicubic", padding_mode="border", align_corners=False)
        .round()
        .clamp(0, 255)
    )
    return torch.where(inside[:, None], sampled, fill.to(image.dtype).view(1, 3, 1, 1))


def affine_matrices(name, args, size):
    """Pillow's affine coefficients of timm's geometric ops (input = M @ output), (n, 2, 3) float64, made where
    ``args`` lives (on the device: no host-to-device copy)."""
    n = len(args)
    m = torch.eye(2, 3, dtype=torch.float64, device=args.device).repeat(n, 1, 1)
    if name == "ShearX":
        m[:, 0, 1] = args
    elif name == "ShearY":
        m[:, 1, 0] = args
    elif name == "TranslateXRel":
        m[:, 0, 2] = args * size
    elif name == "TranslateYRel":
        m[:, 1, 2] = args * size
    elif name == "TranslateX":
        m[:, 0, 2] = args
    elif name == "TranslateY":
        m[:, 1, 2] = args
    elif name == "Rotate":  # Image.rotate about the centre: angle = -radians(degrees)
        angle = -torch.deg2rad(args % 360)
        cos, sin = torch.cos(angle), torch.sin(angle)
        centre = size / 2
        m[:, 0, 0], m[:, 0, 1], m[:, 1, 0], m[:, 1, 1] = cos, sin, -sin, cos
        m[:, 0, 2] = cos * -centre + sin * -centre + centre
        m[:, 1, 2] = -sin * -centre + cos * -centre + centre
    return m


OPS = {
    "AutoContrast": auto_contrast,
    "Equalize": equalize,
    "Invert": invert,
    "PosterizeIncreasing": posterize,
    "Posterize": posterize,
    "PosterizeOriginal": posterize,
    "SolarizeIncreasing": solarize,
    "Solarize": solarize,
    "SolarizeAdd": solarize_add,
    "ColorIncreasing": color,
    "Color": color,
    "ContrastIncreasing": contrast,
    "Contrast": contrast,
    "BrightnessIncreasing": brightness,
    "Brightness": brightness,
    "SharpnessIncreasing": sharpness,
    "Sharpness": sharpness,
    **{name: None for name in GEOMETRIC},
}


def apply_ops(images, batch, fill):
    """Each layer's ops on the images that drew them, in place (one index_put_ per op, none per sample); the groups'
    int32 indices and arguments are slices of the batch's device tensors."""
    size = images.shape[-1]
    for runs in batch.op_layers:
        for name, start, stop in runs:
            index, args = batch.op_index[start:stop], batch.op_args[start:stop]
            chosen = images.index_select(0, index)
            if name in GEOMETRIC:
                out = affine(chosen, affine_matrices(name, args, size), fill)
            else:
                out = OPS[name](chosen, args)
            images.index_put_((index,), out)
    return images


class DeviceAugment:
    """``finish`` of the device pipeline: an :class:`EncodedBatch` that reached the device -> the model's input.
    Its constants (mean, std, RandAugment's fill) are made on each device once."""

    def __init__(self, size, mean, std, training, erase_mode="const", fill=(124, 116, 104)):
        self.size, self.training, self.erase_mode = size, training, erase_mode
        self.values = {"mean": tuple(mean), "std": tuple(std), "fill": tuple(float(f) for f in fill)}
        self.constants = {}

    def _constants(self, device):
        if device not in self.constants:  # once per device: the only host-to-device copies of constants
            self.constants[device] = {key: _pinned_copy(value, device) for key, value in self.values.items()}
        return self.constants[device]

    def __call__(self, batch: EncodedBatch) -> torch.Tensor:
        return self.augment(batch, self.decode(batch))

    @staticmethod
    def decode(batch: EncodedBatch):
        """The first stage (:func:`decode_groups`): the feeder runs it in a thread of its own."""
        return decode_groups(batch)

    def augment(self, batch: EncodedBatch, decoded) -> torch.Tensor:
        """The second stage: crop/resize of the ``decoded`` groups, flip, RandAugment, normalise, erase."""
        constants = self._constants(batch.device)
        x = crop_resize(batch, self.size, decoded).round_().clamp_(0, 255)  # PIL's resize yields uint8
        if self.training:
            x = torch.where(batch.flip.view(-1, 1, 1, 1), x.flip(-1), x)
            x = apply_ops(x, batch, constants["fill"])
        x = (x / 255 - constants["mean"].view(1, -1, 1, 1)) / constants["std"].view(1, -1, 1, 1)
        if self.training and len(batch.erase):
            x = self._erase(x, batch.erase, batch.erased, batch.noise_seeds)
        return x

    def background_batches(self, loader, device, channels_last: bool = False):
        """The loader's batches finished on ``device`` by a background thread (:class:`BackgroundFeeder`)."""
        return BackgroundFeeder(loader, self, device, channels_last)

    def _erase(self, x, boxes, erased, seeds):
        """timm's RandomErasing on the drawn boxes: 'pixel' normal noise per pixel, 'rand' per channel, 'const'
        zeros. The noise is a function of the sample's seed and the pixel (:func:`normal_noise`): exact resume,
        and the same pixels whatever the batch. Only the ``erased`` images (int32 batch positions; ``seeds`` theirs)
        are taken out, erased and put back: the noise's int64/float64 intermediates peak at ~41 bytes per element
        (measured on the CPU), ~0.8 GB for a whole batch of 128 at 224^2, where ReProb 0.25 erases about a quarter
        of the images."""
        _, c, h, w = x.shape
        chosen = x.index_select(0, erased)
        rows = torch.arange(h, device=x.device).view(1, h, 1)
        cols = torch.arange(w, device=x.device).view(1, 1, w)
        slot, top, left, height, width = (boxes[:, k].view(-1, 1, 1) for k in range(5))
        inside = (rows >= top) & (rows < top + height) & (cols >= left) & (cols < left + width)  # (k, h, w)
        mask = torch.zeros(len(chosen), h, w, dtype=torch.bool, device=x.device).index_put_(
            (slot.view(-1),), inside, accumulate=True
        )
        if self.erase_mode == "pixel":
            noise = normal_noise(seeds, (c, h, w))
        elif self.erase_mode == "rand":
            noise = normal_noise(seeds, (c, 1, 1)).expand_as(chosen)
        else:
            noise = torch.zeros_like(chosen)
        return x.index_put_((erased,), torch.where(mask[:, None], noise, chosen))


def _pinned_copy(values, device) -> torch.Tensor:
    """float32 ``values`` on ``device`` by an asynchronous copy: ``torch.tensor(..., device=cuda)`` copies from
    pageable memory and waits for it (a host sync); pinned memory stays reserved until the copy has run."""
    tensor = torch.tensor(values, dtype=torch.float32)
    if torch.device(device).type == "cuda":
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=True)


def _mix32(x):
    """A 32-bit integer hash (lowbias32) on int64 tensors holding values < 2**32 (no overflow)."""
    mask = 0xFFFFFFFF
    x = x ^ (x >> 16)
    x = (x * 0x7FEB352D) & mask
    x = x ^ (x >> 15)
    x = (x * 0x846CA68B) & mask
    return x ^ (x >> 16)


def normal_noise(seeds: torch.Tensor, shape) -> torch.Tensor:
    """Standard normal noise (len(seeds), *shape), a pure function of each sample's seed and the element's position
    (counter-based: hash, then Box-Muller), so it needs no per-sample generator and no loop."""
    count = math.prod(shape)
    counter = torch.arange(count, device=seeds.device, dtype=torch.int64)[None, :] * 2
    key = _mix32((seeds[:, None] & 0xFFFFFFFF) ^ _mix32((seeds[:, None] >> 32) & 0xFFFFFFFF))
    u1 = (_mix32(key ^ counter).double() + 1) / 4294967297.0  # in (0, 1)
    u2 = _mix32(key ^ (counter + 1)).double() / 4294967296.0
    normal = torch.sqrt(-2 * torch.log(u1)) * torch.cos(2 * math.pi * u2)
    return normal.float().reshape(len(seeds), *shape)


# ------------------------------------------------------------------------------------------- the feeder
class CudaStreams:
    """The CUDA calls of :class:`BackgroundFeeder` (a test passes a recording stand-in with the same methods)."""

    def __init__(self, device):
        self.device = torch.device(device)

    def device_context(self):
        return torch.cuda.device(self.device)  # the thread's current device: the rank's, not cuda:0

    def new_stream(self):
        return torch.cuda.Stream(device=self.device)

    def decode_stream(self):
        return _decode_stream(self.device)  # the decode's pool: see _decode_jpegs

    def use(self, stream):
        return torch.cuda.stream(stream)

    def current(self):
        return torch.cuda.current_stream(self.device)

    def new_event(self):
        return torch.cuda.Event()


class HostStreams(CudaStreams):
    """Off CUDA there are no streams: work is in order, the thread alone overlaps it with the main thread's."""

    def device_context(self):
        return contextlib.nullcontext()

    def new_stream(self):
        return None

    def decode_stream(self):
        return None

    def use(self, stream):
        return contextlib.nullcontext()

    def current(self):
        return None

    def new_event(self):
        return _NoEvent()


class _NoEvent:
    def record(self, stream=None):
        pass


_END = object()


class _Stopped(Exception):
    """The consumer stopped iterating: the augmenting thread leaves a batch half-taken."""


def _device_tensors(inputs) -> list:
    """The device tensors of a loader batch's inputs (an :class:`EncodedBatch`'s parameters, or the tensor)."""
    if isinstance(inputs, EncodedBatch):
        return [getattr(inputs, key) for key in EncodedBatch.ON_DEVICE]
    return [inputs]


class BackgroundFeeder:
    """The loader's batches, finished on ``device`` by two background threads, handed to the consuming (training)
    stream with events.

    Why threads: ``decode_jpeg`` on CUDA blocks its calling thread (nvJPEG's host phase: Huffman decoding of
    non-baseline JPEGs, its stream synchronisations), and a loader's next batch waits on the host for the
    workers; neither should stall the thread that launches the model's kernels, nor the one that launches the
    augmentation's. So, per batch:

    - thread A (decode), on the decode stream (:func:`_decode_stream`, whose pool the decode outputs come from):
      copies the batch's parameters (pinned, ``non_blocking``), records an event, hands the batch over; then per
      plan group decodes it, records an event, hands the images over -- through a queue of one item, so at most
      two groups are decoded ahead of thread B's (one waiting, one being decoded: the memory bound of docs/data.md);
    - thread B (augment), on a side stream: ``wait_event`` on each event (a device-side wait: the host does not
      block) and ``record_stream(side)`` on every tensor it takes, runs crop/resize and augmentation, records an
      event on the side stream;
    - the consumer makes its current stream ``wait_event`` and calls ``record_stream(consumer)`` on every tensor it
      receives, so the caching allocator does not give their memory back to the producing stream until the
      consumer's work queued before their release has run.

    ``finish`` without ``decode``/``augment`` stages (a plain callable) runs whole in thread B. An error in either
    thread reaches the consumer; both threads stop with the consumer (``close``, an error) and never block on a
    full queue (puts and gets poll the stop flags). ``depth`` finished batches at most wait for the consumer."""

    def __init__(self, loader, finish, device, channels_last: bool = False, depth: int = 2, streams=None):
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            # resolved here, on the caller's thread (its current device is the rank's); in the producer thread a
            # bare "cuda" (as preflight passes it) would be cuda:0
            device = torch.device("cuda", torch.cuda.current_device())
        if device.type == "cuda" and getattr(loader, "num_workers", None) == 0:
            # without workers the producer thread would run SeededSamples' reseed/restore of the global RNGs
            # concurrently with the main thread: exact resume would break at random
            raise ConfigError("loader.pipeline='device' on CUDA needs data.workers >= 1")
        self.loader, self.finish, self.device, self.channels_last = loader, finish, device, channels_last
        self.depth = depth
        self.streams = streams or (CudaStreams(device) if device.type == "cuda" else HostStreams(device))
        self.staged = callable(getattr(finish, "decode", None)) and callable(getattr(finish, "augment", None))

    def __len__(self):
        return len(self.loader)

    def _decode(self, batches, handoff, stop):
        """Thread A: copies and decodes on the decode stream; items: ``(inputs, targets, event, staged)``, then
        (staged) one ``(images, event)`` per plan group."""
        try:
            with self.streams.device_context():
                pool = self.streams.decode_stream()
                for inputs, targets in batches:
                    if stop.is_set():
                        return
                    with self.streams.use(pool):
                        inputs = inputs.to(self.device, non_blocking=True)
                        targets = targets.to(self.device, non_blocking=True)
                        ready = self.streams.new_event()
                        ready.record(pool)
                    if not self._put(handoff, stop, (inputs, targets, ready, self.staged)):
                        return
                    groups = self.finish.decode(inputs) if self.staged else iter(())
                    while True:
                        with self.streams.use(pool):  # the generator decodes when advanced: under the stream
                            images = next(groups, _END)
                            if images is _END:
                                break
                            ready = self.streams.new_event()
                            ready.record(pool)
                        if not self._put(handoff, stop, (images, ready)):
                            return
        except BaseException as error:  # noqa: BLE001 -- re-raised in the consuming thread
            self._put(handoff, stop, error)
            return
        self._put(handoff, stop, _END)

    def _take(self, handoff, stop):
        item = self._get(handoff, stop)
        if isinstance(item, BaseException):
            raise item
        return item

    def _groups(self, handoff, stop, side):
        """Thread B's view of thread A's decoded groups: each waited for and owned on the side stream."""
        while True:
            images, ready = self._take(handoff, stop)
            self._own(side, ready, images)
            yield images

    @staticmethod
    def _own(stream, ready, tensors):
        if stream is not None:  # off CUDA: no streams, work in order
            stream.wait_event(ready)
            for tensor in tensors:
                tensor.record_stream(stream)

    def _augment(self, handoff, out, stop, decoding):
        """Thread B: crop/resize and augmentation on the side stream; items ``((inputs, targets), event)``."""
        try:
            with self.streams.device_context():
                side = self.streams.new_stream()
                while True:
                    item = self._take(handoff, stop)
                    if item is _END:
                        break
                    inputs, targets, ready, staged = item
                    with self.streams.use(side):
                        self._own(side, ready, [*_device_tensors(inputs), targets])
                        if staged:
                            inputs = self.finish.augment(inputs, self._groups(handoff, stop, side))
                        else:
                            inputs = self.finish(inputs)
                        if self.channels_last and inputs.dim() == 4:
                            inputs = inputs.contiguous(memory_format=torch.channels_last)
                        done = self.streams.new_event()
                        done.record(side)
                    if not self._put(out, stop, ((inputs, targets), done)):
                        return
        except BaseException as error:  # noqa: BLE001 -- re-raised in the consuming thread
            self._put(out, stop, error)
            return
        finally:
            decoding.set()  # thread A stops with this one
        self._put(out, stop, _END)

    @staticmethod
    def _put(queue, stop, item) -> bool:
        while not stop.is_set():
            try:
                queue.put(item, timeout=0.1)
                return True
            except Full:
                continue
        return False

    @staticmethod
    def _get(queue, stop):
        while not stop.is_set():
            try:
                return queue.get(timeout=0.1)
            except Empty:
                continue
        raise _Stopped

    def __iter__(self):
        handoff, out = Queue(maxsize=1), Queue(maxsize=self.depth)
        stop, decoding = threading.Event(), threading.Event()
        threads = [
            threading.Thread(
                target=self._decode,
                args=(iter(self.loader), handoff, decoding),
                name="depthbench-device-decode",
                daemon=True,
            ),
            threading.Thread(
                target=self._augment,
                args=(handoff, out, stop, decoding),
                name="depthbench-device-pipeline",
                daemon=True,
            ),
        ]
        for thread in threads:
            thread.start()
        try:
            consumer = self.streams.current()
            while True:
                item = out.get()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                tensors, ready = item
                self._own(consumer, ready, tensors)
                yield tensors
        finally:
            stop.set()
            decoding.set()
            for thread in threads:
                thread.join()


# ------------------------------------------------------------------------------------------- the switch
def encoded_batches(dataset, data, aug, is_training: bool, train_transform=None):
    """``(EncodedImages, collate_fn, finish)`` of an image dataset for ``loader.pipeline='device'``;
    ``train_transform``: the recipe's CPU training transform (harness/tasks/image.py), whose draws the workers make."""
    if not (hasattr(dataset, "read") or hasattr(getattr(dataset, "reader", None), "__getitem__")) or data.type in (
        "cifar10",
        "cifar100",
        "wds",
    ):
        raise ConfigError(
            f"loader.pipeline='device' reads image files or packed shards (data.type folder, shards, "
            f"digits, glyphs), not data.type={data.type}; set loader.pipeline='cpu'"
        )
    if is_training and aug.pipeline != "imagenet":
        raise ConfigError(
            f"loader.pipeline='device' runs the imagenet training transform, not aug.pipeline="
            f"{aug.pipeline!r}; set loader.pipeline='cpu'"
        )
    if is_training:
        draw = ParameterDraw(train_transform, data.input_size)
    else:
        draw = EvalBox(data.input_size, data.crop_pct, data.crop_mode)
    mean = data.mean
    fill = tuple(round(255 * x) for x in mean)
    finish = DeviceAugment(data.input_size, mean, data.std, is_training, erase_mode=aug.remode, fill=fill)
    return EncodedImages(dataset, draw), collate_encoded, finish
