"""The embedded *glyphs* dataset: real typefaces, 53 characters, rendered on a fresh machine with no download.

Each image is one character drawn from a TrueType/OpenType font of Debian's font packages (:data:`FONT_PACKAGES`)
with a random affine (scale, aspect, rotation, shear, shift), partly visible neighbouring characters of the same
font (as in a crop of printed text), a random background (flat, gradient or smooth colour noise), an ink colour
that contrasts with it (dark ink on a lighter ground three times in four, as in print; light ink on a dark ground
otherwise), blur and pixel noise (:class:`Distortions`). Validation images are drawn from **held-out typefaces**:
the fonts of :data:`VAL_FONT_DIRS` (DejaVu, PT, Hack, EB Garamond, Cantarell, Quicksand, Yanone Kaffeesatz) never
appear in training, so top-1 measures reading unseen typefaces, not remembering seen ones.

The 53 classes (:data:`GLYPH_CLASSES`) are the alphanumerics and symbols that no typeface confuses once scale is
random: capitals A-Z, digits 2-9 (0 is O, 1 is I), the lower-case letters whose shape differs from their capital
(a b d e f g h i m n q r t) and & ? @ # % $. No flips in any recipe: a mirrored b is a d.

Determinism: one numpy generator per image, seeded by (dataset seed, split, index), the fonts in sorted path order,
the glyphs rasterised by Pillow's bundled FreeType, composited in float32 and written as PNG without metadata, so
the same Pillow/numpy (requirements/lock.txt) and the same Debian font packages give the same bytes on every
machine. ``manifest.json`` in the exported folder records the fonts (with their SHA-256), the versions and a
SHA-256 of every split's images. docs/claims.md says how the difficulty was set.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import PIL
from PIL import Image, ImageDraw, ImageFilter, ImageFont, features
from tqdm import tqdm

from harness.core.errors import DataError
from harness.core.files import atomic_dir, data_cache

SEED = 20260129
GENERATOR_VERSION = 1
TRAIN_PER_CLASS = 400  # 53 x 400 = 21,200 training images
VAL_PER_CLASS = 100  # 53 x 100 = 5,300 validation images, held-out typefaces

# (folder name, character): the folder names sort in class order and differ on case-insensitive file systems
_SYMBOLS = (("ampersand", "&"), ("question", "?"), ("at", "@"), ("hash", "#"), ("percent", "%"), ("dollar", "$"))
GLYPH_CLASSES: tuple[tuple[str, str], ...] = tuple(
    (f"{i:02d}-{name}", char)
    for i, (name, char) in enumerate(
        [(c, c) for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"]
        + [(c, c) for c in "23456789"]
        + [(f"{c}-lower", c) for c in "abdefghimnqrt"]
        + list(_SYMBOLS)
    )
)

FONT_ROOT = Path("/usr/share/fonts")
# (Debian package, folder under /usr/share/fonts, split). Where two packages are the same design under two names
# only one is used (fonts-texgyre = fonts-urw-base35's designs, fonts-croscore = fonts-liberation2's, fonts-lmodern
# = fonts-cmu's), so no typeface of the validation split is a training typeface under another name.
FONT_PACKAGES: tuple[tuple[str, str, str], ...] = (
    ("fonts-adf-accanthis", "truetype/adf", "train"),
    ("fonts-anonymous-pro", "truetype/anonymous-pro", "train"),
    ("fonts-cabin", "opentype/cabin", "train"),
    ("fonts-cantarell", "opentype/cantarell", "val"),
    ("fonts-cmu", "truetype/cmu", "train"),
    ("fonts-comfortaa", "truetype/comfortaa", "train"),
    ("fonts-crosextra-caladea", "truetype/crosextra", "train"),
    ("fonts-crosextra-carlito", "truetype/crosextra", "train"),
    ("fonts-dancingscript", "opentype/dancingscript", "train"),
    ("fonts-dejavu-core", "truetype/dejavu", "val"),
    ("fonts-dejavu-extra", "truetype/dejavu", "val"),
    ("fonts-ebgaramond", "opentype/ebgaramond", "val"),
    ("fonts-firacode", "truetype/firacode", "train"),
    ("fonts-freefont-ttf", "truetype/freefont", "train"),
    ("fonts-gfs-didot", "opentype/didot", "train"),
    ("fonts-go", "fonts-go", "train"),
    ("fonts-hack", "truetype/hack", "val"),
    ("fonts-inconsolata", "truetype/inconsolata", "train"),
    ("fonts-jura", "opentype/jura", "train"),
    ("fonts-lato", "truetype/lato", "train"),
    ("fonts-league-spartan", "opentype/league-spartan", "train"),
    ("fonts-liberation2", "truetype/liberation2", "train"),
    ("fonts-linuxlibertine", "opentype/linux-libertine", "train"),
    ("fonts-noto-mono", "truetype/noto", "train"),
    ("fonts-oldstandard", "truetype/fonts-oldstandard", "train"),
    ("fonts-open-sans", "truetype/open-sans", "train"),
    ("fonts-paratype", "truetype/paratype", "val"),
    ("fonts-quicksand", "truetype/quicksand", "val"),
    ("fonts-roboto-unhinted", "truetype/roboto", "train"),
    ("fonts-sil-andika", "truetype/andika", "train"),
    ("fonts-sil-charis", "truetype/charis", "train"),
    ("fonts-sil-gentium", "truetype/gentium", "train"),
    ("fonts-stix", "opentype/stix", "train"),
    ("fonts-stix", "opentype/stix-word", "train"),
    ("fonts-urw-base35", "opentype/urw-base35", "train"),
    ("fonts-yanone-kaffeesatz", "opentype/yanone-kaffeesatz", "val"),
)
FONT_DEBIAN_PACKAGES = tuple(sorted({p for p, _, _ in FONT_PACKAGES}))
VAL_FONT_DIRS = tuple(sorted({d for _, d, s in FONT_PACKAGES if s == "val"}))
# fonts whose code points for our characters hold other shapes: dingbats, symbols (Greek at Latin code points),
# keyboard key caps, small capitals for lower case
EXCLUDED_FONTS = frozenset(
    {"D050000L.otf", "StandardSymbolsPS.otf", "LinBiolinum_K.otf", "Go-Smallcaps.ttf", "Go-Smallcaps-Italic.ttf"}
)


# ----------------------------------------------------------------------------------------- fonts
def glyph_fonts(font_root: str | Path = FONT_ROOT) -> dict[str, list[Path]]:
    """The fonts of each split (``{"train": [...], "val": [...]}``, sorted paths) that hold all 53 characters.

    Raises :class:`DataError` naming the Debian packages to install when a package's folder is missing.
    """
    from fontTools.ttLib import TTFont

    font_root = Path(font_root)
    missing = sorted({pkg for pkg, folder, _ in FONT_PACKAGES if not (font_root / folder).is_dir()})
    if missing:
        raise DataError(
            f"the glyphs dataset renders the fonts of {len(FONT_DEBIAN_PACKAGES)} Debian packages and "
            f"{len(missing)} are missing under {font_root}; install them with: apt-get install "
            f"--no-install-recommends {' '.join(FONT_DEBIAN_PACKAGES)} (or rerun make setup)"
        )
    fonts: dict[str, list[Path]] = {"train": [], "val": []}
    for folder in sorted({(folder, split) for _, folder, split in FONT_PACKAGES}):
        folder, split = folder
        for path in sorted(p for p in (font_root / folder).rglob("*") if p.suffix.lower() in (".ttf", ".otf")):
            if path.name in EXCLUDED_FONTS:
                continue
            cmap = TTFont(path, lazy=True).getBestCmap() or {}
            if all(ord(char) in cmap for _, char in GLYPH_CLASSES):  # math/integral/size-variant fonts drop out
                fonts[split].append(path)
    return fonts


def _font_group(path: Path, font_root: Path) -> str:
    """The folder of :data:`FONT_PACKAGES` a font came from: images pick a folder first, then a font in it, so a
    package with 33 weights and sizes is not 33 times as frequent as one with a single font."""
    rel = path.relative_to(font_root).as_posix()
    return next(folder for _, folder, _ in FONT_PACKAGES if rel.startswith(folder + "/"))


# ----------------------------------------------------------------------------------------- rendering
@dataclass(frozen=True)
class Distortions:
    """The random ranges of one image (fractions of the image side unless said otherwise)."""

    size: tuple[float, float] = (0.6, 0.85)  # the character's larger ink side
    log_aspect: float = 0.22  # width stretch exp(U(-a, a))
    rotation: float = 8.0  # degrees, U(-r, r)
    shear: float = 0.15
    shift: float = 0.08  # centre offset, U(-s, s) per axis
    neighbours: float = 0.3  # probability of a neighbour on each side
    gap: tuple[float, float] = (0.06, 0.14)  # space between the character and a neighbour
    blur: float = 0.3  # probability of out-of-focus ink
    backgrounds: tuple[str, ...] = ("flat", "gradient", "noise")
    contrast: float = 0.4  # minimum luminance difference of ink and background mean
    light_ink: float = 0.25  # probability of light ink on a dark background (else print)
    noise: float = 0.05  # pixel noise sigma, U(0, n)


DISTORTIONS = Distortions()
# The dataset's variants (``data.variant``): the same fonts, characters, affine ranges and indices, with less in the
# picture. ``cluttered`` (the default) is the set described above. ``clean`` is printed characters alone: ink darker
# than its flat ground (both of a random colour), no gradient or noise ground, no neighbours, no blur, no pixel
# noise. Plain vision transformers, whose linear patch embedding has to learn every background and both ink
# polarities, stay near chance for most of a CPU budget on the cluttered set and learn the clean one
# (docs/claims.md: the DeiT comparisons use it).
DEFAULT_VARIANT = "cluttered"  # also what a config without data.variant gets
VARIANTS = {
    DEFAULT_VARIANT: DISTORTIONS,
    "clean": Distortions(neighbours=0.0, backgrounds=("flat",), light_ink=0.0, blur=0.0, noise=0.0),
}
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)  # ITU-R BT.601 luminance weights


@dataclass
class _Glyph:
    mask: "np.ndarray"  # uint8 ink coverage of the tight ink box, rendered at the em size of the renderer
    width: int
    height: int


class GlyphRenderer:
    """Renders images of one split: ``render(index)`` -> uint8 HxWx3 array, a pure function of ``index``."""

    def __init__(
        self,
        split: str,
        resolution: int = 32,
        font_root: str | Path = FONT_ROOT,
        fonts: dict[str, list[Path]] | None = None,
        seed: int = SEED,
        distortions: Distortions = DISTORTIONS,
    ):
        if resolution < 8:
            raise DataError(f"glyphs resolution {resolution} is too small; use 8 or more (32 and 64 are the presets)")
        self.split, self.resolution, self.seed, self.d = split, resolution, seed, distortions
        self.font_root = Path(font_root)
        fonts = fonts if fonts is not None else glyph_fonts(self.font_root)
        groups: dict[str, list[Path]] = {}
        for path in fonts[split]:
            groups.setdefault(_font_group(path, self.font_root), []).append(path)
        self.groups = [groups[k] for k in sorted(groups)]
        self.canvas = 2 * resolution  # drawn at twice the size, then box-filtered down (anti-aliasing)
        self.em = int(round(1.5 * self.canvas))
        self._glyphs: dict[tuple[Path, str], _Glyph] = {}
        self._fonts: dict[Path, object] = {}
        y, x = np.mgrid[0 : self.canvas, 0 : self.canvas].astype(np.float32) / (self.canvas - 1) - 0.5
        self._grid = (x, y)

    def _glyph(self, path: Path, char: str) -> _Glyph:
        key = (path, char)
        if key not in self._glyphs:
            if path not in self._fonts:
                self._fonts[path] = ImageFont.truetype(str(path), self.em)
            font = self._fonts[path]
            left, top, right, bottom = font.getbbox(char)
            w, h = max(1, right - left), max(1, bottom - top)
            image = Image.new("L", (w, h), 0)
            ImageDraw.Draw(image).text((-left, -top), char, font=font, fill=255)
            self._glyphs[key] = _Glyph(np.asarray(image), w, h)
        return self._glyphs[key]

    def _place(
        self, glyph: _Glyph, size: float, aspect: float, angle: float, shear: float, cx: float, cy: float
    ) -> "np.ndarray":
        """The glyph's ink box scaled so its larger side is ``size`` canvas pixels, stretched by ``aspect``,
        sheared, rotated by ``angle`` and centred at (cx, cy): float32 coverage on the canvas."""
        s = size / max(glyph.width, glyph.height)
        sx, sy = s * aspect, s
        c, si = math.cos(angle), math.sin(angle)
        # forward map glyph -> canvas: A = R @ Shear @ Scale ; PIL wants the inverse (canvas -> glyph)
        a = np.array([[sx, shear * sy], [0.0, sy]])
        a = np.array([[c, -si], [si, c]]) @ a
        inv = np.linalg.inv(a)
        gx, gy = glyph.width / 2.0, glyph.height / 2.0
        off = np.array([gx, gy]) - inv @ np.array([cx, cy])
        coeffs = (inv[0, 0], inv[0, 1], off[0], inv[1, 0], inv[1, 1], off[1])
        image = Image.fromarray(glyph.mask).transform(
            (self.canvas, self.canvas), Image.AFFINE, [float(v) for v in coeffs], resample=Image.BILINEAR
        )
        return np.asarray(image, dtype=np.float32) / 255.0

    def render(self, index: int) -> "np.ndarray":
        rng = np.random.default_rng((self.seed, 0 if self.split == "train" else 1, index))
        n_classes = len(GLYPH_CLASSES)
        label = index % n_classes
        group = self.groups[rng.integers(len(self.groups))]
        path = group[rng.integers(len(group))]
        C, d = self.canvas, self.d
        # the character: scaled, stretched, rotated, sheared and shifted (Distortions)
        size = C * rng.uniform(*d.size)
        aspect = math.exp(rng.uniform(-d.log_aspect, d.log_aspect))
        angle = math.radians(rng.uniform(-d.rotation, d.rotation))
        shear = rng.uniform(-d.shear, d.shear)
        cx, cy = C * (0.5 + rng.uniform(-d.shift, d.shift)), C * (0.5 + rng.uniform(-d.shift, d.shift))
        main = self._glyph(path, GLYPH_CLASSES[label][1])
        alpha = self._place(main, size, aspect, angle, shear, cx, cy)
        # neighbours: the characters left and right of it in a line of text, cut by the crop
        half_w = 0.5 * size * aspect * main.width / max(main.width, main.height)
        for side in (-1, 1):
            if rng.uniform() < d.neighbours:
                other = self._glyph(path, GLYPH_CLASSES[rng.integers(n_classes)][1])
                o_size = size * rng.uniform(0.85, 1.15)
                o_half = 0.5 * o_size * aspect * other.width / max(other.width, other.height)
                gap = C * rng.uniform(*d.gap)
                ox = cx + side * (half_w + gap + o_half) * math.cos(angle)
                oy = cy + side * (half_w + gap + o_half) * math.sin(angle) + C * rng.uniform(-0.04, 0.04)
                alpha = np.maximum(alpha, self._place(other, o_size, aspect, angle, shear, ox, oy))
        if rng.uniform() < d.blur:  # out-of-focus ink
            blurred = Image.fromarray(np.round(alpha * 255).astype(np.uint8)).filter(
                ImageFilter.GaussianBlur(rng.uniform(0.5, 1.6) * C / 64)
            )
            alpha = np.asarray(blurred, dtype=np.float32) / 255.0
        background = self._background(rng)
        light_ink = rng.uniform() < d.light_ink
        if light_ink == (float(background.mean(axis=(0, 1)) @ _LUMA) > 0.5):  # paper of the wrong brightness
            background = 1.0 - background
        ink = self._ink(rng, background.mean(axis=(0, 1)), d.contrast, light_ink)
        image = background * (1.0 - alpha[..., None]) + ink * alpha[..., None]
        image = image.reshape(C // 2, 2, C // 2, 2, 3).mean(axis=(1, 3))  # 2x2 box filter
        image = image + rng.normal(0.0, rng.uniform(0.0, d.noise), size=image.shape).astype(np.float32)
        return np.clip(np.round(image * 255.0), 0, 255).astype(np.uint8)

    def _background(self, rng) -> "np.ndarray":
        C = self.canvas
        kind = self.d.backgrounds[rng.integers(len(self.d.backgrounds))]
        c0, c1 = rng.uniform(size=3).astype(np.float32), rng.uniform(size=3).astype(np.float32)
        theta = rng.uniform(0, 2 * math.pi)
        coarse = rng.uniform(size=(4, 4, 3)).astype(np.float32)
        x, y = self._grid
        t = (x * math.cos(theta) + y * math.sin(theta))[..., None]
        if kind == "flat":
            return np.broadcast_to(c0, (C, C, 3)).astype(np.float32)
        if kind == "gradient":
            w = np.clip(t + 0.5, 0, 1)
            return (c0 * (1 - w) + c1 * w).astype(np.float32)
        if kind == "split":  # two tones split by a line (the edge of a sign or a page)
            mix = 0.5 * c0 + 0.5 * c1
            return np.where(t > rng.uniform(-0.3, 0.3), c0, mix).astype(np.float32)
        if kind != "noise":
            raise DataError(f"unknown glyphs background {kind!r}; use flat, gradient, split or noise")

        grid = Image.fromarray(np.round(coarse * 255).astype(np.uint8)).resize((C, C), Image.BICUBIC)
        return (0.15 + 0.7 * np.asarray(grid, dtype=np.float32) / 255.0).astype(np.float32)

    @staticmethod
    def _ink(rng, background_mean, contrast: float, light: bool) -> "np.ndarray":
        """An ink colour at least ``contrast`` lighter (``light``) or darker than the background's mean luminance
        (drawn until one is; the candidates are drawn in a fixed batch so the number of draws never depends on the
        background); white or black when none of them is."""
        candidates = rng.uniform(size=(16, 3)).astype(np.float32)
        bg = float(background_mean @ _LUMA)
        for c in candidates:
            if (float(c @ _LUMA) - bg if light else bg - float(c @ _LUMA)) >= contrast:
                return c
        return np.ones(3, np.float32) if light else np.zeros(3, np.float32)


# ----------------------------------------------------------------------------------------- export
def glyphs_folder(
    resolution: int = 32,
    root: str | Path | None = None,
    *,
    train_per_class: int = TRAIN_PER_CLASS,
    val_per_class: int = VAL_PER_CLASS,
    variant: str = DEFAULT_VARIANT,
) -> Path:
    """Where :func:`export_glyphs` renders the set (it exists once rendered: written whole or not at all)."""
    root = Path(root) if root is not None else data_cache()
    name = f"glyphs-{resolution}" if variant == DEFAULT_VARIANT else f"glyphs-{variant}-{resolution}"
    if (train_per_class, val_per_class) != (TRAIN_PER_CLASS, VAL_PER_CLASS):
        name += f"-{train_per_class}x{val_per_class}"
    return root / name


def export_glyphs(
    resolution: int = 32,
    root: str | Path | None = None,
    *,
    font_root: str | Path = FONT_ROOT,
    train_per_class: int = TRAIN_PER_CLASS,
    val_per_class: int = VAL_PER_CLASS,
    progress: bool = True,
    variant: str = DEFAULT_VARIANT,
) -> Path:
    """Render the glyphs dataset once to ``<root>/glyphs-<resolution>/{train,val}/<class>/<n>.png`` (RGB); the
    ``clean`` variant (:data:`VARIANTS`) to ``<root>/glyphs-clean-<resolution>/``.

    53 classes, 21,200 training images from 254 training fonts and 5,300 validation images from 62 held-out fonts
    (Debian bookworm's packages). Written with :func:`harness.core.files.atomic_dir`, so concurrent exporters and
    killed exports never leave a half cache. Smaller ``*_per_class`` (tests) write ``glyphs-<res>-<train>x<val>``.
    """
    distortions = _variant(variant)
    target = glyphs_folder(
        resolution, root, train_per_class=train_per_class, val_per_class=val_per_class, variant=variant
    )
    if target.exists():
        return target
    fonts = glyph_fonts(font_root)  # before anything is written: a missing package fails in one line
    with atomic_dir(target) as tmp:
        if tmp is None:
            return target
        digests = {}
        for split, per_class in (("train", train_per_class), ("val", val_per_class)):
            renderer = GlyphRenderer(split, resolution, font_root, fonts, distortions=distortions)
            for class_name, _ in GLYPH_CLASSES:
                (tmp / split / class_name).mkdir(parents=True, exist_ok=True)
            count = per_class * len(GLYPH_CLASSES)
            digest = hashlib.sha256()
            for i in _progress(range(count), f"{target.name} {split}", progress):
                path = tmp / split / GLYPH_CLASSES[i % len(GLYPH_CLASSES)][0] / f"{i:05d}.png"
                Image.fromarray(renderer.render(i)).save(path, optimize=False, compress_level=6)
                digest.update(path.read_bytes())
            digests[split] = digest.hexdigest()
        manifest = _manifest(resolution, fonts, Path(font_root), digests, train_per_class, val_per_class, variant)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return target


def _variant(variant: str) -> Distortions:
    if variant not in VARIANTS:
        raise DataError(f"data.variant={variant!r}: the glyphs variants are {', '.join(VARIANTS)}")
    return VARIANTS[variant]


def _manifest(resolution, fonts, font_root, digests, train_per_class, val_per_class, variant) -> dict:
    return {
        "name": "glyphs",
        "generator_version": GENERATOR_VERSION,
        "seed": SEED,
        "resolution": resolution,
        "variant": variant,
        "distortions": dataclasses.asdict(VARIANTS[variant]),
        "classes": {name: char for name, char in GLYPH_CLASSES},
        "images": {"train": train_per_class * len(GLYPH_CLASSES), "val": val_per_class * len(GLYPH_CLASSES)},
        "sha256": digests,  # over the PNG bytes of each split, in index order
        "debian_packages": list(FONT_DEBIAN_PACKAGES),
        "fonts": {
            split: [
                {"path": str(p.relative_to(font_root)), "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
                for p in paths
            ]
            for split, paths in fonts.items()
        },
        "versions": {"pillow": PIL.__version__, "freetype": features.version("freetype2"), "numpy": np.__version__},
    }


def sample_sheet(
    resolution: int = 32,
    split: str = "val",
    rows: int = 4,
    scale: int = 2,
    font_root: str | Path = FONT_ROOT,
    variant: str = DEFAULT_VARIANT,
    fonts: dict[str, list[Path]] | None = None,
):
    """A contact sheet of the first ``rows`` x 53 images of ``split`` (one class per column, in class order),
    enlarged ``scale`` times without smoothing: a PIL image for docs and the report. Renders directly (no export).
    ``fonts``: :func:`glyph_fonts`'s answer, for a caller drawing several sheets (the scan is ~2.5 s of CPU)."""
    renderer = GlyphRenderer(split, resolution, font_root, fonts=fonts, distortions=_variant(variant))
    n = len(GLYPH_CLASSES)
    grid = np.concatenate(
        [np.concatenate([renderer.render(r * n + c) for c in range(n)], axis=1) for r in range(rows)], axis=0
    )
    sheet = Image.fromarray(grid)
    return sheet.resize((sheet.width * scale, sheet.height * scale), Image.NEAREST) if scale != 1 else sheet


def fonts_fingerprint(fonts: dict[str, list[Path]], font_root: str | Path = FONT_ROOT) -> str:
    """SHA-256 over the relative paths and bytes of the fonts in use: equal fingerprints (and equal Pillow and
    numpy) mean byte-identical images."""
    digest = hashlib.sha256()
    for split in sorted(fonts):
        for path in fonts[split]:
            digest.update(f"{split}:{Path(path).relative_to(font_root)}\n".encode())
            digest.update(Path(path).read_bytes())
    return digest.hexdigest()


def _progress(iterable, desc: str, enabled: bool):
    if not enabled:
        return iterable
    return tqdm(iterable, desc=desc, unit="img", mininterval=2.0, leave=False)
