"""ScaleNet: deepen a pretrained DeiT/Swin with weight-shared layers and small per-layer adjustments.

Paper: "ScaleNet: Scaling up Pretrained Neural Networks with Incremental Parameters" (Hao et al.); sections,
equations and tables below are the paper's, and what it leaves open is in ``docs/scalenet.md``. There is no
official code.

This module holds the registered models and the schedule; the surgery they are built with is in
:mod:`models.scalenet_surgery` (user docs: ``docs/scalenet.md``):

* Registered timm models ``scalenet_*`` (bottom of the file) that build each scaled model of the paper's
  tables directly, from random init, a timm pretrained base (``pretrained=True``) or a base checkpoint
  (``base_checkpoint=PATH``): the timm base, then :func:`~models.scalenet_surgery.expand` (WSPT: new layer
  instances share their source layer's weight tensors, each with its own norms and adjustment branch, §III-B)
  or :func:`~models.scalenet_surgery.grow` (the Table I baselines).
* :class:`GrowthSchedule` — WSPT as a schedule the training engine calls between epochs.
* The surgery's public names (``expand``, ``grow``, ``assert_tied``, ``retie``, ``tied_groups``,
  ``set_trainable``, the adjustment branches, ...) are imported here, so ``from models.scalenet import ...``
  keeps working.

Defaults the paper does not give are constructor arguments, marked [ASSUMED] where they appear (see
:mod:`models.scalenet_surgery` for the expansion's).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from torch import nn

from timm.models import build_model_with_cfg, create_model, generate_default_cfgs, register_model
from timm.models.swin_transformer import SwinTransformer
from timm.models.vision_transformer import VisionTransformer

# the surgery's public names stay importable from here (harness, downstream and tests import them so)
from models.scalenet_surgery import (
    ADJUSTMENTS,
    EXPAND_KEYS,
    GROW_KEYS,
    GROWTH_INITS,
    ORDERS,  # noqa: F401
    TRAINABLE_GROUPS,
    AdjustedLinear,
    ExpansionRecord,
    LoRA,
    LowRankBranch,
    ParallelAdapter,
    TyingError,
    assert_tied,
    expand,
    grow,
    growth_mapping,
    layer_mapping,
    load_base_checkpoint,
    matched_new_blocks,
    parameter_groups,
    retie,
    set_trainable,
    tied_groups,
    tied_state_dict,
)

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
    "ORDERS",
    "ADJUSTMENTS",
    "TRAINABLE_GROUPS",
    "GROWTH_INITS",
]


# ---------------------------------------------------------------------------------------------------------
# WSPT as a schedule the engine calls between epochs
# ---------------------------------------------------------------------------------------------------------


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
        "url": "",
        "num_classes": 1000,
        "input_size": (3, 224, 224),
        "pool_size": (7, 7) if swin else None,
        "crop_pct": 0.9 if swin else 0.875,
        "interpolation": "bicubic",
        "fixed_input_size": True,
        "mean": (0.485, 0.456, 0.406),
        "std": (0.229, 0.224, 0.225),
        "first_conv": "patch_embed.proj",
        "classifier": "head.fc" if swin else "head",
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
    own_keys = EXPAND_KEYS if method == "scalenet" else GROW_KEYS if method == "grow" else set()
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
    return build_model_with_cfg(
        partial(_scaled_model, variant, pretrained), variant, False, feature_cfg=feature_cfg, **kwargs
    )


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
