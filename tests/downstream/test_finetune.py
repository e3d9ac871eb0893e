"""depthbench finetune / test and the embedded detection/segmentation data, on real mmdet/mmseg (CPU),
and downstream.finetune's console.

The end-to-end tests run the embedded presets for a few iterations in this process (one import of the
OpenMMLab stack for all of them) with a small validation set; the AP/mIoU floors are checked on shortened
runs of both presets (the full presets' numbers are in docs/guides/finetuning.md).
"""

from __future__ import annotations

import hashlib
import json
import logging
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.logging import MMLogger

from harness import cli  # noqa: E402
from harness.core.rundir import read_metrics  # noqa: E402
import os
from fixtures.files import refused as _refused

from downstream.finetune import console, log_warnings

ROOT = Path(__file__).resolve().parents[2]
DET = str(ROOT / "configs/det/mask-rcnn_steps-resnet18-w32_fpn_500it_embedded-coco.py")
SEG = str(ROOT / "configs/seg/upernet_steps-resnet18-w32_500it_embedded-ade.py")
# a few iterations, a checkpoint and an evaluation at the end, 8 validation images
SHORT = [
    "train_cfg.max_iters=2",
    "train_cfg.val_interval=2",
    "default_hooks.checkpoint.interval=2",
    "default_hooks.logger.interval=1",
    "+val_dataloader.dataset.indices=8",
]


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        h.update(f.relative_to(folder).as_posix().encode())
        h.update(f.read_bytes())
    return h.hexdigest()


# ------------------------------------------------------------------------------------------- the generator
def test_coco_generator_is_deterministic_and_valid(tmp_path):
    from pycocotools import mask as mask_utils
    from pycocotools.coco import COCO
    from PIL import Image

    from downstream.embedded import COCO_SHAPES_CLASSES, generate_coco

    generate_coco(tmp_path / "a", size=96, train=12, val=4)
    generate_coco(tmp_path / "b", size=96, train=12, val=4)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")

    coco = COCO(str(tmp_path / "a/annotations/instances_train2017.json"))
    assert [c["name"] for c in coco.loadCats(coco.getCatIds())] == list(COCO_SHAPES_CLASSES)
    assert len(coco.getImgIds()) == 12 and len(coco.getAnnIds()) >= 12
    classes = set()
    for ann in coco.loadAnns(coco.getAnnIds()):
        info = coco.loadImgs(ann["image_id"])[0]
        img = np.asarray(Image.open(tmp_path / "a/train2017" / info["file_name"]))
        assert img.shape == (info["height"], info["width"], 3)
        x, y, w, h = ann["bbox"]
        assert 0 <= x and 0 <= y and x + w <= info["width"] and y + h <= info["height"] and w > 4 and h > 4
        mask = coco.annToMask(ann)
        assert mask.shape == img.shape[:2]
        # COCO's convention: the area is that of the polygon's mask
        rle = mask_utils.frPyObjects(ann["segmentation"], info["height"], info["width"])
        assert float(mask_utils.area(rle).sum()) == ann["area"] == mask.sum() > 20
        ys, xs = np.nonzero(mask)
        assert xs.min() >= int(x) - 1 and xs.max() <= x + w + 1 and ys.min() >= int(y) - 1 and ys.max() <= y + h + 1
        classes.add(ann["category_id"])
    assert len(classes) >= 3  # several classes in only 12 images


def test_ade_generator_is_deterministic_and_valid(tmp_path):
    from PIL import Image

    from downstream.embedded import ADE_SHAPES_CLASSES, generate_ade

    generate_ade(tmp_path / "a", size=64, train=6, val=3)
    generate_ade(tmp_path / "b", size=64, train=6, val=3)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    for split, count in (("training", 6), ("validation", 3)):
        images = sorted((tmp_path / "a/images" / split).glob("ADE_*.jpg"))
        labels = sorted((tmp_path / "a/annotations" / split).glob("ADE_*.png"))
        assert len(images) == len(labels) == count
        assert [p.stem for p in images] == [p.stem for p in labels]
        values = set()
        for image, label in zip(images, labels):
            lab = np.asarray(Image.open(label))
            assert lab.dtype == np.uint8 and lab.shape == np.asarray(Image.open(image)).shape[:2]
            values |= set(np.unique(lab).tolist())
        # ADE's convention: class i stored as i + 1, 0 (unlabelled) unused here
        assert values <= set(range(1, len(ADE_SHAPES_CLASSES) + 1)) and 1 in values and len(values) >= 3


def test_generation_is_atomic(tmp_path, monkeypatch):
    """A generation that dies half-way leaves no set (and no temporary folder); the next one completes."""
    from downstream import embedded

    monkeypatch.setenv("DEPTHBENCH_CACHE", str(tmp_path))
    monkeypatch.setitem(embedded.SETS, "coco-shapes", dict(size=64, train=3, val=2))
    real = embedded.generate_coco

    def dies(root, **kwargs):
        real(root, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(embedded, "generate_coco", dies)
    with pytest.raises(KeyboardInterrupt):
        embedded.ensure_dataset("coco-shapes")
    assert list((tmp_path / "data").iterdir()) == []
    monkeypatch.setattr(embedded, "generate_coco", real)
    path = embedded.ensure_dataset("coco-shapes")
    assert (path / "annotations/instances_val2017.json").is_file()
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [path.name]


# ------------------------------------------------------------------------------------------- bad input
def _one_line_error(capsys, code, needle):
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    lines = [ln for ln in err if ln.startswith("depthbench ")]
    assert len(lines) == 1 and needle in lines[0], err
    return lines[0]


@pytest.mark.tier("integration")
def test_a_bad_nproc_is_refused_before_the_heavy_imports():
    """``finetune --nproc 0`` is answered before MMEngine and torch are imported (seconds), as ``train``'s is."""
    import subprocess
    import sys

    probe = (
        "import sys; from harness.cli import main; "
        f"code = main(['finetune', {DET!r}, '--nproc', '0']); "
        "print(code, sorted(m for m in ('torch', 'mmengine', 'mmdet') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.stdout.split("\n")[0] == "2 []", (done.stdout, done.stderr[-2000:])
    assert done.stderr.strip() == (
        "depthbench finetune: error: --nproc 0: give the number of processes to start, 1 or more"
    )


@pytest.mark.tier("integration")
@pytest.mark.slow
def test_bad_input_is_one_line_and_writes_nothing(embedded_cache, tmp_path, capsys):
    work = tmp_path / "run"
    code = cli.main(["finetune", DET, "--work-dir", str(work), "data_root=/nonexistent/coco/"])
    _one_line_error(capsys, code, "/nonexistent/coco/")
    code = cli.main(["finetune", DET, "--work-dir", str(work), "model.backbone.model_name=steps_resnet81"])
    _one_line_error(capsys, code, "steps_resnet81")
    code = cli.main(["finetune", SEG, "--work-dir", str(work), "model.decode_head.type=UPerHeadd"])
    _one_line_error(capsys, code, "UPerHeadd")
    foreign = tmp_path / "foreign.pth"
    torch.save({"state_dict": {"encoder.weight": torch.zeros(3, 3)}}, foreign)
    code = cli.main(["finetune", DET, "--work-dir", str(work), f"load_from={str(foreign)!r}"])
    _one_line_error(capsys, code, "none of its 1 tensors fits")
    code = cli.main(["test", SEG, str(foreign), "--work-dir", str(work)])
    _one_line_error(capsys, code, "none of its 1 tensors fits")
    corrupt = tmp_path / "corrupt.pth"
    corrupt.write_bytes(bytes(range(256)) * 8)  # e.g. a truncated download
    for argv in (
        ["test", DET, str(corrupt)],
        ["finetune", SEG, f"load_from={str(corrupt)!r}"],
        ["finetune", DET, f"model.backbone.init_cfg.checkpoint={corrupt}"],
    ):
        code = cli.main([*argv, "--work-dir", str(work)])
        _one_line_error(capsys, code, "corrupt.pth is not a readable")
    code = cli.main(["finetune", DET, "--work-dir", str(work), "train_cfg.max_iter=3"])
    _one_line_error(capsys, code, "did you mean train_cfg.max_iters")
    assert not work.exists()


# ------------------------------------------------------------------------------------------- pretrained backbone
def _preset_backbone(config: str) -> tuple:
    """(timm name, model kwargs) of a preset's backbone."""
    from harness.core.config import load_config

    backbone = load_config(config).model.backbone
    return backbone.model_name, dict(backbone.get("model_kwargs") or {})


def _built_backbone(config: str, overrides):
    """The preset's model with ``overrides``, built and initialised as `depthbench finetune` does."""
    from mmengine.registry import MODELS

    from downstream.finetune import load_downstream_config
    from downstream.mmengine_compat import use_default_scope

    cfg = load_downstream_config(config, overrides)
    use_default_scope(cfg.default_scope)
    model = MODELS.build(cfg.model)
    model.init_weights()
    return model.backbone


@pytest.mark.tier("integration")
@pytest.mark.slow
def test_preset_fine_tunes_a_depthbench_train_checkpoint(embedded_cache, tmp_path, capsys):
    """A `depthbench train` checkpoint of the presets' half-width Steps-ResNet-18 (any head) loads into the
    preset's backbone with the plain override model.backbone.init_cfg.checkpoint=PATH (a run directory or a
    file, EMA or not) and no missing key; a checkpoint of another width is one line before anything is written."""
    import timm

    import models  # noqa: F401
    from harness.engine.checkpoint import FORMAT, save_atomic

    name, kwargs = _preset_backbone(SEG)
    assert (name, kwargs) == _preset_backbone(DET) == ("steps_resnet18_w32", {})  # one registered variant
    classifier = timm.create_model(name, num_classes=10, **kwargs)  # e.g. pretrained on digits
    weights = classifier.state_dict()
    ema = {k: v + 1.0 if v.is_floating_point() else v for k, v in weights.items()}
    pretrain = tmp_path / "runs/digits/run1"
    pretrain.mkdir(parents=True)
    save_atomic({"format": FORMAT, "model": weights, "ema": ema}, pretrain / "best.pth")

    random_init = _built_backbone(SEG, [])  # the preset as shipped: checkpoint=None, random initialisation
    assert random_init.checkpoint is None
    for source, extra, expected in [
        (str(pretrain), [], weights),
        (str(pretrain / "best.pth"), ["+model.backbone.init_cfg.ema=True"], ema),
    ]:
        backbone = _built_backbone(SEG, [f"model.backbone.init_cfg.checkpoint={source}", *extra])
        own = backbone.model.state_dict()
        assert set(own) <= set(weights)  # zero missing backbone keys (the loader would raise otherwise)
        assert all(torch.equal(own[k], expected[k]) for k in own)
        assert not torch.equal(random_init.model.state_dict()["conv1.weight"], own["conv1.weight"])
    # the whole-dict spelling works too
    backbone = _built_backbone(DET, [f"model.backbone.init_cfg={{'type': 'Pretrained', 'checkpoint': '{pretrain}'}}"])
    assert torch.equal(backbone.model.state_dict()["conv1.weight"], weights["conv1.weight"])

    full_width = timm.create_model("steps_resnet18", num_classes=10)  # the paper's width: does not fit
    save_atomic({"format": FORMAT, "model": full_width.state_dict(), "ema": None}, tmp_path / "wide.pth")
    work = tmp_path / "run"
    capsys.readouterr()
    code = cli.main(
        ["finetune", SEG, "--work-dir", str(work), f"model.backbone.init_cfg.checkpoint={tmp_path}/wide.pth"]
    )
    line = _one_line_error(capsys, code, "does not fit the steps_resnet18_w32 backbone")
    assert "mis-shaped" in line and "conv1.weight" in line
    code = cli.main(["finetune", DET, "--work-dir", str(work), "model.backbone.init_cfg.checkpoint=3"])
    _one_line_error(capsys, code, "model.backbone.init_cfg.checkpoint=PATH")
    code = cli.main(["finetune", DET, "--work-dir", str(work), f"model.backbone.init_cfg.checkpoint={tmp_path}/no.pth"])
    _one_line_error(capsys, code, "no.pth")
    assert not work.exists()


# ------------------------------------------------------------------------------------------- end to end
def _eval_records(run: Path, kind="eval"):
    return [r for r in read_metrics(run / "metrics.jsonl") if r["kind"] == kind]


@pytest.mark.tier("integration")
@pytest.mark.slow
def test_mask_rcnn_finetune_resume_and_test(embedded_cache, tmp_path, capsys):
    run = tmp_path / "det"
    capsys.readouterr()
    assert cli.main(["finetune", DET, "--work-dir", str(run), *SHORT]) == 0
    done = capsys.readouterr().out.strip().splitlines()[-1]  # the last line says it ended, as train's does
    assert done.startswith("done: 2 iterations, last validation coco/bbox_mAP ") and done.endswith(f"; {run}")
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "done" and meta["engine"] == "mmengine" and meta["world_size"] == 1
    assert meta["scale"].startswith("embedded coco-shapes")
    train = _eval_records(run, "train")
    assert [r["global_step"] for r in train] == [1, 2] and all(np.isfinite(r["loss"]) for r in train)
    assert {"loss_rpn_cls", "loss_cls", "loss_mask", "lr"} <= set(train[0])
    (record,) = _eval_records(run)
    assert record["global_step"] == 2
    for key in ("coco/bbox_mAP", "coco/bbox_mAP_50", "coco/segm_mAP"):
        assert 0.0 <= record[key] <= 1.0
    assert (run / "last.pth").resolve() == (run / "iter_2.pth").resolve()
    assert (run / "config.py").is_file()

    # --resume auto continues the same run from iteration 2 to 4
    longer = [a.replace("max_iters=2", "max_iters=4") for a in SHORT]
    assert cli.main(["finetune", DET, "--work-dir", str(run), "--resume", "auto", *longer]) == 0
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "done" and meta["global_step"] == 4
    assert [r["global_step"] for r in meta["resumes"]] == [2]
    assert [r["global_step"] for r in _eval_records(run, "train")] == [1, 2, 3, 4]
    assert [r["global_step"] for r in _eval_records(run)] == [2, 4]
    state = torch.load(run / "iter_4.pth", map_location="cpu", weights_only=False)
    assert state["meta"]["iter"] == 4

    # without --resume, a work dir that holds checkpoints is refused
    capsys.readouterr()
    _one_line_error(capsys, cli.main(["finetune", DET, "--work-dir", str(run), *SHORT]), "--resume auto")

    # depthbench test on the produced checkpoint
    capsys.readouterr()
    out = tmp_path / "test"
    assert (
        cli.main(
            ["test", DET, str(run / "last.pth"), "--work-dir", str(out), "--json", "+test_dataloader.dataset.indices=8"]
        )
        == 0
    )
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["coco/bbox_mAP"] == pytest.approx(_eval_records(run)[-1]["coco/bbox_mAP"], abs=1e-6)
    (test_record,) = _eval_records(out, "test")
    test_meta = json.loads((out / "meta.json").read_text())
    assert test_meta["status"] == "done"
    assert test_record["coco/segm_mAP"] == printed["coco/segm_mAP"]
    # labelled by the tested run (4 iterations), not by the config's 500; results reads its metrics (issue 45)
    assert test_meta["scale"] == meta["scale"] and "4 iterations" in meta["scale"]
    from results.runs import collect

    (row,) = collect([out])[0].to_dict("records")
    assert row["scale"] == f"test of {run.name}/last.pth: {meta['scale']}"
    assert row["metric.bbox_mAP"] == pytest.approx(100 * printed["coco/bbox_mAP"])


@pytest.mark.tier("integration")
@pytest.mark.slow
def test_upernet_finetune_and_test(embedded_cache, tmp_path, capsys):
    run = tmp_path / "seg"
    assert cli.main(["finetune", SEG, "--work-dir", str(run), *SHORT]) == 0
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "done" and meta["scale"].startswith("embedded ade-shapes")
    assert {"decode.loss_ce", "aux.loss_ce", "lr"} <= set(_eval_records(run, "train")[0])
    (record,) = _eval_records(run)
    assert {"mIoU", "mAcc", "aAcc"} <= set(record) and 0 <= record["mIoU"] <= 100
    capsys.readouterr()
    assert (
        cli.main(
            [
                "test",
                SEG,
                str(run / "last.pth"),
                "--work-dir",
                str(tmp_path / "t"),
                "--json",
                "+test_dataloader.dataset.indices=8",
            ]
        )
        == 0
    )
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["mIoU"] == pytest.approx(record["mIoU"], abs=1e-4)


ONE = [
    "train_cfg.max_iters=1",
    "train_cfg.val_interval=1",
    "default_hooks.checkpoint.interval=1",
    "default_hooks.logger.interval=1",
    "+val_dataloader.dataset.indices=4",
]


@pytest.mark.tier("integration")
@pytest.mark.slow
@pytest.mark.parametrize("family", ["steps_swin", "transnext", "scalenet_swin"])
def test_mask_rcnn_iteration_and_evaluation_per_family(family, embedded_cache, tmp_path):
    """Each dense paper backbone family (reduced width, tests/downstream/test_downstream_backbone.py) in the embedded
    Mask R-CNN preset: one training iteration and one COCO evaluation pass on the embedded set, end to end
    through `depthbench finetune` (the papers' full-size configs train one step on synthetic batches there)."""
    from fixtures.downstream import SMALL, SMALL_CHANNELS

    backbone = dict(
        SMALL[family],
        _delete_=True,
        type="DepthbenchBackbone",
        out_indices=(0, 1, 2, 3),
        init_cfg=dict(type="Pretrained", checkpoint=None),
    )
    if family == "transnext":  # the embedded images are 128x128 (the position bias is generated there)
        backbone["model_kwargs"] = dict(backbone["model_kwargs"], img_size=128)
    config = tmp_path / f"mask-rcnn_{family}_embedded-coco.py"
    config.write_text(
        f"_base_ = [{DET!r}]\nmodel = dict(backbone={backbone!r}, neck=dict(in_channels={SMALL_CHANNELS[family]!r}))\n"
    )
    run = tmp_path / "run"
    assert cli.main(["finetune", str(config), "--work-dir", str(run), *ONE]) == 0
    assert json.loads((run / "meta.json").read_text())["status"] == "done"
    (train,) = _eval_records(run, "train")
    assert train["global_step"] == 1 and np.isfinite(train["loss"]) and train["loss_mask"] > 0
    (record,) = _eval_records(run)
    for key in ("coco/bbox_mAP", "coco/segm_mAP"):
        assert 0.0 <= record[key] <= 1.0
    state = torch.load(run / "last.pth", map_location="cpu", weights_only=False)["state_dict"]
    assert state["neck.lateral_convs.0.conv.weight"].shape[1] == SMALL_CHANNELS[family][0]  # this family's maps


FLOOR_ITERS = 150
FLOORS = {  # measured at 150 iterations (this compressed schedule): AP50 0.173 / mask AP50 0.224; mIoU 26.0 / mAcc 36.6
    DET: {"coco/bbox_mAP_50": 0.08, "coco/segm_mAP_50": 0.10},  # chance: ~0
    # all-background prediction: mIoU ~16 (background IoU = its ~80% pixel share, over 5 classes), mAcc 20
    SEG: {"mIoU": 21.0, "mAcc": 28.0},
}


@pytest.mark.tier("system")
@pytest.mark.slow
@pytest.mark.parametrize("config", [DET, SEG], ids=["mask-rcnn", "upernet"])
def test_preset_reaches_the_floor(config, embedded_cache, tmp_path):
    """Each embedded preset, shortened to FLOOR_ITERS iterations (its schedule compressed to fit), is well above
    chance on the full validation set: Mask R-CNN detects and segments the shapes, UperNet tells shape classes
    apart (not only shapes from background). Loose floors, a single run each, no timing."""
    schedule = [
        dict(type="LinearLR", start_factor=0.01, by_epoch=False, begin=0, end=30),
        dict(type="CosineAnnealingLR", eta_min=1e-5, by_epoch=False, begin=30, end=FLOOR_ITERS),
    ]
    run = tmp_path / "floor"
    assert (
        cli.main(
            [
                "finetune",
                config,
                "--work-dir",
                str(run),
                f"train_cfg.max_iters={FLOOR_ITERS}",
                f"train_cfg.val_interval={FLOOR_ITERS}",
                f"default_hooks.checkpoint.interval={FLOOR_ITERS}",
                f"param_scheduler={schedule!r}",
            ]
        )
        == 0
    )
    (record,) = _eval_records(run)
    for key, floor in FLOORS[config].items():
        assert record[key] > floor, record


def test_a_test_run_with_load_from_does_not_say_random_init():
    """Issue 58 item 9: `depthbench test` loads the whole model from load_from; its first line said "backbone random
    init, load_from ..." -- as if the backbone were untrained."""
    from mmengine import Config

    from downstream.finetune import describe_model

    backbone = dict(
        type="DepthbenchBackbone", model_name="steps_resnet18_w32", init_cfg=dict(type="Pretrained", checkpoint=None)
    )
    tested = Config(dict(model=dict(type="MaskRCNN", backbone=backbone), load_from="runs/det/iter_40.pth"))
    assert describe_model(tested) == "MaskRCNN with steps_resnet18_w32 (all weights from runs/det/iter_40.pth)"
    fresh = Config(dict(model=dict(type="MaskRCNN", backbone=backbone), load_from=None))
    assert describe_model(fresh) == "MaskRCNN with steps_resnet18_w32 (backbone random init)"


# ------------------------------------------------------------------------------------------------ runs, caches, weights
def test_a_fifo_as_load_from_is_one_line_at_once(tmp_path):
    from downstream.finetune import read_any_checkpoint

    os.mkfifo(tmp_path / "weights.pth")
    _refused(lambda: read_any_checkpoint(str(tmp_path / "weights.pth")), "weights.pth", "not a regular file")


# ------------------------------------------------------------------------------------------- the console
# library warnings of a fine-tune go to its Runner's log, never to another run's logger and never to the console
class _Runner:
    def __init__(self, logger):
        self.logger = logger


def _library_warning(text: str) -> None:
    # issued as if from a library's file: console() keeps only our own packages' warnings on the console
    warnings.warn_explicit(text, UserWarning, "/site-packages/somelib/module.py", 1)


def test_library_warnings_reach_only_this_run_s_log(tmp_path, capsys):
    other = MMLogger.get_instance("another-run", log_file=str(tmp_path / "other.log"))  # an earlier in-process run
    with console(verbose=False) as warned:
        _library_warning("before the runner")
        ours = MMLogger.get_instance("this-run", log_file=str(tmp_path / "this.log"))  # as the Runner builds it
        for handler in ours.handlers:  # and quiets its console (downstream.mmengine_compat.DepthbenchRunner)
            if type(handler) is logging.StreamHandler:
                handler.setLevel(logging.ERROR)
        log_warnings(warned, _Runner(ours))
        _library_warning("after the runner")
    for handler in ours.handlers + other.handlers:
        handler.flush()
    this_log = (tmp_path / "this.log").read_text()
    assert "before the runner" in this_log and "after the runner" in this_log
    assert "runner" not in (tmp_path / "other.log").read_text()
    assert "runner" not in capsys.readouterr().err
