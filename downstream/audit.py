"""Parameters and FLOPs of whole detectors/segmentors, built from configs/det and configs/seg on the meta device.

``depthbench verify`` checks the papers' dense rows with these (``det_params_m``, ``det_flops_g``,
``seg_params_m``, ``seg_flops_g`` columns of ``results/tables/<paper>.yaml``); :data:`DENSE_CONFIGS` says which
config builds each row. Counting conventions, as the papers' tables (MMDetection/MMSegmentation ``get_flops``):

- parameters: every parameter of the built model (auxiliary heads included), buffers excluded;
- FLOPs: harness/measure/flops.py's one counter, batch 1, eval mode, no weights (meta device);
  - two-stage detectors at 1280×800 (StepsNet Table 2, "backbone + FPN + head"): backbone, neck, the RPN head's
    convolutions, and the RoI heads on a fixed 1000 proposals (box branch) and their first 100 (mask branch) —
    what mmdet's ``forward_dummy``, used by its FLOP tool, runs; for a cascade, every stage. RoIAlign and NMS
    cost nothing under the convention (no multiply-accumulates);
  - encoder-decoder segmentors at 512×2048 (StepsNet Table 3): backbone and decode head, whole image, as
    mmseg's ``get_flops``; the auxiliary head is training-only and not counted.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import torch
from torch import nn

import downstream.backbone  # noqa: F401  (registers DepthbenchBackbone)
from downstream.mmengine_compat import use_default_scope
from harness.core.config import PACKAGE_PREFIXES, load_config as read_config
from harness.core.errors import DepthbenchError
from harness.engine.models import SkipInitOnMeta
from harness.measure.cache import file_hash
from harness.measure.flops import count_flops, count_params

REPO = Path(__file__).resolve().parent.parent

# (paper, table id, row name as printed) -> the config that builds the row's detector/segmentor: ours, or a
# stock mmdet/mmseg one (``mmdet::``/``mmseg::``) for a comparison row the papers took from those model zoos
_DET, _SEG = "configs/det/", "configs/seg/"
_SWIN_UPERNET = "-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py"
_MASK2FORMER = "-in1k-pre_mask2former_8xb2-160k_ade20k-512x512.py"
_SCALENET_UPERNET = "-in1k-pre_upernet_8xb2-40k_ade20k-512x512.py"
DENSE_CONFIGS: dict[tuple[str, str, str], str] = {
    **{
        ("stepsnet", "2a", name): f"{_DET}stepsnet/mask-rcnn_{arch}-p4-w7_fpn_ms-crop-1x_coco.py"
        for name, arch in [
            ("Swin-T", "swin-t"),
            ("Steps-Swin-T", "steps-swin-t"),
            ("Swin-S", "swin-s"),
            ("Steps-Swin-S", "steps-swin-s"),
            ("Swin-B", "swin-b"),
            ("Steps-Swin-B", "steps-swin-b"),
        ]
    },
    **{
        ("stepsnet", "2b", name): f"{_DET}stepsnet/cascade-mask-rcnn_{arch}-p4-w7_fpn_4conv1fc-giou_ms-crop-3x_coco.py"
        for name, arch in [("Swin-T", "swin-t"), ("Steps-Swin-T", "steps-swin-t"), ("Swin-S", "swin-s")]
    },
    ("stepsnet", "3", "Swin-T"): f"{_SEG}stepsnet/swin-tiny{_SWIN_UPERNET}",
    ("stepsnet", "3", "Steps-Swin-T"): f"{_SEG}stepsnet/steps-swin-tiny{_SWIN_UPERNET}",
    **{
        ("transnext", "12", f"TransNeXt-{v.title()}"): f"{_DET}transnext/mask-rcnn_transnext-{v}_fpn_{amp}1x_coco.py"
        for v, amp in [("tiny", ""), ("small", ""), ("base", "amp-")]
    },
    **{
        ("transnext", "12", f"Swin-{s}"): f"{_DET}stepsnet/mask-rcnn_swin-{s.lower()}-p4-w7_fpn_ms-crop-1x_coco.py"
        for s in "TSB"
    },
    **{
        (
            "transnext",
            "13",
            f"TransNeXt-Tiny ({n}-scale)",
        ): f"{_DET}transnext/dino-{n}scale_transnext-tiny_8xb2-12e_coco.py"
        for n in (4, 5)
    },
    ("transnext", "13", "TransNeXt-Small"): f"{_DET}transnext/dino-5scale_transnext-small_8xb2-12e_coco.py",
    ("transnext", "13", "TransNeXt-Base"): f"{_DET}transnext/dino-5scale_transnext-base_8xb2-12e_coco.py",
    ("transnext", "13", "Swin-L"): "mmdet::dino/dino-5scale_swin-l_8xb2-12e_coco.py",
    **{
        (
            "transnext",
            "14",
            f"TransNeXt-{v.title()}",
        ): f"{_SEG}transnext/transnext-{v}-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py"
        for v in ("tiny", "small", "base")
    },
    ("transnext", "14", "Swin-T"): f"{_SEG}stepsnet/swin-tiny{_SWIN_UPERNET}",
    ("transnext", "14", "Swin-S"): f"{_SEG}scalenet/swin-small{_SWIN_UPERNET}",
    ("transnext", "14", "Swin-B"): f"mmseg::swin/swin-base{_SWIN_UPERNET}",
    **{
        ("transnext", "15", f"TransNeXt-{v.title()}"): f"{_SEG}transnext/transnext-{v}{_MASK2FORMER}"
        for v in ("tiny", "small", "base")
    },
    ("transnext", "15", "Swin-S"): "mmseg::mask2former/mask2former_swin-s_8xb2-160k_ade20k-512x512.py",
    (
        "transnext",
        "15",
        "Swin-B (IN-1K)",
    ): "mmseg::mask2former/mask2former_swin-b-in1k-384x384-pre_8xb2-160k_ade20k-640x640.py",
    (
        "transnext",
        "15",
        "Swin-B (IN-22K)",
    ): "mmseg::mask2former/mask2former_swin-b-in22k-384x384-pre_8xb2-160k_ade20k-640x640.py",
    ("scalenet", "VIII", "Swin-Tiny"): f"{_DET}scalenet/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py",
    ("scalenet", "VIII", "Swin-Tiny ScaleNet"): f"{_DET}scalenet/mask-rcnn_scalenet-swin-t-2x-p4-w7_fpn_1x_coco.py",
    ("scalenet", "VIII", "Swin-Small"): f"{_DET}scalenet/mask-rcnn_swin-s-p4-w7_fpn_amp-ms-crop-3x_coco.py",
    ("scalenet", "VIII", "Swin-Small ScaleNet"): f"{_DET}scalenet/mask-rcnn_scalenet-swin-s-2x-p4-w7_fpn_1x_coco.py",
    ("scalenet", "IX", "Swin-Tiny"): f"{_SEG}scalenet/swin-tiny{_SWIN_UPERNET}",
    ("scalenet", "IX", "Swin-Tiny ScaleNet"): f"{_SEG}scalenet/scalenet-swin-tiny-2x{_SCALENET_UPERNET}",
    ("scalenet", "IX", "Swin-Small"): f"{_SEG}scalenet/swin-small{_SWIN_UPERNET}",
    ("scalenet", "IX", "Swin-Small ScaleNet"): f"{_SEG}scalenet/scalenet-swin-small-2x{_SCALENET_UPERNET}",
}

# the verify columns measured here (results/audit.py MEASURES, dense=True) -> what they count
DENSE_COLUMNS = {"det_params_m": "params", "det_flops_g": "flops", "seg_params_m": "params", "seg_flops_g": "flops"}
DET_FLOPS_SIZE = (800, 1280)  # H, W: "FLOPs at 1280×800" (StepsNet Table 2)
SEG_FLOPS_SIZE = (512, 2048)  # "FLOPs at 512×2048" (StepsNet Table 3)
NUM_PROPOSALS, NUM_MASK_ROIS = 1000, 100


def config_for(paper: str, table: str, row: str) -> str:
    try:
        return DENSE_CONFIGS[(paper, str(table), row)]
    except KeyError:
        raise DepthbenchError(
            f"{paper} table {table} row {row!r} has a dense column but no config in "
            f"downstream/audit.py DENSE_CONFIGS; add the config that builds it"
        ) from None


def load_config(path: str | Path):
    """An MMEngine config from configs/det or configs/seg (or a stock ``mmdet::``/``mmseg::`` one), with its
    registries' default scope set."""
    if not str(path).startswith(PACKAGE_PREFIXES) and not Path(path).is_absolute():
        path = REPO / path
    cfg = read_config(path)
    use_default_scope(cfg.get("default_scope", "mmdet"))
    return cfg


def _without_weights(model_cfg) -> dict:
    """The model config with every pretrained-weights reference removed (nothing to read on the meta device)."""
    cfg = copy.deepcopy(model_cfg)  # a ConfigDict: some heads read their sub-configs as attributes
    backbone = cfg.get("backbone", {})
    backbone.pop("init_cfg", None)
    backbone.pop("pretrained", None)
    if isinstance(backbone.get("model_kwargs"), dict):
        backbone["model_kwargs"].pop("base_checkpoint", None)
    return cfg


def build_model(path: str | Path, device: str = "meta", **backbone_overrides) -> nn.Module:
    """The detector/segmentor of a config, without weights on ``device`` (default meta: no memory, no compute).

    ``backbone_overrides`` update ``model.backbone`` (e.g. ``model_kwargs=...`` for a reduced-width test build).
    """
    cfg = load_config(path)
    model_cfg = _without_weights(cfg.model)
    model_cfg["backbone"].update(backbone_overrides)
    scope = cfg.get("default_scope", "mmdet")
    if scope == "mmseg":
        from mmseg.registry import MODELS
    else:
        from mmdet.registry import MODELS
    with torch.device(device), _LinspaceOnCpu():
        return MODELS.build(model_cfg)


class _LinspaceOnCpu(SkipInitOnMeta):
    """Inside a meta-device build (in-place initialisation skipped, as for any model): ``torch.linspace`` on the CPU
    (mmdet's/mmseg's Swin take Python numbers from ``torch.linspace(...).item()`` in ``__init__``)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.linspace and (kwargs or {}).get("device") is None:
            kwargs = {**(kwargs or {}), "device": "cpu"}
        return super().__torch_function__(func, types, args, kwargs)


class _FlopsForward(nn.Module):
    """What the papers' FLOP tools run, as one ``forward(image)`` for ``harness.measure.flops.count_flops``."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, image: torch.Tensor):
        model = self.model
        if hasattr(model, "decode_head"):  # mmseg EncoderDecoder: backbone (+neck) and decode head, whole image
            return model.decode_head(model.extract_feat(image))
        feats = model.extract_feat(image)
        model.rpn_head(feats)
        roi_head = model.roi_head
        stages = range(roi_head.num_stages) if hasattr(roi_head, "num_stages") else [None]
        for stage in stages:
            bbox_head = roi_head.bbox_head if stage is None else roi_head.bbox_head[stage]
            extractor = roi_head.bbox_roi_extractor if stage is None else roi_head.bbox_roi_extractor[stage]
            bbox_head(self._roi_features(image, extractor, NUM_PROPOSALS))
            if roi_head.with_mask:
                mask_head = roi_head.mask_head if stage is None else roi_head.mask_head[stage]
                extractor = roi_head.mask_roi_extractor if stage is None else roi_head.mask_roi_extractor[stage]
                mask_head(self._roi_features(image, extractor, NUM_MASK_ROIS))

    @staticmethod
    def _roi_features(image: torch.Tensor, extractor: nn.Module, rois: int) -> torch.Tensor:
        # RoIAlign has no multiply-accumulates under the convention, and its level assignment is data-dependent
        # (no meta kernel): the heads get features of the extractor's output shape directly.
        size = extractor.roi_layers[0].output_size
        size = size if isinstance(size, tuple) else (size, size)
        return image.new_empty(rois, extractor.out_channels, *size)


def count_model_flops(model: nn.Module, size: tuple[int, int]) -> int:
    image = torch.empty(1, 3, *size, device=next(model.parameters()).device)
    return count_flops(_FlopsForward(model), inputs=(image,)).total


@functools.lru_cache(maxsize=None)
def meta_model(config: str) -> nn.Module:
    """:func:`build_model` on the meta device, once per config and process (no weights: cheap to keep)."""
    return build_model(config)


@functools.lru_cache(maxsize=None)
def measure(config: str, what: str) -> float:
    """``what`` = 'params' (millions) or 'flops' (G, at the size of the config's task) of a config's model."""
    model = meta_model(config)
    if what == "params":
        return count_params(model) / 1e6
    size = SEG_FLOPS_SIZE if hasattr(model, "decode_head") else DET_FLOPS_SIZE
    return count_model_flops(model, size) / 1e9


def cache_key(paper: str, table: str, row: str) -> list:
    """What a dense row's counts depend on, for the measurement cache: the row, its config and the counting code."""
    config = DENSE_CONFIGS.get((paper, str(table), row))
    return [
        paper,
        table,
        row,
        config,
        file_hash(str(REPO / config)) if config and "::" not in config else "",
        file_hash(str(REPO / "downstream" / "audit.py")),
        file_hash(str(REPO / "downstream" / "backbone.py")),
    ]


def measure_row(paper: str, table: str, row: str, column: str) -> float:
    """The value of a dense verify column for one row of a paper's tables."""
    return measure(config_for(paper, table, row), DENSE_COLUMNS[column])
