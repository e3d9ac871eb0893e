"""The claims' embedded dataset (harness/tasks/glyphs.py): 53 characters rendered from Debian's typefaces,
deterministic, validation typefaces held out, the stated size, one-line errors when fonts are missing."""

import hashlib
import json

import numpy as np
import pytest

from harness.core.errors import DataError
from harness.tasks.glyphs import (
    FONT_DEBIAN_PACKAGES,
    GLYPH_CLASSES,
    TRAIN_PER_CLASS,
    VAL_PER_CLASS,
    GlyphRenderer,
    export_glyphs,
    fonts_fingerprint,
    glyph_fonts,
)

# Recorded with Debian bookworm's font packages (tools/setup_env.py), Pillow 13.0.0 (FreeType 2.14.3) and numpy
# 2.4.6 (requirements/lock.txt): the fonts' fingerprint and the SHA-256 of the first 106 images of each split.
FONTS_FINGERPRINT = "5cbe1b4e945b0ae75dae518bad6fcf6087770276147de0c2392452caa4e0882a"
SAMPLE_SHA256 = "c8cbfbc116d236df02a40756306fd0076590da226eb29cce1960ea99241144a0"


@pytest.fixture(scope="module")
def fonts():
    try:
        return glyph_fonts()
    except DataError as e:  # a machine without the font packages: a missing component fails, saying what to install
        pytest.fail(str(e))


def sample_digest(fonts, count=2 * len(GLYPH_CLASSES)) -> str:
    digest = hashlib.sha256()
    for split in ("train", "val"):
        renderer = GlyphRenderer(split, 32, fonts=fonts)
        for i in range(count):
            digest.update(renderer.render(i).tobytes())
    return digest.hexdigest()


def test_classes_are_53_distinct_characters_in_folder_order():
    names, chars = zip(*GLYPH_CLASSES)
    assert len(GLYPH_CLASSES) == 53 and len(set(chars)) == 53
    assert list(names) == sorted(names)  # ImageFolder's sorted order is the class index
    assert len({n.lower() for n in names}) == 53  # safe on case-insensitive file systems
    # no pair a reader could not tell apart once the scale is random
    for a, b in ("O0", "Il", "I1", "Oo", "Ss", "Cc", "Xx"):
        assert not (a in chars and b in chars)


def test_validation_typefaces_are_held_out(fonts):
    assert len(fonts["train"]) >= 200 and len(fonts["val"]) >= 40
    assert not set(fonts["train"]) & set(fonts["val"])
    # whole folders (packages) are held out, so no weight or width of a validation typeface is seen in training
    assert not {p.parent for p in fonts["train"]} & {p.parent for p in fonts["val"]}


def test_rendering_is_deterministic_and_matches_the_recorded_sample(fonts):
    first = sample_digest(fonts)
    assert sample_digest(fonts) == first  # fresh renderers, same bytes
    image = GlyphRenderer("train", 32, fonts=fonts).render(7)
    assert image.shape == (32, 32, 3) and image.dtype == np.uint8 and image.std() > 10
    if fonts_fingerprint(fonts) != FONTS_FINGERPRINT:
        pytest.skip("font files differ from the recorded Debian bookworm packages; byte equality not expected")
    assert first == SAMPLE_SHA256


def test_index_decides_the_image_not_the_order_of_rendering(fonts):
    a, b = GlyphRenderer("val", 32, fonts=fonts), GlyphRenderer("val", 32, fonts=fonts)
    forward = [a.render(i) for i in range(5)]
    backward = [b.render(i) for i in reversed(range(5))][::-1]
    assert all(np.array_equal(x, y) for x, y in zip(forward, backward))


def test_export_layout_counts_manifest_and_cache(fonts, tmp_path):
    root = export_glyphs(32, tmp_path, train_per_class=2, val_per_class=1, progress=False)
    assert root.name == "glyphs-32-2x1"
    classes = sorted(p.name for p in (root / "train").iterdir())
    assert classes == [name for name, _ in GLYPH_CLASSES] == sorted(p.name for p in (root / "val").iterdir())
    counts = {split: sum(1 for _ in (root / split).rglob("*.png")) for split in ("train", "val")}
    assert counts == {"train": 106, "val": 53}
    from PIL import Image

    image = Image.open(root / "val" / GLYPH_CLASSES[3][0] / "00003.png")
    assert image.size == (32, 32) and image.mode == "RGB"
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["images"] == {"train": 106, "val": 53} and len(manifest["classes"]) == 53
    assert manifest["debian_packages"] == list(FONT_DEBIAN_PACKAGES)
    # the digest recorded in the manifest is over the PNG files, in index order
    digest = hashlib.sha256()
    for i in range(106):
        digest.update((root / "train" / GLYPH_CLASSES[i % 53][0] / f"{i:05d}.png").read_bytes())
    assert manifest["sha256"]["train"] == digest.hexdigest()
    # a second call reuses the cache; no temporary folder is left behind
    mtime = (root / "val").stat().st_mtime
    assert export_glyphs(32, tmp_path, train_per_class=2, val_per_class=1) == root
    assert (root / "val").stat().st_mtime == mtime and [p.name for p in tmp_path.iterdir()] == [root.name]


def test_the_full_dataset_has_the_stated_size():
    # the sizes docs/claims.md states: >= 50 classes, >= 20,000 training images at 32x32
    assert len(GLYPH_CLASSES) * TRAIN_PER_CLASS == 21_200 and len(GLYPH_CLASSES) * VAL_PER_CLASS == 5_300


def test_missing_fonts_fail_in_one_line_naming_the_packages(tmp_path):
    with pytest.raises(DataError) as err:
        export_glyphs(32, tmp_path / "cache", font_root=tmp_path / "fonts")
    message = str(err.value)
    assert "\n" not in message and "apt-get install" in message and "fonts-dejavu-core" in message
    assert not (tmp_path / "cache").exists()  # nothing written


def test_a_too_small_resolution_is_refused(fonts):
    with pytest.raises(DataError, match="too small"):
        GlyphRenderer("train", 4, fonts=fonts)


def test_the_clean_variant_is_printed_characters_alone(fonts, tmp_path):
    from harness.tasks.glyphs import VARIANTS

    clean, cluttered = (
        GlyphRenderer("train", 32, fonts=fonts, distortions=VARIANTS[v]) for v in ("clean", "cluttered")
    )
    images = [clean.render(i) for i in range(30)]
    assert all(np.array_equal(image, clean.render(i)) for i, image in enumerate(images))  # a pure function of i
    for image in images:
        luminance = image.astype(np.float32).mean(axis=2)
        border = np.concatenate([luminance[0], luminance[-1], luminance[:, 0], luminance[:, -1]])
        paper = np.median(border)
        assert np.ptp(image, axis=2).max() <= 1 or paper > luminance.min()  # grey ink and paper, or dark on light
        assert luminance.max() <= paper + 1  # flat paper and no pixel noise: nothing is lighter than the paper
        assert luminance.min() < paper - 25  # dark ink (print polarity), never light ink on a dark ground
    # the same indices in the cluttered set have backgrounds, noise and neighbours: other images
    assert sum(np.array_equal(a, cluttered.render(i)) for i, a in enumerate(images)) == 0
    root = export_glyphs(32, tmp_path, train_per_class=1, val_per_class=1, progress=False, variant="clean")
    assert root.name == "glyphs-clean-32-1x1"
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["variant"] == "clean" and manifest["distortions"]["neighbours"] == 0.0
    with pytest.raises(DataError, match="the glyphs variants are cluttered, clean"):
        export_glyphs(32, tmp_path, variant="noisy")


def test_the_report_s_sample_sheets_scan_the_fonts_once(fonts, tmp_path, monkeypatch):
    """The claims report's three sample sheets (train, val, clean val) share one font scan (~2.5 s of CPU each, in
    every claims call)."""
    from PIL import Image

    from results import claims_run

    scans = []
    monkeypatch.setattr(claims_run, "glyph_fonts", lambda *a: scans.append(a) or fonts)  # the name it calls
    path = claims_run._glyph_samples(tmp_path / "glyphs-samples.png")
    assert len(scans) == 1 and Image.open(path).size == (53 * 32, 7 * 32 + 2 * 8)
