"""``depthbench export``: a run's weights as files that are safe to share -- safetensors plus a JSON config.

    depthbench export RUN [--ema] [--checkpoint best|last] --out DIR

    from harness.commands.export import run
    result = run("results/runs/horesnet10-rk4_1xb64-20e_digits/20261126-101500", out="exports/horesnet10")

``DIR`` gets timm's own export layout (``timm.models.save_for_hf``): ``model.safetensors`` (tensors only: loading
it never runs code) and ``config.json`` (the model's timm name as ``architecture``, its keyword arguments as
``model_args``, the pretrained cfg with the preprocessing the run evaluated with -- input size, mean/std,
interpolation, crop_pct, crop_mode: its task's ``data_config`` -- and under ``depthbench`` where the weights came
from and the checkpoint's SHA-256). The model is rebuilt from the run's ``config.json`` -- data, never its
``config.py`` -- and the weights go through the one weights loader (strict), so an export always loads into the
architecture it names, and timm's own data functions evaluate it as the run did::

    import timm, models
    from timm.data import create_transform, resolve_data_config
    model = timm.create_model("local-dir:exports/horesnet10", pretrained=True)
    transform = create_transform(**resolve_data_config({}, model=model))

and depthbench reads the folder wherever it takes weights (``model.pretrained=DIR``, ``eval --checkpoint DIR``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import DepthbenchError

__all__ = ["run", "ExportResult", "add_parser", "main"]


@dataclass
class ExportResult:
    out: Path
    architecture: str
    model_args: dict
    source: Path  # the checkpoint the weights came from
    sha256: str  # of the exported model.safetensors


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "export",
        help="a run's weights as safetensors + config.json (safe to share)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("run", help="a run directory of depthbench train (or its best.pth/last.pth)")
    p.add_argument("--out", required=True, help="the folder to write (must not hold an export already)")
    p.add_argument("--ema", action="store_true", help="export the EMA weights")
    p.add_argument(
        "--checkpoint",
        choices=("best", "last"),
        default="best",
        help="which checkpoint of the run (default best; last when the run has no best.pth)",
    )
    p.set_defaults(func=main)


def main(args) -> int:
    result = run(args.run, out=args.out, ema=args.ema, checkpoint=args.checkpoint)
    print(
        f"exported {result.architecture} ({result.source}{' EMA' if args.ema else ''}) to {result.out}: "
        f"model.safetensors (sha256 {result.sha256[:12]}...), config.json"
    )
    return 0


def run(run_dir: str | Path, *, out: str | Path, ema: bool = False, checkpoint: str = "best") -> ExportResult:
    """Export ``run_dir``'s ``best.pth`` (or ``last.pth``; ``ema``: its EMA weights) to ``out``; see the module
    docstring. Every input is checked before anything is written; ``out`` appears whole or not at all."""
    import os

    from harness.core.files import atomic_dir, check_writable_folder, read_json

    source, run_path = _source(Path(run_dir).expanduser(), checkpoint)
    out = Path(out).expanduser()
    if os.path.islink(out):  # rmdir/rename would act on the link or where it points, not on a folder of ours
        raise DepthbenchError(
            f"--out {out} is a symbolic link; give the path of a new folder (not a link) for the export"
        )
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise DepthbenchError(f"--out {out} exists and is not an empty folder; choose a new folder for the export")
    check_writable_folder(out, "--out", "the export")
    try:  # a config.json that is there but unreadable (a link, a FIFO, too deep, not an object) is one line naming it
        cfg = read_json(run_path / "config.json", inside=run_path, what="config.json")
    except FileNotFoundError:
        raise DepthbenchError(
            f"{run_path} has no config.json (runs before this version kept their config only as "
            f"config.py, which depthbench does not execute); retrain, or export by hand with "
            f"timm.models.save_for_hf"
        ) from None
    except OSError as e:
        raise DepthbenchError(f"{run_path / 'config.json'} is unreadable ({e.strerror or e})") from None
    name, model_args = _architecture(cfg, run_path)
    data_config = _data_config(cfg, run_path)
    model = _build(name, model_args)

    from timm.models import save_for_hf

    from harness.engine.checkpoint import load_weights

    load_weights(model, source, ema=ema)  # strict: every tensor of the architecture, nothing else
    provenance = {
        "run": str(run_path),
        "checkpoint": source.name,
        "ema": ema,
        "checkpoint_sha256": _sha256(source),
        "experiment": cfg.get("experiment"),
    }
    if out.is_dir():
        out.rmdir()  # empty (checked above): atomic_dir fills a sibling and renames it here
    with atomic_dir(out) as tmp:
        save_for_hf(
            model,
            str(tmp),
            model_config={"depthbench": provenance},
            model_args=model_args,
            safe_serialization=True,
            data_config=data_config,
        )
        umask = os.umask(0)
        os.umask(umask)
        for file in tmp.iterdir():  # safetensors writes 0600; a shared export is readable as the umask allows
            file.chmod(0o666 & ~umask)
    digest = _sha256(out / "model.safetensors")
    read_json(out / "config.json", inside=out, what="exported config.json")  # written whole
    return ExportResult(out, name, model_args, source, digest)


def _source(path: Path, checkpoint: str) -> tuple[Path, Path]:
    """``(checkpoint file, its run directory)``."""
    from harness.core.files import no_link_below

    if path.is_file():
        if not (path.parent / "meta.json").is_file():
            raise DepthbenchError(
                f"{path} is not inside a run directory of depthbench train (no meta.json beside "
                f"it): the export needs the run's config"
            )
        return path, path.parent
    if not (path / "meta.json").is_file():
        raise DepthbenchError(f"{path}: not a run directory of depthbench train (no meta.json)")
    names = [f"{checkpoint}.pth"] + (["last.pth"] if checkpoint == "best" else [])
    for name in names:
        no_link_below(path / name, path, what=name)  # a link to another run's checkpoint is refused
        if (path / name).is_file():
            return path / name, path
    raise DepthbenchError(f"{path} has no {' or '.join(names)}; the run wrote no checkpoint yet")


def _architecture(cfg: dict, run_path: Path) -> tuple[str, dict]:
    """The timm name and keyword arguments of a run's model, from its config as data."""
    from harness.engine.models import MODEL_BUILD_KEYS, require_registered

    model = cfg.get("model") if isinstance(cfg.get("model"), dict) else {}
    name = model.get("name")
    if isinstance(model.get("backbone"), dict):
        raise DepthbenchError(_finetune_pointer(model, run_path))
    if not isinstance(name, str) or not name:
        raise DepthbenchError(f"{run_path}/config.json names no model.name; only timm-registered models export")
    if model.get("grow"):
        raise DepthbenchError(
            f"{run_path} grew its model during training (model.grow): the grown architecture is "
            f"not a registered name with arguments, so it does not export to timm's layout"
        )
    require_registered(name)
    args = {k: v for k, v in model.items() if k not in MODEL_BUILD_KEYS}
    data = cfg.get("data") if isinstance(cfg.get("data"), dict) else {}
    if "num_classes" not in args and isinstance(data.get("num_classes"), int):
        args["num_classes"] = data["num_classes"]
    return name, args


def _finetune_pointer(model: dict, run_path: Path) -> str:
    """What to do with a fine-tune run (a detector/segmentor around a timm backbone), which timm's layout cannot
    carry: export the pretraining run its backbone started from, or share the MMEngine checkpoint itself."""
    backbone = model["backbone"]
    init = backbone.get("init_cfg") if isinstance(backbone.get("init_cfg"), dict) else {}
    start = init.get("checkpoint")
    if isinstance(start, str) and start:
        pretrained = Path(start).parent if Path(start).suffix in (".pth", ".safetensors") else Path(start)
        where = f"export the pretraining run its backbone started from: depthbench export {pretrained} --out DIR"
    else:
        where = "its backbone started from random initialisation (no pretraining run to export)"
    return (
        f"{run_path} is a fine-tune ({model.get('type', 'a detector/segmentor')} with backbone "
        f"{backbone.get('model_name') or backbone.get('type')}): timm's export layout holds a classifier, and "
        f"a detector/segmentor is none; {where}; or share the fine-tune's MMEngine checkpoint as it is "
        f"(depthbench test and finetune's load_from read it weights-only)"
    )


def _data_config(cfg: dict, run_path: Path) -> dict | None:
    """The preprocessing the run evaluated with, as timm's data config (its task's, from the config as data; None
    for a task without images): written into the export's ``pretrained_cfg`` in place of the architecture's
    defaults, so timm's ``resolve_data_config`` + ``create_transform`` on the export evaluate as the run did."""
    from mmengine.config import ConfigDict

    from harness.engine.tasks import task_for

    data, aug = (ConfigDict(cfg.get(k) if isinstance(cfg.get(k), dict) else {}) for k in ("data", "aug"))
    if not isinstance(data.get("type"), str):
        raise DepthbenchError(
            f"{run_path}/config.json names no data.type, so the preprocessing the run evaluated "
            f"with is unknown; retrain with this version of depthbench"
        )
    try:
        return task_for(data.type).data_config(data, aug)
    except (AttributeError, KeyError) as e:  # a config.json written before the key existed
        raise DepthbenchError(
            f"{run_path}/config.json lacks a setting of the run's preprocessing ({e}); retrain "
            f"with this version of depthbench"
        ) from None


def _build(name: str, model_args: dict):
    import timm

    import models  # noqa: F401  (registers the paper models)

    try:
        return timm.create_model(name, **model_args)
    except Exception as e:
        raise DepthbenchError(
            f"model {name} does not build with {model_args}: {type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''}"
        ) from None


def _sha256(path: Path) -> str:
    import hashlib

    from harness.core.files import open_file

    digest = hashlib.sha256()
    with open_file(path, max_bytes=None, what="checkpoint") as fh:  # a regular file: no FIFO
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
