"""The one parameter and FLOP counter of depthbench.

Convention (the five papers' tables, fvcore style): "FLOPs" are multiply-accumulates (1 MAC = 1 FLOP) of
convolutions, linear layers and matmuls, including the attention products q@kᵀ and attn@v, plus the
normalisation layers as fvcore counts them (LayerNorm/GroupNorm 5 per element with affine, 4 without;
BatchNorm 2 per element in eval mode). Softmax, activations, additions and pooling are not counted.

Built on ``torch.utils.flop_counter.FlopCounterMode`` (maintained with torch, works on the meta device, so
a model of any size is counted without allocating its weights). That counter reports 2 FLOPs per MAC; we
register the normalisation formulas and the CPU flash-attention kernel it lacks and halve the total.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop


aten = torch.ops.aten


def _layer_norm_flop(input_shape, normalized_shape, weight_shape=None, bias_shape=None, *args, **kwargs) -> int:
    return 2 * prod(input_shape) * (5 if weight_shape is not None else 4)


def _group_norm_flop(input_shape, weight_shape=None, *args, **kwargs) -> int:
    return 2 * prod(input_shape) * (5 if weight_shape is not None else 4)


def _batch_norm_flop(
    input_shape,
    weight_shape=None,
    bias_shape=None,
    running_mean=None,
    running_var=None,
    training=False,
    *args,
    **kwargs,
) -> int:
    if training:
        return 2 * prod(input_shape) * (5 if weight_shape is not None else 4)
    return 2 * prod(input_shape) * (2 if weight_shape is not None else 1)


def _cpu_flash_sdpa_flop(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop(query_shape, key_shape, value_shape)


def _eval_batch_norm_flop(input_shape, weight_shape=None, *args, **kwargs) -> int:
    return _batch_norm_flop(input_shape, weight_shape, training=False)


# Ops missing from torch's registry; values are in torch's unit (2 per MAC), halved with everything else.
# Keyed by overload as well as by packet: FlopCounterMode decomposes any overload it has no formula for,
# and native_batch_norm would then disappear into ops it does not count.
_FORMULAS = {
    aten.native_layer_norm: _layer_norm_flop,
    aten.native_group_norm: _group_norm_flop,
    aten.native_batch_norm: _batch_norm_flop,
    aten._native_batch_norm_legit: _batch_norm_flop,
    aten._native_batch_norm_legit_no_training: _eval_batch_norm_flop,
    aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_sdpa_flop,
}
EXTRA_FORMULAS = {**_FORMULAS, **{packet.default: f for packet, f in _FORMULAS.items()}}


@dataclass
class FlopCount:
    """MACs (the papers' "FLOPs") of one forward pass, total and per aten op."""

    total: int
    by_op: dict[str, int] = field(default_factory=dict)

    @property
    def giga(self) -> float:
        return self.total / 1e9


def count_params(model: nn.Module) -> int:
    """Unique trainable-or-not parameters; buffers excluded, tied parameters counted once."""
    return sum(p.numel() for p in model.parameters())


def image_input_size(input_size) -> tuple:
    """C×H×W of an image input given as C×H×W, H×W or a side (3 channels)."""
    if isinstance(input_size, int) or len(input_size) == 1:
        side = input_size if isinstance(input_size, int) else input_size[0]
        return (3, side, side)
    return (3, *input_size) if len(input_size) == 2 else tuple(input_size)


def example_inputs(model: nn.Module, input_size, batch_size: int = 1) -> tuple:
    """Inputs for one forward pass on the model's device.

    Image models take ``input_size`` = C×H×W (or H×W, or a side); models with other inputs (e.g. language
    models) define ``model.example_inputs(input_size, batch_size)`` and are asked for theirs.
    """
    if hasattr(model, "example_inputs"):
        return tuple(model.example_inputs(input_size, batch_size))
    param = next(model.parameters(), None)
    device = param.device if param is not None else torch.device("cpu")
    input_size = image_input_size(input_size)
    return (
        torch.empty(batch_size, *input_size, device=device)
        if device.type == "meta"
        else torch.randn(batch_size, *input_size, device=device),
    )


def count_flops(model: nn.Module, input_size=224, inputs: tuple | None = None) -> FlopCount:
    """MACs of ``model(*inputs)`` in eval mode, batch 1, by the convention above.

    Works on the meta device (no memory, no compute) and on real tensors alike.
    """
    inputs = inputs if inputs is not None else example_inputs(model, input_size)
    was_training = model.training
    # FlopCounterMode's module tracker hooks autograd on inputs that require grad, and fails on models that
    # pass parameters between modules (timm's PiT hands its cls token to a submodule); nothing here needs grad.
    requires_grad = {p: p.requires_grad for p in model.parameters()}
    model.eval()
    counter = FlopCounterMode(display=False, custom_mapping=EXTRA_FORMULAS)
    try:
        for p in requires_grad:
            p.requires_grad_(False)
        with counter, torch.no_grad():
            model(*inputs)
    finally:
        model.train(was_training)
        for p, flag in requires_grad.items():
            p.requires_grad_(flag)
    by_op = {str(op).replace("aten.", ""): n // 2 for op, n in counter.get_flop_counts()["Global"].items()}
    return FlopCount(total=counter.get_total_flops() // 2, by_op=by_op)
