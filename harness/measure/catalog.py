"""``depthbench models``: every model depthbench can build, with parameters and FLOPs.

Families are the five papers' model files under ``models/`` plus the timm baselines the papers compare
against. Counts come from ``harness.flops`` on the meta device, at each model's default input size.
"""
from __future__ import annotations

import fnmatch
import json
import sys

FAMILIES = ["stepsnet", "sret", "transnext", "horesnet", "scalenet"]
BASELINES = ["resnet18", "resnet34", "resnet50",
             "deit_tiny_patch16_224", "deit_small_patch16_224", "deit_base_patch16_224",
             "swin_tiny_patch4_window7_224", "swin_small_patch4_window7_224", "swin_base_patch4_window7_224"]


def registered() -> list[tuple[str, str]]:
    """(name, family) of every model, baselines first, then each paper's models in registration order."""
    import timm

    import models  # noqa: F401  (registers our models)

    rows = [(name, "baseline (timm)") for name in BASELINES]
    for family in FAMILIES:
        rows += [(name, family) for name in timm.list_models(module=family)]
    return rows


def default_input_size(name: str):
    import timm

    import models  # noqa: F401  (registers the paper models' cfgs: without it a paper model fell back to 224²)

    cfg = timm.models.get_pretrained_cfg(name)
    return tuple(cfg.input_size) if cfg and cfg.input_size else (3, 224, 224)


def describe(name: str, family: str, with_flops: bool = True) -> dict:
    from harness.flops import build_model, count_flops, count_params

    input_size = default_input_size(name)
    entry = {"name": name, "family": family, "input_size": list(input_size)}
    try:
        model = build_model(name)
        entry["params_m"] = round(count_params(model) / 1e6, 3)
        if with_flops:
            entry["flops_g"] = round(count_flops(model, input_size).giga, 3)
    except Exception as e:  # list the model anyway, with what went wrong
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        entry["error"] = f"{type(e).__name__}: {first}"  # the first line, whole
    return entry


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("models", help="list every registered model with params and FLOPs")
    p.add_argument("pattern", nargs="?", default="*", help="shell-style filter on the name, e.g. 'steps_*'")
    p.add_argument("--family", choices=["baseline"] + FAMILIES, help="only this family")
    p.add_argument("--no-flops", action="store_true", help="skip FLOP counting (faster)")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=main)


def main(args) -> int:
    from harness.errors import DepthbenchError
    from harness.launch import configure_threads

    selected = [(n, f) for n, f in registered()
                if fnmatch.fnmatch(n, args.pattern) and (not args.family or f.startswith(args.family))]
    if not selected:
        raise DepthbenchError(f"no model matches {args.pattern!r}" + (f" in family {args.family}" if args.family else "")
                              + "; patterns are shell-style, e.g. 'steps_*' or '*rk4*'")
    configure_threads()
    if args.json:  # one JSON document at the end; a progress bar meanwhile when someone watches
        items = selected
        if sys.stderr.isatty():
            from tqdm import tqdm
            items = tqdm(selected, desc="counting", unit="model", leave=False)
        print(json.dumps([describe(n, f, not args.no_flops) for n, f in items], indent=1))
        return 0
    # a table printed row by row as each model is counted (all of them take about a minute on 2 cores)
    width = max(len(name) for name, _ in selected)
    print(f"{'model':<{width}}  {'family':<16} {'input':>9}  {'params':>9}  {'FLOPs':>8}", flush=True)
    for name, family in selected:
        e = describe(name, family, not args.no_flops)
        size = "x".join(str(s) for s in e["input_size"][-2:])
        if "error" in e:
            print(f"{e['name']:<{width}}  {e['family']:<16} {size:>9}  ERROR {e['error']}", flush=True)
            continue
        flops = f"{e['flops_g']:.2f}G" if "flops_g" in e else "-"
        print(f"{e['name']:<{width}}  {e['family']:<16} {size:>9}  {e['params_m']:>8.2f}M  {flops:>8}", flush=True)
    print(f"\n{len(selected)} models")
    return 0
