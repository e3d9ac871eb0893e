"""Embedded detection / segmentation data: small COCO- and ADE20K-format sets generated on the machine.

So that ``depthbench finetune`` runs a detector or a segmentor on a fresh machine without COCO or ADE20K, two
sets are generated deterministically (same files, byte for byte, on every machine with the same packages):

- ``coco-shapes``: COCO-format instance segmentation. Each image is a crop of one of scikit-image's bundled
  photographs (``skimage.data``: astronaut, coffee, rocket, ...) with 1-4 non-overlapping filled shapes of
  four classes (ellipse, triangle, rectangle, star), each a polygon; ``annotations/instances_{train,val}2017
  .json`` + ``{train,val}2017/*.png``, the layout of COCO itself, so the stock ``CocoDataset`` and
  ``CocoMetric`` read it (``metainfo=dict(classes=COCO_SHAPES_CLASSES)``).
- ``ade-shapes``: ADE20K-format semantic segmentation: ``images/{training,validation}/*.jpg`` and
  ``annotations/{training,validation}/*.png`` label maps with ADE's convention (0 = unlabelled, class ``i``
  stored as ``i + 1``, read with ``reduce_zero_label=True``) for five classes (background and the four
  shapes, which may overlap here: the label map is what was painted last; each shape class is filled with its
  own texture, a tinted crop of one of ``ADE_TEXTURES``, on crops of the other photographs). ``EmbeddedADE20KDataset`` is
  ADE20K's dataset class with these classes.

Sets are cached under ``$DEPTHBENCH_CACHE/data`` (default ``~/.cache/depthbench/data``), one folder per set
and generator version. Generation writes into a temporary folder renamed into place at the end, so a killed
generation never leaves half a set. Configs name a set as ``data_root = 'embedded://coco-shapes/'``;
:func:`resolve_embedded_roots` (called by ``depthbench finetune``/``test`` and ``DepthbenchRunner``) replaces
such roots by the generated folder, generating it the first time. ``python -m downstream.embedded`` generates
both and prints where they are.

Written by hand because no package ships a small instance/semantic segmentation set with masks that installs
from PyPI; the photographs come from scikit-image, which does ship them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw
from pycocotools import mask as mask_utils

from harness.core.errors import DepthbenchError
from harness.core.files import atomic_dir, data_cache

SCHEME = "embedded://"
VERSION = 2  # bump when the generator's output changes; the cache folder name carries it
COCO_SHAPES_CLASSES = ("ellipse", "triangle", "rectangle", "star")
ADE_SHAPES_CLASSES = ("background",) + COCO_SHAPES_CLASSES
ADE_SHAPES_PALETTE = [[120, 120, 120], [220, 20, 60], [0, 130, 230], [250, 170, 30], [60, 180, 75]]
# scikit-image's photographs that are bundled with the package (no download); colour and grey-level
PHOTOS = (
    "astronaut",
    "brick",
    "camera",
    "cat",
    "coffee",
    "coins",
    "grass",
    "gravel",
    "hubble_deep_field",
    "immunohistochemistry",
    "moon",
    "retina",
    "rocket",
)
# ade-shapes: each shape class is filled with its own texture (a tinted crop of one of these photographs), as
# semantic classes have characteristic appearance; its backgrounds come from the other photographs
ADE_TEXTURES = ("brick", "grass", "gravel", "coins")
SETS = {
    # name: image side, images per split (train, val)
    "coco-shapes": dict(size=128, train=400, val=100),
    "ade-shapes": dict(size=128, train=400, val=100),
}


def dataset_path(name: str) -> Path:
    return data_cache() / f"{name}-v{VERSION}"


def ensure_dataset(name: str) -> Path:
    """The folder of embedded set ``name``, generated (atomically) if it is not in the cache yet."""
    if name not in SETS:
        raise DepthbenchError(
            f"unknown embedded data set {SCHEME}{name}; the embedded sets are {', '.join(SCHEME + n for n in SETS)}"
        )
    final = dataset_path(name)
    with atomic_dir(final) as tmp:
        if tmp is not None:
            (generate_coco if name == "coco-shapes" else generate_ade)(tmp, **SETS[name])
    return final


def resolve_embedded_roots(cfg) -> list[str]:
    """Replace every ``embedded://<set>/...`` string in ``cfg`` (data roots, annotation files) by the
    generated set's folder, generating it if needed. Returns the sets used."""
    used = []

    def visit(node):
        items = node.items() if hasattr(node, "items") else enumerate(node)
        for key, value in list(items):
            if isinstance(value, str) and value.startswith(SCHEME):
                name, _, rest = value[len(SCHEME) :].partition("/")
                used.append(name)
                node[key] = str(ensure_dataset(name)) + "/" + rest
            elif hasattr(value, "items") or isinstance(value, list):
                visit(value)

    visit(cfg)
    return sorted(set(used))


# ------------------------------------------------------------------------------------------- drawing
def _photos(names=PHOTOS) -> list[np.ndarray]:
    try:
        from skimage import data
    except ImportError:
        raise DepthbenchError(
            "the embedded detection/segmentation data needs scikit-image's sample photographs; "
            "install it (make setup, or pip install scikit-image)"
        ) from None
    photos = []
    for name in names:
        img = np.asarray(getattr(data, name)())
        if img.ndim == 2:
            img = np.repeat(img[..., None], 3, axis=2)
        photos.append(np.ascontiguousarray(img[..., :3]).astype(np.uint8))
    return photos


def _background(rng: np.random.Generator, photos: list[np.ndarray], size: int) -> np.ndarray:
    """A random square crop (30-100 % of the short side) of a random photograph, resized, maybe mirrored."""
    photo = photos[rng.integers(len(photos))]
    h, w = photo.shape[:2]
    side = int(min(h, w) * rng.uniform(0.3, 1.0))
    y, x = rng.integers(0, h - side + 1), rng.integers(0, w - side + 1)
    crop = Image.fromarray(photo[y : y + side, x : x + side]).resize((size, size), Image.BILINEAR)
    img = np.asarray(crop)
    return np.ascontiguousarray(img[:, ::-1] if rng.random() < 0.5 else img)


def _shape_polygon(rng: np.random.Generator, cls: int, cx: float, cy: float, r: float) -> np.ndarray:
    """Vertices (N, 2) of a shape of class ``cls`` (index into COCO_SHAPES_CLASSES) of radius ``r``."""
    angle = rng.uniform(0, 2 * np.pi)
    if cls == 0:  # ellipse, axis ratio 0.5-1
        t = np.linspace(0, 2 * np.pi, 32, endpoint=False)
        pts = np.stack([np.cos(t), rng.uniform(0.5, 1.0) * np.sin(t)], 1)
    elif cls == 1:  # triangle, jittered equilateral
        t = np.array([0, 2, 4]) * np.pi / 3 + rng.uniform(-0.25, 0.25, 3)
        pts = np.stack([np.cos(t), np.sin(t)], 1)
    elif cls == 2:  # rectangle, aspect 0.5-1
        a = rng.uniform(0.5, 1.0)
        pts = np.array([[-1, -a], [1, -a], [1, a], [-1, a]]) / np.sqrt(1 + a * a)
    else:  # five-pointed star
        t = np.arange(10) * np.pi / 5
        pts = np.stack([np.cos(t), np.sin(t)], 1) * np.where(np.arange(10) % 2, 0.45, 1.0)[:, None]
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    return pts @ rot.T * r + np.array([cx, cy])


def _paint(
    img: np.ndarray, poly: np.ndarray, rng: np.random.Generator, texture: np.ndarray | None = None
) -> np.ndarray:
    """Fill ``poly`` on ``img`` with a random colour under a linear shading, or modulating ``texture`` (an
    image of ``img``'s size); returns the filled mask."""
    h, w = img.shape[:2]
    canvas = Image.new("L", (w, h), 0)
    ImageDraw.Draw(canvas).polygon([tuple(p) for p in poly.tolist()], fill=1)
    mask = np.asarray(canvas).astype(bool)
    colour = rng.integers(0, 256, 3).astype(np.float32)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    direction = rng.normal(size=2)
    shade = 1 + 0.25 * np.tanh((xx * direction[0] + yy * direction[1]) / max(h, w))
    if texture is not None:
        shade = 0.3 + 1.2 * texture.mean(axis=2) / 255.0
    fill = np.clip(colour[None, None] * shade[..., None] + rng.normal(0, 6, (h, w, 3)), 0, 255)
    img[mask] = fill[mask].astype(np.uint8)
    return mask


def _place(rng, size, placed, allow_overlap, r_range):
    """A centre and radius for a new shape inside the image (not overlapping ``placed`` boxes unless allowed)."""
    for _ in range(50):
        r = rng.uniform(*r_range)
        cx, cy = rng.uniform(r, size - r, 2)
        box = (cx - r, cy - r, cx + r, cy + r)
        if allow_overlap or all(
            box[2] + 2 < b[0] or b[2] + 2 < box[0] or box[3] + 2 < b[1] or b[3] + 2 < box[1] for b in placed
        ):
            return cx, cy, r, box
    return None


def _seed(name: str, split: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{name}/{split}/v{VERSION}".encode()).digest()[:8], "little")


# ------------------------------------------------------------------------------------------- the sets
def generate_coco(root: Path, size: int, train: int, val: int) -> None:
    """COCO-format instance segmentation (see the module docstring) under ``root``."""
    photos = _photos()
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    for split, count in (("train", train), ("val", val)):
        rng = np.random.default_rng(_seed("coco-shapes", split))
        folder = root / f"{split}2017"
        folder.mkdir()
        images, annotations = [], []
        for i in range(count):
            img = _background(rng, photos, size).copy()
            placed = []
            file_name = f"{i:06d}.png"
            for _ in range(rng.integers(1, 5)):
                spot = _place(rng, size, placed, allow_overlap=False, r_range=(0.08 * size, 0.25 * size))
                if spot is None:
                    continue
                cx, cy, r, box = spot
                placed.append(box)
                cls = int(rng.integers(len(COCO_SHAPES_CLASSES)))
                poly = np.clip(_shape_polygon(rng, cls, cx, cy, r), 0, size - 1)
                _paint(img, poly, rng)
                x0, y0 = float(poly[:, 0].min()), float(poly[:, 1].min())
                segmentation = [[round(float(v), 2) for v in poly.reshape(-1)]]
                area = float(mask_utils.area(mask_utils.frPyObjects(segmentation, size, size)).sum())  # COCO's
                annotations.append(
                    dict(
                        id=len(annotations) + 1,
                        image_id=i + 1,
                        category_id=cls + 1,
                        iscrowd=0,
                        segmentation=segmentation,
                        area=area,
                        bbox=[
                            round(x0, 2),
                            round(y0, 2),
                            round(float(poly[:, 0].max()) - x0, 2),
                            round(float(poly[:, 1].max()) - y0, 2),
                        ],
                    )
                )
            Image.fromarray(img).save(folder / file_name)
            images.append(dict(id=i + 1, file_name=file_name, width=size, height=size))
        coco = dict(
            info=dict(description=f"depthbench embedded coco-shapes v{VERSION} ({split})"),
            images=images,
            annotations=annotations,
            licenses=[],
            categories=[dict(id=k + 1, name=n, supercategory="shape") for k, n in enumerate(COCO_SHAPES_CLASSES)],
        )
        (root / "annotations" / f"instances_{split}2017.json").write_text(json.dumps(coco))


def generate_ade(root: Path, size: int, train: int, val: int) -> None:
    """ADE20K-format semantic segmentation (see the module docstring) under ``root``."""
    photos = _photos(tuple(p for p in PHOTOS if p not in ADE_TEXTURES))
    textures = _photos(ADE_TEXTURES)
    for split, folder, count in (("train", "training", train), ("val", "validation", val)):
        rng = np.random.default_rng(_seed("ade-shapes", split))
        (root / "images" / folder).mkdir(parents=True)
        (root / "annotations" / folder).mkdir(parents=True)
        for i in range(count):
            img = _background(rng, photos, size).copy()
            label = np.ones((size, size), np.uint8)  # ADE stores class i as i + 1; 1 = background
            for _ in range(rng.integers(1, 6)):
                cx, cy, r, _box = _place(rng, size, [], allow_overlap=True, r_range=(0.08 * size, 0.3 * size))
                cls = int(rng.integers(len(COCO_SHAPES_CLASSES)))
                texture = _background(rng, textures[cls : cls + 1], size)
                mask = _paint(img, _shape_polygon(rng, cls, cx, cy, r), rng, texture=texture)
                label[mask] = cls + 2
            name = f"ADE_{split}_{i:08d}"
            Image.fromarray(img).save(root / "images" / folder / f"{name}.jpg", quality=95)
            Image.fromarray(label).save(root / "annotations" / folder / f"{name}.png")


def _register_dataset():
    """``EmbeddedADE20KDataset``: mmseg's ADE20KDataset with the ade-shapes classes (mmseg checks that
    ``metainfo`` classes are a subset of the dataset class's own, so a subclass is the way to change them)."""
    try:
        from mmseg.datasets import ADE20KDataset
        from mmseg.registry import DATASETS
    except ImportError:  # mmseg is optional for importing this module (the generator itself needs neither)
        return None

    @DATASETS.register_module(force=True)
    class EmbeddedADE20KDataset(ADE20KDataset):
        METAINFO = dict(classes=ADE_SHAPES_CLASSES, palette=ADE_SHAPES_PALETTE)

    return EmbeddedADE20KDataset


EmbeddedADE20KDataset = _register_dataset()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m downstream.embedded", description="generate (once) the embedded detection/segmentation sets"
    )
    parser.add_argument("sets", nargs="*", default=list(SETS), help=f"default: {' '.join(SETS)}")
    for name in parser.parse_args(argv).sets:
        print(f"{SCHEME}{name} -> {ensure_dataset(name)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
