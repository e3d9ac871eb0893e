"""``depthbench eval``: trained weights on a validation set or an evaluation protocol (harness/evaluation.py).

    depthbench eval CONFIG --checkpoint PATH|RUN_DIR [--ema] [--dataset NAME --data DIR] [--input-size N ...]
                    [--pool-mode normal|linear ...] [--analysis SPEC ...] [--out CSV] [--out-run DIR] [--json]
                    [key=value ...]

The model is the config's (with its ``key=value`` overrides); the weights come through
:func:`harness.checkpoint.load_weights` (a run's ``best.pth``/``last.pth`` or any weights file; ``--ema``: the
EMA weights, an error for a run trained without EMA). One row per (pool mode, input size, analysis, metric):
printed as a table, appended to the run directory's ``metrics.jsonl`` as ``{"kind": "eval_suite", ...}`` records
(the checkpoint's run, or ``--out-run``) and, with ``--out``, written as CSV. A record says what was evaluated:
``dataset``, ``input_size``, ``pool_mode`` (TransNeXt; ``normal`` by default), ``analysis``, ``model_overrides``
(model arguments built differently from the run's config, e.g. ``+model.length_scaling=False``); that is how
``depthbench results`` knows the table cell it fills (results/paper_tables.py). Every input is checked before a
model is built. :func:`evaluate_checkpoint` is the programmatic form of the plain validation-set evaluation.
"""
from __future__ import annotations

import json
from pathlib import Path

from harness.errors import DepthbenchError


def add_parser(subparsers) -> None:
    from harness.evaluation import PROTOCOLS

    e = subparsers.add_parser("eval", help="top-1/top-5 of a checkpoint on the validation set or an evaluation "
                                           "protocol (ImageNet-A/R/Sketch/V2/ReaL/C, multi-size, StepsNet analyses)")
    e.add_argument("config")
    e.add_argument("overrides", nargs="*", metavar="key=value")
    e.add_argument("--checkpoint", required=True, help="last.pth/best.pth of a run, a run directory, or any "
                                                       "weights file")
    e.add_argument("--ema", action="store_true", help="evaluate the EMA weights")
    e.add_argument("--dataset", default="val", choices=(*PROTOCOLS, "lm-eval"),
                   help="evaluation protocol (default: the config's validation split); lm-eval: zero-shot tasks of "
                        "a Llama recipe (harness/llm_eval.py)")
    e.add_argument("--tasks", nargs="+", help="--dataset lm-eval: lm-eval task names (default: ScaleNet Table X's "
                                              "seven; depthbench_tiny_mc is local)")
    e.add_argument("--data", help="the protocol's data set folder (its standard layout)")
    e.add_argument("--input-size", type=int, nargs="+",
                   help="evaluation resolution(s), one row each (default: the config's data.input_size)")
    e.add_argument("--pool-mode", nargs="+", choices=("normal", "linear"),
                   help="TransNeXt inference mode(s) (Table 5); linear keeps the pool at the training size's")
    e.add_argument("--analysis", nargs="+", metavar="SPEC",
                   help="StepsNet Tables 6-7, one row each: none | mask_first=N | mask_last=N | drop_last=STEP:K, "
                        "comma-joined, plus stage=S for multi-stage Steps models")
    e.add_argument("--real-labels", help="ReaL labels json (default: the copy bundled with timm)")
    e.add_argument("--corrupt-from", help="imagenet-c: generate the corruptions of this image folder into --data "
                                          "(default on digits configs: the digits val split)")
    e.add_argument("--out", help="also write the rows as CSV here")
    e.add_argument("--out-run", help="run directory to append the rows to (default: the checkpoint's)")
    e.add_argument("--json", action="store_true", help="print the result as JSON")
    e.set_defaults(func=main)


# ----------------------------------------------------------------------------------------- plain evaluation
def evaluate_checkpoint(config, checkpoint, *, overrides=(), ema: bool = False, input_size: int | None = None) -> dict:
    """``{"top1", "top5", "loss", "images", ...}`` of ``checkpoint``'s weights on ``config``'s validation set."""
    from harness.builders import build_model, check_model
    from harness.checkpoint import load_weights
    from harness.config import load_config
    from harness.data import build_eval_loader, check_data
    from harness.engine import AccelerateBackend, evaluate
    from harness.launch import configure_threads, export_distributed_env

    if input_size is not None and input_size < 1:
        raise DepthbenchError(f"--input-size {input_size}: give a positive image side")
    cfg = load_config(config, list(overrides))
    if input_size:
        cfg.data.input_size = input_size
    check_model(cfg)
    check_data(cfg.data)
    model = build_model(cfg, pretrained=False)
    load_weights(model, checkpoint, ema=ema)
    configure_threads(1, cfg.data.workers)
    export_distributed_env()
    backend = AccelerateBackend(cfg.precision, 1)
    val_loader = build_eval_loader(cfg, backend.rank, backend.world_size, cfg.data.eval_batch_size or 64)
    metrics = evaluate(model.to(backend.device), val_loader, backend)
    metrics.update(checkpoint=str(checkpoint), model=cfg.model.name, ema=ema, input_size=cfg.data.input_size,
                   is_main=backend.is_main)
    return metrics


# ----------------------------------------------------------------------------------------- the suite
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
        raise DepthbenchError(f"--analysis {spec!r}: expected none or comma-joined mask_first=N, mask_last=N, "
                              f"drop_last=STEP:K, stage=S (StepsNet Tables 6-7)")
    return kwargs


def checkpoint_run(checkpoint) -> Path | None:
    path = Path(checkpoint).expanduser()
    for folder in (path, path.parent):
        if (folder / "meta.json").is_file():
            return folder
    return None


def _check_checkpoint_model(run: Path | None, name: str) -> None:
    """A checkpoint from a run of another model: said before the model is built."""
    if run is None or not (run / "config.py").is_file():
        return
    from harness.config import load_config

    try:
        trained = load_config(str(run / "config.py"), []).model.name
    except Exception:  # an unreadable run config: load_weights still checks every key
        return
    if trained and trained != name:
        raise DepthbenchError(f"--checkpoint {run} is a {trained} run but the config builds {name}; "
                              f"evaluate it with that run's config ({run / 'config.py'})")


def run_suite(args) -> list[dict]:
    """The rows of one ``depthbench eval`` call (see the module docstring)."""
    import torch

    import models  # noqa: F401
    from harness import evaluation as ev
    from harness.builders import build_model, check_model, model_kwargs
    from harness.checkpoint import load_weights
    from harness.config import load_config
    from harness.data import build_transform, check_data, data_cache, data_root
    from harness.launch import configure_threads

    sizes = args.input_size or [None]
    if any(s is not None and s < 1 for s in sizes):
        raise DepthbenchError(f"--input-size {' '.join(map(str, sizes))}: give positive image sides")
    analyses = [(spec, parse_analysis(spec)) for spec in (args.analysis or ["none"])]
    cfg = load_config(args.config, list(args.overrides))
    name, protocol = cfg.model.name, args.dataset
    train_size = cfg.data.input_size
    if args.analysis and not name.startswith("steps_"):
        raise DepthbenchError(f"--analysis needs a StepsNet model (steps_*), not {name}")
    check_model(cfg)
    for size in sizes:  # every size on the meta device first: a model with a fixed input size fails here
        if size and size != train_size:
            cfg.data.input_size = size
            check_model(cfg)
    cfg.data.input_size = train_size
    if args.pool_mode and "transnext" not in name:
        raise DepthbenchError(f"--pool-mode is TransNeXt's inference mode (Table 5); {name} has none")
    num_classes = model_kwargs(cfg)["num_classes"]
    data_dir, corrupt_from = args.data, args.corrupt_from
    if protocol == "val":
        if args.data:
            raise DepthbenchError("--data is for --dataset protocols; the validation split is the config's "
                                  "data.root (override it with data.root=DIR)")
        check_data(cfg.data)
    elif protocol == "imagenet-c" and corrupt_from is None and cfg.data.type == "digits":
        corrupt_from = data_root(cfg.data) / cfg.data.val_split
        data_dir = data_dir or data_cache() / f"digits-{cfg.data.input_size}-c"
    if protocol != "val" and not data_dir:
        raise DepthbenchError(f"--dataset {protocol} needs --data DIR ({ev.LAYOUTS[protocol]})")
    if corrupt_from is not None and protocol != "imagenet-c":
        raise DepthbenchError("--corrupt-from generates ImageNet-C-style data; use it with --dataset imagenet-c")
    if args.real_labels and protocol != "imagenet-real":
        raise DepthbenchError("--real-labels belongs to --dataset imagenet-real")
    real_labels = ev.load_real_labels(args.real_labels) if protocol == "imagenet-real" else None
    if not Path(args.checkpoint).expanduser().exists():
        raise DepthbenchError(f"--checkpoint {args.checkpoint}: no such file or run directory")
    run = Path(args.out_run) if args.out_run else checkpoint_run(args.checkpoint)
    if args.out_run and not (run / "meta.json").is_file():
        raise DepthbenchError(f"--out-run {run} is not a run directory (no meta.json)")
    _check_checkpoint_model(checkpoint_run(args.checkpoint), name)
    model_overrides = _model_overrides(cfg, run, args.config)
    if corrupt_from is not None:
        ev.generate_corruptions(corrupt_from, data_dir)
    if protocol != "val":
        ev.check_dataset(protocol, data_dir, num_classes)

    configure_threads(1, cfg.data.workers)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    batch = cfg.data.eval_batch_size or 64
    rows = []
    for pool_mode in (args.pool_mode or [None]):
        if pool_mode:
            cfg.model.pool_mode = pool_mode
            cfg.model.setdefault("pretrain_size", train_size)  # linear mode: pool = training size / 32
        model = build_model(cfg, pretrained=False)
        load_weights(model, args.checkpoint, ema=args.ema)
        model.to(device).eval()
        for size in sizes:
            cfg.data.input_size = size or train_size
            transform = build_transform(cfg.data, cfg.aug, is_training=False)
            for spec, kwargs in analyses:
                base = dict(kind="eval_suite", dataset=protocol, protocol=protocol, model=name,
                            input_size=cfg.data.input_size,
                            pool_mode=pool_mode or cfg.model.get("pool_mode") or ("normal" if "transnext" in name
                                                                                 else None),
                            analysis=spec, model_overrides=model_overrides, checkpoint=str(args.checkpoint),
                            ema=args.ema)
                with _analysis(model, kwargs):
                    metrics = _score(ev, protocol, model, cfg, data_dir, corrupt_from, transform, batch, device,
                                     real_labels)
                images = metrics.pop("images", None)
                rows += [dict(base, metric=metric, value=value, images=images) for metric, value in metrics.items()]
    if run is not None:
        from harness.rundir import RunDir

        rundir = RunDir(run)
        for row in rows:
            rundir.log_metrics(**row)
    return rows


def _plain(value):
    """A config value as plain JSON data (ConfigDicts, tuples)."""
    return json.loads(json.dumps(value.to_dict() if hasattr(value, "to_dict") else value, default=str))


def _model_overrides(cfg, run: Path | None, config) -> dict:
    """The model arguments this evaluation builds differently from the run it is recorded into (e.g.
    ``+model.length_scaling=False`` for TransNeXt Table 5's rows): they say which table row the numbers belong
    to (results/compare.py). Compared with the run's resolved config.py, so overrides the training run had too
    (a digits preset's ``model.width=32``) are not differences; without a run config: the config file's own model.
    ``pool_mode`` (--pool-mode) is recorded on its own."""
    from harness.config import load_config

    trained = None
    if run is not None and (run / "config.py").is_file():
        try:
            trained = load_config(str(run / "config.py"), []).model
        except Exception:  # an unreadable run config: compare with the config file instead
            trained = None
    if trained is None:
        trained = load_config(config, []).model
    trained, now = _plain(trained), _plain(cfg.model)
    return {k: v for k, v in now.items() if k not in ("pool_mode", "pretrain_size") and trained.get(k) != v}


class _analysis:
    """``stepsnet_analysis`` with its argument errors as one DepthbenchError line."""

    def __init__(self, model, kwargs):
        self.model, self.kwargs, self.context = model, kwargs, None

    def __enter__(self):
        if not self.kwargs:
            return None
        from models.stepsnet import stepsnet_analysis

        self.context = stepsnet_analysis(self.model, **self.kwargs)
        try:
            return self.context.__enter__()
        except ValueError as e:
            raise DepthbenchError(f"--analysis: {e}") from None

    def __exit__(self, *exc):
        return self.context.__exit__(*exc) if self.context else False


def _score(ev, protocol, model, cfg, data_dir, corrupt_from, transform, batch, device, real_labels) -> dict:
    from harness.data import build_dataset

    if protocol == "val":
        dataset = build_dataset(cfg.data, cfg.aug, cfg.data.val_split, is_training=False)
        logits, targets = ev.predict(model, dataset, batch, device)
        return ev.topk_accuracy(logits, targets) | {"images": len(targets)}
    root = Path(data_dir).expanduser()
    if protocol in ("imagenet-a", "imagenet-r", "imagenet-sketch", "imagenet-v2"):
        logits, targets = ev.predict(model, ev.image_folder(root, transform, protocol), batch, device)
        if protocol in ("imagenet-a", "imagenet-r"):
            logits = ev.restrict_to_subset(logits, ev.subset_indices(protocol))
        return ev.topk_accuracy(logits, targets) | {"images": len(targets)}
    if protocol == "imagenet-real":
        dataset = ev.image_folder(root, transform, protocol)
        logits, _ = ev.predict(model, dataset, batch, device)
        return ev.real_accuracy(logits, dataset.filenames(basename=True), real_labels)
    # imagenet-c: top-1 error per (corruption, severity); clean error from the uncorrupted folder when known
    errors = {}
    for c in ev.CORRUPTIONS:
        for s in ev.SEVERITIES:
            folder = root / c / str(s)
            logits, targets = ev.predict(model, ev.image_folder(folder, transform, protocol), batch, device)
            errors[(c, s)] = 1.0 - ev.topk_accuracy(logits, targets, ks=(1,))["top1"] / 100.0
    clean = None
    if corrupt_from is not None:
        logits, targets = ev.predict(model, ev.image_folder(Path(corrupt_from), transform, protocol), batch, device)
        clean = 1.0 - ev.topk_accuracy(logits, targets, ks=(1,))["top1"] / 100.0
    result = {k: 100.0 * v for k, v in ev.corruption_errors(errors, clean).items()}
    if clean is not None:
        result["clean_error"] = 100.0 * clean
    return result | {"images": len(targets)}


def _record_plain(args, metrics: dict) -> None:
    """The plain evaluation's top-1/top-5/loss as eval_suite records of the checkpoint's run, like the suite's
    (an evaluation at another size or with changed model arguments is a table cell: TransNeXt Table 5)."""
    run = checkpoint_run(args.checkpoint)
    if run is None:
        return
    from harness.config import load_config
    from harness.rundir import RunDir

    cfg = load_config(args.config, list(args.overrides))
    name = cfg.model.name
    base = dict(kind="eval_suite", dataset="val", protocol="val", model=name, input_size=metrics["input_size"],
                pool_mode=cfg.model.get("pool_mode") or ("normal" if "transnext" in name else None), analysis="none",
                model_overrides=_model_overrides(cfg, run, args.config), checkpoint=str(args.checkpoint), ema=args.ema)
    rundir = RunDir(run)
    for metric in ("top1", "top5", "loss"):
        if metric in metrics:
            rundir.log_metrics(**base, metric=metric, value=metrics[metric], images=metrics.get("images"))


def format_rows(rows: list[dict]) -> str:
    lines = [f"{'dataset':<16} {'size':>5} {'pool':<7} {'analysis':<18} {'metric':<28} {'value':>8}"]
    for r in rows:
        lines.append(f"{r['dataset']:<16} {r['input_size']:>5} {str(r['pool_mode'] or '-'):<7} {r['analysis']:<18} "
                     f"{r['metric']:<28} {r['value']:>8.2f}")
    return "\n".join(lines)


def main(args) -> int:
    if args.dataset == "lm-eval":  # language-model tasks through EleutherAI's harness
        from harness.llm_eval import main as lm_eval_main

        return lm_eval_main(args)
    if getattr(args, "tasks", None):
        raise DepthbenchError("--tasks belongs to --dataset lm-eval")
    plain = (args.dataset == "val" and not args.pool_mode and not args.analysis and not args.out and not args.out_run
             and len(args.input_size or [None]) == 1 and not args.data and not args.real_labels
             and not args.corrupt_from)
    if plain:  # the validation set at one size: the engine's distributed evaluation (loss included)
        metrics = evaluate_checkpoint(args.config, args.checkpoint, overrides=args.overrides, ema=args.ema,
                                      input_size=(args.input_size or [None])[0])
        if metrics.pop("is_main"):
            _record_plain(args, metrics)
            print(json.dumps(metrics) if args.json else
                  f"{metrics['model']} {'EMA ' if args.ema else ''}@{metrics['input_size']}: top-1 "
                  f"{metrics['top1']:.2f}  top-5 {metrics['top5']:.2f}  loss {metrics['loss']:.4f}  "
                  f"({metrics['images']} images)")
        return 0
    rows = run_suite(args)
    if args.out:
        import pandas as pd

        from harness.rundir import atomic_write

        atomic_write(args.out, pd.DataFrame(rows).to_csv(index=False))
    print("\n".join(json.dumps(r) for r in rows) if args.json else format_rows(rows))
    return 0
