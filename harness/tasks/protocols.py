"""The evaluation protocols of ``depthbench eval --dataset NAME``: robustness sets, ReaL labels, ImageNet-C.

Every protocol reads its data set's standard folder layout as timm's ImageFolder reader does, through depthbench's
(:class:`harness.tasks.image.ImageFolder`: no link out of the folder, no FIFO; with a class map from folder name
to ImageNet-1k index where the layout names synsets) and scores a model's logits:

- ``val``              the config's own validation split (``data.*``), top-1/top-5.
- ``imagenet-a``       ``<root>/<synset>/*.jpg`` (its 200 classes; TransNeXt Table 1). Logits restricted to
                       the 200-class subset (timm's ``_info/imagenet_a_indices.txt``, Hendrycks et al. 2021).
- ``imagenet-r``       the same with ImageNet-R's 200 classes (``_info/imagenet_r_indices.txt``).
- ``imagenet-sketch``  ``<root>/<synset>/*`` over the 1,000 classes, all logits.
- ``imagenet-v2``      ``<root>/<0..999>/*`` (matched-frequency release: folders named by class index).
- ``imagenet-real``    ImageNet val images ``ILSVRC2012_val_XXXXXXXX.JPEG`` (flat or in class folders) scored
                       against the ReaL label sets (Beyer et al. 2020; timm bundles ``imagenet_real_labels.json``).
- ``imagenet-c``       ``<root>/<corruption>/<severity 1..5>/<class>/*`` for the 15 corruptions; top-1 error
                       per (corruption, severity), corruption errors normalised by AlexNet's, mCE and relative
                       mCE (Hendrycks & Dietterich, ICLR 2019, §3). :func:`generate_corruptions` writes that
                       layout from any image folder with the ``imagecorruptions`` package.

The checks (:func:`check_dataset`) run before any model is built. :func:`evaluate_suite` is one ``depthbench eval``
over these protocols (sizes, TransNeXt pool modes, StepsNet analyses; rows recorded into the run directory),
:func:`evaluate_checkpoint` + :func:`record_plain` the plain validation-set evaluation with the engine's loop.
"""

from __future__ import annotations

import json
import os
import pkgutil
import shutil
from pathlib import Path

import numpy as np
import torch
from PIL import Image

import models  # noqa: F401
from harness.core.choices import PROTOCOLS, not_one_of
from harness.core.config import load_config
from harness.core.errors import DepthbenchError
from harness.core.files import BadFile, atomic_dir, data_cache, read_json
from harness.core.rundir import checkpoint_run
from harness.engine import builders  # builders.build_model looked up when called (tests check nothing is built)
from harness.engine.builders import check_model
from harness.engine.checkpoint import load_weights
from harness.engine.data import build_dataset, build_eval_loader, check_data
from harness.engine.evaluation import evaluate, evaluation_backend
from harness.engine.launch import configure_threads, export_distributed_env
from harness.engine.models import model_kwargs
from harness.tasks.image import ImageFolder, build_transform, data_root, decode_image
from models.stepsnet import stepsnet_analysis

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".webp", ".tif", ".tiff", ".ppm")

# The 15 ImageNet-C test corruptions (Hendrycks & Dietterich 2019, Fig. 1), in the paper's order.
CORRUPTIONS = (
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "defocus_blur",
    "glass_blur",
    "motion_blur",
    "zoom_blur",
    "snow",
    "frost",
    "fog",
    "brightness",
    "contrast",
    "elastic_transform",
    "pixelate",
    "jpeg_compression",
)
SEVERITIES = (1, 2, 3, 4, 5)

# AlexNet's top-1 error on ImageNet-C, averaged over the 5 severities, per corruption: the normaliser of the
# Corruption Error, CE_c = sum_s E_{s,c} / sum_s E^AlexNet_{s,c} (Hendrycks & Dietterich, ICLR 2019, §3). The
# paper prints no per-corruption AlexNet table; these are the values its authors published with the ImageNet-C
# release (github.com/hendrycks/robustness) and that the field reuses unchanged; checked digit for digit against
# the copies in AugMix-style ImageNet-C scripts (ALEXNET_ERR) and MMClassification's get_ce_alexnet().
ALEXNET_ERROR = {
    "gaussian_noise": 0.886428,
    "shot_noise": 0.894468,
    "impulse_noise": 0.922640,
    "defocus_blur": 0.819880,
    "glass_blur": 0.826268,
    "motion_blur": 0.785948,
    "zoom_blur": 0.798360,
    "snow": 0.866816,
    "frost": 0.826572,
    "fog": 0.819324,
    "brightness": 0.564592,
    "contrast": 0.853204,
    "elastic_transform": 0.646056,
    "pixelate": 0.717840,
    "jpeg_compression": 0.606500,
}
# AlexNet's clean ImageNet top-1 error, the relative mCE's E^AlexNet_clean (same paper, §3; its results table
# prints AlexNet's clean error as 43.5 %). The AlexNet the paper evaluates is torchvision's pretrained one
# (ImageNet-C/test.py loads it), whose published top-1 is 56.522 % (torchvision AlexNet_Weights.IMAGENET1K_V1,
# tests/harness/tasks/test_protocols.py reads it), so its clean error is 43.478 %; 43.478 rounds to the printed
# 43.5 (the 43.45 used before had no source and does not match torchvision's number).
ALEXNET_CLEAN_ERROR = 1 - 0.56522

IMAGENET_PROTOCOLS = PROTOCOLS[1:]


# ----------------------------------------------------------------------------------------- timm's label files
def _timm_info(name: str) -> list[str]:
    return pkgutil.get_data("timm.data", f"_info/{name}").decode().split()


def imagenet_synsets() -> list[str]:
    return _timm_info("imagenet_synsets.txt")


def subset_indices(protocol: str) -> list[int]:
    """ImageNet-1k indices of ImageNet-A's / ImageNet-R's 200 classes (timm's files)."""
    return [int(i) for i in _timm_info(f"imagenet_{protocol[-1]}_indices.txt")]


def subset_synsets(protocol: str) -> list[str]:
    return _timm_info(f"imagenet_{protocol[-1]}_synsets.txt")


# ----------------------------------------------------------------------------------------- layout checks
def _class_folders(root: Path) -> list[str]:
    return sorted(e.name for e in os.scandir(root) if e.is_dir())


def _has_images(folder: Path) -> bool:
    for _, _, files in os.walk(folder):
        if any(f.lower().endswith(IMAGE_EXTENSIONS) for f in files):
            return True
    return False


def check_dataset(protocol: str, root, num_classes: int) -> None:
    """One DepthbenchError line naming the expected layout when ``root`` is not ``protocol``'s data set."""
    if protocol not in PROTOCOLS:
        raise DepthbenchError(not_one_of("--dataset", protocol, PROTOCOLS))
    if protocol == "val":
        return
    if protocol != "imagenet-c" and num_classes != 1000:
        raise DepthbenchError(
            f"--dataset {protocol} scores ImageNet-1k logits, but the model has {num_classes} "
            "classes; evaluate an ImageNet-1k config/checkpoint"
        )
    root = Path(root).expanduser()
    if not root.is_dir():
        raise DepthbenchError(f"--data {root} does not exist; expected {LAYOUTS[protocol]}")
    if protocol == "imagenet-c":
        _check_imagenet_c(root, num_classes)
        return
    folders = _class_folders(root)
    if protocol in ("imagenet-a", "imagenet-r"):
        expected = subset_synsets(protocol)
        missing = sorted(set(expected) - set(folders))
        if missing:
            raise DepthbenchError(
                f"--data {root} lacks {len(missing)} of {protocol}'s 200 class folders (e.g. "
                f"{missing[0]}); expected {LAYOUTS[protocol]}"
            )
    elif protocol == "imagenet-sketch":
        missing = sorted(set(imagenet_synsets()) - set(folders))
        if missing:
            raise DepthbenchError(
                f"--data {root} lacks {len(missing)} of ImageNet's 1000 synset folders (e.g. "
                f"{missing[0]}); expected {LAYOUTS[protocol]}"
            )
    elif protocol == "imagenet-v2":
        missing = sorted(set(map(str, range(1000))) - set(folders), key=int)
        if missing:
            raise DepthbenchError(
                f"--data {root} lacks {len(missing)} of the class folders 0..999 (e.g. "
                f"{missing[0]}); expected {LAYOUTS[protocol]}"
            )
    elif protocol == "imagenet-real":
        if not any(name.startswith("ILSVRC2012_val_") for _, _, files in os.walk(root) for name in files):
            raise DepthbenchError(f"--data {root} holds no ILSVRC2012_val_*.JPEG images; expected {LAYOUTS[protocol]}")
        return
    if not _has_images(root):
        raise DepthbenchError(f"--data {root} holds no images; expected {LAYOUTS[protocol]}")


def _check_imagenet_c(root: Path, num_classes: int) -> None:
    for corruption in CORRUPTIONS:
        for severity in SEVERITIES:
            folder = root / corruption / str(severity)
            if not folder.is_dir() or not _has_images(folder):
                raise DepthbenchError(
                    f"--data {root}: {folder} is missing or holds no images; expected "
                    f"{LAYOUTS['imagenet-c']} (or generate it with --corrupt-from FOLDER)"
                )
    classes = _class_folders(root / CORRUPTIONS[0] / "1")
    if len(classes) > num_classes:
        raise DepthbenchError(f"--data {root} has {len(classes)} classes but the model has {num_classes}")


LAYOUTS = {
    "imagenet-a": "ImageNet-A's layout <root>/<synset>/*.jpg with its 200 synset folders (n01498041, ...)",
    "imagenet-r": "ImageNet-R's layout <root>/<synset>/*.jpg with its 200 synset folders (n01443537, ...)",
    "imagenet-sketch": "ImageNet-Sketch's layout <root>/<synset>/*.JPEG with the 1000 ImageNet synset folders",
    "imagenet-v2": "ImageNetV2's layout <root>/<0..999>/*.jpeg (imagenetv2-matched-frequency-format-val)",
    "imagenet-real": "ImageNet's val images <root>/[<synset>/]ILSVRC2012_val_XXXXXXXX.JPEG (ReaL labels by file)",
    "imagenet-c": "ImageNet-C's layout <root>/<corruption>/<1..5>/<class>/* for its 15 corruptions",
}


# ----------------------------------------------------------------------------------------- data
def class_map(folder: Path, protocol: str) -> dict | None:
    """Folder name -> model class index: synsets/indices to ImageNet-1k positions, else ImageFolder's order."""
    if protocol == "imagenet-v2":
        return {str(i): i for i in range(1000)}
    if protocol in ("imagenet-a", "imagenet-r", "imagenet-sketch") or (
        protocol == "imagenet-c" and set(_class_folders(folder)) <= set(imagenet_synsets())
    ):
        return {s: i for i, s in enumerate(imagenet_synsets())}
    return None


def image_folder(folder: Path, transform, protocol: str):
    """The evaluation set ``folder`` as timm's ImageFolder reads it (labels: ``protocol``'s class map), walked and
    read by depthbench's :class:`~harness.tasks.image.ImageFolder`: timm's walk follows every link, out of the
    folder and round a loop, and its reader opens a FIFO and waits."""
    return ImageFolder(folder, transform, class_to_idx=class_map(folder, protocol))


def predict(model, dataset, batch_size: int, device, workers: int = 0):
    """``(logits, targets)`` over the whole ``dataset`` in order."""
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=workers)
    model.eval()
    logits, targets = [], []
    for images, labels in loader:
        with torch.no_grad():
            logits.append(model(images.to(device)).float().cpu())
        targets.append(labels)
    return torch.cat(logits), torch.cat(targets)


def topk_accuracy(logits, targets, ks=(1, 5)) -> dict:
    top = logits.topk(min(max(ks), logits.shape[1]), dim=1).indices
    hits = top == targets[:, None]
    return {f"top{k}": 100.0 * hits[:, :k].any(dim=1).float().mean().item() for k in ks}


def restrict_to_subset(logits, indices):
    """Logits of classes outside ``indices`` set to -inf: the argmax is taken over the subset only, and the
    prediction stays an ImageNet-1k index (timm's validate.py slices instead; same ranking)."""
    keep = torch.full((logits.shape[1],), float("-inf"))
    keep[list(indices)] = 0.0
    return logits + keep


def real_accuracy(logits, filenames, real_labels: list, ks=(1, 5)) -> dict:
    """Top-k against the ReaL label sets; images whose set is empty are left out (Beyer et al. 2020, §4).
    Hand-written because timm's RealLabelsImagenet asserts the complete 50,000-image val set."""
    top = logits.topk(max(ks), dim=1).indices.tolist()
    correct, counted = {k: 0 for k in ks}, 0
    for pred, name in zip(top, filenames):
        number = int(Path(name).stem.rsplit("_", 1)[-1])
        labels = real_labels[number - 1]
        if not labels:
            continue
        counted += 1
        for k in ks:
            correct[k] += any(p in labels for p in pred[:k])
    return {f"top{k}": 100.0 * correct[k] / max(counted, 1) for k in ks} | {"images": counted}


def load_real_labels(path=None) -> list:
    if path is None:
        return json.loads(pkgutil.get_data("timm.data", "_info/imagenet_real_labels.json").decode())

    try:
        return read_json(path, expect=list, what="--real-labels")
    except (OSError, BadFile) as e:
        raise DepthbenchError(f"--real-labels {path}: not a readable ReaL labels json ({e})") from None


# ----------------------------------------------------------------------------------------- ImageNet-C
def corruption_errors(errors: dict, clean_error: float | None = None) -> dict:
    """``errors[(corruption, severity)]`` = top-1 error (fraction) -> CE per corruption, mCE and relative mCE
    (fractions; Hendrycks & Dietterich 2019, §3: CE_c = sum_s E_{s,c} / sum_s E^AlexNet_{s,c},
    relative CE_c = sum_s (E_{s,c} - E_clean) / sum_s (E^AlexNet_{s,c} - E^AlexNet_clean), means over c)."""
    out = {}
    ces, rel = [], []
    for c in CORRUPTIONS:
        mean = float(np.mean([errors[(c, s)] for s in SEVERITIES]))
        out[f"error/{c}"] = mean
        ces.append(mean / ALEXNET_ERROR[c])
        out[f"CE/{c}"] = ces[-1]
        if clean_error is not None:
            rel.append((mean - clean_error) / (ALEXNET_ERROR[c] - ALEXNET_CLEAN_ERROR))
    out["mean_error"] = float(np.mean([out[f"error/{c}"] for c in CORRUPTIONS]))
    out["mCE"] = float(np.mean(ces))
    if clean_error is not None:
        out["relative_mCE"] = float(np.mean(rel))
    return out


def _at_least_32(image):
    """imagecorruptions refuses images under 32 px (its noise and frost patterns); smaller ones (the 16 px
    digits) are upsampled to 32 first; the evaluation transform resizes to the input size anyway."""
    if min(image.size) >= 32:
        return image
    scale = 32 / min(image.size)
    return image.resize((round(image.width * scale), round(image.height * scale)), Image.BILINEAR)


def generate_corruptions(source, target, corruptions=CORRUPTIONS, severities=SEVERITIES) -> Path:
    """Write ImageNet-C-style corrupted copies of the image folder ``source`` (``<class>/<image>``) to
    ``target/<corruption>/<severity>/<class>/<image>.png`` with the ``imagecorruptions`` package (images under
    32 px are upsampled to 32 first, the package's minimum). Written into a
    temporary folder and renamed, so an interrupted run leaves no half data set; an existing target is kept."""
    source, target = Path(source).expanduser(), Path(target).expanduser()
    if all((target / c / str(s)).is_dir() for c in corruptions for s in severities):
        return target
    if not source.is_dir() or not _class_folders(source):
        raise DepthbenchError(f"--corrupt-from {source}: expected an image folder <class>/<image>")
    try:
        from imagecorruptions import corrupt
    except ImportError:
        raise DepthbenchError(
            "generating corruptions needs the imagecorruptions package: "
            "pip install imagecorruptions-imaug (the maintained fork; `make setup` installs it)"
        )

    files = [
        (cls, p)
        for cls in _class_folders(source)
        for p in sorted((source / cls).iterdir())
        if p.suffix.lower() in IMAGE_EXTENSIONS and p.is_file()
    ]
    images = [(cls, p.stem, np.asarray(_at_least_32(decode_image(p)))) for cls, p in files]  # one line per bad one
    shutil.rmtree(target, ignore_errors=True)  # an incomplete set (written by hand, or before this was atomic)
    with atomic_dir(target) as tmp:
        for c in corruptions if tmp is not None else ():  # None: another process wrote it meanwhile
            for s in severities:
                rng_state = np.random.get_state()
                np.random.seed(1000 * s + corruptions.index(c))  # the package draws noise from numpy's global RNG
                for cls, stem, pixels in images:
                    out = tmp / c / str(s) / cls
                    out.mkdir(parents=True, exist_ok=True)
                    corrupted = corrupt(pixels, corruption_name=c, severity=s)
                    corrupted = np.clip(np.asarray(corrupted), 0, 255).astype(np.uint8)
                    corrupted = corrupted[: pixels.shape[0], : pixels.shape[1]]  # some corruptions pad odd sizes
                    Image.fromarray(corrupted).save(out / f"{stem}.png")
                np.random.set_state(rng_state)
    return target


# ----------------------------------------------------------------------------------------- one evaluation
def evaluate_checkpoint(config, checkpoint, *, overrides=(), ema: bool = False, input_size: int | None = None) -> dict:
    """``{"top1", "top5", "loss", "images", ..., "is_main"}`` of ``checkpoint``'s weights on ``config``'s
    validation set, with the engine's (distributed) evaluation; ``is_main``: this process reports."""
    if input_size is not None and input_size < 1:
        raise DepthbenchError(f"--input-size {input_size}: give a positive image side")
    cfg = load_config(config, list(overrides))
    if input_size:
        cfg.data.input_size = input_size
    check_model(cfg)
    check_data(cfg.data)
    model = builders.build_model(cfg, pretrained=False)
    load_weights(model, checkpoint, ema=ema)
    configure_threads(1, cfg.data.workers)
    export_distributed_env()
    backend = evaluation_backend(cfg.precision)
    val_loader = build_eval_loader(cfg, backend.rank, backend.world_size, cfg.data.eval_batch_size or 64)
    metrics = evaluate(model.to(backend.device), val_loader, backend)
    metrics.update(
        checkpoint=str(checkpoint),
        model=cfg.model.name,
        ema=ema,
        input_size=cfg.data.input_size,
        is_main=backend.is_main,
    )
    return metrics


def record_plain(
    config,
    checkpoint,
    metrics: dict,
    *,
    overrides=(),
    ema: bool = False,
    record_into=None,
    trained_model: dict | None = None,
) -> list[dict]:
    """The plain evaluation's top-1/top-5/loss as eval_suite rows like the suite's, appended to ``record_into``
    (the checkpoint's run, opened by the caller) when given (an evaluation at another size or with changed model
    arguments is a table cell: TransNeXt Table 5). ``trained_model``: that run's model config, as data."""
    cfg = load_config(config, list(overrides))
    name = cfg.model.name
    base = dict(
        kind="eval_suite",
        dataset="val",
        protocol="val",
        model=name,
        input_size=metrics["input_size"],
        pool_mode=cfg.model.get("pool_mode") or ("normal" if "transnext" in name else None),
        analysis="none",
        model_overrides=model_overrides(cfg, trained_model, config),
        checkpoint=str(checkpoint),
        ema=ema,
    )
    rows = [
        dict(base, metric=metric, value=metrics[metric], images=metrics.get("images"))
        for metric in ("top1", "top5", "loss")
        if metric in metrics
    ]
    if record_into is not None:
        for row in rows:
            record_into.log_metrics(**row)
    return rows


def parse_analysis(spec: str) -> dict:
    """``mask_first=64,stage=2`` -> ``stepsnet_analysis`` keyword arguments (``none`` -> {})."""
    if spec == "none":
        return {}
    kwargs = {}
    for part in spec.split(","):
        key, sep, value = part.partition("=")
        try:
            if key in ("mask_first", "mask_last", "stage") and sep:
                kwargs[key] = int(value)
                continue
            if key == "drop_last" and sep:
                step, _, k = value.partition(":")
                kwargs.setdefault("drop_last", {})[int(step)] = int(k)
                continue
        except ValueError:
            pass
        raise DepthbenchError(
            f"--analysis {spec!r}: expected none or comma-joined mask_first=N, mask_last=N, "
            f"drop_last=STEP:K, stage=S (StepsNet Tables 6-7)"
        )
    return kwargs


def check_checkpoint_model(trained_model: dict | None, run: Path | None, name: str) -> None:
    """A checkpoint from a run of another model (``trained_model``: that run's model config, as data): said before
    the model is built."""
    trained = (trained_model or {}).get("name")
    if trained and isinstance(trained, str) and trained != name:
        raise DepthbenchError(
            f"--checkpoint {run} is a {trained} run but the config builds {name}; "
            f"evaluate it with that run's config ({run / 'config.py'})"
        )


def evaluate_suite(
    config,
    checkpoint,
    *,
    overrides=(),
    ema: bool = False,
    protocol: str = "val",
    data=None,
    input_sizes=None,
    pool_modes=None,
    analyses=None,
    real_labels=None,
    corrupt_from=None,
    record_into=None,
    trained_model: dict | None = None,
    checkpoint_model: dict | None = None,
) -> list[dict]:
    """The rows of one ``depthbench eval`` protocol evaluation: one per (pool mode, input size, analysis,
    metric), appended to ``record_into`` (a RunDir the caller opened: the checkpoint's run or ``--out-run``) as
    ``{"kind": "eval_suite", ...}`` records. ``trained_model``: the model config of that run, ``checkpoint_model``:
    of the checkpoint's run -- data read by the caller (config.json), never a run's config.py executed. Every
    input is checked before a model is built."""
    sizes = list(input_sizes or [None])
    if any(s is not None and s < 1 for s in sizes):
        raise DepthbenchError(f"--input-size {' '.join(map(str, sizes))}: give positive image sides")
    specs = [(spec, parse_analysis(spec)) for spec in (analyses or ["none"])]
    cfg = load_config(config, list(overrides))
    name = cfg.model.name
    train_size = cfg.data.input_size
    if analyses and not name.startswith("steps_"):
        raise DepthbenchError(f"--analysis needs a StepsNet model (steps_*), not {name}")
    check_model(cfg)
    for size in sizes:  # every size on the meta device first: a model with a fixed input size fails here
        if size and size != train_size:
            cfg.data.input_size = size
            check_model(cfg)
    cfg.data.input_size = train_size
    if pool_modes and "transnext" not in name:
        raise DepthbenchError(f"--pool-mode is TransNeXt's inference mode (Table 5); {name} has none")
    num_classes = model_kwargs(cfg)["num_classes"]
    data_dir = data
    if protocol == "val":
        if data:
            raise DepthbenchError(
                "--data is for --dataset protocols; the validation split is the config's "
                "data.root (override it with data.root=DIR)"
            )
        check_data(cfg.data)
    elif protocol == "imagenet-c" and corrupt_from is None and cfg.data.type == "digits":
        corrupt_from = data_root(cfg.data) / cfg.data.val_split
        data_dir = data_dir or data_cache() / f"digits-{cfg.data.input_size}-c"
    if protocol != "val" and not data_dir:
        raise DepthbenchError(f"--dataset {protocol} needs --data DIR ({LAYOUTS[protocol]})")
    if corrupt_from is not None and protocol != "imagenet-c":
        raise DepthbenchError("--corrupt-from generates ImageNet-C-style data; use it with --dataset imagenet-c")
    if real_labels and protocol != "imagenet-real":
        raise DepthbenchError("--real-labels belongs to --dataset imagenet-real")
    labels = load_real_labels(real_labels) if protocol == "imagenet-real" else None
    if not Path(checkpoint).expanduser().exists():
        raise DepthbenchError(f"--checkpoint {checkpoint}: no such file or run directory")
    check_checkpoint_model(checkpoint_model, checkpoint_run(checkpoint), name)
    changed = model_overrides(cfg, trained_model, config)
    if corrupt_from is not None:
        generate_corruptions(corrupt_from, data_dir)
    if protocol != "val":
        check_dataset(protocol, data_dir, num_classes)

    configure_threads(1, cfg.data.workers)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    batch = cfg.data.eval_batch_size or 64
    rows = []
    for pool_mode in pool_modes or [None]:
        if pool_mode:
            cfg.model.pool_mode = pool_mode
            cfg.model.setdefault("pretrain_size", train_size)  # linear mode: pool = training size / 32
        model = builders.build_model(cfg, pretrained=False)
        load_weights(model, checkpoint, ema=ema)
        model.to(device).eval()
        for size in sizes:
            cfg.data.input_size = size or train_size
            transform = build_transform(cfg.data, cfg.aug, is_training=False)
            for spec, kwargs in specs:
                base = dict(
                    kind="eval_suite",
                    dataset=protocol,
                    protocol=protocol,
                    model=name,
                    input_size=cfg.data.input_size,
                    pool_mode=pool_mode or cfg.model.get("pool_mode") or ("normal" if "transnext" in name else None),
                    analysis=spec,
                    model_overrides=changed,
                    checkpoint=str(checkpoint),
                    ema=ema,
                )
                with _analysis(model, kwargs):
                    metrics = _score(protocol, model, cfg, data_dir, corrupt_from, transform, batch, device, labels)
                images = metrics.pop("images", None)
                rows += [dict(base, metric=metric, value=value, images=images) for metric, value in metrics.items()]
    if record_into is not None:
        for row in rows:
            record_into.log_metrics(**row)
    return rows


def _plain(value):
    """A config value as plain JSON data (ConfigDicts, tuples)."""
    return json.loads(json.dumps(value.to_dict() if hasattr(value, "to_dict") else value, default=str))


def model_overrides(cfg, trained_model: dict | None, config) -> dict:
    """The model arguments this evaluation builds differently from the run it is recorded into (e.g.
    ``+model.length_scaling=False`` for TransNeXt Table 5's rows): they say which table row the numbers belong
    to (results/compare.py). Compared with that run's resolved model config (``trained_model``, read as data), so
    overrides the training run had too (a digits preset's ``model.width=32``) are not differences; without one:
    the config file's own model (the file the user named). ``pool_mode`` (--pool-mode) is recorded on its own."""
    trained = trained_model if trained_model is not None else load_config(config, []).model
    trained, now = _plain(trained), _plain(cfg.model)
    return {k: v for k, v in now.items() if k not in ("pool_mode", "pretrain_size") and trained.get(k) != v}


class _analysis:
    """``stepsnet_analysis`` with its argument errors as one DepthbenchError line."""

    def __init__(self, model, kwargs):
        self.model, self.kwargs, self.context = model, kwargs, None

    def __enter__(self):
        if not self.kwargs:
            return None

        self.context = stepsnet_analysis(self.model, **self.kwargs)
        try:
            return self.context.__enter__()
        except ValueError as e:
            raise DepthbenchError(f"--analysis: {e}") from None

    def __exit__(self, *exc):
        return self.context.__exit__(*exc) if self.context else False


def _score(protocol, model, cfg, data_dir, corrupt_from, transform, batch, device, real_labels) -> dict:
    if protocol == "val":
        dataset = build_dataset(cfg.data, cfg.aug, cfg.data.val_split, is_training=False)
        logits, targets = predict(model, dataset, batch, device)
        return topk_accuracy(logits, targets) | {"images": len(targets)}
    root = Path(data_dir).expanduser()
    if protocol in ("imagenet-a", "imagenet-r", "imagenet-sketch", "imagenet-v2"):
        logits, targets = predict(model, image_folder(root, transform, protocol), batch, device)
        if protocol in ("imagenet-a", "imagenet-r"):
            logits = restrict_to_subset(logits, subset_indices(protocol))
        return topk_accuracy(logits, targets) | {"images": len(targets)}
    if protocol == "imagenet-real":
        dataset = image_folder(root, transform, protocol)
        logits, _ = predict(model, dataset, batch, device)
        return real_accuracy(logits, dataset.filenames(basename=True), real_labels)
    # imagenet-c: top-1 error per (corruption, severity); clean error from the uncorrupted folder when known
    errors = {}
    for c in CORRUPTIONS:
        for s in SEVERITIES:
            folder = root / c / str(s)
            logits, targets = predict(model, image_folder(folder, transform, protocol), batch, device)
            errors[(c, s)] = 1.0 - topk_accuracy(logits, targets, ks=(1,))["top1"] / 100.0
    clean = None
    if corrupt_from is not None:
        logits, targets = predict(model, image_folder(Path(corrupt_from), transform, protocol), batch, device)
        clean = 1.0 - topk_accuracy(logits, targets, ks=(1,))["top1"] / 100.0
    result = {k: 100.0 * v for k, v in corruption_errors(errors, clean).items()}
    if clean is not None:
        result["clean_error"] = 100.0 * clean
    return result | {"images": len(targets)}
