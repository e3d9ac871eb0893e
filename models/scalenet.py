"""ScaleNet: deepen a pretrained DeiT/Swin with weight-shared layers and small per-layer adjustments.

Paper: "ScaleNet: Scaling up Pretrained Neural Networks with Incremental Parameters" (Hao et al.); sections,
equations and tables below are the paper's, and what it leaves open is in ``docs/scalenet.md``. There is no
official code.

What this module provides (user docs: ``docs/scalenet.md``):

* :func:`expand` — WSPT depth expansion of a timm ``VisionTransformer`` (DeiT) or ``SwinTransformer``, in
  place. Every new layer instance *shares* the attention and MLP weight tensors of its source layer (the same
  ``nn.Parameter`` objects; for Swin also the relative-position-bias table) and has its own LayerNorms
  (copied from the source), drop-path rate and, for Swin, shift/attention mask by position (§III-B, Eqs. 5-6).
  Each adjusted instance gets its own adjustment branch beside the shared linears: a parallel adapter on
  fc1 and fc2 (default, rank 16, no bias, up-projection zero-initialised so the expanded model starts as the
  pure weight-shared model, Eq. 9) or LoRA on qkv/proj/fc1/fc2 (Table VI). Which parameters train is set by
  ``trainable`` (default: §III-C, Eq. 10, and §IV-A).
* :func:`grow` — the Table I baselines (Random / Stack / Interpolate / SWA): new *independent* blocks,
  parameter-matched (Table I).
* :class:`GrowthSchedule` — WSPT as a schedule the training engine calls between epochs.
* Tying that survives checkpoints: the state dict of an expanded model holds each shared tensor once,
  loading fills the aliases back in (and refuses a checkpoint whose "tied" tensors differ), and a load with
  ``assign=True`` is re-tied; :func:`assert_tied` / :func:`tied_groups` / :func:`retie` let the engine
  check and repair it (e.g. after ``to_empty()``).
* Registered timm models ``scalenet_*`` (bottom of the file) that build each scaled model of the paper's
  tables directly, from random init, a timm pretrained base (``pretrained=True``) or a base checkpoint
  (``base_checkpoint=PATH``).

Defaults the paper does not give are constructor arguments, marked [ASSUMED] where they appear: adapter
activation ReLU, adapter scale 1, LoRA alpha = rank and Gaussian A (std 1/rank), linear drop-path schedule
over the scaled depth, head frozen for DeiT-B/Swin, SWA averaging 2 layers, Interpolate baseline mapping
g(p) = floor(p·L/L').
"""
from __future__ import annotations

import copy
import math
import warnings
from functools import partial
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from timm.layers import DropPath, trunc_normal_
from timm.models import (build_model_with_cfg, create_model, generate_default_cfgs, load_state_dict, register_model,
                         swin_transformer, vision_transformer)
from timm.models.swin_transformer import SwinTransformer
from timm.models.vision_transformer import VisionTransformer

__all__ = [
    "LowRankBranch", "ParallelAdapter", "LoRA", "AdjustedLinear", "ExpansionRecord", "TyingError",
    "expand", "grow", "layer_mapping", "growth_mapping", "matched_new_blocks", "parameter_groups",
    "set_trainable", "tied_groups", "assert_tied", "retie", "tied_state_dict", "load_tied_state_dict",
    "load_base_checkpoint", "GrowthSchedule", "ORDERS", "ADJUSTMENTS", "TRAINABLE_GROUPS", "GROWTH_INITS",
]

ORDERS = ("interpolate", "stack")
ADJUSTMENTS = ("adapter", "lora", "none")
TRAINABLE_GROUPS = ("adjust", "norms", "blocks", "embed", "merging", "head", "other")
GROWTH_INITS = ("random", "stack", "interpolate", "swa")
_ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "identity": nn.Identity}
_NORM_TYPES = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._NormBase, nn.RMSNorm)


# ---------------------------------------------------------------------------------------------------------
# Building blocks: adjustment branches and the linear layer that carries one
# ---------------------------------------------------------------------------------------------------------

class LowRankBranch(nn.Module):
    """``scale · up(act(down(x)))`` with ``down: in→rank``, ``up: rank→out``, no biases; ``up`` starts at 0."""

    def __init__(self, in_features: int, out_features: int, rank: int, act_layer: type[nn.Module] = nn.Identity,
                 scale: float = 1.0, device=None, dtype=None):
        super().__init__()
        dd = {"device": device, "dtype": dtype}
        self.rank = rank
        self.scale = scale
        self.down = nn.Linear(in_features, rank, bias=False, **dd)
        self.act = act_layer()
        self.up = nn.Linear(rank, out_features, bias=False, **dd)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # nn.Linear's own init (kaiming-uniform, a=√5) for the down-projection; zero up-projection, so a new
        # branch leaves the layer's function unchanged (as LoRA's zero B, §III-B).
        self.down.reset_parameters()
        nn.init.zeros_(self.up.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.up(self.act(self.down(x)))
        return out if self.scale == 1.0 else out * self.scale

    def extra_repr(self) -> str:
        return f"rank={self.rank}, scale={self.scale}"


class ParallelAdapter(LowRankBranch):
    """Parallel adapter of Eq. 9: f(x) = θx + B·σ(A·x); σ = ReLU by default [ASSUMED], scale 1 [ASSUMED]."""

    def __init__(self, in_features: int, out_features: int, rank: int = 16, act_layer: type[nn.Module] = nn.ReLU,
                 scale: float = 1.0, device=None, dtype=None):
        super().__init__(in_features, out_features, rank, act_layer, scale, device=device, dtype=dtype)


class LoRA(LowRankBranch):
    """LoRA of Eq. 8: f(x) = (θ + s·BA)x, kept unmerged because θ is shared. s = alpha/rank (alpha = rank
    [ASSUMED]); A Gaussian with std 1/rank [ASSUMED; the paper says "Gaussian"], B zero (paper)."""

    def __init__(self, in_features: int, out_features: int, rank: int = 16, alpha: float | None = None,
                 device=None, dtype=None):
        alpha = float(rank if alpha is None else alpha)
        super().__init__(in_features, out_features, rank, nn.Identity, alpha / rank, device=device, dtype=dtype)
        self.alpha = alpha

    def reset_parameters(self) -> None:
        nn.init.normal_(self.down.weight, std=1.0 / self.rank)
        nn.init.zeros_(self.up.weight)


class AdjustedLinear(nn.Linear):
    """A linear layer whose weight/bias may be shared with other layer instances, plus this instance's own
    adjustment branch: ``F.linear(x, W, b) + adjust(x)``.

    It *is* an ``nn.Linear`` (same ``weight``/``bias`` names, so state-dict paths of the shared tensors do not
    change and tools that look for linears still find it); the branch lives under ``.adjust``.
    """

    def __init__(self, linear: nn.Linear, adjust: LowRankBranch):
        nn.Module.__init__(self)  # not nn.Linear.__init__: the weights are the given (shared) Parameters
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.register_parameter("weight", linear.weight)
        self.register_parameter("bias", linear.bias)
        self.adjust = adjust

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias) + self.adjust(x)


# ---------------------------------------------------------------------------------------------------------
# Layer mappings (Eq. 6; Table I baselines)
# ---------------------------------------------------------------------------------------------------------

def layer_mapping(num_layers: int, k: int = 2, order: str = "interpolate",
                  layers: Iterable[int] | None = None) -> list[int]:
    """Source layer (0-based) of every position of the scaled stack.

    ``interpolate``: each selected layer is followed by its k−1 copies ([0,0,1,1,…] for k=2).
    ``stack``: the original stack, then the selected layers again, k−1 times ([0..L−1, 0..L−1]); this is the
    paper's Eq. 6 read 1-based as g(l') = ((l'−1) mod L) + 1. ``layers`` (default: all) are the layers that
    get copies (Table III partial sharing).
    """
    if k < 1:
        raise ValueError(f"k={k}: the reuse count must be ≥ 1 (1 = no new layers, 2 = double the depth)")
    selected = sorted(set(range(num_layers) if layers is None else layers))
    bad = [i for i in selected if not 0 <= i < num_layers]
    if bad:
        raise ValueError(f"layers {bad} out of range for a stack of {num_layers} layers (0-based indices)")
    if order == "interpolate":
        return [i for i in range(num_layers) for _ in range(k if i in selected else 1)]
    if order == "stack":
        return list(range(num_layers)) + selected * (k - 1)
    raise ValueError(f"unknown order {order!r}; use one of {ORDERS} or an explicit list of source indices")


def growth_mapping(num_layers: int, new_blocks: int, init: str) -> list[int | None]:
    """Positions of a baseline-grown stack: source index of each block, ``None`` for a block that is new and
    not a copy (Random, SWA). Stack copies θ_{p mod L} at the tail; Interpolate uses g(p) = ⌊p·L/L'⌋
    [ASSUMED, docs/scalenet.md] so 1–2 new layers are spread through the stack; Random/SWA append at the tail."""
    if init not in GROWTH_INITS:
        raise ValueError(f"unknown growth init {init!r}; use one of {GROWTH_INITS}")
    total = num_layers + new_blocks
    if init == "interpolate":
        return [p * num_layers // total for p in range(total)]
    if init == "stack":
        return list(range(num_layers)) + [p % num_layers for p in range(num_layers, total)]
    return list(range(num_layers)) + [None] * new_blocks


# ---------------------------------------------------------------------------------------------------------
# Model anatomy
# ---------------------------------------------------------------------------------------------------------

def _unwrap(model: nn.Module) -> nn.Module:
    """The model inside DDP / DeepSpeed / Accelerate (``.module``) and torch.compile (``._orig_mod``) wrappers."""
    while True:
        inner = getattr(model, "_orig_mod", None)
        if not isinstance(inner, nn.Module):
            inner = getattr(model, "module", None)
        if not isinstance(inner, nn.Module):
            return model
        model = inner


def _family(model: nn.Module) -> str:
    if isinstance(model, SwinTransformer):
        return "swin"
    if isinstance(model, VisionTransformer):
        return "deit"
    if _unwrap(model) is not model:
        raise TypeError(f"expand/grow take the bare model, not a {type(model).__name__} wrapper: pass .module "
                        f"(expand before wrapping in DDP/DeepSpeed, then re-wrap)")
    raise TypeError(f"ScaleNet expansion supports timm VisionTransformer (DeiT) and SwinTransformer models, "
                    f"not {type(model).__name__}")


def _stage_owners(model: nn.Module) -> list[nn.Module]:
    """Modules that own a ``blocks`` Sequential: the ViT itself, or each Swin stage."""
    return list(model.layers) if _family(model) == "swin" else [model]


def _block_names(model: nn.Module) -> list[str]:
    prefixes = [f"layers.{i}.blocks" for i in range(len(model.layers))] if _family(model) == "swin" else ["blocks"]
    return [f"{p}.{j}" for p, owner in zip(prefixes, _stage_owners(model)) for j in range(len(owner.blocks))]


def _shared_params(block: nn.Module) -> list[nn.Parameter]:
    """The tensors an instance shares with its source: everything in ``attn`` and ``mlp`` except norm layers
    and adjustment branches (qkv, proj, fc1, fc2 weights/biases; Swin's relative-position-bias table)."""
    if not (hasattr(block, "attn") and hasattr(block, "mlp")):
        raise TypeError(f"{type(block).__name__} has no attn/mlp: not a transformer block ScaleNet can share")
    skip = {id(p) for part in (block.attn, block.mlp) for m in part.modules()
            if isinstance(m, (*_NORM_TYPES, LowRankBranch)) for p in m.parameters()}
    return [p for part in (block.attn, block.mlp) for p in part.parameters() if id(p) not in skip]


def _tied_instance(block: nn.Module) -> nn.Module:
    """A new instance of ``block``: same shared Parameters, own copies of everything else (norms, branches)."""
    memo = {id(p): p for p in _shared_params(block)}  # deepcopy returns memo entries as-is: tied, not copied
    return copy.deepcopy(block, memo)


def _independent_copy(block: nn.Module) -> nn.Module:
    return copy.deepcopy(block)


def _set_swin_shift(block: nn.Module, position: int) -> None:
    """Swin alternates W-MSA / SW-MSA by position in the stage (even: no shift); a copy placed at a position
    of the other parity takes that position's shift and mask (§III-B). timm zeroes the shift when the
    resolution fits in one window, and so does this."""
    window = tuple(block.window_size)
    block.target_shift_size = (window[0] // 2, window[1] // 2) if position % 2 else (0, 0)
    block.window_size, block.shift_size = block._calc_window_shift(window)
    block.window_area = block.window_size[0] * block.window_size[1]
    block._init_buffers()


def _drop_path_rate(model: nn.Module) -> float:
    rates = [m.drop_prob for m in model.modules() if isinstance(m, DropPath)]
    return max(rates, default=0.0)


def _respread_drop_path(model: nn.Module, rate: float) -> None:
    """timm's linear rule over the scaled depth: block i of T gets rate·i/(T−1) [ASSUMED, docs/scalenet.md]."""
    blocks = [b for owner in _stage_owners(model) for b in owner.blocks]
    rates = torch.linspace(0, rate, len(blocks), device="cpu").tolist()
    for block, r in zip(blocks, rates):
        for attr in ("drop_path1", "drop_path2"):
            if hasattr(block, attr):
                setattr(block, attr, DropPath(r) if r > 0 else nn.Identity())


def _replace_blocks(model: nn.Module, owner: nn.Module, blocks: list[nn.Module]) -> None:
    owner.blocks = nn.Sequential(*blocks)
    if _family(model) == "swin":
        owner.depth = len(blocks)
        for position, block in enumerate(blocks):
            _set_swin_shift(block, position)
    else:
        reduction = model.feature_info[0]["reduction"] if model.feature_info else 16
        model.feature_info = [dict(module=f"blocks.{i}", num_chs=model.embed_dim, reduction=reduction)
                              for i in range(len(blocks))]


def _meta_clone(model: nn.Module) -> nn.Module:
    """A copy of ``model`` on the meta device, made without copying any weights (for counting)."""
    memo = {}
    for t in list(model.parameters()) + list(model.buffers()):
        meta = torch.empty_like(t, device="meta")
        memo[id(t)] = nn.Parameter(meta, requires_grad=t.requires_grad) if isinstance(t, nn.Parameter) else meta
    return copy.deepcopy(model, memo)


# ---------------------------------------------------------------------------------------------------------
# The record an expanded model carries, and which parameters train
# ---------------------------------------------------------------------------------------------------------

@dataclass
class ExpansionRecord:
    """Kept on an expanded model as ``model.scalenet``: what was done, and which parameter paths are tied."""
    family: str
    history: list[dict] = field(default_factory=list)  # one entry per expand()/grow() call, with its arguments
    ties: list[tuple[str, ...]] = field(default_factory=list)  # groups of paths that must be one Parameter
    schedule_steps: int = 0  # GrowthSchedule stages applied to this model


def parameter_groups(model: nn.Module) -> dict[str, list[str]]:
    """Parameter names (tied parameters once, by their first path) in each group of :data:`TRAINABLE_GROUPS`:

    ``adjust`` adapters/LoRA · ``norms`` every normalisation layer (block LNs, final norm, Swin patch-embed and
    patch-merging norms) · ``blocks`` the attention/MLP weights of every block (shared or not) and Swin's
    relative-position-bias tables · ``embed`` patch embedding, cls/pos tokens · ``merging`` Swin's
    patch-merging reductions · ``head`` the classifier · ``other`` anything else.
    """
    model = _unwrap(model)
    group_of: dict[int, str] = {}
    for module in model.modules():
        if isinstance(module, LowRankBranch):
            for p in module.parameters():
                group_of[id(p)] = "adjust"
    for module in model.modules():
        if isinstance(module, _NORM_TYPES):
            for p in module.parameters(recurse=False):
                group_of.setdefault(id(p), "norms")
    groups: dict[str, list[str]] = {g: [] for g in TRAINABLE_GROUPS}
    for name, p in model.named_parameters():
        group = group_of.get(id(p))
        if group is None:
            head = name.split(".")[0]
            if head == "head":
                group = "head"
            elif head in ("patch_embed", "cls_token", "pos_embed", "reg_token", "dist_token"):
                group = "embed"
            elif ".downsample." in f".{name}":
                group = "merging"
            elif ".blocks." in f".{name}":
                group = "blocks"
            else:
                group = "other"
        groups[group].append(name)
    return groups


def _spec_trainable(model: nn.Module) -> tuple[str, ...]:
    """§III-C / §IV-A: DeiT-Tiny/Small train everything; DeiT-Base and every Swin only adjustments + norms (head
    frozen [ASSUMED], literal reading). Decided by width: a ViT of embed_dim ≤ 384 is Tiny/Small-like."""
    if _family(model) == "deit" and model.embed_dim <= 384:
        return TRAINABLE_GROUPS
    return ("adjust", "norms")


def _resolve_trainable(model: nn.Module, trainable) -> tuple[str, ...]:
    if trainable == "spec":
        return _spec_trainable(model)
    if trainable == "all":
        return TRAINABLE_GROUPS
    if trainable in ("none", None):
        return ()
    names = [t.strip() for t in trainable.split(",")] if isinstance(trainable, str) else list(trainable)
    bad = [t for t in names if t not in TRAINABLE_GROUPS]
    if bad:
        raise ValueError(f"unknown trainable group(s) {bad}; use 'spec', 'all', 'none' or a list of {TRAINABLE_GROUPS}")
    return tuple(names)


def set_trainable(model: nn.Module, trainable="spec") -> tuple[str, ...]:
    """Set ``requires_grad`` per group (``'spec'`` = the paper's default, §IV-A, ``'all'``, ``'none'``, or a list/comma
    string of group names); returns the groups that train. The engine optimises ``requires_grad`` params."""
    model = _unwrap(model)
    groups = _resolve_trainable(model, trainable)
    names = parameter_groups(model)
    for group, members in names.items():
        for name in members:
            model.get_parameter(name).requires_grad_(group in groups)
    return groups


# ---------------------------------------------------------------------------------------------------------
# expand(): WSPT + adjustments
# ---------------------------------------------------------------------------------------------------------

def _adjust_block(block: nn.Module, adjust: str, rank: int, act_layer, adapter_scale: float,
                  lora_alpha: float | None) -> None:
    if adjust == "adapter":
        targets = [(block.mlp, "fc1"), (block.mlp, "fc2")]
    else:
        targets = [(block.attn, "qkv"), (block.attn, "proj"), (block.mlp, "fc1"), (block.mlp, "fc2")]
    for parent, attr in targets:
        linear = getattr(parent, attr)
        if isinstance(linear, AdjustedLinear):
            continue  # re-expanding an adjusted model: this instance already has its branch
        dd = {"device": linear.weight.device, "dtype": linear.weight.dtype}
        if adjust == "adapter":
            branch = ParallelAdapter(linear.in_features, linear.out_features, rank, act_layer, adapter_scale, **dd)
        else:
            branch = LoRA(linear.in_features, linear.out_features, rank, lora_alpha, **dd)
        setattr(parent, attr, AdjustedLinear(linear, branch))


def _selected_stages(model: nn.Module, layers) -> dict[int, list[int] | None]:
    """stage index → selected source layers (None = all). DeiT has one stage; for Swin ``layers`` names stages."""
    if _family(model) == "deit":
        if layers in (None, "all"):
            return {0: None}
        return {0: sorted(set(int(i) for i in ([layers] if isinstance(layers, int) else layers)))}
    num_stages = len(model.layers)
    if layers is None:
        stages = [num_stages - 1]  # §IV-A: Swin scales its last stage by default
    elif layers == "all":
        stages = list(range(num_stages))
    else:
        stages = sorted(set(int(i) for i in ([layers] if isinstance(layers, int) else layers)))
    bad = [s for s in stages if not 0 <= s < num_stages]
    if bad:
        raise ValueError(f"Swin stages {bad} out of range: for Swin, `layers` names stages 0..{num_stages - 1} "
                         f"(0-based; the default {num_stages - 1} is the last stage)")
    return {s: None for s in stages}


def expand(model: nn.Module, *, k: int = 2, order: str | Sequence[int] | None = None, layers=None,
           adjust: str | None = "adapter", rank: int = 16, adapter_act: str | type[nn.Module] = "relu",
           adapter_scale: float = 1.0, lora_alpha: float | None = None, coverage: str | None = None,
           drop_path: float | None = None, trainable="spec") -> nn.Module:
    """Deepen a timm DeiT (``VisionTransformer``) or ``SwinTransformer`` by weight sharing, in place.

    Args:
        model: the (pretrained or random) model; modified in place and returned.
        k: reuse count — every selected layer appears k times (k=1: no new layers, only adjustments; Table II
            "✗ WSPT"). Table IV uses 2 and 3.
        order: ``'interpolate'`` (copies right after their source; DeiT default) or ``'stack'`` (copies
            appended at the tail of the stack/stage; Swin default), or an explicit list of source indices
            (0-based) for the one scaled stack. Table V.
        layers: DeiT — 0-based block indices that get copies (default all; Table III uses e.g. [0, 1, 2]).
            Swin — 0-based *stage* indices whose blocks all get copies (default the last stage, 3; 'all').
        adjust: ``'adapter'`` (parallel adapters on fc1 and fc2), ``'lora'`` (on qkv, proj, fc1, fc2) or
            ``None``/``'none'`` (pure WSPT). Table VI.
        rank: adapter/LoRA bottleneck r (16).
        adapter_act: adapter non-linearity, ``'relu'`` [ASSUMED] or ``'gelu'`` (or a module class).
        adapter_scale: adapter output scale s [ASSUMED 1]. lora_alpha: LoRA alpha [ASSUMED = rank].
        coverage: which instances get an adjustment branch: ``'groups'`` (every instance of a selected layer:
            source and copies; DeiT default, Table III counts) or ``'all'`` (every block of the model; Swin
            default, Eq. 9). Instances that already carry a branch keep it.
        drop_path: max stochastic-depth rate, spread linearly over the scaled depth; ``None`` keeps the rate
            the model was built with (its largest DropPath), re-spread.
        trainable: ``'spec'`` (§IV-A: DeiT ≤ Small all; DeiT-B/Swin adjustments + norms), ``'all'``, ``'none'``
            or groups from :data:`TRAINABLE_GROUPS`.

    Returns the same model object, with ``model.scalenet`` (an :class:`ExpansionRecord`) describing the
    expansion and its tied parameter paths, and state-dict hooks that keep the tying through save/load.
    """
    family = _family(model)
    adjust = "none" if adjust is None else adjust
    if adjust not in ADJUSTMENTS:
        raise ValueError(f"unknown adjust {adjust!r}; use 'adapter', 'lora' or None")
    if adjust != "none" and (not isinstance(rank, int) or rank < 1):
        raise ValueError(f"rank={rank!r}: the adapter/LoRA bottleneck must be a positive integer")
    act_layer = _ACTIVATIONS.get(adapter_act) if isinstance(adapter_act, str) else adapter_act
    if act_layer is None:
        raise ValueError(f"unknown adapter_act {adapter_act!r}; use one of {tuple(_ACTIVATIONS)}")
    coverage = coverage or ("all" if family == "swin" else "groups")
    if coverage not in ("groups", "all"):
        raise ValueError(f"unknown coverage {coverage!r}; use 'groups' (instances of shared layers) or 'all'")
    explicit = None if order is None or isinstance(order, str) else [int(i) for i in order]
    order = order if isinstance(order, str) else ("stack" if family == "swin" else "interpolate")
    if order not in ORDERS:
        raise ValueError(f"unknown order {order!r}; use one of {ORDERS} or an explicit list of source indices")
    _resolve_trainable(model, trainable)  # fail on a bad group name before any work
    rate = _drop_path_rate(model) if drop_path is None else float(drop_path)

    stages = _selected_stages(model, layers)
    if explicit is not None and len(stages) != 1:
        raise ValueError("an explicit order list applies to one stack: for Swin also pass layers=<one stage>")
    owners = _stage_owners(model)
    to_adjust: list[nn.Module] = []
    for index, owner in enumerate(owners):
        old = list(owner.blocks)
        if index not in stages:
            to_adjust += old if coverage == "all" else []
            continue
        if explicit is not None:
            mapping = explicit
            bad = sorted(set(mapping) - set(range(len(old)))) + sorted(set(range(len(old))) - set(mapping))
            if bad:
                raise ValueError(f"order list must use every source index 0..{len(old) - 1} and no other (off: {bad})")
            selected = stages[index] if stages[index] is not None else [i for i in set(mapping) if mapping.count(i) > 1]
        else:
            selected = stages[index] if stages[index] is not None else list(range(len(old)))
            mapping = layer_mapping(len(old), k, order, selected)
        blocks, seen = [], set()
        for source in mapping:
            block = old[source] if source not in seen else _tied_instance(old[source])
            seen.add(source)
            blocks.append(block)
            if coverage == "all" or source in selected:
                to_adjust.append(block)
        _replace_blocks(model, owner, blocks)
    if adjust != "none":
        for block in to_adjust:
            _adjust_block(block, adjust, rank, act_layer, adapter_scale, lora_alpha)
    _respread_drop_path(model, rate)
    _record(model, dict(method="scalenet", k=k, order=explicit or order, layers=layers, adjust=adjust, rank=rank,
                        adapter_act=str(adapter_act), coverage=coverage, drop_path=rate, trainable=trainable))
    set_trainable(model, trainable)
    return model


# ---------------------------------------------------------------------------------------------------------
# grow(): the Table I baselines — new independent blocks
# ---------------------------------------------------------------------------------------------------------

def _reinit_block(block: nn.Module) -> None:
    """timm's init for a fresh block: Linear trunc-normal(0.02) + zero bias, norms 1/0, Swin bias table
    trunc-normal(0.02) [ASSUMED, docs/scalenet.md]."""
    with torch.no_grad():
        for module in block.modules():
            if isinstance(module, nn.Linear):
                trunc_normal_(module.weight, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, _NORM_TYPES):
                module.reset_parameters()
            if hasattr(module, "relative_position_bias_table"):
                trunc_normal_(module.relative_position_bias_table, std=0.02)


def _averaged_block(blocks: list[nn.Module], count: int, generator: torch.Generator) -> nn.Module:
    """SWA init: element-wise average of ``count`` distinct randomly drawn layers, norms included."""
    if count > len(blocks):
        raise ValueError(f"swa_layers={count} but the stack has only {len(blocks)} layers")
    picks = torch.randperm(len(blocks), generator=generator, device="cpu")[:count].tolist()
    new = _independent_copy(blocks[picks[0]])
    with torch.no_grad():
        sources = [dict(blocks[i].named_parameters()) for i in picks]
        for name, p in new.named_parameters():
            p.copy_(sum(s[name] for s in sources) / count)
    return new


def matched_new_blocks(model: nn.Module, target_params: int, stage: int | None = None) -> int:
    """Blocks to add (each a copy of the last block of the grown stack) until the count is ≥ target_params —
    the paper's parameter-matching rule for the baselines (Table I; docs/scalenet.md)."""
    base = sum(p.numel() for p in model.parameters())
    owner = _stage_owners(model)[_grow_stage(model, stage)]
    per_block = sum(p.numel() for p in owner.blocks[-1].parameters())
    return max(0, math.ceil((target_params - base) / per_block))


def _grow_stage(model: nn.Module, stage: int | None) -> int:
    if _family(model) == "deit":
        return 0
    stage = len(model.layers) - 2 if stage is None else stage  # Swin: stage 3 (index 2), as Table I's counts give
    if not 0 <= stage < len(model.layers):
        raise ValueError(f"stage={stage}: Swin has stages 0..{len(model.layers) - 1} (0-based)")
    return stage


def grow(model: nn.Module, *, new_blocks: int | str = "match", init: str = "stack", stage: int | None = None,
         swa_layers: int = 2, seed: int = 0, drop_path: float | None = None, trainable="all",
         match: dict | None = None) -> nn.Module:
    """Progressive-training baselines of Table I: add ``new_blocks`` *independent* blocks, in place.

    Args:
        new_blocks: number of blocks, or ``'match'`` to add blocks until the parameter count reaches that of
            ``expand(model, **match)`` (default ScaleNet settings) — DeiT-T +2, DeiT-S/B +1, Swin +1 (Table I).
        init: ``'random'`` (tail, timm init), ``'stack'`` (tail, copies of θ_{p mod L}), ``'interpolate'``
            (g(p) = ⌊p·L/L'⌋ [ASSUMED]) or ``'swa'`` (tail, average of ``swa_layers`` random layers [ASSUMED 2]).
        stage: Swin stage to grow (0-based; default 2 = stage 3, which the paper's counts imply). DeiT: ignored.
        seed: for Random and SWA draws. drop_path: as in :func:`expand`. trainable: default ``'all'`` [ASSUMED].
    """
    family = _family(model)
    if init not in GROWTH_INITS:
        raise ValueError(f"unknown growth init {init!r}; use one of {GROWTH_INITS}")
    stage_index = _grow_stage(model, stage)
    if new_blocks == "match":
        target = sum(p.numel() for p in expand(_meta_clone(model), **(match or {})).parameters())
        new_blocks = matched_new_blocks(model, target, stage)
    if not isinstance(new_blocks, int) or new_blocks < 0:
        raise ValueError(f"new_blocks={new_blocks!r}: give a non-negative integer or 'match'")
    _resolve_trainable(model, trainable)
    rate = _drop_path_rate(model) if drop_path is None else float(drop_path)
    generator = torch.Generator().manual_seed(seed)
    owner = _stage_owners(model)[stage_index]
    old = list(owner.blocks)
    blocks, seen = [], set()
    for source in growth_mapping(len(old), new_blocks, init):
        if source is None and init == "swa":
            block = _averaged_block(old, swa_layers, generator)
        elif source is None:
            block = _independent_copy(old[-1])
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(int(torch.randint(0, 2 ** 31 - 1, (1,), generator=generator, device="cpu")))
                _reinit_block(block)
        else:
            block = old[source] if source not in seen else _independent_copy(old[source])
            seen.add(source)
        blocks.append(block)
    _replace_blocks(model, owner, blocks)
    _respread_drop_path(model, rate)
    _record(model, dict(method="grow", new_blocks=new_blocks, init=init,
                        stage=stage_index if family == "swin" else None,
                        swa_layers=swa_layers, seed=seed, drop_path=rate, trainable=trainable))
    set_trainable(model, trainable)
    return model


# ---------------------------------------------------------------------------------------------------------
# Tying through save / load
# ---------------------------------------------------------------------------------------------------------

class TyingError(RuntimeError):
    """Parameters that ScaleNet shares are no longer one object, or a checkpoint disagrees about them."""


def tied_groups(model: nn.Module) -> list[list[str]]:
    """Groups of parameter paths that are currently the *same* ``nn.Parameter`` (first path first)."""
    by_id: dict[int, list[str]] = {}
    for name, p in _unwrap(model).named_parameters(remove_duplicate=False):
        by_id.setdefault(id(p), []).append(name)
    return [names for names in by_id.values() if len(names) > 1]


def _broken_ties(model: nn.Module) -> list[tuple[str, ...]]:
    record = getattr(model, "scalenet", None)
    if record is None:
        return []
    broken = []
    for group in record.ties:
        first = model.get_parameter(group[0])
        if any(model.get_parameter(name) is not first for name in group[1:]):
            broken.append(group)
    return broken


def assert_tied(model: nn.Module) -> None:
    """Raise :class:`TyingError` if any parameter group recorded as tied at expansion is no longer one object
    (e.g. after ``to_empty()``, a loader that assigns fresh tensors, or a wrapper that copied parameters)."""
    model = _unwrap(model)
    if getattr(model, "scalenet", None) is None:
        raise TyingError(f"{type(model).__name__} is not a ScaleNet-expanded model (no .scalenet record)")
    broken = _broken_ties(model)
    if broken:
        raise TyingError(f"{len(broken)} ScaleNet weight groups are no longer shared, e.g. {' / '.join(broken[0])}: "
                         f"something un-tied them (to_empty(), assign-loading, a wrapper); call "
                         f"models.scalenet.retie(model) and rebuild the optimizer")


def retie(model: nn.Module, check_values: bool = True) -> int:
    """Make every recorded tie group one Parameter again (the group's first path wins); returns how many
    paths were re-pointed. Raises :class:`TyingError` if the tensors to be merged hold different values,
    unless ``check_values=False`` (right after ``to_empty()``, whose values are garbage anyway)."""
    model = _unwrap(model)
    repointed = 0
    for group in _broken_ties(model):
        first = model.get_parameter(group[0])
        for name in group[1:]:
            other = model.get_parameter(name)
            if other is first:
                continue
            if other.shape != first.shape or (check_values and not first.is_meta and not other.is_meta
                                               and not torch.equal(other.detach().to(first.device), first.detach())):
                raise TyingError(f"cannot re-tie {name} to {group[0]}: their values differ (trained untied?)")
            parent, _, attr = name.rpartition(".")
            setattr(model.get_submodule(parent), attr, first)
            repointed += 1
    return repointed


def _state_dict_hook(module: nn.Module, state_dict: dict, prefix: str, local_metadata) -> None:
    """Save each shared tensor once: drop the alias paths of groups that are really tied right now."""
    broken = set(_broken_ties(module))
    if broken:
        warnings.warn(f"ScaleNet: {len(broken)} weight groups are not tied; saving every copy (call retie())")
    for group in module.scalenet.ties:
        if group not in broken:
            for name in group[1:]:
                state_dict.pop(prefix + name, None)


def _load_pre_hook(module: nn.Module, state_dict: dict, prefix: str, local_metadata, strict, missing_keys,
                   unexpected_keys, error_msgs) -> None:
    """Fill alias paths from the saved copy; refuse a checkpoint whose 'tied' tensors differ."""
    for group in module.scalenet.ties:
        present = [name for name in group if prefix + name in state_dict]
        if not present:
            continue
        first = state_dict[prefix + present[0]]
        for name in present[1:]:
            other = state_dict[prefix + name]
            same = other is first or (other.shape == first.shape and (
                other.is_meta or first.is_meta or other.numel() == 0 or torch.equal(other, first.to(other.device))))
            if not same:
                error_msgs.append(f"checkpoint holds different values for {prefix + present[0]} and "
                                  f"{prefix + name}, which this ScaleNet model shares: it was saved from an "
                                  f"untied model (a baseline or an explicit deep copy), not from this architecture")
        for name in group:
            state_dict.setdefault(prefix + name, first)


def _load_post_hook(module: nn.Module, incompatible_keys) -> None:
    retie(module)  # a load with assign=True gives each path its own Parameter; make them one again


def _record(model: nn.Module, entry: dict) -> None:
    record = getattr(model, "scalenet", None)
    if record is None:
        record = ExpansionRecord(family=_family(model))
        model.scalenet = record
        model.register_state_dict_post_hook(_state_dict_hook)
        model.register_load_state_dict_pre_hook(_load_pre_hook)
        model.register_load_state_dict_post_hook(_load_post_hook)
    record.history.append(entry)
    record.ties = [tuple(group) for group in tied_groups(model)]


def tied_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """State dict of the (unwrapped) model with each shared tensor once — what ``model.state_dict()`` of an
    expanded model already returns; use this on a DDP/DeepSpeed/compiled wrapper to get clean keys."""
    return _unwrap(model).state_dict()


def load_tied_state_dict(model: nn.Module, state_dict: dict, strict: bool = True):
    """Load into the (unwrapped) model, accepting keys with a ``module.``/``_orig_mod.`` prefix, with or
    without alias paths, then check the tying (:func:`assert_tied`). Returns load_state_dict's result."""
    inner = _unwrap(model)
    cleaned = {}
    for key, value in state_dict.items():
        for prefix in ("module.", "_orig_mod."):
            while key.startswith(prefix):
                key = key[len(prefix):]
        cleaned[key] = value
    result = inner.load_state_dict(cleaned, strict=strict)
    assert_tied(inner)
    return result


def load_base_checkpoint(model: nn.Module, path: str) -> nn.Module:
    """Load a DeiT/Swin checkpoint (timm's, the official DeiT/Swin ``{'model': ...}`` files, or ours) into the
    *unexpanded* model, converting official key layouts with timm's filters; strict, one-line errors."""
    import os

    if not os.path.isfile(path):
        raise FileNotFoundError(f"base_checkpoint {path!r} does not exist")
    # timm's loader: weights_only=True, unwraps {'state_dict'|'model': ...} and module./_orig_mod. prefixes
    state = load_state_dict(path, use_ema=False)
    family_module = swin_transformer if _family(model) == "swin" else vision_transformer
    state = family_module.checkpoint_filter_fn(state, model)
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as e:  # shape mismatches: torch lists them all over many lines; one is enough
        first = next((line.strip() for line in str(e).splitlines() if "size mismatch" in line), str(e)[:200])
        raise ValueError(f"{path}: not a checkpoint of this {type(model).__name__} ({first}); "
                         f"check the base model size") from None
    if missing or unexpected:
        raise ValueError(f"{path}: not a checkpoint of this {type(model).__name__} "
                         f"({len(missing)} missing keys, e.g. {missing[:2]}; {len(unexpected)} unexpected, "
                         f"e.g. {unexpected[:2]}); check the base model size")
    return model


# ---------------------------------------------------------------------------------------------------------
# WSPT as a schedule the engine calls between epochs
# ---------------------------------------------------------------------------------------------------------

_EXPAND_KEYS = {"k", "order", "layers", "adjust", "rank", "adapter_act", "adapter_scale", "lora_alpha",
                "coverage", "drop_path", "trainable"}
_GROW_KEYS = {"new_blocks", "init", "stage", "swa_layers", "seed", "drop_path", "trainable", "match"}


class GrowthSchedule:
    """Depth growth at given epochs; the engine calls :meth:`maybe_grow` at the start of every epoch.

    Config (a plain dict, e.g. ``model.growth`` in a config file)::

        {"stages": [                       # applied in order; each at the start of its epoch
            {"epoch": 0,                   # default 0 (the paper: expand once, then train 100 epochs)
             "method": "scalenet",         # 'scalenet' → expand() (tied, WSPT); 'grow' → grow() (baselines)
             "k": 2, "adjust": "adapter", "rank": 16, ...},   # any other key: that function's arguments
        ]}

    A dict without ``stages`` is one stage (``{"k": 2}`` = the paper's default at epoch 0). The number of
    stages already applied is kept on the model (``model.scalenet.schedule_steps``), so calling it again at
    the same epoch, or on resume (fresh base model, ``maybe_grow(model, resume_epoch)``, then load the
    checkpoint) applies each stage exactly once.
    """

    def __init__(self, stages: list[dict] | None = None, **stage):
        if stages is not None and stage:
            raise ValueError("give either stages=[...] or the keys of a single stage, not both")
        self.stages = [self._check(dict(s)) for s in (stages if stages is not None else [stage])]
        epochs = [s["epoch"] for s in self.stages]
        if epochs != sorted(epochs):
            raise ValueError(f"growth stages must be in epoch order, got epochs {epochs}")

    @classmethod
    def from_config(cls, config: dict) -> "GrowthSchedule":
        config = dict(config)
        return cls(stages=config.pop("stages")) if "stages" in config else cls(**config)

    @staticmethod
    def _check(stage: dict) -> dict:
        stage.setdefault("epoch", 0)
        stage.setdefault("method", "scalenet")
        allowed = _EXPAND_KEYS if stage["method"] == "scalenet" else _GROW_KEYS if stage["method"] == "grow" else None
        if allowed is None:
            raise ValueError(f"growth stage method {stage['method']!r}: use 'scalenet' (tied) or 'grow' (baseline)")
        unknown = set(stage) - allowed - {"epoch", "method"}
        if unknown:
            raise ValueError(f"unknown key(s) {sorted(unknown)} in a '{stage['method']}' growth stage; allowed: "
                             f"{sorted(allowed | {'epoch', 'method'})}")
        if not isinstance(stage["epoch"], int) or stage["epoch"] < 0:
            raise ValueError(f"growth stage epoch {stage['epoch']!r} must be a non-negative integer")
        return stage

    def maybe_grow(self, model: nn.Module, epoch: int) -> tuple[nn.Module, bool]:
        """Apply every stage due by ``epoch`` that this model has not had; returns (model, changed). When
        changed, rebuild the optimizer (and re-wrap DDP/DeepSpeed): the parameter set is different."""
        inner = _unwrap(model)
        done = getattr(getattr(inner, "scalenet", None), "schedule_steps", 0)
        changed = False
        for stage in self.stages[done:]:
            if stage["epoch"] > epoch:
                break
            if inner is not model:
                raise TypeError("maybe_grow needs the bare model (grow before wrapping in DDP/DeepSpeed, then re-wrap)")
            kwargs = {k: v for k, v in stage.items() if k not in ("epoch", "method")}
            (expand if stage["method"] == "scalenet" else grow)(inner, **kwargs)
            inner.scalenet.schedule_steps += 1
            changed = True
        return model, changed


# ---------------------------------------------------------------------------------------------------------
# Registered models
# ---------------------------------------------------------------------------------------------------------

_BASES = {  # base arch, timm pretrained tag (official ImageNet-1k checkpoints, §IV-A), drop-path rate (docs)
    "deit_tiny": ("deit_tiny_patch16_224", "fb_in1k", 0.0),
    "deit_small": ("deit_small_patch16_224", "fb_in1k", 0.2),
    "deit_base": ("deit_base_patch16_224", "fb_in1k", 0.5),
    "swin_tiny": ("swin_tiny_patch4_window7_224", "ms_in1k", 0.2),
    "swin_small": ("swin_small_patch4_window7_224", "ms_in1k", 0.2),
    "swin_base": ("swin_base_patch4_window7_224", "ms_in1k", 0.5),
}

# Every registered name → (base, method, arguments): method "scalenet" builds expand(base, **arguments), "grow" a
# Table I baseline grow(base, **arguments), "scratch" the deeper timm model itself. The @register_model functions
# at the bottom of the file build their entry through _create_scalenet.
_VARIANTS: dict[str, tuple[str, str, dict[str, Any]]] = {
    # Tables I/II ScaleNet, §IV-A defaults: DeiT 12 → 24 layers, Interpolate; Swin stage 4 doubled, Stack; adapters
    "scalenet_deit_tiny_2x": ("deit_tiny", "scalenet", {}),
    "scalenet_deit_small_2x": ("deit_small", "scalenet", {}),
    "scalenet_deit_base_2x": ("deit_base", "scalenet", {}),
    "scalenet_swin_tiny_2x": ("swin_tiny", "scalenet", {}),
    "scalenet_swin_small_2x": ("swin_small", "scalenet", {}),
    "scalenet_swin_base_2x": ("swin_base", "scalenet", {}),
    # Table II: ✓ WSPT without adjustment; ✗ WSPT = original depth + an adjustment sized to ScaleNet's count
    # (docs/scalenet.md)
    "scalenet_deit_tiny_2x_noadjust": ("deit_tiny", "scalenet", {"adjust": "none"}),
    "scalenet_deit_tiny_1x_adapter32": ("deit_tiny", "scalenet", {"k": 1, "rank": 32}),
    "scalenet_deit_tiny_1x_lora16": ("deit_tiny", "scalenet", {"k": 1, "adjust": "lora", "rank": 16}),
    "scalenet_deit_small_2x_noadjust": ("deit_small", "scalenet", {"adjust": "none"}),
    "scalenet_deit_small_1x_adapter32": ("deit_small", "scalenet", {"k": 1, "rank": 32}),
    "scalenet_deit_small_1x_lora16": ("deit_small", "scalenet", {"k": 1, "adjust": "lora", "rank": 16}),
    "scalenet_deit_base_2x_noadjust": ("deit_base", "scalenet", {"adjust": "none"}),
    "scalenet_deit_base_1x_adapter32": ("deit_base", "scalenet", {"k": 1, "rank": 32}),
    "scalenet_deit_base_1x_lora16": ("deit_base", "scalenet", {"k": 1, "adjust": "lora", "rank": 16}),
    "scalenet_swin_tiny_2x_noadjust": ("swin_tiny", "scalenet", {"adjust": "none"}),
    "scalenet_swin_tiny_1x_adapter16": ("swin_tiny", "scalenet", {"k": 1, "rank": 16}),
    "scalenet_swin_tiny_1x_lora8": ("swin_tiny", "scalenet", {"k": 1, "adjust": "lora", "rank": 8}),
    "scalenet_swin_small_2x_noadjust": ("swin_small", "scalenet", {"adjust": "none"}),
    "scalenet_swin_small_1x_adapter16": ("swin_small", "scalenet", {"k": 1, "rank": 16}),
    "scalenet_swin_small_1x_lora8": ("swin_small", "scalenet", {"k": 1, "adjust": "lora", "rank": 8}),
    "scalenet_swin_base_2x_noadjust": ("swin_base", "scalenet", {"adjust": "none"}),
    "scalenet_swin_base_1x_adapter16": ("swin_base", "scalenet", {"k": 1, "rank": 16}),
    "scalenet_swin_base_1x_lora8": ("swin_base", "scalenet", {"k": 1, "adjust": "lora", "rank": 8}),
    # Table III: which layers are shared. DeiT sets are 1-based in the names (as printed), 0-based in `layers`;
    # for Swin `layers` names stages (Swin-B rows; stage 3 of Swin-T also fits its printed 29.37M, docs/scalenet.md)
    "scalenet_deit_base_2x_layers1to3": ("deit_base", "scalenet", {"layers": [0, 1, 2]}),
    "scalenet_deit_base_2x_layers4to6": ("deit_base", "scalenet", {"layers": [3, 4, 5]}),
    "scalenet_deit_base_2x_layers7to9": ("deit_base", "scalenet", {"layers": [6, 7, 8]}),
    "scalenet_deit_base_2x_layers10to12": ("deit_base", "scalenet", {"layers": [9, 10, 11]}),
    "scalenet_swin_tiny_2x_stage1": ("swin_tiny", "scalenet", {"layers": [0]}),
    "scalenet_swin_tiny_2x_stage2": ("swin_tiny", "scalenet", {"layers": [1]}),
    "scalenet_swin_tiny_2x_stage3": ("swin_tiny", "scalenet", {"layers": [2]}),
    "scalenet_swin_tiny_2x_allstages": ("swin_tiny", "scalenet", {"layers": "all"}),
    "scalenet_swin_small_2x_stage1": ("swin_small", "scalenet", {"layers": [0]}),
    "scalenet_swin_small_2x_stage2": ("swin_small", "scalenet", {"layers": [1]}),
    "scalenet_swin_small_2x_stage3": ("swin_small", "scalenet", {"layers": [2]}),
    "scalenet_swin_small_2x_allstages": ("swin_small", "scalenet", {"layers": "all"}),
    "scalenet_swin_base_2x_stage1": ("swin_base", "scalenet", {"layers": [0]}),
    "scalenet_swin_base_2x_stage2": ("swin_base", "scalenet", {"layers": [1]}),
    "scalenet_swin_base_2x_stage3": ("swin_base", "scalenet", {"layers": [2]}),
    "scalenet_swin_base_2x_allstages": ("swin_base", "scalenet", {"layers": "all"}),
    # Table IV: reuse count 3
    "scalenet_deit_base_3x": ("deit_base", "scalenet", {"k": 3}),
    "scalenet_swin_base_3x": ("swin_base", "scalenet", {"k": 3}),
    # Table V: the other layer order
    "scalenet_deit_base_2x_stack": ("deit_base", "scalenet", {"order": "stack"}),
    "scalenet_swin_base_2x_interp": ("swin_base", "scalenet", {"order": "interpolate"}),
    # Table VI: adjustment design and bottleneck (adapter r=16 is scalenet_deit_base_2x)
    "scalenet_deit_base_2x_lora4": ("deit_base", "scalenet", {"adjust": "lora", "rank": 4}),
    "scalenet_deit_base_2x_lora8": ("deit_base", "scalenet", {"adjust": "lora", "rank": 8}),
    "scalenet_deit_base_2x_lora16": ("deit_base", "scalenet", {"adjust": "lora", "rank": 16}),
    "scalenet_deit_base_2x_adapter8": ("deit_base", "scalenet", {"rank": 8}),
    "scalenet_deit_base_2x_adapter32": ("deit_base", "scalenet", {"rank": 32}),
    # Table I baselines: independent new blocks, as many as parameter matching gives (Table I): DeiT-T +2,
    # DeiT-S/B +1, Swin +1 (in stage 3)
    "scalenet_deit_tiny_grow_random": ("deit_tiny", "grow", {"init": "random", "new_blocks": 2}),
    "scalenet_deit_tiny_grow_stack": ("deit_tiny", "grow", {"init": "stack", "new_blocks": 2}),
    "scalenet_deit_tiny_grow_interp": ("deit_tiny", "grow", {"init": "interpolate", "new_blocks": 2}),
    "scalenet_deit_tiny_grow_swa": ("deit_tiny", "grow", {"init": "swa", "new_blocks": 2}),
    "scalenet_deit_small_grow_random": ("deit_small", "grow", {"init": "random", "new_blocks": 1}),
    "scalenet_deit_small_grow_stack": ("deit_small", "grow", {"init": "stack", "new_blocks": 1}),
    "scalenet_deit_small_grow_interp": ("deit_small", "grow", {"init": "interpolate", "new_blocks": 1}),
    "scalenet_deit_small_grow_swa": ("deit_small", "grow", {"init": "swa", "new_blocks": 1}),
    "scalenet_deit_base_grow_random": ("deit_base", "grow", {"init": "random", "new_blocks": 1}),
    "scalenet_deit_base_grow_stack": ("deit_base", "grow", {"init": "stack", "new_blocks": 1}),
    "scalenet_deit_base_grow_interp": ("deit_base", "grow", {"init": "interpolate", "new_blocks": 1}),
    "scalenet_deit_base_grow_swa": ("deit_base", "grow", {"init": "swa", "new_blocks": 1}),
    "scalenet_swin_tiny_grow_random": ("swin_tiny", "grow", {"init": "random", "new_blocks": 1}),
    "scalenet_swin_tiny_grow_stack": ("swin_tiny", "grow", {"init": "stack", "new_blocks": 1}),
    "scalenet_swin_tiny_grow_interp": ("swin_tiny", "grow", {"init": "interpolate", "new_blocks": 1}),
    "scalenet_swin_tiny_grow_swa": ("swin_tiny", "grow", {"init": "swa", "new_blocks": 1}),
    "scalenet_swin_small_grow_random": ("swin_small", "grow", {"init": "random", "new_blocks": 1}),
    "scalenet_swin_small_grow_stack": ("swin_small", "grow", {"init": "stack", "new_blocks": 1}),
    "scalenet_swin_small_grow_interp": ("swin_small", "grow", {"init": "interpolate", "new_blocks": 1}),
    "scalenet_swin_small_grow_swa": ("swin_small", "grow", {"init": "swa", "new_blocks": 1}),
    "scalenet_swin_base_grow_random": ("swin_base", "grow", {"init": "random", "new_blocks": 1}),
    "scalenet_swin_base_grow_stack": ("swin_base", "grow", {"init": "stack", "new_blocks": 1}),
    "scalenet_swin_base_grow_interp": ("swin_base", "grow", {"init": "interpolate", "new_blocks": 1}),
    "scalenet_swin_base_grow_swa": ("swin_base", "grow", {"init": "swa", "new_blocks": 1}),
    # Table VII: the 24-layer DeiTs trained from scratch
    "scalenet_deit_small_depth24": ("deit_small", "scratch", {"depth": 24}),
    "scalenet_deit_base_depth24": ("deit_base", "scratch", {"depth": 24}),
}


def _cfg(base: str, **kwargs) -> dict[str, Any]:
    swin = base.startswith("swin")
    return {
        "url": "", "num_classes": 1000, "input_size": (3, 224, 224), "pool_size": (7, 7) if swin else None,
        "crop_pct": 0.9 if swin else 0.875, "interpolation": "bicubic", "fixed_input_size": True,
        "mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225),
        "first_conv": "patch_embed.proj", "classifier": "head.fc" if swin else "head",
        **kwargs,
    }


default_cfgs = generate_default_cfgs({name: _cfg(base) for name, (base, _, _) in _VARIANTS.items()})


def _scaled_model(variant: str, pretrained: bool = False, base_checkpoint: str | None = None, **kwargs) -> nn.Module:
    """The model class ``build_model_with_cfg`` builds for a variant: the timm base (random, ``pretrained=True``
    = timm's ImageNet-1k weights, or ``base_checkpoint=PATH``), then expand()/grow() with the variant's
    arguments, overridable by kwargs. Every other kwarg (img_size, num_classes, drop_path_rate, embed_dim,
    window_size, device, …) goes to the base."""
    base, method, arguments = _VARIANTS[variant]
    arch, tag, drop_path_rate = _BASES[base]
    own_keys = _EXPAND_KEYS if method == "scalenet" else _GROW_KEYS if method == "grow" else set()
    arguments = {**arguments, **{key: kwargs.pop(key) for key in list(kwargs) if key in own_keys - {"drop_path"}}}
    if method == "scratch":
        kwargs.setdefault("depth", arguments["depth"])
        drop_path_rate = 0.1  # DeiT's own recipe for the from-scratch 24-layer models (Table VII)
    kwargs.setdefault("drop_path_rate", kwargs.pop("drop_path", drop_path_rate))
    if pretrained and base_checkpoint:
        raise ValueError("give pretrained=True (timm's weights) or base_checkpoint=PATH, not both")
    model = create_model(f"{arch}.{tag}" if pretrained else arch, pretrained=pretrained, **kwargs)
    if base_checkpoint:
        load_base_checkpoint(model, base_checkpoint)
    if method == "scalenet":
        expand(model, **arguments)
    elif method == "grow":
        grow(model, **arguments)
    return model


def _create_scalenet(variant: str, pretrained: bool = False, **kwargs) -> nn.Module:
    # timm's builder (cfg, kwargs, features_only). The pretrained weights are the *base's*, loaded by timm in
    # _scaled_model before the expansion, so the builder itself loads nothing (pretrained=False here).
    if _VARIANTS[variant][0].startswith("swin"):  # as timm's _create_swin_transformer / _create_vision_transformer
        feature_cfg = dict(flatten_sequential=True, out_indices=kwargs.pop("out_indices", (0, 1, 2, 3)))
    else:
        feature_cfg = dict(out_indices=kwargs.pop("out_indices", 3), feature_cls="getter")
    return build_model_with_cfg(partial(_scaled_model, variant, pretrained), variant, False, feature_cfg=feature_cfg,
                                **kwargs)


@register_model
def scalenet_deit_tiny_2x(pretrained=False, **kwargs) -> VisionTransformer:
    """Tables I and II: expand(deit_tiny_patch16_224)."""
    return _create_scalenet("scalenet_deit_tiny_2x", pretrained, **kwargs)


@register_model
def scalenet_deit_small_2x(pretrained=False, **kwargs) -> VisionTransformer:
    """Tables I and II: expand(deit_small_patch16_224)."""
    return _create_scalenet("scalenet_deit_small_2x", pretrained, **kwargs)


@register_model
def scalenet_deit_base_2x(pretrained=False, **kwargs) -> VisionTransformer:
    """Tables I and II: expand(deit_base_patch16_224)."""
    return _create_scalenet("scalenet_deit_base_2x", pretrained, **kwargs)


@register_model
def scalenet_swin_tiny_2x(pretrained=False, **kwargs) -> SwinTransformer:
    """Tables I and II: expand(swin_tiny_patch4_window7_224)."""
    return _create_scalenet("scalenet_swin_tiny_2x", pretrained, **kwargs)


@register_model
def scalenet_swin_small_2x(pretrained=False, **kwargs) -> SwinTransformer:
    """Tables I and II: expand(swin_small_patch4_window7_224)."""
    return _create_scalenet("scalenet_swin_small_2x", pretrained, **kwargs)


@register_model
def scalenet_swin_base_2x(pretrained=False, **kwargs) -> SwinTransformer:
    """Tables I and II: expand(swin_base_patch4_window7_224)."""
    return _create_scalenet("scalenet_swin_base_2x", pretrained, **kwargs)


@register_model
def scalenet_deit_tiny_2x_noadjust(pretrained=False, **kwargs) -> VisionTransformer:
    """Table II: expand(deit_tiny_patch16_224, adjust='none')."""
    return _create_scalenet("scalenet_deit_tiny_2x_noadjust", pretrained, **kwargs)


@register_model
def scalenet_deit_tiny_1x_adapter32(pretrained=False, **kwargs) -> VisionTransformer:
    """Table II: expand(deit_tiny_patch16_224, k=1, rank=32)."""
    return _create_scalenet("scalenet_deit_tiny_1x_adapter32", pretrained, **kwargs)


@register_model
def scalenet_deit_tiny_1x_lora16(pretrained=False, **kwargs) -> VisionTransformer:
    """Table II: expand(deit_tiny_patch16_224, k=1, adjust='lora', rank=16)."""
    return _create_scalenet("scalenet_deit_tiny_1x_lora16", pretrained, **kwargs)


@register_model
def scalenet_deit_small_2x_noadjust(pretrained=False, **kwargs) -> VisionTransformer:
    """Table II: expand(deit_small_patch16_224, adjust='none')."""
    return _create_scalenet("scalenet_deit_small_2x_noadjust", pretrained, **kwargs)


@register_model
def scalenet_deit_small_1x_adapter32(pretrained=False, **kwargs) -> VisionTransformer:
    """Table II: expand(deit_small_patch16_224, k=1, rank=32)."""
    return _create_scalenet("scalenet_deit_small_1x_adapter32", pretrained, **kwargs)


@register_model
def scalenet_deit_small_1x_lora16(pretrained=False, **kwargs) -> VisionTransformer:
    """Table II: expand(deit_small_patch16_224, k=1, adjust='lora', rank=16)."""
    return _create_scalenet("scalenet_deit_small_1x_lora16", pretrained, **kwargs)


@register_model
def scalenet_deit_base_2x_noadjust(pretrained=False, **kwargs) -> VisionTransformer:
    """Table II: expand(deit_base_patch16_224, adjust='none')."""
    return _create_scalenet("scalenet_deit_base_2x_noadjust", pretrained, **kwargs)


@register_model
def scalenet_deit_base_1x_adapter32(pretrained=False, **kwargs) -> VisionTransformer:
    """Table II: expand(deit_base_patch16_224, k=1, rank=32)."""
    return _create_scalenet("scalenet_deit_base_1x_adapter32", pretrained, **kwargs)


@register_model
def scalenet_deit_base_1x_lora16(pretrained=False, **kwargs) -> VisionTransformer:
    """Table II: expand(deit_base_patch16_224, k=1, adjust='lora', rank=16)."""
    return _create_scalenet("scalenet_deit_base_1x_lora16", pretrained, **kwargs)


@register_model
def scalenet_swin_tiny_2x_noadjust(pretrained=False, **kwargs) -> SwinTransformer:
    """Table II: expand(swin_tiny_patch4_window7_224, adjust='none')."""
    return _create_scalenet("scalenet_swin_tiny_2x_noadjust", pretrained, **kwargs)


@register_model
def scalenet_swin_tiny_1x_adapter16(pretrained=False, **kwargs) -> SwinTransformer:
    """Table II: expand(swin_tiny_patch4_window7_224, k=1, rank=16)."""
    return _create_scalenet("scalenet_swin_tiny_1x_adapter16", pretrained, **kwargs)


@register_model
def scalenet_swin_tiny_1x_lora8(pretrained=False, **kwargs) -> SwinTransformer:
    """Table II: expand(swin_tiny_patch4_window7_224, k=1, adjust='lora', rank=8)."""
    return _create_scalenet("scalenet_swin_tiny_1x_lora8", pretrained, **kwargs)


@register_model
def scalenet_swin_small_2x_noadjust(pretrained=False, **kwargs) -> SwinTransformer:
    """Table II: expand(swin_small_patch4_window7_224, adjust='none')."""
    return _create_scalenet("scalenet_swin_small_2x_noadjust", pretrained, **kwargs)


@register_model
def scalenet_swin_small_1x_adapter16(pretrained=False, **kwargs) -> SwinTransformer:
    """Table II: expand(swin_small_patch4_window7_224, k=1, rank=16)."""
    return _create_scalenet("scalenet_swin_small_1x_adapter16", pretrained, **kwargs)


@register_model
def scalenet_swin_small_1x_lora8(pretrained=False, **kwargs) -> SwinTransformer:
    """Table II: expand(swin_small_patch4_window7_224, k=1, adjust='lora', rank=8)."""
    return _create_scalenet("scalenet_swin_small_1x_lora8", pretrained, **kwargs)


@register_model
def scalenet_swin_base_2x_noadjust(pretrained=False, **kwargs) -> SwinTransformer:
    """Table II: expand(swin_base_patch4_window7_224, adjust='none')."""
    return _create_scalenet("scalenet_swin_base_2x_noadjust", pretrained, **kwargs)


@register_model
def scalenet_swin_base_1x_adapter16(pretrained=False, **kwargs) -> SwinTransformer:
    """Table II: expand(swin_base_patch4_window7_224, k=1, rank=16)."""
    return _create_scalenet("scalenet_swin_base_1x_adapter16", pretrained, **kwargs)


@register_model
def scalenet_swin_base_1x_lora8(pretrained=False, **kwargs) -> SwinTransformer:
    """Table II: expand(swin_base_patch4_window7_224, k=1, adjust='lora', rank=8)."""
    return _create_scalenet("scalenet_swin_base_1x_lora8", pretrained, **kwargs)


@register_model
def scalenet_deit_base_2x_layers1to3(pretrained=False, **kwargs) -> VisionTransformer:
    """Table III: expand(deit_base_patch16_224, layers=[0, 1, 2])."""
    return _create_scalenet("scalenet_deit_base_2x_layers1to3", pretrained, **kwargs)


@register_model
def scalenet_deit_base_2x_layers4to6(pretrained=False, **kwargs) -> VisionTransformer:
    """Table III: expand(deit_base_patch16_224, layers=[3, 4, 5])."""
    return _create_scalenet("scalenet_deit_base_2x_layers4to6", pretrained, **kwargs)


@register_model
def scalenet_deit_base_2x_layers7to9(pretrained=False, **kwargs) -> VisionTransformer:
    """Table III: expand(deit_base_patch16_224, layers=[6, 7, 8])."""
    return _create_scalenet("scalenet_deit_base_2x_layers7to9", pretrained, **kwargs)


@register_model
def scalenet_deit_base_2x_layers10to12(pretrained=False, **kwargs) -> VisionTransformer:
    """Table III: expand(deit_base_patch16_224, layers=[9, 10, 11])."""
    return _create_scalenet("scalenet_deit_base_2x_layers10to12", pretrained, **kwargs)


@register_model
def scalenet_swin_tiny_2x_stage1(pretrained=False, **kwargs) -> SwinTransformer:
    """Table III: expand(swin_tiny_patch4_window7_224, layers=[0])."""
    return _create_scalenet("scalenet_swin_tiny_2x_stage1", pretrained, **kwargs)


@register_model
def scalenet_swin_tiny_2x_stage2(pretrained=False, **kwargs) -> SwinTransformer:
    """Table III: expand(swin_tiny_patch4_window7_224, layers=[1])."""
    return _create_scalenet("scalenet_swin_tiny_2x_stage2", pretrained, **kwargs)


@register_model
def scalenet_swin_tiny_2x_stage3(pretrained=False, **kwargs) -> SwinTransformer:
    """Table III: expand(swin_tiny_patch4_window7_224, layers=[2])."""
    return _create_scalenet("scalenet_swin_tiny_2x_stage3", pretrained, **kwargs)


@register_model
def scalenet_swin_tiny_2x_allstages(pretrained=False, **kwargs) -> SwinTransformer:
    """Table III: expand(swin_tiny_patch4_window7_224, layers='all')."""
    return _create_scalenet("scalenet_swin_tiny_2x_allstages", pretrained, **kwargs)


@register_model
def scalenet_swin_small_2x_stage1(pretrained=False, **kwargs) -> SwinTransformer:
    """Table III: expand(swin_small_patch4_window7_224, layers=[0])."""
    return _create_scalenet("scalenet_swin_small_2x_stage1", pretrained, **kwargs)


@register_model
def scalenet_swin_small_2x_stage2(pretrained=False, **kwargs) -> SwinTransformer:
    """Table III: expand(swin_small_patch4_window7_224, layers=[1])."""
    return _create_scalenet("scalenet_swin_small_2x_stage2", pretrained, **kwargs)


@register_model
def scalenet_swin_small_2x_stage3(pretrained=False, **kwargs) -> SwinTransformer:
    """Table III: expand(swin_small_patch4_window7_224, layers=[2])."""
    return _create_scalenet("scalenet_swin_small_2x_stage3", pretrained, **kwargs)


@register_model
def scalenet_swin_small_2x_allstages(pretrained=False, **kwargs) -> SwinTransformer:
    """Table III: expand(swin_small_patch4_window7_224, layers='all')."""
    return _create_scalenet("scalenet_swin_small_2x_allstages", pretrained, **kwargs)


@register_model
def scalenet_swin_base_2x_stage1(pretrained=False, **kwargs) -> SwinTransformer:
    """Table III: expand(swin_base_patch4_window7_224, layers=[0])."""
    return _create_scalenet("scalenet_swin_base_2x_stage1", pretrained, **kwargs)


@register_model
def scalenet_swin_base_2x_stage2(pretrained=False, **kwargs) -> SwinTransformer:
    """Table III: expand(swin_base_patch4_window7_224, layers=[1])."""
    return _create_scalenet("scalenet_swin_base_2x_stage2", pretrained, **kwargs)


@register_model
def scalenet_swin_base_2x_stage3(pretrained=False, **kwargs) -> SwinTransformer:
    """Table III: expand(swin_base_patch4_window7_224, layers=[2])."""
    return _create_scalenet("scalenet_swin_base_2x_stage3", pretrained, **kwargs)


@register_model
def scalenet_swin_base_2x_allstages(pretrained=False, **kwargs) -> SwinTransformer:
    """Table III: expand(swin_base_patch4_window7_224, layers='all')."""
    return _create_scalenet("scalenet_swin_base_2x_allstages", pretrained, **kwargs)


@register_model
def scalenet_deit_base_3x(pretrained=False, **kwargs) -> VisionTransformer:
    """Table IV: expand(deit_base_patch16_224, k=3)."""
    return _create_scalenet("scalenet_deit_base_3x", pretrained, **kwargs)


@register_model
def scalenet_swin_base_3x(pretrained=False, **kwargs) -> SwinTransformer:
    """Table IV: expand(swin_base_patch4_window7_224, k=3)."""
    return _create_scalenet("scalenet_swin_base_3x", pretrained, **kwargs)


@register_model
def scalenet_deit_base_2x_stack(pretrained=False, **kwargs) -> VisionTransformer:
    """Table V: expand(deit_base_patch16_224, order='stack')."""
    return _create_scalenet("scalenet_deit_base_2x_stack", pretrained, **kwargs)


@register_model
def scalenet_swin_base_2x_interp(pretrained=False, **kwargs) -> SwinTransformer:
    """Table V: expand(swin_base_patch4_window7_224, order='interpolate')."""
    return _create_scalenet("scalenet_swin_base_2x_interp", pretrained, **kwargs)


@register_model
def scalenet_deit_base_2x_lora4(pretrained=False, **kwargs) -> VisionTransformer:
    """Table VI: expand(deit_base_patch16_224, adjust='lora', rank=4)."""
    return _create_scalenet("scalenet_deit_base_2x_lora4", pretrained, **kwargs)


@register_model
def scalenet_deit_base_2x_lora8(pretrained=False, **kwargs) -> VisionTransformer:
    """Table VI: expand(deit_base_patch16_224, adjust='lora', rank=8)."""
    return _create_scalenet("scalenet_deit_base_2x_lora8", pretrained, **kwargs)


@register_model
def scalenet_deit_base_2x_lora16(pretrained=False, **kwargs) -> VisionTransformer:
    """Table VI: expand(deit_base_patch16_224, adjust='lora', rank=16)."""
    return _create_scalenet("scalenet_deit_base_2x_lora16", pretrained, **kwargs)


@register_model
def scalenet_deit_base_2x_adapter8(pretrained=False, **kwargs) -> VisionTransformer:
    """Table VI: expand(deit_base_patch16_224, rank=8)."""
    return _create_scalenet("scalenet_deit_base_2x_adapter8", pretrained, **kwargs)


@register_model
def scalenet_deit_base_2x_adapter32(pretrained=False, **kwargs) -> VisionTransformer:
    """Table VI: expand(deit_base_patch16_224, rank=32)."""
    return _create_scalenet("scalenet_deit_base_2x_adapter32", pretrained, **kwargs)


@register_model
def scalenet_deit_tiny_grow_random(pretrained=False, **kwargs) -> VisionTransformer:
    """Table I baseline: grow(deit_tiny_patch16_224, init='random', new_blocks=2)."""
    return _create_scalenet("scalenet_deit_tiny_grow_random", pretrained, **kwargs)


@register_model
def scalenet_deit_tiny_grow_stack(pretrained=False, **kwargs) -> VisionTransformer:
    """Table I baseline: grow(deit_tiny_patch16_224, init='stack', new_blocks=2)."""
    return _create_scalenet("scalenet_deit_tiny_grow_stack", pretrained, **kwargs)


@register_model
def scalenet_deit_tiny_grow_interp(pretrained=False, **kwargs) -> VisionTransformer:
    """Table I baseline: grow(deit_tiny_patch16_224, init='interpolate', new_blocks=2)."""
    return _create_scalenet("scalenet_deit_tiny_grow_interp", pretrained, **kwargs)


@register_model
def scalenet_deit_tiny_grow_swa(pretrained=False, **kwargs) -> VisionTransformer:
    """Table I baseline: grow(deit_tiny_patch16_224, init='swa', new_blocks=2)."""
    return _create_scalenet("scalenet_deit_tiny_grow_swa", pretrained, **kwargs)


@register_model
def scalenet_deit_small_grow_random(pretrained=False, **kwargs) -> VisionTransformer:
    """Table I baseline: grow(deit_small_patch16_224, init='random', new_blocks=1)."""
    return _create_scalenet("scalenet_deit_small_grow_random", pretrained, **kwargs)


@register_model
def scalenet_deit_small_grow_stack(pretrained=False, **kwargs) -> VisionTransformer:
    """Table I baseline: grow(deit_small_patch16_224, init='stack', new_blocks=1)."""
    return _create_scalenet("scalenet_deit_small_grow_stack", pretrained, **kwargs)


@register_model
def scalenet_deit_small_grow_interp(pretrained=False, **kwargs) -> VisionTransformer:
    """Table I baseline: grow(deit_small_patch16_224, init='interpolate', new_blocks=1)."""
    return _create_scalenet("scalenet_deit_small_grow_interp", pretrained, **kwargs)


@register_model
def scalenet_deit_small_grow_swa(pretrained=False, **kwargs) -> VisionTransformer:
    """Table I baseline: grow(deit_small_patch16_224, init='swa', new_blocks=1)."""
    return _create_scalenet("scalenet_deit_small_grow_swa", pretrained, **kwargs)


@register_model
def scalenet_deit_base_grow_random(pretrained=False, **kwargs) -> VisionTransformer:
    """Table I baseline: grow(deit_base_patch16_224, init='random', new_blocks=1)."""
    return _create_scalenet("scalenet_deit_base_grow_random", pretrained, **kwargs)


@register_model
def scalenet_deit_base_grow_stack(pretrained=False, **kwargs) -> VisionTransformer:
    """Table I baseline: grow(deit_base_patch16_224, init='stack', new_blocks=1)."""
    return _create_scalenet("scalenet_deit_base_grow_stack", pretrained, **kwargs)


@register_model
def scalenet_deit_base_grow_interp(pretrained=False, **kwargs) -> VisionTransformer:
    """Table I baseline: grow(deit_base_patch16_224, init='interpolate', new_blocks=1)."""
    return _create_scalenet("scalenet_deit_base_grow_interp", pretrained, **kwargs)


@register_model
def scalenet_deit_base_grow_swa(pretrained=False, **kwargs) -> VisionTransformer:
    """Table I baseline: grow(deit_base_patch16_224, init='swa', new_blocks=1)."""
    return _create_scalenet("scalenet_deit_base_grow_swa", pretrained, **kwargs)


@register_model
def scalenet_swin_tiny_grow_random(pretrained=False, **kwargs) -> SwinTransformer:
    """Table I baseline: grow(swin_tiny_patch4_window7_224, init='random', new_blocks=1)."""
    return _create_scalenet("scalenet_swin_tiny_grow_random", pretrained, **kwargs)


@register_model
def scalenet_swin_tiny_grow_stack(pretrained=False, **kwargs) -> SwinTransformer:
    """Table I baseline: grow(swin_tiny_patch4_window7_224, init='stack', new_blocks=1)."""
    return _create_scalenet("scalenet_swin_tiny_grow_stack", pretrained, **kwargs)


@register_model
def scalenet_swin_tiny_grow_interp(pretrained=False, **kwargs) -> SwinTransformer:
    """Table I baseline: grow(swin_tiny_patch4_window7_224, init='interpolate', new_blocks=1)."""
    return _create_scalenet("scalenet_swin_tiny_grow_interp", pretrained, **kwargs)


@register_model
def scalenet_swin_tiny_grow_swa(pretrained=False, **kwargs) -> SwinTransformer:
    """Table I baseline: grow(swin_tiny_patch4_window7_224, init='swa', new_blocks=1)."""
    return _create_scalenet("scalenet_swin_tiny_grow_swa", pretrained, **kwargs)


@register_model
def scalenet_swin_small_grow_random(pretrained=False, **kwargs) -> SwinTransformer:
    """Table I baseline: grow(swin_small_patch4_window7_224, init='random', new_blocks=1)."""
    return _create_scalenet("scalenet_swin_small_grow_random", pretrained, **kwargs)


@register_model
def scalenet_swin_small_grow_stack(pretrained=False, **kwargs) -> SwinTransformer:
    """Table I baseline: grow(swin_small_patch4_window7_224, init='stack', new_blocks=1)."""
    return _create_scalenet("scalenet_swin_small_grow_stack", pretrained, **kwargs)


@register_model
def scalenet_swin_small_grow_interp(pretrained=False, **kwargs) -> SwinTransformer:
    """Table I baseline: grow(swin_small_patch4_window7_224, init='interpolate', new_blocks=1)."""
    return _create_scalenet("scalenet_swin_small_grow_interp", pretrained, **kwargs)


@register_model
def scalenet_swin_small_grow_swa(pretrained=False, **kwargs) -> SwinTransformer:
    """Table I baseline: grow(swin_small_patch4_window7_224, init='swa', new_blocks=1)."""
    return _create_scalenet("scalenet_swin_small_grow_swa", pretrained, **kwargs)


@register_model
def scalenet_swin_base_grow_random(pretrained=False, **kwargs) -> SwinTransformer:
    """Table I baseline: grow(swin_base_patch4_window7_224, init='random', new_blocks=1)."""
    return _create_scalenet("scalenet_swin_base_grow_random", pretrained, **kwargs)


@register_model
def scalenet_swin_base_grow_stack(pretrained=False, **kwargs) -> SwinTransformer:
    """Table I baseline: grow(swin_base_patch4_window7_224, init='stack', new_blocks=1)."""
    return _create_scalenet("scalenet_swin_base_grow_stack", pretrained, **kwargs)


@register_model
def scalenet_swin_base_grow_interp(pretrained=False, **kwargs) -> SwinTransformer:
    """Table I baseline: grow(swin_base_patch4_window7_224, init='interpolate', new_blocks=1)."""
    return _create_scalenet("scalenet_swin_base_grow_interp", pretrained, **kwargs)


@register_model
def scalenet_swin_base_grow_swa(pretrained=False, **kwargs) -> SwinTransformer:
    """Table I baseline: grow(swin_base_patch4_window7_224, init='swa', new_blocks=1)."""
    return _create_scalenet("scalenet_swin_base_grow_swa", pretrained, **kwargs)


@register_model
def scalenet_deit_small_depth24(pretrained=False, **kwargs) -> VisionTransformer:
    """Table VII: timm.create_model(deit_small_patch16_224, depth=24)."""
    return _create_scalenet("scalenet_deit_small_depth24", pretrained, **kwargs)


@register_model
def scalenet_deit_base_depth24(pretrained=False, **kwargs) -> VisionTransformer:
    """Table VII: timm.create_model(deit_base_patch16_224, depth=24)."""
    return _create_scalenet("scalenet_deit_base_depth24", pretrained, **kwargs)
