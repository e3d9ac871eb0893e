"""ScaleNet depth expansion for Hugging Face Llama (``transformers`` ``LlamaForCausalLM``), ScaleNet Table X.

Each of the k*L decoder-layer instances shares the q/k/v/o and gate/up/down ``nn.Linear`` modules (the same
Parameters) of one pretrained layer, in "interpolate" order (layer i -> instances k*i ... k*i+k-1), keeps its own
input/post-attention RMSNorms (copied) and its own ``layer_idx`` (the KV-cache slot), and gets parallel adapters
(rank r, no bias, up-projection zero-initialised) on gate/up/down, so a fresh expansion computes exactly what
the plain layer-duplicated model computes. Adapter rank 16 on the three MLP linears of all instances and per-instance
RMSNorms are [ASSUMED] (docs/scalenet.md); for Llama-3.2-1B this gives 1,251,608,576 unique parameters against the
paper's printed 1265M.

Pure torch + transformers + safetensors (no harness imports). Save/load: :func:`save_llama` writes a Hugging Face
style directory (config.json with a ``scalenet`` entry, model.safetensors with every shared tensor once) and
:func:`load_saved_llama` rebuilds the base model, re-expands it and loads the tensors into the tied modules, so
the ties (and Llama's tied input/output embeddings) survive; plain ``LlamaForCausalLM.from_pretrained`` cannot
describe an expansion (its config has no notion of shared layers). ``model.state_dict()`` / ``expand_llama`` on a
fresh base model then ``load_state_dict`` (the engine's checkpoints) keeps the ties too.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from harness.core.files import BadFile, read_json

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
        nn.init.kaiming_uniform_(self.adapter_down.weight, a=5**0.5)
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
        raise ValueError(
            f"{type(model).__name__} is not a Hugging Face Llama model (no model.layers of decoder layers)"
        )
    config = model.config
    instances = [_new_instance(layer, config, k * i + j, rank) for i, layer in enumerate(layers) for j in range(k)]
    decoder.layers = nn.ModuleList(instances)
    config.num_hidden_layers = len(instances)
    if getattr(config, "layer_types", None) is not None:
        config.layer_types = [t for t in config.layer_types for _ in range(k)]
    config.scalenet = {"k": k, "rank": rank, "order": "interpolate", "adapters": list(MLP_PROJECTIONS)}
    return model


def llama_parameter_count(
    hidden: int, intermediate: int, layers: int, k: int = 2, rank: int = 16, base: int = 0
) -> int:
    """Unique parameters after :func:`expand_llama` by formula: base + adapters of every instance + the new
    instances' two RMSNorms."""
    instances = k * layers
    return base + instances * 3 * rank * (hidden + intermediate) + (instances - layers) * 2 * hidden


def unique_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # nn.Module.parameters() yields a shared Parameter once


# ----------------------------------------------------------------------------------------- named architectures
# Llama-3.2-1B (ScaleNet Table X; spec §2.9): 16 decoder layers, hidden 2048, SwiGLU MLP 8192, 32 query / 8 KV
# heads of dimension 64, tied input/output embeddings; vocabulary 128,256 (Meta's config.json) -- 1,235,814,400
# parameters, the paper's "1236M". RoPE settings are left at transformers' defaults: they hold no parameters, and a
# run with weights takes its architecture from the checkpoint's own config.json.
LLAMA_ARCHITECTURES = {
    "llama_3_2_1b": dict(
        vocab_size=128256,
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=64,
        tie_word_embeddings=True,
        rms_norm_eps=1e-5,
        max_position_embeddings=131072,
        bos_token_id=128000,
        eos_token_id=128001,
    ),
}
# the fields that decide the parameter count: a checkpoint must agree with the recipe's architecture on these
ARCHITECTURE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "tie_word_embeddings",
)
# Table X's models by name (``depthbench verify`` builds them on the meta device): ScaleNet's 2x expansion with the
# assumed rank-16 adapters on gate/up/down (spec §2.9)
LLAMA_MODELS = {
    "llama_3_2_1b": dict(config="llama_3_2_1b", scalenet=None),
    "scalenet_llama_3_2_1b_2x": dict(config="llama_3_2_1b", scalenet=dict(k=2, rank=16)),
}


def llama_config(source):
    """A ``LlamaConfig`` from a named architecture (:data:`LLAMA_ARCHITECTURES`), a dict of its fields, a
    ``config.json`` or a checkpoint directory holding one. Raises ValueError naming what is wrong."""
    from transformers import LlamaConfig

    if isinstance(source, dict):
        return LlamaConfig(**source)
    if isinstance(source, str) and source in LLAMA_ARCHITECTURES:
        return LlamaConfig(**LLAMA_ARCHITECTURES[source])
    path = Path(str(source)).expanduser()
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise ValueError(
            f"{source}: not a named Llama architecture ({', '.join(LLAMA_ARCHITECTURES)}), "
            f"config.json or checkpoint directory"
        )
    try:
        fields = read_json(path, what="Llama config")  # no FIFO, size- and depth-capped, an object
    except OSError as e:
        raise ValueError(f"{path} is not a JSON file ({type(e).__name__})") from None
    except BadFile as e:
        raise ValueError(str(e)) from None
    if fields.get("model_type", "llama") != "llama":
        raise ValueError(f"{path} describes a {fields.get('model_type')} model, not a Llama")
    return LlamaConfig.from_dict(fields)


def base_config(config):
    """The config of the model an expanded config was expanded from (``config.scalenet`` says by how much)."""
    expansion = getattr(config, "scalenet", None)
    if not expansion:
        return config
    base = copy.deepcopy(config)
    k = int(expansion["k"])
    base.num_hidden_layers = config.num_hidden_layers // k
    if getattr(config, "layer_types", None) is not None:
        base.layer_types = list(config.layer_types)[::k]
    del base.scalenet
    return base


def build_named_llama(name: str, **overrides):
    """One of :data:`LLAMA_MODELS` (``overrides``: its ``config``/``scalenet`` replaced), random weights."""
    spec = {**LLAMA_MODELS[name], **overrides}
    return build_llama(spec["config"], spec.get("scalenet"))


def build_llama(config, scalenet: dict | None = None):
    """A randomly initialised ``LlamaForCausalLM`` of ``config`` (see :func:`llama_config`), expanded when
    ``scalenet=dict(k=..., rank=...)``. Build it under ``torch.device("meta")`` to count without memory."""
    from transformers import LlamaForCausalLM

    config = config if not isinstance(config, (str, dict, Path)) else llama_config(config)
    model = LlamaForCausalLM(config)
    return expand_llama(model, **scalenet) if scalenet else model


# ----------------------------------------------------------------------------------------- training
class CausalLMLogits(nn.Module):
    """A causal LM as the engine's sequence model: input ids ``(B, T)`` -> next-token logits ``(B, T, V)``.

    No attention mask: the instruction data is right-padded, and causal attention keeps padding (which comes after
    every real token) out of the real tokens' outputs. ``vocab_size``/``seq_len`` are what the engine's checks read.
    """

    def __init__(self, lm: nn.Module):
        super().__init__()
        self.lm = lm
        self.vocab_size = lm.config.vocab_size
        self.seq_len = lm.config.max_position_embeddings

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.lm(input_ids=input_ids, use_cache=False).logits


TRAINABLE = ("all", "adapters_norms")


def set_trainable(model: nn.Module, trainable: str = "all") -> nn.Module:
    """``all``, or ``adapters_norms``: only the adapters and RMSNorms train (ScaleNet's frozen-backbone setting,
    spec §2.9 [ASSUMED] for Llama; the shared projections, embeddings and head stay frozen)."""
    if trainable not in TRAINABLE:
        raise ValueError(f"trainable={trainable!r} is not one of {', '.join(TRAINABLE)}")
    if trainable == "all":
        return model.requires_grad_(True)
    model.requires_grad_(False)
    for module in model.modules():
        if isinstance(module, AdaptedLinear):
            module.adapter_down.requires_grad_(True)
            module.adapter_up.requires_grad_(True)
        elif type(module).__name__.endswith("RMSNorm"):
            module.requires_grad_(True)
    return model


# ----------------------------------------------------------------------------------------- save / load
def unique_state_dict(model: nn.Module) -> dict:
    """The state dict with every shared tensor once (under its first name) -- what safetensors can store."""
    seen, out = set(), {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        if id(tensor) not in seen:
            seen.add(id(tensor))
            out[name] = tensor.detach().contiguous()
    return out


def alias_names(model: nn.Module) -> set[str]:
    """State-dict names whose tensor appeared earlier under another name (the shared layers, the tied head)."""
    seen, aliases = set(), set()
    for name, tensor in model.state_dict(keep_vars=True).items():
        (aliases.add(name) if id(tensor) in seen else seen.add(id(tensor)))
    return aliases


def save_llama(model: nn.Module, directory, tokenizer=None) -> Path:
    """A Hugging Face style directory for a (possibly expanded) Llama: config.json (with ``scalenet`` when
    expanded), model.safetensors (shared tensors once), and the tokenizer's files when given."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    model.config.to_json_file(str(directory / "config.json"))
    save_file(unique_state_dict(model), str(directory / "model.safetensors"), metadata={"format": "pt"})
    if tokenizer is not None:
        tokenizer.save_pretrained(str(directory))
    return directory


def load_saved_llama(directory) -> nn.Module:
    """The model :func:`save_llama` wrote (or any single-file Llama safetensors checkpoint whose config.json
    carries a ``scalenet`` entry): the base model rebuilt, re-expanded, the tensors loaded into the tied modules.
    Every tensor must be present (an alias of a stored tensor counts as present); raises ValueError otherwise."""
    directory = Path(directory)
    config = llama_config(directory)
    expansion = getattr(config, "scalenet", None)
    model = build_llama(base_config(config), scalenet=expansion and {k: expansion[k] for k in ("k", "rank")})
    state = load_file(str(directory / "model.safetensors"))
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = set(missing) - alias_names(model)
    if missing or unexpected:
        raise ValueError(
            f"{directory}/model.safetensors does not fit the model its config.json describes: "
            f"{len(missing)} missing ({', '.join(sorted(missing)[:3])}), {len(unexpected)} unexpected "
            f"({', '.join(sorted(unexpected)[:3])})"
        )
    return model.eval()
