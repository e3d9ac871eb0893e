"""``depthbench models``: every model depthbench can build, with parameters and FLOPs.

    depthbench models [PATTERN] [--family baseline|stepsnet|sret|transnext|horesnet|scalenet] [--no-flops] [--json]

    from harness.commands.models import run
    rows = run("steps_*", flops=False)   # [{"name", "family", "input_size", "params_m", "flops_g"}, ...]

The list and the counts are harness/measure/catalog.py (meta device, each model's default input size).
"""

from __future__ import annotations

import fnmatch
import json
import sys
import time
from typing import Callable

from harness.core.choices import FAMILIES
from harness.core.errors import DepthbenchError
from harness.core.wording import plural

__all__ = ["run", "add_parser", "main"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("models", help="list every registered model with params and FLOPs")
    p.add_argument("pattern", nargs="?", default="*", help="shell-style filter on the name, e.g. 'steps_*'")
    p.add_argument("--family", choices=["baseline"] + FAMILIES, help="only this family")
    p.add_argument("--no-flops", action="store_true", help="skip FLOP counting (faster)")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=main)


def run(
    pattern: str = "*",
    *,
    family: str | None = None,
    flops: bool = True,
    on_start: Callable[[list[tuple[str, str]]], None] | None = None,
    on_row: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Every registered model whose name matches the shell-style ``pattern`` (only ``family``'s if given:
    "baseline" or a paper), with its input size, parameters (M) and, if ``flops``, GFLOPs (MACs) -- or the error
    it raised when built. ``on_start`` gets the (name, family) list before any is counted, ``on_row`` each row as
    soon as it is counted (all of them take about a minute on 2 cores)."""
    from harness.engine.launch import configure_threads
    from harness.measure import catalog

    selected = [
        (n, f) for n, f in catalog.registered() if fnmatch.fnmatch(n, pattern) and (not family or f.startswith(family))
    ]
    if not selected:
        raise DepthbenchError(
            f"no model matches {pattern!r}"
            + (f" in family {family}" if family else "")
            + "; patterns are shell-style, e.g. 'steps_*' or '*rk4*'"
        )
    from harness.measure.cache import MeasurementCache

    configure_threads()
    if on_start:
        on_start(selected)
    cache = MeasurementCache()  # counts are measured once per version of the code that defines each model
    rows = []
    try:
        for name, fam in selected:
            rows.append(catalog.describe(name, fam, flops, cache))
            if on_row:
                on_row(rows[-1])
    finally:
        cache.save()
    return rows


def announce(selected, flops: bool) -> int:
    """One line on stderr before a wait: how many models are counted, where the counts go and about how long it
    takes (the whole list: 61 s on 2 cores, issue 58); the number of models to count."""
    from harness.measure.cache import cache_dir
    from harness.measure.catalog import uncounted

    pending = len(uncounted([name for name, _ in selected], flops))
    if pending:
        print(
            f"depthbench models: counting {pending} of {plural(len(selected), 'model')} not in the measurement "
            f"cache yet (the whole list takes about a minute on 2 cores; kept in {cache_dir()} for the next call and for "
            f"verify/results)",
            file=sys.stderr,
            flush=True,
        )
    return pending


def main(args) -> int:
    started, pending = time.monotonic(), 0
    if args.json:  # one JSON document at the end; a progress bar meanwhile when someone watches
        bar = None

        def start(selected):
            nonlocal bar, pending
            pending = announce(selected, not args.no_flops)
            if sys.stderr.isatty() and pending:
                from tqdm import tqdm

                bar = tqdm(total=len(selected), desc="counting", unit="model", leave=False)

        rows = run(
            args.pattern,
            family=args.family,
            flops=not args.no_flops,
            on_start=start,
            on_row=lambda row: bar.update() if bar else None,
        )
        if bar:
            bar.close()
        print(json.dumps(rows, indent=1))
        return 0
    # a table printed row by row as each model is counted
    width = 0

    def header(selected):
        nonlocal width, pending
        pending = announce(selected, not args.no_flops)
        width = max(len(name) for name, _ in selected)
        print(f"{'model':<{width}}  {'family':<16} {'input':>9}  {'params':>9}  {'FLOPs':>8}", flush=True)

    def row(e):
        size = "x".join(str(s) for s in e["input_size"][-2:])
        if "error" in e:
            print(f"{e['name']:<{width}}  {e['family']:<16} {size:>9}  ERROR {e['error']}", flush=True)
            return
        flops = f"{e['flops_g']:.2f}G" if "flops_g" in e else "-"
        print(f"{e['name']:<{width}}  {e['family']:<16} {size:>9}  {e['params_m']:>8.2f}M  {flops:>8}", flush=True)

    rows = run(args.pattern, family=args.family, flops=not args.no_flops, on_start=header, on_row=row)
    counted = f" ({pending} counted in {time.monotonic() - started:.0f} s, cached)" if pending else ""
    print(f"\n{plural(len(rows), 'model')}{counted}")
    return 0
