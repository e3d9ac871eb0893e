"""configs/det and configs/seg: every config loads and builds its model; the papers' dense rows are audited."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from mmengine.logging import MMLogger
from mmengine.registry import DefaultScope

from downstream.audit import DENSE_COLUMNS, DENSE_CONFIGS, load_config, meta_model
from harness.commands import verify
from results import paper_tables

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted(
    str(p.relative_to(ROOT)) for folder in ("configs/det", "configs/seg") for p in (ROOT / folder).rglob("*.py")
)


def _dense_rows(checked_only: bool = True):
    """(paper, table, row, column) for every dense column (that verify measures: not unchecked)."""
    for paper in paper_tables.available_papers():
        for table in paper_tables.load_paper(paper):
            for row in table.rows:
                for column in row.paper:
                    if column in DENSE_COLUMNS and not (checked_only and (column in row.unchecked or row.reason)):
                        yield paper, table.id, row.name, column


def test_every_dense_row_has_a_config_and_every_config_a_row():
    rows = list(_dense_rows())
    assert len(rows) >= 40
    for paper, table, name, column in rows:
        assert (paper, table, name) in DENSE_CONFIGS, (paper, table, name, column)
    stale = set(DENSE_CONFIGS) - {(p, t, n) for p, t, n, _ in _dense_rows(checked_only=False)}
    assert not stale, f"DENSE_CONFIGS names rows the tables do not have: {sorted(stale)}"
    for config in set(DENSE_CONFIGS.values()):
        assert config.startswith(("mmdet::", "mmseg::")) or (ROOT / config).is_file(), config


def test_paper_settings_in_the_transnext_configs():
    """Values the TransNeXt paper prints (drop path T/S/B for Mask R-CNN and DINO 0.3/0.5/0.6, UperNet
    0.4/0.6/0.7; AdamW 1e-4 / 6e-5, weight decay 0.05) and its multi-scale test (ratios 0.5-1.75 of 2048x512)."""

    def backbone(name):
        return load_config(f"configs/{name}").model.backbone

    for size, (det, seg) in {"tiny": (0.3, 0.4), "small": (0.5, 0.6), "base": (0.6, 0.7)}.items():
        amp = "amp-" if size == "base" else ""
        assert backbone(f"det/transnext/mask-rcnn_transnext-{size}_fpn_{amp}1x_coco.py").drop_path_rate == det
        assert backbone(f"det/transnext/dino-5scale_transnext-{size}_8xb2-12e_coco.py").drop_path_rate == det
        assert (
            backbone(f"seg/transnext/transnext-{size}-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py").drop_path_rate
            == seg
        )
        assert (
            backbone(f"seg/transnext/transnext-{size}-in1k-pre_mask2former_8xb2-160k_ade20k-512x512.py").drop_path_rate
            == det
        )
    cfg = load_config("configs/det/transnext/mask-rcnn_transnext-tiny_fpn_1x_coco.py")
    assert (cfg.optim_wrapper.optimizer.lr, cfg.optim_wrapper.optimizer.weight_decay) == (1e-4, 0.05)
    assert cfg.model.backbone.model_kwargs == dict(img_size=800, pretrain_size=224, position_bias="interpolate")
    cfg = load_config("configs/seg/transnext/transnext-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py")
    assert (cfg.optim_wrapper.optimizer.lr, cfg.optim_wrapper.optimizer.weight_decay) == (6e-5, 0.05)
    assert cfg.model.test_cfg.mode == "slide" and cfg.model.test_cfg.stride == (341, 341)
    for mode, img_size in (("interpolate", 800), ("extrapolate", 512)):
        cfg = load_config(
            f"configs/seg/transnext/transnext-base-in1k-pre_upernet_8xb2-160k_ade20k-512x512_tta-{mode}.py"
        )
        assert cfg.model.backbone.model_name == "transnext_base" and cfg.model.test_cfg.mode == "whole"
        assert cfg.model.backbone.model_kwargs.position_bias == mode
        assert cfg.model.backbone.model_kwargs.img_size == img_size
        scales = [t.scale for t in cfg.tta_pipeline[1].transforms[0]]
        assert scales == [(1024, 256), (1536, 384), (2048, 512), (2560, 640), (3072, 768), (3584, 896)]


def test_dense_verify_rows_pass_stepsnet_segmentation():
    checks = verify.run(papers=["stepsnet"], table="3", progress=False)
    assert {(c.row, c.column) for c in checks} == {
        (r, c) for r in ("Swin-T", "Steps-Swin-T") for c in ("seg_params_m", "seg_flops_g")
    }
    assert all(c.status == "pass" for c in checks), [c for c in checks if c.status != "pass"]
    steps = {c.column: c.ours for c in checks if c.row == "Steps-Swin-T"}
    assert steps["seg_params_m"] == pytest.approx(58.19, abs=0.01)  # the 544-wide stage 4 (StepsNet Table 3: 58M)


@pytest.mark.slow
def test_every_config_loads_and_builds_its_model():
    """Full size, on the meta device (no weights, no compute), as `depthbench verify` builds them; the neck or
    head takes the backbone's channels."""
    built = {}
    for config in CONFIGS:
        cfg = load_config(config)
        key = repr(cfg.model)
        if key in built:
            continue
        model = meta_model(config)  # cached: the dense verify test below measures the same models
        built[key] = config
        assert sum(p.numel() for p in model.parameters()) > 1e6, config
        channels = getattr(model.backbone, "out_channels", None)
        if channels is None:  # mmdet's / mmseg's own backbones
            continue
        head = cfg.model.get("neck") or cfg.model.decode_head
        assert list(head.in_channels) == list(channels), config
    assert len(built) >= 30


@pytest.mark.slow
def test_dense_verify_rows_pass():
    """Every detection/segmentation parameter and FLOP count the papers print, from the configs."""
    checks = [
        c
        for paper, table in (
            ("stepsnet", "2a"),
            ("stepsnet", "2b"),
            ("transnext", "12"),
            ("transnext", "13"),
            ("transnext", "14"),
            ("transnext", "15"),
            ("scalenet", "VIII"),
            ("scalenet", "IX"),
        )
        for c in verify.run(papers=[paper], table=table, progress=False)
        if c.column in DENSE_COLUMNS
    ]
    assert len([c for c in checks if c.status == "pass"]) >= 35
    assert not [c for c in checks if c.status in ("fail", "error")], [
        c for c in checks if c.status in ("fail", "error")
    ]


def test_moving_between_detection_and_segmentation_configs_sets_the_scope_without_a_warning():
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = MMLogger.get_current_instance()
    logger.addHandler(handler)
    try:
        for config in (
            "configs/det/mask-rcnn_steps-resnet18-w32_fpn_500it_embedded-coco.py",
            "configs/seg/upernet_steps-resnet18-w32_500it_embedded-ade.py",
        ) * 2:
            cfg = load_config(config)
            assert DefaultScope.get_current_instance().scope_name == cfg.default_scope
    finally:
        logger.removeHandler(handler)
    assert not [r.getMessage() for r in records if r.levelno >= logging.WARNING]
