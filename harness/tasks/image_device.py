"""The device image pipeline (``loader.pipeline='device'``): workers read bytes, the GPU decodes and augments.

timm's pipeline decodes (PIL) and augments in the loader workers: ~210 images/s per CPU core, so an 8-GPU node is
loader-bound (docs/benchmarks.md). Here a worker only reads the compressed bytes, parses the image header (PIL,
no decode) and draws the sample's random parameters *with timm's own code* (``RandomResizedCropAndInterpolation.
get_params``, the flip, ``RandAugment``'s op choice, magnitude noise and level functions, torchvision's
``ColorJitter.get_params``, ``RandomErasing._erase``), under the sample's seed (exact resume). The device then
works on the whole batch at once (:class:`DeviceAugment`):

1. decode: ``torchvision.io.decode_jpeg(list, device=...)`` -- nvJPEG's batched decode on CUDA, libjpeg on CPU (CI).
   Non-JPEG files (and CMYK JPEGs) were decoded by the worker with PIL; a JPEG the batched decode rejects is decoded
   alone on the CPU, its file named once.
2. crop + resize in one ``torchvision.ops.roi_align`` over all images: a box per image (the random crop, or the
   eval resize-and-centre-crop mapped back onto the original image) into ``input_size``². roi_align, not
   ``interpolate``/``grid_sample``: it averages ``ceil(box/out)`` bilinear samples per output pixel, i.e. it
   antialiases downscaling as PIL's resize does, and it takes a box per image, so images of different sizes need
   no per-image launch. The images are stacked in one float "atlas" (rows of each image, edges replicated).
3. flip, then RandAugment (or colour jitter): each of timm's 15 ``rand-*-inc1`` ops is a batched tensor op on the
   images that drew it (:data:`OPS`; a loop over ops and layers, never over samples), with PIL's arithmetic
   (uint8 rounding, Pillow's blend, equalize and autocontrast look-up tables, bicubic affine with timm's fill).
4. ``/255``, normalise, random erasing (the boxes timm drew; noise from a per-batch seed).

No library does this: Kornia (not installed on the GPU nodes) has a RandAugment whose ops and magnitude ranges are
not timm's, and DALI is a heavy wheel. Mixup/CutMix stay in the training loop as before.
"""
from __future__ import annotations

import copy
import io
import math
import random
import sys

import numpy as np
import torch
from PIL import Image
from timm.data.auto_augment import AugmentOp, RandAugment
from torch.utils.data import default_collate
from torchvision.io import ImageReadMode, decode_jpeg
from torchvision.ops import roi_align

from harness.core.errors import ConfigError, DataError

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
        known = ("RandomResizedCropAndInterpolation", "RandomResizedCrop", "RandomHorizontalFlip", "RandAugment",
                 "ColorJitter", "MaybeToTensor", "ToTensor", "Normalize", "RandomErasing")
        for step in self.steps:
            if type(step).__name__ not in known:
                raise ConfigError(f"loader.pipeline='device' has no device version of {type(step).__name__} "
                                  f"(it maps {', '.join(known[:6])}, normalise, random erasing); set "
                                  f"loader.pipeline='cpu'")
            if isinstance(step, RandAugment):
                for op in step.ops:
                    if isinstance(op, AugmentOp):
                        if op.name not in OPS:
                            raise ConfigError(f"loader.pipeline='device' has no device version of RandAugment's "
                                              f"{op.name}; set loader.pipeline='cpu'")
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
                params["ops"] = [(factors[i][0], (float(factors[i][1]),)) for i in order.tolist()
                                 if i in factors and factors[i][1] is not None]
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


class EncodedImages(torch.utils.data.Dataset):
    """An image dataset (:class:`~harness.tasks.image.ImageFolder` or :class:`~harness.tasks.shards.ShardDataset`) as encoded samples:
    ``(EncodedSample, target)``; ``draw`` (:class:`ParameterDraw`) is None for evaluation."""

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
            pixels = None
            if not data.startswith(JPEG_MAGIC) or header.mode not in ("RGB", "L"):  # PNG, CMYK JPEG, ...: PIL
                pixels = torch.from_numpy(np.array(header.convert("RGB"))).permute(2, 0, 1).contiguous()
        except Exception as e:
            raise DataError(f"{name} is not a readable image ({type(e).__name__}: {e}); remove or replace it") from None
        params = self.draw(header) if self.draw is not None else {"box": None, "flip": False, "ops": [], "erase": []}
        encoded = None if pixels is not None else torch.frombuffer(bytearray(data), dtype=torch.uint8)
        sample = EncodedSample(data=encoded, pixels=pixels, height=header.size[1], width=header.size[0], name=name,
                               noise_seed=random.getrandbits(62), **params)
        return sample, target


# ------------------------------------------------------------------------------------------- the batch
class EncodedBatch:
    """A collated batch: the compressed images and, as small tensors, the per-sample parameters (built on the CPU,
    so the device never waits on the host to group samples by op)."""

    def __init__(self, samples):
        self.samples = samples
        self.sizes = [(s.height, s.width) for s in samples]
        self.boxes = torch.tensor([s.box if s.box is not None else (0, 0, 0, 0) for s in samples], dtype=torch.float32)
        self.flip = torch.tensor([bool(s.flip) for s in samples])
        layers = max([len(s.ops) for s in samples] + [0])
        self.op_layers = []  # per layer: {op name: (sample indices, args)}
        for layer in range(layers):
            groups = {}
            for i, s in enumerate(samples):
                if layer < len(s.ops):
                    name, args = s.ops[layer]
                    groups.setdefault(name, ([], []))
                    groups[name][0].append(i)
                    groups[name][1].append(args[0] if args else 0.0)
            self.op_layers.append({name: (torch.tensor(idx), torch.tensor(args, dtype=torch.float64))
                                   for name, (idx, args) in groups.items()})
        erase = [(i, *box) for i, s in enumerate(samples) for box in s.erase]
        self.erase = torch.tensor(erase, dtype=torch.int64).reshape(-1, 5)
        self.noise_seeds = torch.tensor([s.noise_seed for s in samples], dtype=torch.int64)
        self.device = torch.device("cpu")

    def pin_memory(self):
        return self

    def to(self, device, non_blocking: bool = False):
        self.device = torch.device(device)
        return self

    def __len__(self):
        return len(self.samples)


def collate_encoded(batch):
    return EncodedBatch([sample for sample, _ in batch]), default_collate([target for _, target in batch])


# ------------------------------------------------------------------------------------------- device side
_warned = set()


def decode(batch: EncodedBatch, device) -> list:
    """The batch's images as uint8 (3, H, W) tensors on ``device``: one batched decode of the JPEGs."""
    images = [None] * len(batch)
    jpegs = [i for i, s in enumerate(batch.samples) if s.pixels is None]
    for i, s in enumerate(batch.samples):
        if s.pixels is not None:
            images[i] = s.pixels.to(device, non_blocking=True)
            _warn_once(s.name, "is not a baseline RGB/grey JPEG; decoded on the CPU")
    if jpegs:
        data = [batch.samples[i].data for i in jpegs]
        try:
            decoded = decode_jpeg(data, mode=ImageReadMode.RGB, device=device)
        except RuntimeError:
            decoded = [_decode_one(batch.samples[i], device) for i in jpegs]  # rare: find the bad one(s)
        for i, image in zip(jpegs, decoded):
            images[i] = image
    return images


def _decode_one(sample, device):
    try:
        return decode_jpeg(sample.data, mode=ImageReadMode.RGB, device=device)
    except RuntimeError:
        _warn_once(sample.name, "was rejected by the batched JPEG decode; decoded on the CPU (PIL)")
        try:
            image = Image.open(io.BytesIO(sample.data.numpy().tobytes())).convert("RGB")
        except Exception as e:
            raise DataError(f"{sample.name} is not a readable image ({type(e).__name__}: {e}); remove or replace "
                            f"it") from None
        return torch.from_numpy(np.asarray(image)).permute(2, 0, 1).contiguous().to(device)


NAMED_FILES = 5  # a dataset of PNGs would otherwise name every file


def _warn_once(name, what):
    """Name a file the batched decode could not take, once per file and process, the first few only."""
    if name in _warned or len(_warned) > NAMED_FILES:
        return
    _warned.add(name)
    if len(_warned) > NAMED_FILES:
        print(f"depthbench: more files are decoded on the CPU (not named); convert them to baseline RGB JPEG "
              f"for the device pipeline", file=sys.stderr)
    else:
        print(f"depthbench: {name} {what}", file=sys.stderr)


def crop_resize(images: list, boxes: torch.Tensor, size: int) -> torch.Tensor:
    """Each image's box (x1, y1, x2, y2 in pixel-edge coordinates) resized to ``size``², as float (B, 3, S, S) in
    [0, 255]: one roi_align over the images padded to the batch's largest height and width (see the module
    docstring for why roi_align). The padding repeats each image's last row and column, so bilinear taps at an
    edge read the edge (as PIL's resize does), and every box is in its own image's coordinates: a sample's pixels
    do not depend on the batch it came in (the same numbers for any number of ranks)."""
    device = images[0].device
    heights = torch.tensor([im.shape[1] for im in images])
    widths = torch.tensor([im.shape[2] for im in images])
    bases = torch.cumsum(heights * widths, 0) - heights * widths
    rows = torch.minimum(torch.arange(int(heights.max()))[None, :], heights[:, None] - 1)  # (B, maxH)
    row_base = (bases[:, None] + rows * widths[:, None]).to(device, non_blocking=True)
    row_last = (widths - 1).to(device, non_blocking=True)
    flat = torch.cat([im.reshape(3, -1) for im in images], dim=1)
    columns = torch.arange(int(widths.max()), device=device)
    source = row_base[:, :, None] + torch.minimum(columns[None, None, :], row_last[:, None, None])  # (B, maxH, maxW)
    padded = flat[:, source.reshape(-1)].reshape(3, *source.shape).transpose(0, 1).float()
    rois = torch.cat([torch.arange(len(images), dtype=torch.float32)[:, None], boxes.float()], dim=1)
    return roi_align(padded, rois.to(device, non_blocking=True), output_size=size, spatial_scale=1.0,
                     sampling_ratio=-1, aligned=True)


def eval_boxes(sizes, size: int, crop_pct: float, crop_mode: str) -> torch.Tensor:
    """timm's eval transform (resize the shorter side to floor(size / crop_pct), centre-crop ``size``; 'squash':
    resize to a square first) as one box per image in the original image's coordinates."""
    scale_size = math.floor(size / crop_pct)
    boxes = []
    for height, width in sizes:
        if crop_mode == "squash":
            new_h = new_w = scale_size
        elif crop_mode == "center":  # torchvision Resize(int): the shorter side to scale_size, the other truncated
            if width <= height:
                new_w, new_h = scale_size, int(scale_size * height / width)
            else:
                new_h, new_w = scale_size, int(scale_size * width / height)
        else:
            raise ConfigError(f"loader.pipeline='device' knows data.crop_mode 'center' and 'squash', not "
                              f"{crop_mode!r}; set loader.pipeline='cpu'")
        top, left = int(round((new_h - size) / 2.0)), int(round((new_w - size) / 2.0))
        sy, sx = height / new_h, width / new_w
        boxes.append((left * sx, top * sy, (left + size) * sx, (top + size) * sy))
    return torch.tensor(boxes, dtype=torch.float32)


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
    (bicubic), outside the image: ``fill``; ``matrices`` (n, 2, 3) in pixel units."""
    n, _, h, w = image.shape
    ys, xs = torch.meshgrid(torch.arange(h, device=image.device, dtype=torch.float64) + 0.5,
                            torch.arange(w, device=image.device, dtype=torch.float64) + 0.5, indexing="ij")
    m = matrices.to(image.device)
    src_x = m[:, 0, 0, None, None] * xs + m[:, 0, 1, None, None] * ys + m[:, 0, 2, None, None]
    src_y = m[:, 1, 0, None, None] * xs + m[:, 1, 1, None, None] * ys + m[:, 1, 2, None, None]
    inside = (src_x >= 0) & (src_x < w) & (src_y >= 0) & (src_y < h)
    grid = torch.stack([src_x / w * 2 - 1, src_y / h * 2 - 1], dim=-1).to(image.dtype)
    sampled = torch.nn.functional.grid_sample(image, grid, mode="bicubic", padding_mode="border",
                                              align_corners=False).round().clamp(0, 255)
    fill = torch.as_tensor(fill, dtype=image.dtype, device=image.device).view(1, 3, 1, 1)
    return torch.where(inside[:, None], sampled, fill)


def affine_matrices(name, args, size):
    """Pillow's affine coefficients of timm's geometric ops (input = M @ output), (n, 2, 3) float64."""
    n = len(args)
    m = torch.zeros(n, 2, 3, dtype=torch.float64)
    m[:, 0, 0] = m[:, 1, 1] = 1
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


OPS = {"AutoContrast": auto_contrast, "Equalize": equalize, "Invert": invert,
       "PosterizeIncreasing": posterize, "Posterize": posterize, "PosterizeOriginal": posterize,
       "SolarizeIncreasing": solarize, "Solarize": solarize, "SolarizeAdd": solarize_add,
       "ColorIncreasing": color, "Color": color, "ContrastIncreasing": contrast, "Contrast": contrast,
       "BrightnessIncreasing": brightness, "Brightness": brightness,
       "SharpnessIncreasing": sharpness, "Sharpness": sharpness,
       **{name: None for name in GEOMETRIC}}


def apply_ops(images, op_layers, fill):
    """Each layer's ops on the images that drew them, in place (index_copy_: one launch per op, none per sample)."""
    size = images.shape[-1]
    for groups in op_layers:
        for name, (index, args) in groups.items():
            index = index.to(images.device, non_blocking=True)
            chosen = images.index_select(0, index)
            if name in GEOMETRIC:
                out = affine(chosen, affine_matrices(name, args, size), fill)
            else:
                out = OPS[name](chosen, args.to(images.device, non_blocking=True))
            images.index_copy_(0, index, out)
    return images


class DeviceAugment:
    """``finish`` of the device pipeline: an :class:`EncodedBatch` that reached the device -> the model's input."""

    def __init__(self, size, mean, std, training, erase_mode="const", fill=(124, 116, 104), crop_pct=0.875,
                 crop_mode="center"):
        self.size, self.training, self.erase_mode, self.fill = size, training, erase_mode, fill
        self.mean = torch.as_tensor(mean, dtype=torch.float32).reshape(1, -1, 1, 1)
        self.std = torch.as_tensor(std, dtype=torch.float32).reshape(1, -1, 1, 1)
        self.crop_pct, self.crop_mode = crop_pct, crop_mode

    def __call__(self, batch: EncodedBatch) -> torch.Tensor:
        device = batch.device
        images = decode(batch, device)
        boxes = batch.boxes if self.training else eval_boxes(batch.sizes, self.size, self.crop_pct, self.crop_mode)
        x = crop_resize(images, boxes, self.size).round_().clamp_(0, 255)  # PIL's resize yields uint8
        if self.training:
            x = torch.where(batch.flip.to(device, non_blocking=True).view(-1, 1, 1, 1), x.flip(-1), x)
            x = apply_ops(x, batch.op_layers, self.fill)
        x = (x / 255 - self.mean.to(device)) / self.std.to(device)
        if self.training and len(batch.erase):
            x = self._erase(x, batch.erase.to(device, non_blocking=True),
                            batch.noise_seeds.to(device, non_blocking=True))
        return x

    def _erase(self, x, boxes, seeds):
        """timm's RandomErasing on the drawn boxes: 'pixel' normal noise per pixel, 'rand' per channel, 'const'
        zeros. The noise is a function of the sample's seed and the pixel (:func:`normal_noise`): exact resume,
        and the same pixels whatever the batch."""
        n, c, h, w = x.shape
        rows = torch.arange(h, device=x.device).view(1, h, 1)
        cols = torch.arange(w, device=x.device).view(1, 1, w)
        index, top, left, height, width = (boxes[:, k].view(-1, 1, 1) for k in range(5))
        inside = (rows >= top) & (rows < top + height) & (cols >= left) & (cols < left + width)  # (k, h, w)
        mask = torch.zeros(n, h, w, dtype=torch.bool, device=x.device).index_put_(
            (index.view(-1),), inside, accumulate=True)
        if self.erase_mode == "pixel":
            noise = normal_noise(seeds, (c, h, w))
        elif self.erase_mode == "rand":
            noise = normal_noise(seeds, (c, 1, 1)).expand_as(x)
        else:
            noise = torch.zeros_like(x)
        return torch.where(mask[:, None], noise, x)


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


# ------------------------------------------------------------------------------------------- the switch
def encoded_batches(dataset, data, aug, is_training: bool, train_transform=None):
    """``(EncodedImages, collate_fn, finish)`` of an image dataset for ``loader.pipeline='device'``;
    ``train_transform``: the recipe's CPU training transform (harness/tasks/image.py), whose draws the workers make."""
    if not (hasattr(dataset, "read") or hasattr(getattr(dataset, "reader", None), "__getitem__")) \
            or data.type in ("cifar10", "cifar100", "wds"):
        raise ConfigError(f"loader.pipeline='device' reads image files or packed shards (data.type folder, shards, "
                          f"digits, glyphs), not data.type={data.type}; set loader.pipeline='cpu'")
    if is_training and aug.pipeline != "imagenet":
        raise ConfigError(f"loader.pipeline='device' runs the imagenet training transform, not aug.pipeline="
                          f"{aug.pipeline!r}; set loader.pipeline='cpu'")
    draw = None
    if is_training:
        draw = ParameterDraw(train_transform, data.input_size)
    mean = data.mean
    fill = tuple(round(255 * x) for x in mean)
    finish = DeviceAugment(data.input_size, mean, data.std, is_training, erase_mode=aug.remode, fill=fill,
                           crop_pct=data.crop_pct, crop_mode=data.crop_mode)
    return EncodedImages(dataset, draw), collate_encoded, finish
