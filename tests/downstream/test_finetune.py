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
import math
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.logging import MMLogger

from harness import cli  # noqa: E402
from harness.core.rundir import read_metrics  # noqa: E402
import os
from fixtures.cli import one_line_captured as _one_line
from fixtures.files import evil_mmengine_checkpoint as _evil_mmengine_checkpoint
from fixtures.files import hold_lock as _hold_lock
from fixtures.files import read_only
from fixtures.files import refused as _refused
from harness.core.errors import DepthbenchError

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

TINY_FINETUNE = ["train_cfg.max_iters=2", "default_hooks.logger.interval=1", "+val_dataloader.dataset.indices=4"]


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
    """Each dense paper backbone family (reduced width, tests/downstream/test_backbone.py) in the embedded
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


# -------------------------------------------------------------------------- run directories and resuming
def test_resume_auto_resolves_only_inside_the_work_dir(tmp_path):
    from downstream.finetune import latest_checkpoint, resume_checkpoint

    work, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    (elsewhere / "iter_1.pth").write_bytes(b"x")
    (work / "last_checkpoint").write_text(str(elsewhere / "iter_1.pth"))
    assert latest_checkpoint(work) is None
    with pytest.raises(DepthbenchError, match="names no checkpoint inside"):
        resume_checkpoint("auto", work)
    (work / "iter_1.pth").symlink_to(elsewhere / "iter_1.pth")  # a link out of the work dir is outside too
    assert latest_checkpoint(work) is None
    (work / "iter_1.pth").unlink()
    (work / "iter_1.pth").write_bytes(b"y")  # a copied run: the pointer's old absolute path, the file here
    assert resume_checkpoint("auto", work) == work / "iter_1.pth"


@pytest.mark.tier("integration")
@pytest.mark.slow
@pytest.mark.parametrize("how", ["test", "load_from", "resume", "resume-auto"])
def test_crafted_mmengine_checkpoints_are_refused_by_test_finetune_and_resume(how, embedded_cache, tmp_path, capsys):
    """A crafted iter_1.pth in a directory whose meta.json says engine mmengine (what used to grant trust), given
    to `test`, to `load_from=`, to `--resume FILE`, or reached by `--resume auto` through a last_checkpoint pointer
    out of the work dir: one line, nothing runs, nothing is written."""
    marker = tmp_path / "pwned"
    shared = tmp_path / "shared"
    evil = _evil_mmengine_checkpoint(shared / "iter_1.pth", marker)
    (shared / "meta.json").write_text(json.dumps({"engine": "mmengine", "status": "done"}))
    work = tmp_path / "work"
    argv, needle = {
        "test": (["test", DET, str(evil), "--work-dir", str(work)], "posix.system"),
        "load_from": (["finetune", DET, "--work-dir", str(work), f"load_from={str(evil)!r}"], "posix.system"),
        "resume": (["finetune", DET, "--work-dir", str(work), "--resume", str(evil), *TINY_FINETUNE], "posix.system"),
        "resume-auto": (
            ["finetune", DET, "--work-dir", str(work), "--resume", "auto", *TINY_FINETUNE],
            "names no checkpoint inside",
        ),
    }[how]
    if how == "resume-auto":
        work.mkdir()
        (work / "last_checkpoint").write_text(str(evil))
    code = cli.main(argv)
    assert not marker.exists(), "the crafted pickle ran"
    line = _one_line(capsys, code, needle)
    assert how == "resume-auto" or "weights-only load refuses" in line
    assert not work.exists() or sorted(p.name for p in work.iterdir()) == ["last_checkpoint"]
    assert sorted(p.name for p in shared.iterdir()) == ["iter_1.pth", "meta.json"]


@pytest.mark.tier("integration")
def test_a_file_as_work_dir_is_one_line(embedded_cache, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("")
    _one_line(capsys, cli.main(["finetune", DET, "--work-dir", str(afile)]), "is a file, not a directory")
    _one_line(capsys, cli.main(["test", DET, str(afile), "--work-dir", str(afile)]), "is a file, not a directory")


@pytest.mark.tier("integration")
def test_a_test_beside_a_checkpoint_it_cannot_write_beside_is_one_line(embedded_cache, tmp_path, capsys):
    """``depthbench test`` without --work-dir writes beside the checkpoint: a folder really unwritable there (root
    included: os.access says yes to root, CI runs as root) is one line before the model is built."""
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "w.pth").write_bytes(b"not reached")
    with read_only(folder):
        _one_line(
            capsys,
            cli.main(["test", DET, str(folder / "w.pth")]),
            f"the test's run directory {folder / 'w-test'}: cannot write in {folder}",
        )
    assert sorted(p.name for p in folder.iterdir()) == ["w.pth"]


@pytest.mark.tier("integration")
def test_a_second_finetune_of_a_run_directory_is_one_line(embedded_cache, tmp_path, capsys):
    work = tmp_path / "run"
    holder = _hold_lock(work)
    try:
        before = sorted(p.name for p in work.iterdir())
        meta = (work / "meta.json").read_text()
        _one_line(
            capsys,
            cli.main(["finetune", DET, "--work-dir", str(work), "--resume", "auto", *TINY_FINETUNE]),
            "is in use by pid",
        )
        assert sorted(p.name for p in work.iterdir()) == before and (work / "meta.json").read_text() == meta
    finally:
        holder.kill()
        holder.wait()


# ------------------------------------------------------------------------------------ a shortened schedule
def test_a_shortened_finetune_brings_its_schedule_along():
    """Issue 26 item 7: train_cfg.max_iters=40 on the 500-iteration preset: the warm-up is 4 iterations, the cosine
    ends at 40, evaluation and checkpoints every 20, and the rates are the closed forms of that schedule (at
    iteration 25 the run is past its warm-up, where the unscaled schedule still warmed up at lr 4.9e-4)."""
    from mmengine.optim.scheduler import LinearLR, CosineAnnealingLR  # noqa: F401  (registers)
    from mmengine.registry import PARAM_SCHEDULERS

    from downstream.finetune import load_downstream_config

    changes = []
    cfg = load_downstream_config(DET, ["train_cfg.max_iters=40"], changes)
    warmup, cosine = cfg.param_scheduler
    assert (warmup.begin, warmup.end, cosine.begin, cosine.end) == (0, 4, 4, 40)
    assert cfg.train_cfg.val_interval == 20 and cfg.default_hooks.checkpoint.interval == 20
    assert cfg.scale == "embedded coco-shapes 128px, 40 iterations" and len(changes) == 4
    base, start, eta_min = cfg.optim_wrapper.optimizer.lr, warmup.start_factor, cosine.eta_min
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=base)
    schedulers = [PARAM_SCHEDULERS.build(dict(s, optimizer=optimizer)) for s in cfg.param_scheduler]
    rates = []
    for _ in range(40):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        for s in schedulers:
            s.step()
    for k in range(4):  # linear warm-up from start_factor to 1 over its 4 iterations
        assert rates[k] == pytest.approx(base * (start + (1 - start) * k / 3))
    for k in (4, 25, 39):
        assert rates[k] == pytest.approx(eta_min + (base - eta_min) * (1 + math.cos(math.pi * (k - 4) / 36)) / 2)

    constant = [dict(type="ConstantLR", factor=1.0, by_epoch=False)]
    kept = load_downstream_config(
        DET, ["train_cfg.max_iters=40", "train_cfg.val_interval=5", f"param_scheduler={constant!r}"]
    )
    assert kept.param_scheduler == constant
    assert kept.train_cfg.val_interval == 5  # set on the command line: kept as given
    epochs = load_downstream_config(
        "configs/det/stepsnet/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-1x_coco.py", ["train_cfg.max_epochs=6"]
    )
    warmup, steps = epochs.param_scheduler
    assert warmup.end == 500 and (steps.end, steps.milestones) == (6, [4, 5])  # the warm-up counts iterations
    assert epochs.scale == "6 epochs (the config's 12)"


def test_a_schedule_that_cannot_be_rescaled_says_which_key_to_set(tmp_path):
    from downstream.finetune import load_downstream_config

    config = tmp_path / "custom.py"
    config.write_text(
        f"_base_ = [{DET!r}]\nparam_scheduler = [dict(type='ReduceOnPlateauLR', by_epoch=False, "
        f"monitor='loss', patience=50)]\n"
    )
    with pytest.raises(
        DepthbenchError,
        match=r"param_scheduler\[0\] \(ReduceOnPlateauLR\) cannot be rescaled from "
        r"500 to 40 iterations; set param_scheduler=\[\.\.\.\]",
    ):
        load_downstream_config(str(config), ["train_cfg.max_iters=40"])
    assert load_downstream_config(str(config), []).param_scheduler[0].patience == 50  # no override: untouched


# ------------------------------------------------------------------ the console, and `test` beside its run
@pytest.fixture(scope="module")
def finetuned(embedded_cache, tmp_path_factory):
    """A 2-iteration fine-tune of the Mask R-CNN preset, as a user runs it (a subprocess, its console kept)."""
    from clitools import run_cli

    run = tmp_path_factory.mktemp("ft") / "run"
    done = run_cli("finetune", DET, "--work-dir", run, *TINY_FINETUNE, env={"DEPTHBENCH_CACHE": str(embedded_cache)})
    assert done.returncode == 0, done.stderr[-3000:]
    return run, done


@pytest.mark.tier("integration")
@pytest.mark.slow
def test_finetune_console_is_a_header_and_progress_and_the_run_keeps_its_config_as_data(finetuned):
    run, done = finetuned
    out = done.stdout.splitlines()
    assert out[0].startswith(f"depthbench finetune: {DET} -> {run}") and "model: MaskRCNN with steps_resnet18" in out[1]
    assert any(line.startswith("  2 iterations") for line in out) and any("schedule follows" in line for line in out)
    # training progress and the evaluations (every 250 of 500 iterations: here every 1 of 2)
    assert [line.split(":")[0] for line in out if line.startswith("iter ")] == [
        "iter 1/2",
        "iter 1",
        "iter 2/2",
        "iter 2",
    ]
    assert len(out) <= 12 and "mmengine - INFO" not in done.stdout and "loading annotations" not in done.stdout
    assert done.stderr.strip() == ""  # no library warnings, no MMEngine log
    log = next(run.glob("2*/2*.log")).read_text()
    assert "System environment" in log and "loading annotations into memory" in log  # the full log is kept
    meta = json.loads((run / "meta.json").read_text())
    assert meta["scale"] == "embedded coco-shapes 128px, 2 iterations" and meta["schedule_changes"]
    config = json.loads((run / "config.json").read_text())
    assert config["model"]["backbone"]["model_name"] == "steps_resnet18_w32" and config["train_cfg"]["max_iters"] == 2
    assert not (run / ".lock").exists() or subprocess.run(["flock", "-n", str(run / ".lock"), "true"]).returncode == 0


@pytest.mark.tier("integration")
@pytest.mark.slow
def test_test_writes_beside_its_checkpoints_run_and_verbose_shows_the_mmengine_log(finetuned, embedded_cache, capsys):
    run, _ = finetuned
    capsys.readouterr()
    assert (
        cli.main(["test", DET, str(run / "last.pth"), "--json", "--verbose", "+test_dataloader.dataset.indices=4"]) == 0
    )
    captured = capsys.readouterr()
    assert "coco/bbox_mAP" in json.loads(captured.out.strip().splitlines()[-1])
    # --verbose: MMEngine's console log is back, on stderr: stdout holds only the metrics (issue 45)
    assert "mmengine - INFO" in captured.err and "mmengine - " not in captured.out
    tested = run.parent / f"{run.name}-test-iter_2"  # last.pth -> iter_2.pth
    meta = json.loads((tested / "meta.json").read_text())
    assert meta["mode"] == "test" and meta["status"] == "done" and meta["tested_run"] == str(run)
    assert not (ROOT / "results/runs" / f"{json.loads((run / 'meta.json').read_text())['experiment']}-test").exists()
