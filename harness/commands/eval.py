"""``depthbench eval``: trained weights on a validation set or an evaluation protocol (harness/tasks/protocols.py).

    depthbench eval CONFIG --checkpoint PATH|RUN_DIR [--ema] [--dataset NAME --data DIR] [--input-size N ...]
                    [--pool-mode normal|linear ...] [--analysis SPEC ...] [--out CSV] [--out-run DIR] [--json]
                    [key=value ...]

The model is the config's (with its ``key=value`` overrides); the weights come through
:func:`harness.engine.checkpoint.load_weights` (a run's ``best.pth``/``last.pth`` or any weights file; ``--ema``: the
EMA weights, an error for a run trained without EMA). One row per (pool mode, input size, analysis, metric):
printed as a table, appended to the run directory's ``metrics.jsonl`` as ``{"kind": "eval_suite", ...}`` records
(the checkpoint's run, or ``--out-run``) and, with ``--out``, written as CSV. A record says what was evaluated:
``dataset``, ``input_size``, ``pool_mode`` (TransNeXt; ``normal`` by default), ``analysis``, ``model_overrides``
(model arguments built differently from the run's config, e.g. ``+model.length_scaling=False``); that is how
``depthbench results`` knows the table cell it fills (results/paper_tables.py). Every input is checked before a
model is built. ``--dataset lm-eval``: zero-shot lm-eval tasks of a Llama recipe (harness/tasks/lm_eval.py).

    from harness.commands.eval import run
    result = run("configs/demo/steps-deit-w64-d8_1xb64-8e_digits.py", "results/runs/x/20260101-000000",
                 input_size=[16, 24])     # EvalResult: [{"metric": "top1", "value": ..., ...}, ...]
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.choices import PROTOCOLS

if TYPE_CHECKING:
    from results.evaluate import EvalResult

__all__ = ["run", "add_parser", "main"]


def add_parser(subparsers) -> None:
    e = subparsers.add_parser(
        "eval",
        help="top-1/top-5 of a checkpoint on the validation set or an evaluation "
        "protocol (ImageNet-A/R/Sketch/V2/ReaL/C, multi-size, StepsNet analyses)",
    )
    e.add_argument("config")
    e.add_argument("overrides", nargs="*", metavar="key=value")
    e.add_argument(
        "--checkpoint", required=True, help="last.pth/best.pth of a run, a run directory, or any weights file"
    )
    e.add_argument("--ema", action="store_true", help="evaluate the EMA weights")
    e.add_argument(
        "--dataset",
        default="val",
        choices=(*PROTOCOLS, "lm-eval"),
        help="evaluation protocol (default: the config's validation split); lm-eval: zero-shot tasks of "
        "a Llama recipe (harness/tasks/lm_eval.py)",
    )
    e.add_argument(
        "--tasks",
        nargs="+",
        help="--dataset lm-eval: lm-eval task names (default: ScaleNet Table X's seven; depthbench_tiny_mc is local)",
    )
    e.add_argument("--data", help="the protocol's data set folder (its standard layout)")
    e.add_argument(
        "--input-size",
        type=int,
        nargs="+",
        help="evaluation resolution(s), one row each (default: the config's data.input_size)",
    )
    e.add_argument(
        "--pool-mode",
        nargs="+",
        choices=("normal", "linear"),
        help="TransNeXt inference mode(s) (Table 5); linear keeps the pool at the training size's",
    )
    e.add_argument(
        "--analysis",
        nargs="+",
        metavar="SPEC",
        help="StepsNet Tables 6-7, one row each: none | mask_first=N | mask_last=N | drop_last=STEP:K, "
        "comma-joined, plus stage=S for multi-stage Steps models",
    )
    e.add_argument("--real-labels", help="ReaL labels json (default: the copy bundled with timm)")
    e.add_argument(
        "--corrupt-from",
        help="imagenet-c: generate the corruptions of this image folder into --data "
        "(default on digits configs: the digits val split)",
    )
    e.add_argument("--out", help="also write the rows as CSV here")
    e.add_argument("--out-run", help="run directory to append the rows to (default: the checkpoint's)")
    e.add_argument("--json", action="store_true", help="print the result as JSON")
    e.set_defaults(func=main)


def main(args) -> int:
    result = run(
        args.config,
        args.checkpoint,
        overrides=args.overrides,
        ema=args.ema,
        dataset=args.dataset,
        tasks=args.tasks,
        data=args.data,
        input_size=args.input_size,
        pool_mode=args.pool_mode,
        analysis=args.analysis,
        real_labels=args.real_labels,
        corrupt_from=args.corrupt_from,
        out=args.out,
        out_run=args.out_run,
    )
    if result.kind == "plain":
        metrics = result.metrics
        if result.is_main:
            print(
                json.dumps(metrics)
                if args.json
                else f"{metrics['model']} {'EMA ' if args.ema else ''}@{metrics['input_size']}: top-1 "
                f"{metrics['top1']:.2f}  top-5 {metrics['top5']:.2f}  loss {metrics['loss']:.4f}  "
                f"({metrics['images']} images)"
            )
        _say_where(result)
        return 0
    table = _lm_table if result.kind == "lm-eval" else _suite_table
    print("\n".join(json.dumps(r) for r in result.rows) if args.json else table(result.rows))
    sys.stdout.flush()
    _say_where(result)
    return 0


def _say_where(result: EvalResult) -> None:
    """The last line: where the rows went (stderr: stdout is the table or JSON a script reads)."""
    places = [f"{result.recorded / 'metrics.jsonl'}"] if result.recorded else []
    places += [str(result.out)] if result.out else []
    if result.is_main and places:
        print(f"depthbench eval: rows recorded in {' and '.join(places)}", file=sys.stderr, flush=True)


def run(
    config: str | Path,
    checkpoint: str | Path,
    *,
    overrides=(),
    ema: bool = False,
    dataset: str = "val",
    tasks=None,
    data=None,
    input_size=None,
    pool_mode=None,
    analysis=None,
    real_labels=None,
    corrupt_from=None,
    out=None,
    out_run=None,
) -> EvalResult:
    """Evaluate ``checkpoint`` (a run directory, its best.pth/last.pth, or any weights file) under ``config``
    (with ``key=value`` ``overrides``); the keyword arguments are the command's options.

    ``dataset``: ``val`` (the config's validation split), an ImageNet protocol (harness/tasks/protocols.py, its
    folder ``data``), or ``lm-eval`` (``tasks``; default ScaleNet Table X's). ``input_size``, ``pool_mode``,
    ``analysis``, ``tasks``: one value or a list (one row each). The rows are appended to the checkpoint's run
    (or ``out_run``; opened as its one writer, so a run another process is writing is refused before any work)
    and, with ``out``, written as CSV (its folder checked first). A run's own config is read as data
    (config.json), never executed: only ``config`` is. Bad input raises :class:`DepthbenchError` before any model
    is built. With nothing but the validation split at one size, this is the engine's (distributed) evaluation,
    loss included: ``metrics`` holds its numbers.
    """
    from results.evaluate import evaluate

    return evaluate(
        config,
        checkpoint,
        overrides=overrides,
        ema=ema,
        dataset=dataset,
        tasks=tasks,
        data=data,
        input_size=input_size,
        pool_mode=pool_mode,
        analysis=analysis,
        real_labels=real_labels,
        corrupt_from=corrupt_from,
        out=out,
        out_run=out_run,
    )


def _suite_table(rows: list[dict]) -> str:
    lines = [f"{'dataset':<16} {'size':>5} {'pool':<7} {'analysis':<18} {'metric':<28} {'value':>8}"]
    for r in rows:
        lines.append(
            f"{r['dataset']:<16} {r['input_size']:>5} {str(r['pool_mode'] or '-'):<7} {r['analysis']:<18} "
            f"{r['metric']:<28} {r['value']:>8.2f}"
        )
    return "\n".join(lines)


def _lm_table(rows: list[dict]) -> str:
    lines = [f"{'task':<22} {'metric':<9} {'value':>7} {'stderr':>7} {'samples':>8}"]
    for r in rows:
        stderr = f"{r['stderr']:.2f}" if isinstance(r.get("stderr"), float) and math.isfinite(r["stderr"]) else "-"
        lines.append(f"{r['dataset']:<22} {r['metric']:<9} {r['value']:>7.2f} {stderr:>7} {r['samples'] or '-':>8}")
    return "\n".join(lines)
