"""``depthbench eval``: top-1/top-5 of trained weights on a config's validation set.

    depthbench eval CONFIG --checkpoint PATH|RUN_DIR [--ema] [--input-size N] [--json] [key=value ...]

The model is the config's (with its ``key=value`` overrides); the weights come through
:func:`harness.checkpoint.load_weights` (a run's ``best.pth``/``last.pth`` or any weights file; ``--ema``: the
EMA weights, an error for a run trained without EMA). Every input is checked before the evaluation starts.
:func:`evaluate_checkpoint` is the programmatic form; a later evaluation (e.g. robustness data sets) adds its
data next to :func:`build_eval_loader` here.
"""
from __future__ import annotations

import json


def add_parser(subparsers) -> None:
    e = subparsers.add_parser("eval", help="top-1/top-5 of a checkpoint on the config's validation set")
    e.add_argument("config")
    e.add_argument("overrides", nargs="*", metavar="key=value")
    e.add_argument("--checkpoint", required=True, help="last.pth/best.pth of a run, a run directory, or any "
                                                       "weights file")
    e.add_argument("--ema", action="store_true", help="evaluate the EMA weights")
    e.add_argument("--input-size", type=int, help="evaluation resolution (default: the config's data.input_size)")
    e.add_argument("--json", action="store_true", help="print the result as JSON")
    e.set_defaults(func=main)


def evaluate_checkpoint(config, checkpoint, *, overrides=(), ema: bool = False, input_size: int | None = None) -> dict:
    """``{"top1", "top5", "loss", "images", ...}`` of ``checkpoint``'s weights on ``config``'s validation set."""
    from harness.builders import build_model, check_model
    from harness.checkpoint import load_weights
    from harness.config import load_config
    from harness.data import build_eval_loader, check_data
    from harness.engine import AccelerateBackend, evaluate
    from harness.errors import DepthbenchError
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


def main(args) -> int:
    metrics = evaluate_checkpoint(args.config, args.checkpoint, overrides=args.overrides, ema=args.ema,
                                  input_size=args.input_size)
    if metrics.pop("is_main"):
        print(json.dumps(metrics) if args.json else
              f"{metrics['model']} {'EMA ' if args.ema else ''}@{metrics['input_size']}: top-1 {metrics['top1']:.2f}  "
              f"top-5 {metrics['top5']:.2f}  loss {metrics['loss']:.4f}  ({metrics['images']} images)")
    return 0
