"""DepthbenchBackbone in stock MMDetection/MMSegmentation: feature maps, weights, and one training step of each
paper's detector/segmentor at reduced width on synthetic inputs (the embedded data sets are tested end to end
with `depthbench finetune` elsewhere)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import downstream  # noqa: F401  (registers DepthbenchBackbone)
import models  # noqa: F401  (registers the paper models with timm, for the classifiers built here)
from downstream.audit import load_config
from downstream.backbone import DepthbenchBackbone, mmdet_swin_to_timm
from fixtures.downstream import SMALL, SMALL_CHANNELS
from harness.engine.checkpoint import FORMAT, save_atomic
from harness.core.errors import DepthbenchError

pytestmark = pytest.mark.usefixtures("one_thread")


def small_backbone(family: str, **kwargs) -> DepthbenchBackbone:
    return DepthbenchBackbone(**{**SMALL[family], **kwargs})


@pytest.mark.parametrize("family", sorted(SMALL))
@pytest.mark.parametrize("size", [(64, 96), (70, 90), (101, 77)])
def test_feature_shapes_and_strides(family, size):
    backbone = small_backbone(family)
    assert backbone.out_channels == SMALL_CHANNELS[family] and backbone.strides == [4, 8, 16, 32]
    outs = backbone(torch.randn(1, 3, *size))
    # stride-4 stem (TransNeXt: 7x7 conv, pad 3; Swin: padded to 4), then stride-2 stages: ceil at every step
    h, w = math.ceil(size[0] / 4), math.ceil(size[1] / 4)
    for i, (out, channels) in enumerate(zip(outs, SMALL_CHANNELS[family])):
        assert out.shape == (1, channels, h, w), (family, size, i, out.shape)
        h, w = math.ceil(h / 2), math.ceil(w / 2)


def test_out_indices_prune_later_stages_and_out_norms_follow_the_papers():
    backbone = small_backbone("steps_swin", out_indices=(1, 2))
    assert [o.shape[1] for o in backbone(torch.randn(1, 3, 64, 64))] == [32, 64]
    assert len(backbone.model.layers) == 3  # stage 4 pruned
    assert [n for n, _ in backbone.named_children() if n.startswith("norm")] == ["norm1", "norm2"]
    transnext = small_backbone("transnext")  # TransNeXt normalises every stage itself: no extra norms
    assert not [n for n, _ in transnext.named_children() if n.startswith("norm")]
    with pytest.raises(DepthbenchError, match="out_indices"):
        small_backbone("transnext", out_indices=(2, 1))
    with pytest.raises(DepthbenchError, match="unknown backbone model 'steps_swin_tinny'"):
        DepthbenchBackbone("steps_swin_tinny")


def test_frozen_stages_and_norm_eval():
    backbone = small_backbone("transnext", frozen_stages=1)
    frozen = {n for n, p in backbone.model.named_parameters() if not p.requires_grad}
    assert frozen and all(n.startswith(("patch_embed1", "block1", "norm1")) for n in frozen)
    assert any(n.startswith("block1.") for n in frozen) and not any(n.startswith("block2.") for n in frozen)
    backbone.train()
    assert not backbone.model.block1[0].training and backbone.model.block2[0].training
    resnet = DepthbenchBackbone("steps_resnet18", norm_eval=True).train()  # BatchNorm statistics stay frozen
    norms = [m for m in resnet.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert norms and not any(m.training for m in norms) and resnet.model.layer1[0].conv1.training


# ---- weights ------------------------------------------------------------------------------------------------
def _classifier(family: str):
    import timm

    kwargs = {
        k: v
        for k, v in SMALL[family]["model_kwargs"].items()
        if k not in ("strict_img_size", "always_partition", "img_size", "position_bias")
    }
    return timm.create_model(SMALL[family]["model_name"], **kwargs)


@pytest.mark.parametrize("family", ["steps_swin", "transnext"])
def test_depthbench_checkpoint_loads_with_zero_missing_keys(family, tmp_path):
    classifier = _classifier(family)
    ema = {k: v + 1.0 if v.is_floating_point() else v for k, v in classifier.state_dict().items()}
    save_atomic({"format": FORMAT, "model": classifier.state_dict(), "ema": ema}, tmp_path / "last.pth")
    backbone = small_backbone(family, init_cfg=dict(type="Pretrained", checkpoint=str(tmp_path)))
    backbone.init_weights()  # the run directory: its last.pth
    own = backbone.model.state_dict()
    for key, value in classifier.state_dict().items():
        if key in own:
            assert torch.equal(own[key], value), key
    backbone = small_backbone(family, init_cfg=dict(type="Pretrained", checkpoint=str(tmp_path / "last.pth"), ema=True))
    backbone.init_weights()
    assert all(torch.equal(backbone.model.state_dict()[k], ema[k]) for k in backbone.model.state_dict())


def test_official_transnext_checkpoint_loads(tmp_path):
    """The released files are flat state dicts in the official layout, with the size-dependent buffers."""
    official = dict(_classifier("transnext").state_dict())
    official["block1.0.attn.relative_pos_index"] = torch.zeros(3, dtype=torch.long)
    official["block1.0.attn.relative_coords_table"] = torch.zeros(3, 2)
    torch.save(official, tmp_path / "transnext_official.pth")
    backbone = small_backbone(
        "transnext", init_cfg=dict(type="Pretrained", checkpoint=str(tmp_path / "transnext_official.pth"))
    )
    backbone.init_weights()
    assert torch.equal(backbone.model.state_dict()["block1.0.attn.q.weight"], official["block1.0.attn.q.weight"])


def test_wrong_checkpoint_fails_with_the_summary(tmp_path):
    save_atomic(
        {"format": FORMAT, "model": _classifier("scalenet_swin").state_dict(), "ema": None}, tmp_path / "best.pth"
    )
    backbone = small_backbone("steps_swin", init_cfg=dict(type="Pretrained", checkpoint=str(tmp_path / "best.pth")))
    with pytest.raises(DepthbenchError) as error:
        backbone.init_weights()
    message = str(error.value)
    assert "does not fit the steps_swin_tiny backbone" in message and "\n" not in message
    assert "missing from the checkpoint: " in message and "layers.3.blocks.steps" in message
    with pytest.raises(DepthbenchError, match="holds no EMA weights"):
        small_backbone(
            "steps_swin", init_cfg=dict(type="Pretrained", checkpoint=str(tmp_path / "best.pth"), ema=True)
        ).init_weights()
    with pytest.raises(DepthbenchError, match="no such checkpoint"):
        small_backbone(
            "steps_swin", init_cfg=dict(type="Pretrained", checkpoint=str(tmp_path / "nope.pth"))
        ).init_weights()


def test_mmdet_swin_weights_give_the_same_features():
    """A detector trained with mmdet's own Swin (ScaleNet's starting point) converts to timm's layout exactly:
    same stage maps, PatchMerging channel order and shifted windows included. At 224² every stage is a multiple
    of the 7×7 window; elsewhere timm shifts before padding to the window and mmdet after (docs/downstream.md)."""
    from mmdet.registry import MODELS

    torch.manual_seed(0)
    mmdet_swin = MODELS.build(
        dict(
            type="SwinTransformer",
            embed_dims=16,
            depths=(2, 2, 2, 2),
            num_heads=(1, 1, 2, 4),
            window_size=7,
            out_indices=(0, 1, 2, 3),
        )
    )
    mmdet_swin.eval()  # (mmdet's Swin.train() returns None)
    for p in mmdet_swin.parameters():
        torch.nn.init.normal_(p, std=0.1)
    detector = {f"backbone.{k}": v for k, v in mmdet_swin.state_dict().items()}
    ours = DepthbenchBackbone(
        "swin_tiny_patch4_window7_224",
        model_kwargs=dict(
            embed_dim=16, depths=(2, 2, 2, 2), num_heads=(1, 1, 2, 4), strict_img_size=False, always_partition=True
        ),
    ).eval()
    ours.model.load_state_dict(mmdet_swin_to_timm(detector), strict=True)
    ours.load_state_dict(
        {k[len("backbone.") :]: v for k, v in detector.items() if k.startswith("backbone.norm")}, strict=False
    )
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        for theirs, mine in zip(mmdet_swin(x), ours(x)):
            torch.testing.assert_close(mine, theirs, atol=1e-4, rtol=1e-4)


# ---- one training step of each paper's detector / segmentor ---------------------------------------------------
def _build(config: str, family: str, model_overrides: dict | None = None, **backbone):
    """The config's model with the reduced-width backbone; the neck/heads take its channels. Fewer proposals and
    sampled RoIs than COCO training uses keep one CPU step short; the computation is the same."""
    from mmengine.model import revert_sync_batchnorm

    cfg = load_config(config)
    model = cfg.model
    model.update(model_overrides or {})
    if "rpn_proposal" in model.get("train_cfg", {}):
        model.train_cfg.rpn_proposal.update(nms_pre=200, max_per_img=100)
        for rcnn in model.train_cfg.rcnn if isinstance(model.train_cfg.rcnn, list) else [model.train_cfg.rcnn]:
            rcnn.sampler.num = 64
    model.backbone = dict(type="DepthbenchBackbone", **SMALL[family], **backbone)
    channels = [SMALL_CHANNELS[family][i] for i in backbone.get("out_indices", (0, 1, 2, 3))]
    if "neck" in model:
        model.neck.in_channels = channels
    if "decode_head" in model:
        model.decode_head.in_channels = channels
        model.data_preprocessor.size = (64, 64)
    if "auxiliary_head" in model:
        model.auxiliary_head.in_channels = channels[model.auxiliary_head.in_index]
    scope = cfg.get("default_scope")
    registry = __import__(f"{scope}.registry", fromlist=["MODELS"]).MODELS
    torch.manual_seed(0)
    built = revert_sync_batchnorm(registry.build(model))  # SyncBN needs a process group; one CPU process here
    built.init_weights()
    return cfg, built


def _det_batch(masks: bool = True, n: int = 2, size=(64, 80)):
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import BitmapMasks
    from mmengine.structures import InstanceData

    h, w = size
    samples = []
    for _ in range(n):
        sample = DetDataSample(metainfo=dict(img_shape=size, ori_shape=size, scale_factor=(1.0, 1.0)))
        gt = InstanceData(
            bboxes=torch.tensor([[4.0, 6.0, 40.0, 50.0], [20.0, 10.0, 60.0, 44.0]]), labels=torch.tensor([1, 3])
        )
        if masks:
            m = np.zeros((2, h, w), np.uint8)
            m[0, 6:50, 4:40] = 1
            m[1, 10:44, 20:60] = 1
            gt.masks = BitmapMasks(m, h, w)
        sample.gt_instances = gt
        samples.append(sample)
    return dict(inputs=[torch.randint(0, 256, (3, h, w), dtype=torch.uint8) for _ in range(n)], data_samples=samples)


def _seg_batch(n: int = 2, size=(64, 64)):
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample

    samples = []
    for _ in range(n):
        sample = SegDataSample(metainfo=dict(img_shape=size, ori_shape=size))
        labels = torch.zeros(1, *size, dtype=torch.long)
        labels[:, 10:40, 5:50] = 7
        labels[:, 45:, :] = 149
        sample.gt_sem_seg = PixelData(data=labels)
        samples.append(sample)
    return dict(inputs=[torch.randint(0, 256, (3, *size), dtype=torch.uint8) for _ in range(n)], data_samples=samples)


def _train_step(cfg, model, batch) -> dict:
    """One iteration as MMEngine's runner does it: the config's optimizer (paramwise rules included)."""
    from mmengine.optim import build_optim_wrapper

    optim = dict(cfg.optim_wrapper, type="OptimWrapper")  # AMP wrappers need a GPU
    optim.pop("loss_scale", None)
    optim_wrapper = build_optim_wrapper(model, optim)
    model.train()
    before = {n: p.detach().clone() for n, p in model.backbone.named_parameters() if p.requires_grad}
    log_vars = model.train_step(batch, optim_wrapper)
    assert all(math.isfinite(float(v)) for v in log_vars.values()), log_vars
    moved = [n for n, p in model.backbone.named_parameters() if n in before and not torch.equal(p, before[n])]
    assert moved, "no backbone parameter was updated"
    return log_vars


@pytest.mark.parametrize(
    "config,family",
    [
        ("configs/det/stepsnet/mask-rcnn_steps-swin-t-p4-w7_fpn_ms-crop-1x_coco.py", "steps_swin"),
        ("configs/det/transnext/mask-rcnn_transnext-tiny_fpn_1x_coco.py", "transnext"),
        ("configs/det/scalenet/mask-rcnn_scalenet-swin-t-2x-p4-w7_fpn_1x_coco.py", "scalenet_swin"),
    ],
)
def test_mask_rcnn_training_iteration(config, family):
    cfg, model = _build(config, family)
    log_vars = _train_step(cfg, model, _det_batch())
    assert {"loss_rpn_cls", "loss_cls", "loss_bbox", "loss_mask"} <= set(log_vars)
    if family == "scalenet_swin":  # the detector head is frozen (lr 0) except the final cls/reg layers
        from mmengine.optim import build_optim_wrapper

        groups = build_optim_wrapper(model, dict(cfg.optim_wrapper)).optimizer.param_groups
        lr = {id(p): g["lr"] for g in groups for p in g["params"]}
        assert (
            lr[id(model.roi_head.bbox_head.fc_cls.weight)] > 0 and lr[id(model.neck.lateral_convs[0].conv.weight)] == 0
        )
        assert lr[id(model.roi_head.mask_head.conv_logits.weight)] == 0


def test_upernet_training_iteration():
    cfg, model = _build(
        "configs/seg/stepsnet/steps-swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py", "steps_swin"
    )
    assert {"decode.loss_ce", "aux.loss_ce"} <= set(_train_step(cfg, model, _seg_batch()))


def test_dino_loss_and_optimizer_groups():
    cfg, model = _build(
        "configs/det/transnext/dino-4scale_transnext-tiny_8xb2-12e_coco.py",
        "transnext",
        model_overrides={"num_queries": 100},
        out_indices=(1, 2, 3),
    )  # <= tokens of a small image
    data = model.data_preprocessor(_det_batch(masks=False), training=True)
    losses = model(**data, mode="loss")
    total, _ = model.parse_losses(losses)
    total.backward()
    assert torch.isfinite(total) and "loss_cls" in losses and "dn_loss_bbox" in losses
    assert model.backbone.model.block2[0].attn.q.weight.grad.abs().sum() > 0
    from mmengine.optim import build_optim_wrapper

    optim = dict(cfg.optim_wrapper, type="OptimWrapper")
    optim.pop("loss_scale")
    groups = build_optim_wrapper(model, optim).optimizer.param_groups
    by_param = {id(p): g for g in groups for p in g["params"]}
    base_lr, base_wd = cfg.optim_wrapper.optimizer.lr, cfg.optim_wrapper.optimizer.weight_decay
    block = model.backbone.model.block2[0]
    expected = {  # (parameter, lr multiplier, weight-decay multiplier): the official TransNeXt DINO recipe
        "backbone linear": (block.attn.q.weight, 0.1, 1.0),
        "backbone norm": (block.norm1.weight, 0.1, 0.0),
        "stage norm": (model.backbone.model.norm2.weight, 0.1, 0.0),
        "query embedding": (block.attn.query_embedding, 0.1, 0.0),
        "temperature": (block.attn.temperature, 0.1, 0.0),
        "log-CPB": (block.attn.cpb_fc1.weight, 0.1, 0.0),
        "DINO query": (model.query_embedding.weight, 1.0, 1.0),
    }
    for what, (param, lr_mult, decay_mult) in expected.items():
        group = by_param[id(param)]
        assert (group["lr"], group["weight_decay"]) == pytest.approx((base_lr * lr_mult, base_wd * decay_mult)), what


def test_mask2former_loss():
    cfg, model = _build(
        "configs/seg/transnext/transnext-tiny-in1k-pre_mask2former_8xb2-160k_ade20k-512x512.py", "transnext"
    )
    data = model.data_preprocessor(_seg_batch(), training=True)
    losses = model(**data, mode="loss")
    total, _ = model.parse_losses(losses)
    total.backward()
    assert torch.isfinite(total) and any(k.endswith("loss_mask") for k in losses)
    assert model.backbone.model.block1[0].attn.q.weight.grad.abs().sum() > 0
