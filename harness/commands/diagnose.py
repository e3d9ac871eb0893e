"""``depthbench diagnose``: depth diagnostics of residual models.

``depthbench diagnose shortcut-ratio MODEL [MODEL ...]`` measures StepsNet's shortcut ratio (Sec. 3, Fig. 2)
``γ_l = σ_0 / σ_l`` after every residual block l, where σ is the per-token standard deviation over channels
(what a LayerNorm sees), averaged over tokens and the batch; σ_0 is taken on the input of the first block
(for DeiT: patch embedding + cls + position embedding). For StepsNet models the state after a block is the
full-width ``[current step output, untouched slices]`` (docs/stepsnet.md, "Depth diagnostic"), so StepsNet and its baseline are
measured on the same C channels. γ near 0 means the block input is dominated by accumulated residuals.

Writes a run directory (``harness/core/rundir.py``): ``meta.json``, ``metrics.jsonl`` (one record per block),
``shortcut_ratio.csv`` and ``shortcut_ratio.png`` (γ_l against l/L, one curve per model).

    from harness.commands.diagnose import run
    result = run(["deit_tiny_patch16_224", "steps_deit_tiny"], input_size=32, batch_size=2)
    result.summary["steps_deit_tiny"]["mean_gamma"], result.run_dir      # DiagnoseResult

The measurement itself is harness/measure/diagnose.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import DepthbenchError

__all__ = ["run", "DiagnoseResult", "add_parser", "main"]


@dataclass
class DiagnoseResult:
    """The run directory written, and per model its records (one per block, block 0 = the input) and summary
    (blocks, mean_gamma, min_gamma, last_gamma)."""

    run_dir: Path
    curves: dict[str, list[dict]] = field(default_factory=dict)
    summary: dict[str, dict] = field(default_factory=dict)

    @property
    def csv(self) -> Path:
        return self.run_dir / "shortcut_ratio.csv"

    @property
    def plot(self) -> Path:
        return self.run_dir / "shortcut_ratio.png"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "diagnose", help="depth diagnostics (shortcut ratio) of residual models", description=__doc__.split("\n\n")[0]
    )
    sub = p.add_subparsers(dest="diagnostic", metavar="DIAGNOSTIC")
    s = sub.add_parser(
        "shortcut-ratio", help="γ_l = σ_0/σ_l per block (StepsNet Sec. 3, Fig. 2)", description=__doc__.split("\n\n")[1]
    )
    s.add_argument("models", nargs="*", metavar="MODEL", help="registered model name(s), one curve each")
    s.add_argument(
        "--config",
        help="a training config: measure the model it trains (its model.* arguments, e.g. "
        "the digits preset's width=32), first; pair it with that run's --checkpoint",
    )
    s.add_argument(
        "--model-kwargs",
        nargs="+",
        default=[],
        metavar="K=V",
        help="arguments for the named models, as timm's benchmark (e.g. --model-kwargs width=32)",
    )
    s.add_argument(
        "--checkpoint",
        action="append",
        metavar="PATH",
        help="state dict to load, one per model in order ('-' = at init); default: all at init",
    )
    s.add_argument("--data", default="random", help="'random' (Gaussian images, default) or an ImageFolder directory")
    s.add_argument("--input-size", type=int, help="image side (sequence length for language models)")
    s.add_argument("--batch-size", type=int, default=8)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--device", default="cpu")
    s.add_argument("--out-dir", help="root of the run directory (default: results/runs)")
    s.add_argument("--json", action="store_true", help="print the per-model summary as JSON")
    s.set_defaults(func=main)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def main(args) -> int:
    from harness.engine.models import parse_model_kwargs

    names = [m for m in args.models if "=" not in m]
    overrides = [m for m in args.models if "=" in m]  # key=value words override --config keys
    result = run(
        names,
        checkpoints=args.checkpoint,
        data=args.data,
        input_size=args.input_size,
        batch_size=args.batch_size,
        out_dir=args.out_dir,
        seed=args.seed,
        device=args.device,
        config=args.config,
        config_overrides=overrides,
        model_kwargs=parse_model_kwargs(args.model_kwargs),
    )
    if args.json:
        print(json.dumps({"run_dir": str(result.run_dir), "models": result.summary}, indent=1))
        return 0
    width = max(len(n) for n in result.summary)
    print(f"{'model':<{width}}  blocks  mean γ  min γ  last γ")
    for n, s in result.summary.items():
        print(f"{n:<{width}}  {s['blocks']:>6}  {s['mean_gamma']:6.3f}  {s['min_gamma']:5.3f}  {s['last_gamma']:6.3f}")
    print(f"\nwrote {result.csv}\n      {result.plot}")
    return 0


def check_out_dir(out_dir) -> None:
    """``--out-dir``: the root the run directory goes under -- a directory (or one that can be created) that we
    can write, not a file."""
    from harness.core.files import check_writable_folder

    if out_dir is None:
        return
    check_writable_folder(out_dir, "--out-dir", "the run directories")


def run(
    models: Sequence[str] = (),
    *,
    checkpoints: Sequence[str] | None = None,
    data: str = "random",
    input_size: int | None = None,
    batch_size: int = 8,
    out_dir: str | Path | None = None,
    seed: int = 0,
    device: str = "cpu",
    config: str | Path | None = None,
    config_overrides: Sequence[str] = (),
    model_kwargs: dict | None = None,
) -> DiagnoseResult:
    """The shortcut ratio γ_l of every model, written to a new run directory under ``out_dir`` (default
    results/runs) as ``diagnose-shortcut-ratio/<run-id>/``.

    ``config``: a training config whose model (with its arguments and ``key=value`` ``config_overrides``, e.g. the
    digits preset's width=32) is measured first; ``model_kwargs``: arguments for the named ``models`` (timm's
    ``--model-kwargs``). ``checkpoints``: one per model in order ("-" = at init); default all at init. ``data``:
    "random" (Gaussian images) or an ImageFolder directory. Bad input raises :class:`DepthbenchError` before
    anything is written.
    """
    import torch

    from harness.core.config import load_config
    from harness.core.rundir import RunDir
    from harness.engine.checkpoint import read_checkpoint
    from harness.engine.models import require_registered
    from harness.measure.diagnose import build, example_batch, load_checkpoint, plot, shortcut_ratio, summary, write_csv

    if config_overrides and not config:
        raise DepthbenchError(
            f"key=value overrides ({' '.join(config_overrides)}) need --config; for a model name use --model-kwargs"
        )
    model_names = list(models or [])
    configs = [None] * len(model_names)
    if config is not None:
        model_names.insert(0, load_config(config, list(config_overrides)).model.get("name") or "")
        configs.insert(0, config)
    if not model_names:
        raise DepthbenchError("name at least one model, or give --config with a training config")
    for name in model_names:
        require_registered(name)
    checkpoints = list(checkpoints or [])
    if checkpoints and len(checkpoints) != len(model_names):
        raise DepthbenchError(
            f"give one --checkpoint per model ({len(model_names)}, in order; '-' for none), got {len(checkpoints)}"
        )
    for path in checkpoints:
        if path != "-" and not Path(path).is_file():
            raise DepthbenchError(f"checkpoint {path} does not exist")
    if data != "random" and not Path(data).is_dir():
        raise DepthbenchError(f"--data {data}: no such directory (give an ImageFolder directory or 'random')")
    if batch_size < 1 or (input_size is not None and input_size < 1):
        raise DepthbenchError("--batch-size and --input-size must be positive")
    try:
        kind = torch.device(device).type
    except RuntimeError:
        raise DepthbenchError(f"--device {device}: not a torch device (e.g. cpu, cuda, cuda:1)") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise DepthbenchError(f"--device {device}: no CUDA device is visible here; use --device cpu")

    check_out_dir(out_dir)
    for path in checkpoints:  # weights-only and whole, before anything is built or written
        if path != "-":
            read_checkpoint(path, mmap=True)

    # measured first, written after: a checkpoint that does not fit or a model that fails leaves no run behind
    curves = {}
    for k, name in enumerate(model_names):
        torch.manual_seed(seed)
        model = build(name, input_size, device, None if configs[k] else model_kwargs, configs[k], config_overrides)
        if checkpoints and checkpoints[k] != "-":
            load_checkpoint(model, checkpoints[k])
        # the size it was built for: --input-size, else the config's data.input_size or an img_size kwarg
        size = input_size or (
            load_config(configs[k], list(config_overrides)).data.get("input_size")
            if configs[k]
            else (model_kwargs or {}).get("img_size")
        )
        curves[name] = shortcut_ratio(model, example_batch(model, data, size, batch_size, seed, device))

    run_dir = RunDir.create(
        experiment="diagnose-shortcut-ratio",
        root=out_dir,
        models=model_names,
        checkpoints=checkpoints or None,
        data=data,
        input_size=input_size,
        batch_size=batch_size,
        seed=seed,
        device=device,
        definition="gamma_l = sigma_0/sigma_l, per-token std over channels; StepsNet state "
        "= full width [step output, untouched slices] (StepsNet Sec. 3)",
    )
    try:
        for name, records in curves.items():
            for r in records:
                run_dir.log_metrics(model=name, **r)
        write_csv(run_dir.file("shortcut_ratio.csv"), curves)
        plot(run_dir.file("shortcut_ratio.png"), curves, checkpoints, model_names)
    except BaseException:
        run_dir.finish("failed")
        raise
    summaries = {n: summary(r) for n, r in curves.items()}
    run_dir.finish("done", summary=summaries)
    return DiagnoseResult(run_dir.path, curves, summaries)
