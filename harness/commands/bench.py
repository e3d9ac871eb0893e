"""``depthbench bench``: models measured side by side, interleaved, against the machine's own limit.

    depthbench bench MODEL... [--config CONFIG] [--model-kwargs k=v ...] [--mode infer|train|both]
                     [--batch-size B] [--input-size S | H W] [--amp bf16|fp16] [--channels-last] [--compile]
                     [--grad-checkpointing] [--optimizer sgd|adamw|adamw-foreach|adamw-fused]
                     [--compare compile|channels-last|grad-checkpointing|bf16|fused|foreach ...]
                     [--threads T] [--device cpu|cuda] [--clock wall|cpu] [--repeats R] [--out CSV] [--pairs PAPER[:GROUP]]

    from harness.commands.bench import run
    result = run(["resnet18", "resnet34"], input_size=32, batch_size=2)   # BenchResult(rows, pairs, ...)

How it measures (interleaved rounds, the peak matmul, MFU, peak memory) is harness/measure/bench.py. ``--out``
appends the rows to a CSV in timm's benchmark columns plus ours (never overwriting earlier rows; a preset's pairs go
to ``<name>_pairs.csv`` beside it). See docs/benchmarks.md.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from harness.measure.presets import AMP_DTYPES, COMPARE, MODES, OPTIMIZERS, PAPERS, PRESETS

if TYPE_CHECKING:
    from harness.measure.bench import BenchResult

__all__ = ["run", "add_parser", "main"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "bench",
        help="models side by side (interleaved): throughput, spread, MFU, peak memory; timm's CSV",
        description="Interleaved benchmark of registered models, timm benchmark.py style. Put --model-kwargs "
        "after the model names; key=value words after all options override --config keys.",
    )
    p.add_argument("models", nargs="*", metavar="MODEL", help="registered model names (`depthbench models`)")
    p.add_argument(
        "--config", help="a training config: bench the model it trains (name, model kwargs, classes, input size)"
    )
    p.add_argument(
        "--model-kwargs",
        nargs="+",
        default=[],
        metavar="K=V",
        help="keyword arguments for timm.create_model, e.g. drop_path_rate=0.1 (Python literals)",
    )
    p.add_argument(
        "--pairs",
        metavar="PAPER[:GROUP]",
        help=f"a preset of model pairs with the paper's claims: {', '.join(PAPERS)} or one of {', '.join(PRESETS)}",
    )
    p.add_argument("--mode", choices=list(MODES), default="infer")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument(
        "--input-size",
        type=int,
        nargs="+",
        default=None,
        metavar="S",
        help="side, or H W (default: each model's own input size)",
    )
    p.add_argument("--amp", choices=list(AMP_DTYPES), help="autocast dtype (default fp32)")
    p.add_argument("--channels-last", action="store_true", help="NHWC weights and inputs")
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile each model (compiled during warm-up); with --pairs: the papers' claims, compiled",
    )
    p.add_argument(
        "--grad-checkpointing", action="store_true", help="training with the models' set_grad_checkpointing(True)"
    )
    p.add_argument(
        "--optimizer",
        choices=list(OPTIMIZERS),
        default="sgd",
        help="the training step's optimizer (default sgd with momentum, as timm's benchmark)",
    )
    p.add_argument(
        "--compare",
        nargs="+",
        choices=list(COMPARE),
        default=[],
        metavar="OPTION",
        help="also run every model with OPTION changed, interleaved, and pair them: "
        f"{', '.join(COMPARE)} (fused/foreach: against plain AdamW)",
    )
    p.add_argument(
        "--threads",
        type=int,
        help="CPU threads; the process is pinned to that many cores (default: every core it may use)",
    )
    p.add_argument(
        "--device", choices=["cpu", "cuda"], default=None, help="default: cuda when a CUDA device is visible, else cpu"
    )
    p.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="what a step's seconds are: wall time (default) or the process's CPU time (CPU only; on a loaded "
        "machine it leaves out the time spent waiting for a core -- compare runs of equal --threads)",
    )
    p.add_argument("--repeats", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument("--iters", type=int, default=2, help="timed steps per model per round (default 2)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per model first (default 2)")
    p.add_argument(
        "--peak-size",
        type=int,
        default=None,
        metavar="N",
        help="side of the matmul that measures the machine's peak (default 2048 CPU, 8192 CUDA)",
    )
    p.add_argument(
        "--no-memory",
        dest="memory",
        action="store_false",
        help="skip the CPU peak-memory processes (one per model and mode)",
    )
    p.add_argument(
        "--out",
        metavar="CSV",
        help="append rows to this CSV (timm's columns + ours); pairs go to CSV's name + _pairs.csv",
    )
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=main, overrides=[])


def main(args) -> int:
    from harness.engine.models import parse_model_kwargs
    from harness.measure.bench_report import format_pairs, format_ratios, format_table

    # `key=value` words after the model names are config overrides (argparse hands them over as model names)
    models = [m for m in args.models if "=" not in m]
    overrides = list(args.overrides) + [m for m in args.models if "=" in m]

    def show(result: BenchResult) -> None:  # before the CSV is written: a failed write leaves the table on screen
        if args.json:
            print(json.dumps({"models": result.rows, "pairs": result.pairs}, indent=1))
            return
        print(format_table(result.rows, result.modes))
        if result.pairs:
            print()
            print(format_pairs(result.pairs, result.modes))
        elif len(result.rows) > 1:  # `bench A B`: how B compares with A, without a preset
            print()
            print(format_ratios(result.rows, result.modes))

    result = run(
        models,
        config=args.config,
        overrides=overrides,
        model_kwargs=parse_model_kwargs(args.model_kwargs),
        pairs=args.pairs,
        mode=args.mode,
        batch_size=args.batch_size,
        input_size=args.input_size,
        amp=args.amp,
        channels_last=args.channels_last,
        compile=args.compile,
        grad_checkpointing=args.grad_checkpointing,
        optimizer=args.optimizer,
        compare=args.compare,
        threads=args.threads,
        device=args.device,
        clock=args.clock,
        repeats=args.repeats,
        iters=args.iters,
        warmup=args.warmup,
        peak_size=args.peak_size,
        memory=args.memory,
        out=args.out,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
        show=show,
    )
    if result.out:
        print(
            f"depthbench bench: wrote {result.out}" + (f" and {result.pairs_out}" if result.pairs_out else ""),
            file=sys.stderr,
        )
    return 0


def run(
    models: Sequence[str] = (),
    *,
    config: str | Path | None = None,
    overrides: Sequence[str] = (),
    model_kwargs: dict | None = None,
    pairs: str | None = None,
    mode: str = "infer",
    batch_size: int = 8,
    input_size: int | Sequence[int] | None = None,
    amp: str | None = None,
    channels_last: bool = False,
    compile: bool = False,
    grad_checkpointing: bool = False,
    optimizer: str = "sgd",
    compare: Sequence[str] = (),
    threads: int | None = None,
    device: str | None = None,
    clock: str = "wall",
    repeats: int = 5,
    iters: int = 2,
    warmup: int = 2,
    peak_size: int | None = None,
    memory: bool = True,
    out: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    show: Callable[[BenchResult], None] | None = None,
) -> BenchResult:
    """Benchmark the registered ``models``, the model a training ``config`` trains (with ``key=value``
    ``overrides``) and a ``pairs`` preset ("paper" or "paper:group") side by side, interleaved.

    ``model_kwargs`` go to every model's ``timm.create_model``; ``input_size``: a side or (H, W) (default: each
    model's own); ``mode``: infer, train or both; ``threads``: CPU threads, the process pinned to as many cores
    (default: every core it may use); ``clock``: "wall" or "cpu" (the process's CPU time, CPU only);
    ``compile``/``channels_last``/``grad_checkpointing``/``amp``/``optimizer``:
    how every model runs; ``compare``: names of :data:`~harness.measure.bench.COMPARE` -- every model also runs
    with that option changed, interleaved, and each pair's ratios are reported. ``out``: append the rows to this
    CSV (the pairs to ``<name>_pairs.csv``); it is checked before any work. ``progress`` gets a status line at the
    start and after each mode; ``show`` gets the result before the CSV is written. Returns a
    :class:`~harness.measure.bench.BenchResult`: one row per model (timm's benchmark columns + ours), one per pair.
    """
    from harness.measure.bench import BenchOptions, run_bench

    options = BenchOptions(
        mode=mode,
        batch_size=batch_size,
        amp=amp,
        channels_last=channels_last,
        compile=compile,
        grad_checkpointing=grad_checkpointing,
        optimizer=optimizer,
        compare=tuple(compare),
        threads=threads,
        device=device,
        clock=clock,
        repeats=repeats,
        iters=iters,
        warmup=warmup,
        peak_size=peak_size,
        memory=memory,
    )
    return run_bench(
        models,
        options,
        config=config,
        overrides=overrides,
        model_kwargs=model_kwargs,
        pairs=pairs,
        input_size=input_size,
        out=out,
        progress=progress,
        show=show,
    )
