"""ScaleNet's model surgery: depth expansion (WSPT) and the Table I growth baselines, the adjustment branches they
insert, the parameter tying that survives checkpoints, trainable groups and base-checkpoint loading.

Paper: "ScaleNet: Scaling up Pretrained Neural Networks with Incremental Parameters" (Hao et al.); sections,
equations and tables below are the paper's, and what it leaves open is in ``docs/scalenet.md``. The registered
``scalenet_*`` models and :class:`~models.scalenet.GrowthSchedule` live in :mod:`models.scalenet`, which builds on
this module (and re-exports its public names); this module does not import it.

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
* Tying that survives checkpoints: the state dict of an expanded model holds each shared tensor once,
  loading fills the aliases back in (and refuses a checkpoint whose "tied" tensors differ), and a load with
  ``assign=True`` is re-tied; :func:`assert_tied` / :func:`tied_groups` / :func:`retie` let the engine
  check and repair it (e.g. after ``to_empty()``). Checkpoints are loaded through the one weights loader
  (``harness.engine.checkpoint.load_weights``: it unwraps ``module.``/``_orig_mod.``), whose
  ``load_state_dict`` runs the hooks installed here.
* :func:`load_base_checkpoint` — a DeiT/Swin checkpoint into the *unexpanded* base (``base_checkpoint=PATH``
  of the registered models), through timm's loader and key filters.

Defaults the paper does not give are arguments, marked [ASSUMED] where they appear: adapter activation ReLU,
adapter scale 1, LoRA alpha = rank and Gaussian A (std 1/rank), linear drop-path schedule over the scaled
depth, head frozen for DeiT-B/Swin, SWA averaging 2 layers, Interpolate baseline mapping g(p) = floor(p·L/L').
"""

from __future__ import annotations

import copy
import math
import os
import warnings
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from timm.layers import DropPath, trunc_normal_
from timm.models import load_state_dict, swin_transformer, vision_transformer
from timm.models.swin_transformer import SwinTransformer
from timm.models.vision_transformer import VisionTransformer

__all__ = [
    "LowRankBranch",
    "ParallelAdapter",
    "LoRA",
    "AdjustedLinear",
    "ExpansionRecord",
    "TyingError",
    "expand",
    "grow",
    "layer_mapping",
    "growth_mapping",
    "matched_new_blocks",
    "parameter_groups",
    "set_trainable",
    "tied_groups",
    "assert_tied",
    "retie",
    "tied_state_dict",
    "load_base_checkpoint",
    "unwrap",
    "ORDERS",
    "ADJUSTMENTS",
    "TRAINABLE_GROUPS",
    "GROWTH_INITS",
    "EXPAND_KEYS",
    "GROW_KEYS",
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

    def __init__(
        self,
        in_features: int,
        out_features: int,
        rank: int,
        act_layer: type[nn.Module] = nn.Identity,
        scale: float = 1.0,
        device=None,
        dtype=None,
    ):
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

    def __init__(
        self,
        in_features: int,
        out_features: int,
        rank: int = 16,
        act_layer: type[nn.Module] = nn.ReLU,
        scale: float = 1.0,
        device=None,
        dtype=None,
    ):
        super().__init__(in_features, out_features, rank, act_layer, scale, device=device, dtype=dtype)


class LoRA(LowRankBranch):
    """LoRA of Eq. 8: f(x) = (θ + s·BA)x, kept unmerged because θ is shared. s = alpha/rank (alpha = rank
    [ASSUMED]); A Gaussian with std 1/rank [ASSUMED; the paper says "Gaussian"], B zero (paper)."""

    def __init__(
        self, in_features: int, out_features: int, rank: int = 16, alpha: float | None = None, device=None, dtype=None
    ):
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


def layer_mapping(
    num_layers: int, k: int = 2, order: str = "interpolate", layers: Iterable[int] | None = None
) -> list[int]:
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


def unwrap(model: nn.Module) -> nn.Module:
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
    if unwrap(model) is not model:
        raise TypeError(
            f"expand/grow take the bare model, not a {type(model).__name__} wrapper: pass .module "
            f"(expand before wrapping in DDP/DeepSpeed, then re-wrap)"
        )
    raise TypeError(
        f"ScaleNet expansion supports timm VisionTransformer (DeiT) and SwinTransformer models, "
        f"not {type(model).__name__}"
    )


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
    skip = {
        id(p)
        for part in (block.attn, block.mlp)
        for m in part.modules()
        if isinstance(m, (*_NORM_TYPES, LowRankBranch))
        for p in m.parameters()
    }
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
        model.feature_info = [
            dict(module=f"blocks.{i}", num_chs=model.embed_dim, reduction=reduction) for i in range(len(blocks))
        ]


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
    model = unwrap(model)
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
    model = unwrap(model)
    groups = _resolve_trainable(model, trainable)
    names = parameter_groups(model)
    for group, members in names.items():
        for name in members:
            model.get_parameter(name).requires_grad_(group in groups)
    return groups


# ---------------------------------------------------------------------------------------------------------
# expand(): WSPT + adjustments
# ---------------------------------------------------------------------------------------------------------


def _adjust_block(
    block: nn.Module, adjust: str, rank: int, act_layer, adapter_scale: float, lora_alpha: float | None
) -> None:
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
        raise ValueError(
            f"Swin stages {bad} out of range: for Swin, `layers` names stages 0..{num_stages - 1} "
            f"(0-based; the default {num_stages - 1} is the last stage)"
        )
    return {s: None for s in stages}


def expand(
    model: nn.Module,
    *,
    k: int = 2,
    order: str | Sequence[int] | None = None,
    layers=None,
    adjust: str | None = "adapter",
    rank: int = 16,
    adapter_act: str | type[nn.Module] = "relu",
    adapter_scale: float = 1.0,
    lora_alpha: float | None = None,
    coverage: str | None = None,
    drop_path: float | None = None,
    trainable="spec",
) -> nn.Module:
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
    _record(
        model,
        dict(
            method="scalenet",
            k=k,
            order=explicit or order,
            layers=layers,
            adjust=adjust,
            rank=rank,
            adapter_act=str(adapter_act),
            coverage=coverage,
            drop_path=rate,
            trainable=trainable,
        ),
    )
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


def grow(
    model: nn.Module,
    *,
    new_blocks: int | str = "match",
    init: str = "stack",
    stage: int | None = None,
    swa_layers: int = 2,
    seed: int = 0,
    drop_path: float | None = None,
    trainable="all",
    match: dict | None = None,
) -> nn.Module:
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
                torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=generator, device="cpu")))
                _reinit_block(block)
        else:
            block = old[source] if source not in seen else _independent_copy(old[source])
            seen.add(source)
        blocks.append(block)
    _replace_blocks(model, owner, blocks)
    _respread_drop_path(model, rate)
    _record(
        model,
        dict(
            method="grow",
            new_blocks=new_blocks,
            init=init,
            stage=stage_index if family == "swin" else None,
            swa_layers=swa_layers,
            seed=seed,
            drop_path=rate,
            trainable=trainable,
        ),
    )
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
    for name, p in unwrap(model).named_parameters(remove_duplicate=False):
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
    model = unwrap(model)
    if getattr(model, "scalenet", None) is None:
        raise TyingError(f"{type(model).__name__} is not a ScaleNet-expanded model (no .scalenet record)")
    broken = _broken_ties(model)
    if broken:
        raise TyingError(
            f"{len(broken)} ScaleNet weight groups are no longer shared, e.g. {' / '.join(broken[0])}: "
            f"something un-tied them (to_empty(), assign-loading, a wrapper); call "
            f"models.scalenet.retie(model) and rebuild the optimizer"
        )


def retie(model: nn.Module, check_values: bool = True) -> int:
    """Make every recorded tie group one Parameter again (the group's first path wins); returns how many
    paths were re-pointed. Raises :class:`TyingError` if the tensors to be merged hold different values,
    unless ``check_values=False`` (right after ``to_empty()``, whose values are garbage anyway)."""
    model = unwrap(model)
    repointed = 0
    for group in _broken_ties(model):
        first = model.get_parameter(group[0])
        for name in group[1:]:
            other = model.get_parameter(name)
            if other is first:
                continue
            if other.shape != first.shape or (
                check_values
                and not first.is_meta
                and not other.is_meta
                and not torch.equal(other.detach().to(first.device), first.detach())
            ):
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


def _load_pre_hook(
    module: nn.Module, state_dict: dict, prefix: str, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
) -> None:
    """Fill alias paths from the saved copy; refuse a checkpoint whose 'tied' tensors differ."""
    for group in module.scalenet.ties:
        present = [name for name in group if prefix + name in state_dict]
        if not present:
            continue
        first = state_dict[prefix + present[0]]
        for name in present[1:]:
            other = state_dict[prefix + name]
            same = other is first or (
                other.shape == first.shape
                and (other.is_meta or first.is_meta or other.numel() == 0 or torch.equal(other, first.to(other.device)))
            )
            if not same:
                error_msgs.append(
                    f"checkpoint holds different values for {prefix + present[0]} and "
                    f"{prefix + name}, which this ScaleNet model shares: it was saved from an "
                    f"untied model (a baseline or an explicit deep copy), not from this architecture"
                )
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
    return unwrap(model).state_dict()


def load_base_checkpoint(model: nn.Module, path: str) -> nn.Module:
    """Load a DeiT/Swin checkpoint (timm's, the official DeiT/Swin ``{'model': ...}`` files, or ours) into the
    *unexpanded* model, converting official key layouts with timm's filters; strict, one-line errors."""
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
        raise ValueError(
            f"{path}: not a checkpoint of this {type(model).__name__} ({first}); check the base model size"
        ) from None
    if missing or unexpected:
        raise ValueError(
            f"{path}: not a checkpoint of this {type(model).__name__} "
            f"({len(missing)} missing keys, e.g. {missing[:2]}; {len(unexpected)} unexpected, "
            f"e.g. {unexpected[:2]}); check the base model size"
        )
    return model


# the keyword arguments of expand() and grow() (a growth stage or a registered variant may set them)
EXPAND_KEYS = frozenset(
    {
        "k",
        "order",
        "layers",
        "adjust",
        "rank",
        "adapter_act",
        "adapter_scale",
        "lora_alpha",
        "coverage",
        "drop_path",
        "trainable",
    }
)
GROW_KEYS = frozenset({"new_blocks", "init", "stage", "swa_layers", "seed", "drop_path", "trainable", "match"})
