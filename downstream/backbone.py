"""``DepthbenchBackbone``: any registered timm model with ``forward_intermediates`` as an MMDet/MMSeg backbone.

One generic backbone for every paper model (the pattern of mmpretrain's ``TIMMBackbone``, written for timm's
feature API): it builds ``timm.create_model(model_name, **model_kwargs)``, prunes what a dense task does not
use (``prune_intermediate_layers``: the classifier head, the stages after the last output), and returns the
stage maps of ``out_indices`` as NCHW tensors for a neck (FPN, ChannelMapper, UPerHead, Mask2Former's pixel
decoder). It is registered in ``mmdet.registry.MODELS`` and ``mmseg.registry.MODELS``::

    backbone=dict(type='DepthbenchBackbone', model_name='steps_swin_tiny', out_indices=(0, 1, 2, 3),
                  drop_path_rate=0.2, model_kwargs=dict(strict_img_size=False, always_partition=True),
                  init_cfg=dict(type='Pretrained', checkpoint='results/runs/<exp>/<run>/best.pth'))

Model-specific dense options are the models' own constructor arguments, given in ``model_kwargs`` (TransNeXt
``img_size``/``pretrain_size``/``position_bias``; timm Swin ``strict_img_size=False`` for any input size and
``always_partition=True`` for shifted windows in every odd block at detection sizes, as the Swin papers' dense
backbones run; ScaleNet ``base_checkpoint``/expansion arguments).

Pretrained weights: ``init_cfg=dict(type='Pretrained', checkpoint=PATH, ema=False)`` (``checkpoint=None``: random
initialisation, so configs carry the dict and ``model.backbone.init_cfg.checkpoint=PATH`` fills it in) goes through depthbench's
one weights loader (``harness.engine.checkpoint.load_weights``): a depthbench ``last.pth``/``best.pth`` (its EMA
weights with ``ema=True``), a run directory, timm/DeiT/MMEngine files, official TransNeXt checkpoints (the
model family's ``checkpoint_filter_fn`` renames keys). The result is checked here: a missing backbone key, or
an unexpected/mis-shaped key that is not part of what the dense backbone pruned (classifier head, final norm),
raises one ``DepthbenchError`` with the loader's complete summary; otherwise the summary is logged.
"""

from __future__ import annotations

import os
import re
from typing import Sequence
from urllib.parse import urlparse

import timm
import torch
import torch.nn.functional as F
from mmengine.logging import print_log
from mmengine.model import BaseModule
from timm.models import group_parameters
from timm.models.swin_transformer import SwinTransformer
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

import models  # noqa: F401  (registers depthbench's models with timm)
from harness.core.errors import DepthbenchError
from harness.engine.checkpoint import (
    another_architecture,
    extract_weights,
    load_weights,
    read_checkpoint,
    resolve_source,
    save_atomic,
)
from harness.engine.models import require_registered


def _is_swin(model: nn.Module) -> bool:
    return isinstance(model, SwinTransformer)


class DepthbenchBackbone(BaseModule):
    """A timm model as a dense-prediction backbone (see the module docstring).

    Args:
        model_name: a registered timm model (ours or timm's), e.g. ``'steps_swin_tiny'``, ``'transnext_tiny'``.
        model_kwargs: constructor arguments of that model.
        out_indices: stages (0-based) whose outputs are returned, in order.
        frozen_stages: -1 trains everything; 0 freezes the stem (patch embedding); k > 0 also stages 1..k
            (the stage groups of the model's timm ``group_matcher(coarse=True)``), as mmdet's backbones do.
        drop_path_rate: stochastic depth of the model (its ``drop_path_rate`` argument); None keeps its default.
        out_norms: a LayerNorm on every returned map, as the dense Swin backbones of the papers have
            (mmdet's ``norm0..norm3``; Steps-Swin's stage-4 norm is 544/720 wide, following the stage).
            ``'auto'``: on for models whose stage outputs are not normalised (timm's Swin family, including
            Steps-Swin and ScaleNet-Swin), off for models that normalise every stage themselves (TransNeXt).
            With out norms the model's own final norm is pruned (the stage-4 out norm replaces it).
        norm_eval: keep BatchNorm layers in eval mode while training (frozen statistics).
        init_cfg: ``dict(type='Pretrained', checkpoint=PATH, ema=False)`` (see module docstring); ``checkpoint=None``
            or ``init_cfg=None``: the model's own random initialisation.
    """

    def __init__(
        self,
        model_name: str,
        model_kwargs: dict | None = None,
        out_indices: Sequence[int] = (0, 1, 2, 3),
        frozen_stages: int = -1,
        drop_path_rate: float | None = None,
        out_norms: bool | str = "auto",
        norm_eval: bool = False,
        init_cfg: dict | None = None,
    ):
        super().__init__(init_cfg=None)

        require_registered(model_name, "backbone model")  # an unknown name: one DepthbenchError line
        # checkpoint=None is "random initialisation": configs carry the dict so that a user gives a checkpoint
        # with the plain override model.backbone.init_cfg.checkpoint=PATH (overrides only set existing keys)
        if init_cfg is not None and (
            not isinstance(init_cfg, dict)
            or init_cfg.get("type") != "Pretrained"
            or set(init_cfg) - {"type", "checkpoint", "ema"}
            or not (
                init_cfg.get("checkpoint") is None or isinstance(init_cfg["checkpoint"], str) and init_cfg["checkpoint"]
            )
        ):
            raise DepthbenchError(
                f"DepthbenchBackbone init_cfg must be dict(type='Pretrained', checkpoint=PATH or "
                f"None, ema=False), got {init_cfg!r}; give a checkpoint with "
                f"model.backbone.init_cfg.checkpoint=PATH"
            )
        self.model_name = model_name
        self.init_cfg = init_cfg
        self.checkpoint = init_cfg.get("checkpoint") if init_cfg else None
        kwargs = dict(model_kwargs or {})
        if kwargs.get("base_checkpoint"):  # ScaleNet: the base may be an mmdet/mmseg Swin detector or segmentor
            kwargs["base_checkpoint"] = timm_swin_base_checkpoint(kwargs["base_checkpoint"])
        if drop_path_rate is not None:
            kwargs["drop_path_rate"] = drop_path_rate
        self.model = timm.create_model(model_name, pretrained=False, **kwargs)
        if not hasattr(self.model, "forward_intermediates"):
            raise DepthbenchError(
                f"{model_name} does not implement timm's forward_intermediates(), so it cannot be "
                f"a dense backbone; use a model with timm's feature API"
            )
        num_stages = len(self.model.feature_info)
        self.out_indices = tuple(int(i) if i >= 0 else num_stages + int(i) for i in out_indices)
        if (
            not self.out_indices
            or any(not 0 <= i < num_stages for i in self.out_indices)
            or list(self.out_indices) != sorted(set(self.out_indices))
        ):
            raise DepthbenchError(
                f"out_indices={tuple(out_indices)} for {model_name}: give increasing stage "
                f"numbers in 0..{num_stages - 1}"
            )
        self.out_channels = [self.model.feature_info[i]["num_chs"] for i in self.out_indices]
        self.strides = [self.model.feature_info[i]["reduction"] for i in self.out_indices]
        if out_norms == "auto":
            out_norms = _is_swin(self.model)
        if not isinstance(out_norms, bool):
            raise DepthbenchError(f"out_norms must be 'auto', True or False, got {out_norms!r}")
        self.has_out_norms = out_norms

        # What the dense backbone drops from the classifier: the names of those weights are expected to be
        # unused when a classification checkpoint is loaded (reported, never an error).
        full_keys = set(self.model.state_dict())
        if hasattr(self.model, "prune_intermediate_layers"):
            self.model.prune_intermediate_layers(list(self.out_indices), prune_norm=out_norms, prune_head=True)
        else:  # timm's contract has it; without it keep the whole model and drop only the classifier
            self.model.reset_classifier(0)
        self.pruned_keys = full_keys - set(self.model.state_dict())
        # named norm0..norm3 by stage, as mmdet's/mmseg's Swin, so a detector trained with those loads into them
        self.out_norm_names = [f"norm{i}" if out_norms else None for i in self.out_indices]
        for name, channels in zip(self.out_norm_names, self.out_channels):
            if name:
                self.add_module(name, nn.LayerNorm(channels))
        # timm's Swin patch embedding needs sides divisible by the patch; mmdet's Swin pads, so do we
        self.pad_divisor = self.model.patch_embed.patch_size[0] if _is_swin(self.model) else 1

        self.frozen_stages = frozen_stages
        self.norm_eval = norm_eval
        self._frozen = self._frozen_parameter_names(frozen_stages)
        self._freeze()

    # ---- freezing --------------------------------------------------------------------------------------
    def _frozen_parameter_names(self, frozen_stages: int) -> set[str]:
        if frozen_stages < 0:
            return set()
        if not hasattr(self.model, "group_matcher"):
            raise DepthbenchError(
                f"frozen_stages={frozen_stages}: {self.model_name} has no timm group_matcher "
                f"to tell its stages apart; use frozen_stages=-1"
            )

        groups = group_parameters(self.model, self.model.group_matcher(coarse=True))
        ordered = [groups[k] for k in sorted(groups)]
        return {name for group in ordered[: frozen_stages + 1] for name in group}

    def _freeze(self) -> None:
        for name, p in self.model.named_parameters():
            if name in self._frozen:
                p.requires_grad_(False)

    def train(self, mode: bool = True):
        super().train(mode)
        if mode and self._frozen:  # frozen stages run in eval mode (no dropout/drop path), as mmdet's backbones
            for name, m in self.model.named_modules():
                names = [f"{name}.{n}" if name else n for n, _ in m.named_parameters()]
                if names and all(n in self._frozen for n in names):
                    m.eval()
        if mode and self.norm_eval:
            for m in self.modules():
                if isinstance(m, _BatchNorm):
                    m.eval()
        return self

    # ---- weights ---------------------------------------------------------------------------------------
    def init_weights(self) -> None:
        """Load ``init_cfg``'s checkpoint, or keep the model's own initialisation (timm initialises at
        construction; ScaleNet loads its ``base_checkpoint`` there, so nothing is re-initialised here)."""
        if self.checkpoint is None:
            print_log(
                f"DepthbenchBackbone({self.model_name}): no checkpoint, the backbone is randomly initialised",
                logger="current",
            )
        else:
            report = load_backbone_weights(self, self.checkpoint, ema=bool(self.init_cfg.get("ema", False)))
            print_log(f"DepthbenchBackbone({self.model_name}): {report}", logger="current")
        self._is_init = True

    # ---- forward ---------------------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if self.pad_divisor > 1:
            pad_h, pad_w = (-x.shape[-2]) % self.pad_divisor, (-x.shape[-1]) % self.pad_divisor
            if pad_h or pad_w:
                x = F.pad(x, (0, pad_w, 0, pad_h))
        feats = self.model.forward_intermediates(
            x, indices=list(self.out_indices), norm=False, stop_early=True, output_fmt="NCHW", intermediates_only=True
        )
        outs = []
        for feat, norm_name in zip(feats, self.out_norm_names):
            if norm_name:  # LayerNorm over the channels of an NCHW map
                feat = getattr(self, norm_name)(feat.permute(0, 2, 3, 1)).permute(0, 3, 1, 2).contiguous()
            outs.append(feat)
        return tuple(outs)


def load_backbone_weights(backbone: DepthbenchBackbone, source, ema: bool = False) -> str:
    """Load ``source`` into ``backbone.model`` with the one weights loader and check the result.

    Returns the loader's summary. Raises DepthbenchError (with the complete summary) when a backbone key is
    missing, or a key is unexpected or mis-shaped beyond what the dense backbone pruned (head, final norm).
    """
    report = load_weights(backbone.model, source, ema=ema, strict=False)
    pruned = backbone.pruned_keys
    stray = [k for k in report.unexpected if k not in pruned]
    if report.missing or stray or report.mismatched:
        if other := another_architecture(source, report.model, report):
            raise DepthbenchError(f"checkpoint {source} does not fit the {backbone.model_name} backbone: {other}")
        raise DepthbenchError(
            f"checkpoint {source} does not fit the {backbone.model_name} backbone ({len(report.missing)} missing, "
            f"{len(stray)} unexpected, {len(report.mismatched)} mis-shaped backbone keys; a checkpoint of another "
            f"model or size?): {report.summary()}"
        )
    unused = sorted(set(report.unexpected) & pruned)
    return f"loaded {report.loaded} tensors from {source}" + (
        f"; not used by the dense backbone (classifier head / final norm): {', '.join(unused)}" if unused else ""
    )


# ---- ScaleNet from a trained detector/segmentor: mmdet/mmseg Swin weights -> timm Swin --------------------------
def local_checkpoint(source: str) -> str:
    """A local path for ``source``; an http(s) URL is downloaded once into torch's hub cache (as MMEngine does)."""
    if not str(source).startswith(("http://", "https://")):
        return str(source)

    folder = os.path.join(torch.hub.get_dir(), "checkpoints")
    path = os.path.join(folder, os.path.basename(urlparse(source).path))
    if not os.path.isfile(path):
        os.makedirs(folder, exist_ok=True)
        try:
            torch.hub.download_url_to_file(source, path, progress=True)
        except OSError as e:
            raise DepthbenchError(
                f"cannot download {source} ({e}); download it by hand and give the local path"
            ) from None
    return path


def mmdet_swin_to_timm(state_dict: dict) -> dict:
    """The backbone of an mmdet/mmseg Swin checkpoint (``backbone.stages.{i}...``) in timm's Swin layout.

    Inverse of mmdet's ``swin_converter``: ``stages.i`` -> ``layers.i`` with each stage's PatchMerging moved to the
    start of the next stage (timm's place), ``attn.w_msa.`` -> ``attn.``, ``ffn.layers.0.0``/``ffn.layers.1`` ->
    ``mlp.fc1``/``mlp.fc2``, ``patch_embed.projection`` -> ``patch_embed.proj``, and the PatchMerging channel order
    of ``nn.Unfold`` back to the official one. The per-output norms (``norm0..3``) are not timm's; they load into
    DepthbenchBackbone through the detector's own keys (``load_from``).
    """
    out = {}
    for key, value in state_dict.items():
        if not key.startswith("backbone.") or "relative_position_index" in key:
            continue
        key = key[len("backbone.") :]
        if re.match(r"norm\d\.", key):
            continue
        merging = re.match(r"stages\.(\d+)\.downsample\.(reduction|norm)\.(weight|bias)$", key)
        if merging:
            stage, part, kind = int(merging.group(1)), merging.group(2), merging.group(3)
            if part == "reduction":
                o, i = value.shape
                value = value.reshape(o, i // 4, 4).transpose(1, 2)[:, [0, 2, 1, 3], :].reshape(o, i)
            else:
                value = value.reshape(-1, 4).transpose(0, 1)[[0, 2, 1, 3]].reshape(-1)
            out[f"layers.{stage + 1}.downsample.{part}.{kind}"] = value
            continue
        key = key.replace("patch_embed.projection.", "patch_embed.proj.").replace("stages.", "layers.")
        for theirs, ours in (("attn.w_msa.", "attn."), ("ffn.layers.0.0.", "mlp.fc1."), ("ffn.layers.1.", "mlp.fc2.")):
            key = key.replace(theirs, ours)
        out[key] = value
    return out


def timm_swin_base_checkpoint(source: str) -> str:
    """``source`` (path or URL) as a file ScaleNet's ``base_checkpoint`` reads: unchanged if it is already a
    classification checkpoint; an mmdet/mmseg Swin detector/segmentor is converted (:func:`mmdet_swin_to_timm`)
    once into ``~/.cache/depthbench/converted/`` and that file is returned."""
    path = resolve_source(local_checkpoint(source))
    weights = extract_weights(read_checkpoint(path), source=str(path))
    if not any(k.startswith("backbone.stages.") for k in weights):
        return str(path)
    folder = os.path.join(os.environ.get("DEPTHBENCH_CACHE", os.path.expanduser("~/.cache/depthbench")), "converted")
    target = os.path.join(folder, f"{path.stem}.timm-swin.pth")
    if not os.path.isfile(target) or os.path.getmtime(target) < os.path.getmtime(path):
        os.makedirs(folder, exist_ok=True)

        save_atomic({"model": mmdet_swin_to_timm(weights)}, target)
    return target


def register() -> None:
    """Register the backbone in MMDetection's and MMSegmentation's model registries."""
    from mmdet.registry import MODELS as MMDET_MODELS
    from mmseg.registry import MODELS as MMSEG_MODELS

    for registry in (MMDET_MODELS, MMSEG_MODELS):
        if registry.module_dict.get("DepthbenchBackbone") is not DepthbenchBackbone:
            registry.register_module(name="DepthbenchBackbone", module=DepthbenchBackbone, force=True)


register()
