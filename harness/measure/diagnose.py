"""Depth diagnostics of residual models, the measuring behind ``depthbench diagnose`` (harness/commands/diagnose.py).

:func:`shortcut_ratio` measures StepsNet's shortcut ratio (Sec. 3, Fig. 2) ``γ_l = σ_0 / σ_l`` after every residual
block l, where σ is the per-token standard deviation over channels (what a LayerNorm sees), averaged over tokens
and the batch; σ_0 is taken on the input of the first block (for DeiT: patch embedding + cls + position
embedding). For StepsNet models the state after a block is the full-width ``[current step output, untouched
slices]`` (docs/stepsnet.md, "Depth diagnostic"), so StepsNet and its baseline are measured on the same C channels.
γ near 0 means the block input is dominated by accumulated residuals. The rest builds the models and their inputs
and writes the CSV and the plot the command keeps in its run directory.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import timm
import timm.data
import torch
from torch import nn

from harness.core.errors import DepthbenchError
from harness.core.files import atomic_write
from harness.engine.checkpoint import load_weights
from harness.engine.models import build_trained_model
from harness.tasks.image import ImageFolder  # the data-root walk and pixel budget of every image reader
from models.stepsnet import RESIDUAL_BLOCK_TYPES, ReverseStepsNet, StepsNet, residual_blocks

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
    blocks = residual_blocks(model)
    if not blocks:
        raise DepthbenchError(
            f"{type(model).__name__} has no residual blocks of the known types {RESIDUAL_BLOCK_TYPES}"
        )
    owner = {}  # id(block) -> the StepsNet that runs it
    for net in model.modules():
        if isinstance(net, (StepsNet, ReverseStepsNet)):
            for block in net:
                owner[id(block)] = net
    if any(isinstance(net, ReverseStepsNet) for net in owner.values()):
        raise DepthbenchError(
            "the reverse (wide-to-narrow) design has no single full-width state per block; "
            "diagnose its StepsNet twin instead"
        )

    records: list[dict] = []
    handles = []

    def record(state: torch.Tensor, channel_dim: int, **extra) -> None:
        records.append(dict(sigma=float(_std(state, channel_dim)), width=int(state.shape[channel_dim]), **extra))

    first = blocks[0]
    entry = owner.get(id(first), first)
    entry_dim = (
        entry.channel_dim if isinstance(entry, StepsNet) else (1 if type(first).__name__ in CHANNELS_FIRST else -1)
    )
    handles.append(
        entry.register_forward_pre_hook(lambda mod, args: record(args[0], entry_dim) if not records else None)
    )
    for block in blocks:
        if id(block) in owner:
            continue
        dim = 1 if type(block).__name__ in CHANNELS_FIRST else -1
        handles.append(block.register_forward_hook(lambda mod, args, out, dim=dim: record(out, dim)))
    for net in {id(n): n for n in owner.values()}.values():
        handles.append(
            net.register_state_hook(
                lambda net, i, j, state: record(state, net.channel_dim, step=i + 1, step_width=net.widths[i])
            )
        )
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for h in handles:
            h.remove()
    if len(records) != len(blocks) + 1:
        raise DepthbenchError(
            f"saw {len(records) - 1} block outputs for {len(blocks)} blocks; the model does not "
            "run each residual block once per forward"
        )
    sigma0, depth = records[0]["sigma"], len(blocks)
    for index, r in enumerate(records):
        r.update(block=index, depth=index / depth, gamma=sigma0 / r["sigma"] if r["sigma"] > 0 else float("inf"))
    return records


# ------------------------------------------------------------------------------------------ models, inputs, files
def build(
    name: str | None,
    input_size: int | None,
    device: str,
    model_kwargs: dict | None = None,
    config: str | None = None,
    config_overrides=(),
) -> nn.Module:
    """The model as it was trained (:func:`harness.engine.models.build_trained_model`: a config's model with its
    arguments, or a name with ``--model-kwargs``), initialised in place on the target device."""
    kwargs = dict(model_kwargs or {})
    cfg = timm.models.get_pretrained_cfg(name) if name else None
    if input_size and cfg is not None and cfg.fixed_input_size and len(cfg.input_size or ()) == 3:
        kwargs.setdefault("img_size", input_size)  # ViT/Swin fix their resolution at build time
    return build_trained_model(
        config, config_overrides, name=None if config else name, model_kwargs=kwargs, device=device
    ).eval()


def load_checkpoint(model: nn.Module, path: str) -> None:
    """Load trained weights strictly through :func:`harness.checkpoint.load_weights` (the loader every command
    uses): a checkpoint that does not fit is an error naming every key, never a half-loaded model."""
    load_weights(model, path)


def example_batch(
    model: nn.Module, data: str, input_size: int | None, batch_size: int, seed: int, device: str
) -> tuple:
    """A seeded batch for ``model``: Gaussian images (``data="random"``), a random subset of an ImageFolder at
    ``data``, or random token ids for a language model."""
    generator = torch.Generator().manual_seed(seed)
    if hasattr(model, "example_inputs"):  # token models: random ids (no text data sets here)
        if data != "random":
            raise DepthbenchError(f"--data {data}: {type(model).__name__} takes token ids; use --data random")
        (tokens,) = model.example_inputs(input_size, batch_size)
        vocab = getattr(model, "vocab_size", 2)
        return (torch.randint(0, vocab, tokens.shape, generator=generator).to(device),)

    cfg = timm.data.resolve_data_config({}, model=model)
    size = (3, input_size, input_size) if input_size else tuple(cfg["input_size"])
    if data == "random":
        return (torch.randn(batch_size, *size, generator=generator).to(device),)

    transform = timm.data.create_transform(**{**cfg, "input_size": size}, is_training=False)
    try:
        dataset = ImageFolder(Path(data), transform=transform)
    except (FileNotFoundError, OSError) as e:
        raise DepthbenchError(f"--data {data}: not an ImageFolder directory ({str(e).splitlines()[0]})") from None
    # a seeded random subset: ImageFolder is sorted by class, so the first images would all be one class
    picks = torch.randperm(len(dataset), generator=generator)[:batch_size].tolist()
    return (torch.stack([dataset[i][0] for i in picks]).to(device),)


def summary(records: list[dict]) -> dict:
    """Blocks, mean, min and last γ of one model's records (block 0, the input, left out)."""
    gammas = [r["gamma"] for r in records[1:]]
    return {
        "blocks": len(gammas),
        "mean_gamma": sum(gammas) / len(gammas),
        "min_gamma": min(gammas),
        "last_gamma": gammas[-1],
    }


def write_csv(path: Path, curves: dict) -> None:
    fields = ["model", "block", "depth", "gamma", "sigma", "width", "step", "step_width"]
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=fields)
    writer.writeheader()
    for name, records in curves.items():
        for r in records:
            writer.writerow({"model": name, **{f: r.get(f, "") for f in fields[1:]}})
    atomic_write(path, text.getvalue())  # never through a planted link


def plot(path: Path, curves: dict, checkpoints: list[str], names: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for k, (name, records) in enumerate(curves.items()):
        state = "init" if not checkpoints or checkpoints[k] == "-" else Path(checkpoints[k]).name
        s = summary(records)
        ax.plot(
            [r["depth"] for r in records],
            [r["gamma"] for r in records],
            marker="." if s["blocks"] <= 40 else None,
            label=f"{name} ({s['blocks']} blocks, {state}; mean γ {s['mean_gamma']:.2f})",
        )
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
