"""ScaleNet depth expansion for Hugging Face Llama (``transformers`` ``LlamaForCausalLM``), ScaleNet Table X.

Each of the k*L decoder-layer instances shares the q/k/v/o and gate/up/down ``nn.Linear`` modules (the same
Parameters) of one pretrained layer, in "interpolate" order (layer i -> instances k*i ... k*i+k-1), keeps its own
input/post-attention RMSNorms (copied) and its own ``layer_idx`` (the KV-cache slot), and gets parallel adapters
(rank r, no bias, up-projection zero-initialised) on gate/up/down, so a fresh expansion computes exactly what
the plain layer-duplicated model computes. Adapter rank 16 on the three MLP linears of all instances and per-instance
RMSNorms are [ASSUMED] (docs/scalenet.md); for Llama-3.2-1B this gives 1,251,608,576 unique parameters against the
paper's printed 1265M.

Pure torch + transformers (no harness imports). Save/load: ``model.state_dict()`` / ``expand_llama`` on a fresh
base model then ``load_state_dict`` -- the tied modules are the same objects, so loading keeps them tied.
"""
from __future__ import annotations

import copy

import torch
from torch import nn

MLP_PROJECTIONS = ("gate_proj", "up_proj", "down_proj")
ATTENTION_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")


class AdaptedLinear(nn.Module):
    """``base(x) + up(down(x))``: a shared linear with this instance's parallel low-rank adapter."""

    def __init__(self, base: nn.Linear, rank: int):
        super().__init__()
        self.base = base
        param = base.weight
        self.adapter_down = nn.Linear(base.in_features, rank, bias=False, device=param.device, dtype=param.dtype)
        self.adapter_up = nn.Linear(rank, base.out_features, bias=False, device=param.device, dtype=param.dtype)
        nn.init.kaiming_uniform_(self.adapter_down.weight, a=5 ** 0.5)
        nn.init.zeros_(self.adapter_up.weight)  # the adapter starts as the identity change

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.adapter_up(self.adapter_down(x))


def _new_instance(layer: nn.Module, config, layer_idx: int, rank: int) -> nn.Module:
    """One decoder-layer instance tied to ``layer``'s linears, with its own norms, adapters and layer_idx."""
    instance = copy.copy(layer)  # shallow: then give it its own submodule containers
    instance._modules = dict(layer._modules)
    attn = copy.copy(layer.self_attn)
    attn._modules = dict(layer.self_attn._modules)  # the same Linear objects: tied
    attn.layer_idx = layer_idx
    mlp = copy.copy(layer.mlp)
    mlp._modules = dict(layer.mlp._modules)
    for name in MLP_PROJECTIONS:
        base = getattr(layer.mlp, name)
        base = base.base if isinstance(base, AdaptedLinear) else base
        mlp._modules[name] = AdaptedLinear(base, rank)
    instance._modules["self_attn"] = attn
    instance._modules["mlp"] = mlp
    instance._modules["input_layernorm"] = copy.deepcopy(layer.input_layernorm)
    instance._modules["post_attention_layernorm"] = copy.deepcopy(layer.post_attention_layernorm)
    if hasattr(instance, "layer_idx"):
        instance.layer_idx = layer_idx
    return instance


def expand_llama(model: nn.Module, k: int = 2, rank: int = 16) -> nn.Module:
    """Expand a ``LlamaForCausalLM`` (or ``LlamaModel``) in place to ``k`` x depth; returns it."""
    if not isinstance(k, int) or k < 1 or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"k={k!r} and rank={rank!r} must be positive integers")
    decoder = getattr(model, "model", model)
    layers = getattr(decoder, "layers", None)
    if layers is None or not all(hasattr(layer, "mlp") and hasattr(layer, "self_attn") for layer in layers):
        raise ValueError(f"{type(model).__name__} is not a Hugging Face Llama model (no model.layers of decoder layers)")
    config = model.config
    instances = [_new_instance(layer, config, k * i + j, rank) for i, layer in enumerate(layers) for j in range(k)]
    decoder.layers = nn.ModuleList(instances)
    config.num_hidden_layers = len(instances)
    if getattr(config, "layer_types", None) is not None:
        config.layer_types = [t for t in config.layer_types for _ in range(k)]
    config.scalenet = {"k": k, "rank": rank, "order": "interpolate", "adapters": list(MLP_PROJECTIONS)}
    return model


def llama_parameter_count(hidden: int, intermediate: int, layers: int, k: int = 2, rank: int = 16,
                          base: int = 0) -> int:
    """Unique parameters after :func:`expand_llama` by formula: base + adapters of every instance + the new
    instances' two RMSNorms."""
    instances = k * layers
    return base + instances * 3 * rank * (hidden + intermediate) + (instances - layers) * 2 * hidden


def unique_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # nn.Module.parameters() yields a shared Parameter once
