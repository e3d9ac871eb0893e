"""``depthbench diagnose``: depth diagnostics of residual models.

``depthbench diagnose shortcut-ratio MODEL [MODEL ...]`` measures StepsNet's shortcut ratio (Sec. 3, Fig. 2)
``γ_l = σ_0 / σ_l`` after every residual block l, where σ is the per-token standard deviation over channels
(what a LayerNorm sees), averaged over tokens and the batch; σ_0 is taken on the input of the first block
(for DeiT: patch embedding + cls + position embedding). For StepsNet models the state after a block is the
full-width ``[current step output, untouched slices]`` (docs/stepsnet.md, "Depth diagnostic"), so StepsNet and its baseline are
measured on the same C channels. γ near 0 means the block input is dominated by accumulated residuals.

Writes a run directory (``harness/rundir.py``): ``meta.json``, ``metrics.jsonl`` (one record per block),
``shortcut_ratio.csv`` and ``shortcut_ratio.png`` (γ_l against l/L, one curve per model).
"""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import DepthbenchError

if TYPE_CHECKING:  # imported where used: the CLI imports this module to build its parser (torch takes ~2 s)
    import torch
    from torch import nn

CHANNELS_FIRST = ("BasicBlock", "Bottleneck")  # residual blocks with channels on dim 1 (NCHW)


def _std(x: torch.Tensor, channel_dim: int) -> torch.Tensor:
    """Per-token std over channels (biased, as LayerNorm), averaged over every other axis."""
    return x.detach().float().std(dim=channel_dim, unbiased=False).mean()


def shortcut_ratio(model: nn.Module, inputs: tuple) -> list[dict]:
    """γ_l = σ_0/σ_l of one forward pass of ``model(*inputs)``.

    Returns ``L + 1`` records (``block`` 0 is the input, γ_0 = 1), each with ``block``, ``depth`` (l/L),
    ``sigma``, ``gamma``, ``width`` (channels of the state) and, inside a StepsNet, ``step`` (1-based) and
    ``step_width`` (the width the block runs at).
    """
    import torch

    from models.stepsnet import RESIDUAL_BLOCK_TYPES, ReverseStepsNet, StepsNet, residual_blocks

    blocks = residual_blocks(model)
    if not blocks:
        raise DepthbenchError(f"{type(model).__name__} has no residual blocks of the known types "
                              f"{RESIDUAL_BLOCK_TYPES}")
    owner = {}  # id(block) -> the StepsNet that runs it
    for net in model.modules():
        if isinstance(net, (StepsNet, ReverseStepsNet)):
            for block in net:
                owner[id(block)] = net
    if any(isinstance(net, ReverseStepsNet) for net in owner.values()):
        raise DepthbenchError("the reverse (wide-to-narrow) design has no single full-width state per block; "
                            "diagnose its StepsNet twin instead")

    records: list[dict] = []
    handles = []

    def record(state: torch.Tensor, channel_dim: int, **extra) -> None:
        records.append(dict(sigma=float(_std(state, channel_dim)), width=int(state.shape[channel_dim]), **extra))

    first = blocks[0]
    entry = owner.get(id(first), first)
    entry_dim = entry.channel_dim if isinstance(entry, StepsNet) else \
        (1 if type(first).__name__ in CHANNELS_FIRST else -1)
    handles.append(entry.register_forward_pre_hook(
        lambda mod, args: record(args[0], entry_dim) if not records else None))
    for block in blocks:
        if id(block) in owner:
            continue
        dim = 1 if type(block).__name__ in CHANNELS_FIRST else -1
        handles.append(block.register_forward_hook(lambda mod, args, out, dim=dim: record(out, dim)))
    for net in {id(n): n for n in owner.values()}.values():
        handles.append(net.register_state_hook(
            lambda net, i, j, state: record(state, net.channel_dim, step=i + 1, step_width=net.widths[i])))
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for h in handles:
            h.remove()
    if len(records) != len(blocks) + 1:
        raise DepthbenchError(f"saw {len(records) - 1} block outputs for {len(blocks)} blocks; the model does not "
                            "run each residual block once per forward")
    sigma0, depth = records[0]["sigma"], len(blocks)
    for l, r in enumerate(records):
        r.update(block=l, depth=l / depth, gamma=sigma0 / r["sigma"] if r["sigma"] > 0 else float("inf"))
    return records


# ------------------------------------------------------------------------------------------ the command
def _check_model_name(name: str) -> None:
    from harness.flops import require_registered

    require_registered(name)


def _build(name: str | None, input_size: int | None, device: str, model_kwargs: dict | None = None,
           config: str | None = None, config_overrides=()) -> nn.Module:
    """The model as it was trained (:func:`harness.builders.build_trained_model`: a config's model with its
    arguments, or a name with ``--model-kwargs``), initialised in place on the target device."""
    import timm

    from harness.builders import build_trained_model

    kwargs = dict(model_kwargs or {})
    cfg = timm.models.get_pretrained_cfg(name) if name else None
    if input_size and cfg is not None and cfg.fixed_input_size and len(cfg.input_size or ()) == 3:
        kwargs.setdefault("img_size", input_size)  # ViT/Swin fix their resolution at build time
    return build_trained_model(config, config_overrides, name=None if config else name, model_kwargs=kwargs,
                               device=device).eval()


def load_checkpoint(model: nn.Module, path: str) -> None:
    """Load trained weights strictly through :func:`harness.checkpoint.load_weights` (the loader every command
    uses): a checkpoint that does not fit is an error naming every key, never a half-loaded model."""
    from harness.checkpoint import load_weights

    load_weights(model, path)


def _inputs(model: nn.Module, data: str, input_size: int | None, batch_size: int, seed: int, device: str) -> tuple:
    import torch

    generator = torch.Generator().manual_seed(seed)
    if hasattr(model, "example_inputs"):  # token models: random ids (no text data sets here)
        if data != "random":
            raise DepthbenchError(f"--data {data}: {type(model).__name__} takes token ids; use --data random")
        (tokens,) = model.example_inputs(input_size, batch_size)
        vocab = getattr(model, "vocab_size", 2)
        return (torch.randint(0, vocab, tokens.shape, generator=generator).to(device),)
    import timm.data

    cfg = timm.data.resolve_data_config({}, model=model)
    size = (3, input_size, input_size) if input_size else tuple(cfg["input_size"])
    if data == "random":
        return (torch.randn(batch_size, *size, generator=generator).to(device),)
    from torchvision.datasets import ImageFolder

    transform = timm.data.create_transform(**{**cfg, "input_size": size}, is_training=False)
    try:
        dataset = ImageFolder(data, transform=transform)
    except (FileNotFoundError, OSError) as e:
        raise DepthbenchError(f"--data {data}: not an ImageFolder directory ({str(e).splitlines()[0]})") from None
    # a seeded random subset: ImageFolder is sorted by class, so the first images would all be one class
    picks = torch.randperm(len(dataset), generator=generator)[:batch_size].tolist()
    return (torch.stack([dataset[i][0] for i in picks]).to(device),)


def run(model_names: list[str], checkpoints: list[str] | None = None, data: str = "random",
        input_size: int | None = None, batch_size: int = 8, out_dir: str | None = None, seed: int = 0,
        device: str = "cpu", config: str | None = None, config_overrides=(), model_kwargs: dict | None = None):
    """Measure every model, write the run directory and return it. ``config``: a training config whose model
    (with its arguments, e.g. the digits preset's width=32) is measured first; ``model_kwargs``: arguments for
    the named models (timm's ``--model-kwargs``)."""
    import torch

    from harness.config import load_config
    from harness.rundir import RunDir

    model_names = list(model_names or [])
    configs = [None] * len(model_names)
    if config is not None:
        model_names.insert(0, load_config(config, list(config_overrides)).model.get("name") or "")
        configs.insert(0, config)
    if not model_names:
        raise DepthbenchError("name at least one model, or give --config with a training config")
    for name in model_names:
        _check_model_name(name)
    checkpoints = list(checkpoints or [])
    if checkpoints and len(checkpoints) != len(model_names):
        raise DepthbenchError(f"give one --checkpoint per model ({len(model_names)}, in order; '-' for none), "
                            f"got {len(checkpoints)}")
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

    run_dir = RunDir.create(experiment="diagnose-shortcut-ratio", root=out_dir, models=model_names,
                            checkpoints=checkpoints or None, data=data, input_size=input_size,
                            batch_size=batch_size, seed=seed, device=device,
                            definition="gamma_l = sigma_0/sigma_l, per-token std over channels; StepsNet state "
                                       "= full width [step output, untouched slices] (StepsNet Sec. 3)")
    curves = {}
    try:
        for k, name in enumerate(model_names):
            torch.manual_seed(seed)
            model = _build(name, input_size, device, None if configs[k] else model_kwargs, configs[k],
                           config_overrides)
            if checkpoints and checkpoints[k] != "-":
                load_checkpoint(model, checkpoints[k])
            # the size it was built for: --input-size, else the config's data.input_size or an img_size kwarg
            size = input_size or (load_config(configs[k], list(config_overrides)).data.get("input_size")
                                  if configs[k] else (model_kwargs or {}).get("img_size"))
            records = shortcut_ratio(model, _inputs(model, data, size, batch_size, seed, device))
            curves[name] = records
            for r in records:
                run_dir.log_metrics(model=name, **r)
        _write_csv(run_dir.file("shortcut_ratio.csv"), curves)
        _plot(run_dir.file("shortcut_ratio.png"), curves, checkpoints, model_names)
    except BaseException:
        run_dir.finish("failed")
        raise
    run_dir.finish("done", summary={n: _summary(r) for n, r in curves.items()})
    return run_dir, curves


def _summary(records: list[dict]) -> dict:
    gammas = [r["gamma"] for r in records[1:]]
    return {"blocks": len(gammas), "mean_gamma": sum(gammas) / len(gammas), "min_gamma": min(gammas),
            "last_gamma": gammas[-1]}


def _write_csv(path: Path, curves: dict) -> None:
    fields = ["model", "block", "depth", "gamma", "sigma", "width", "step", "step_width"]
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        for name, records in curves.items():
            for r in records:
                writer.writerow({"model": name, **{f: r.get(f, "") for f in fields[1:]}})


def _plot(path: Path, curves: dict, checkpoints: list[str], names: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for k, (name, records) in enumerate(curves.items()):
        state = "init" if not checkpoints or checkpoints[k] == "-" else Path(checkpoints[k]).name
        s = _summary(records)
        ax.plot([r["depth"] for r in records], [r["gamma"] for r in records], marker="." if s["blocks"] <= 40 else None,
                label=f"{name} ({s['blocks']} blocks, {state}; mean γ {s['mean_gamma']:.2f})")
    ax.axhline(1.0, color="0.7", lw=0.8, ls="--")
    ax.set_xlabel("normalized depth l / L")
    ax.set_ylabel("shortcut ratio γ_l = σ_0 / σ_l")
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    ax.set_title("Shortcut ratio per residual block (StepsNet Fig. 2)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------ CLI
def add_parser(subparsers) -> None:
    p = subparsers.add_parser("diagnose", help="depth diagnostics (shortcut ratio) of residual models",
                              description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="diagnostic", metavar="DIAGNOSTIC")
    s = sub.add_parser("shortcut-ratio", help="γ_l = σ_0/σ_l per block (StepsNet Sec. 3, Fig. 2)",
                       description=__doc__.split("\n\n")[1])
    s.add_argument("models", nargs="*", metavar="MODEL", help="registered model name(s), one curve each")
    s.add_argument("--config", help="a training config: measure the model it trains (its model.* arguments, e.g. "
                                    "the digits preset's width=32), first; pair it with that run's --checkpoint")
    s.add_argument("--model-kwargs", nargs="+", default=[], metavar="K=V",
                   help="arguments for the named models, as timm's benchmark (e.g. --model-kwargs width=32)")
    s.add_argument("--checkpoint", action="append", metavar="PATH",
                   help="state dict to load, one per model in order ('-' = at init); default: all at init")
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
    from harness.builders import parse_model_kwargs

    names = [m for m in args.models if "=" not in m]
    overrides = [m for m in args.models if "=" in m]  # key=value words override --config keys
    if overrides and not args.config:
        raise DepthbenchError(f"key=value overrides ({' '.join(overrides)}) need --config; for a model name use "
                              "--model-kwargs")
    run_dir, curves = run(names, args.checkpoint, args.data, args.input_size, args.batch_size,
                          args.out_dir, args.seed, args.device, config=args.config, config_overrides=overrides,
                          model_kwargs=parse_model_kwargs(args.model_kwargs))
    summary = {n: _summary(r) for n, r in curves.items()}
    if args.json:
        print(json.dumps({"run_dir": str(run_dir.path), "models": summary}, indent=1))
        return 0
    width = max(len(n) for n in summary)
    print(f"{'model':<{width}}  blocks  mean γ  min γ  last γ")
    for n, s in summary.items():
        print(f"{n:<{width}}  {s['blocks']:>6}  {s['mean_gamma']:6.3f}  {s['min_gamma']:5.3f}  {s['last_gamma']:6.3f}")
    print(f"\nwrote {run_dir.file('shortcut_ratio.csv')}\n      {run_dir.file('shortcut_ratio.png')}")
    return 0
