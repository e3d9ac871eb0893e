"""``depthbench export`` carries the preprocessing its run evaluated with (issue 45): a timm user who loads the export
the standard way -- ``timm.create_model`` on the folder (or on the name with ``pretrained_cfg_overlay``), then
``timm.data.resolve_data_config`` + ``create_transform`` -- gets the run's evaluation transform, and with it the
run's accuracy. (Safety and layout of the export: the tests at the end of this file.)"""

import json
from pathlib import Path

import pytest
import torch

from clitools import run_cli_here
from fixtures.cli import one_line_here as _one_line_here
from fixtures.files import read_only
from fixtures.training import ONE_EPOCH as TINY

pytestmark = pytest.mark.tier("integration")

PRESET = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"  # 16 px, mean/std 0.5: not the model's defaults
# the preset shortened to ~30 s on one CPU core: ~80 % top-1 (chance is 10 %)
SHORT = [
    "model.width=16",
    "batch_size=32",
    "epochs=4",
    "sched.decay_milestones=[3]",
    "log_interval=50",
    "log.tensorboard=False",
]


def _timm_accuracy(model, config: dict, folder: Path) -> tuple[float, int]:
    """Top-1 (%) and image count of ``model`` on an image folder, through timm's own data functions only."""
    from timm.data import create_dataset, create_transform

    dataset = create_dataset("", root=str(folder), transform=create_transform(**config))
    correct = total = 0
    with torch.no_grad():
        for images, targets in torch.utils.data.DataLoader(dataset, batch_size=120):
            correct += (model(images).argmax(1) == targets).sum().item()
            total += len(targets)
    return 100.0 * correct / total, total


@pytest.mark.slow
def test_an_export_evaluated_through_timm_reproduces_the_runs_accuracy(tmp_path, cli):
    import timm
    from timm.data import resolve_data_config, resolve_model_data_config

    import models  # noqa: F401  (registers the paper models)

    data = tmp_path / "data"
    env = {"OMP_NUM_THREADS": "1", "DEPTHBENCH_DATA": str(data)}
    run = tmp_path / "run"
    trained = cli("train", PRESET, *SHORT, "--work-dir", run, env=env)
    assert trained.returncode == 0, trained.stderr[-2000:]
    evals = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    run_top1 = max(r["top1"] for r in evals if r["kind"] == "eval")  # best.pth's evaluation
    assert run_top1 > 50.0, run_top1  # far from chance, so a wrong transform shows
    exported = cli("export", run, "--out", tmp_path / "export", env=env)
    assert exported.returncode == 0, exported.stderr
    val = data / "digits-16" / "val"  # the run's validation images (the preset's data.input_size)
    assert val.is_dir()
    config = json.loads((tmp_path / "export" / "config.json").read_text())

    by_folder = timm.create_model(f"local-dir:{tmp_path / 'export'}", pretrained=True).eval()
    by_overlay = timm.create_model(
        config["architecture"],
        pretrained=True,
        **config["model_args"],
        pretrained_cfg_overlay=dict(config["pretrained_cfg"], file=str(tmp_path / "export" / "model.safetensors")),
    )
    # Tolerance: at most one of the 360 validation images may flip (float summation order differs between the
    # run's batches and these); the right transform agrees to that, a wrong one lands near chance (10 %).
    one_image = 100.0 / 360 + 1e-9
    for model, resolved in (
        (by_folder, resolve_data_config({}, model=by_folder)),
        (by_overlay.eval(), resolve_model_data_config(by_overlay)),
    ):
        top1, images = _timm_accuracy(model, resolved, val)
        assert images == 360
        assert top1 == pytest.approx(run_top1, abs=one_image), (resolved, top1, run_top1)
        assert tuple(resolved["input_size"]) == (3, 16, 16) and tuple(resolved["mean"]) == (0.5, 0.5, 0.5)


@pytest.mark.parametrize(
    "pipeline, data",
    [
        (
            "imagenet",
            dict(interpolation="bicubic", crop_pct=0.8, crop_mode="center", mean=(0.2, 0.3, 0.4), std=(0.5, 0.6, 0.7)),
        ),
        ("cifar", dict(interpolation="bicubic", crop_pct=0.8, crop_mode="center")),  # which its test transform ignores
        ("none", dict()),
    ],
)
def test_the_exported_preprocessing_is_the_runs_evaluation_transform(pipeline, data, tmp_path):
    """Per pipeline, on a non-square image: timm's transform from the export's config.json is the run's own
    evaluation transform (harness.tasks.image.build_transform), tensor for tensor."""
    import numpy as np
    import timm
    from PIL import Image
    from timm.data import create_transform, resolve_data_config

    import models  # noqa: F401
    from harness.core.config import load_config
    from harness.core.rundir import RunDir
    from harness.engine.checkpoint import FORMAT, save_atomic
    from harness.tasks.image import build_transform

    cfg = load_config(
        PRESET,
        [
            f"aug.pipeline={pipeline!r}",
            "data.input_size=20",
            "model.width=8",
            *(f"data.{k}={v!r}" for k, v in data.items()),
        ],
    )
    run = RunDir.create("export-test", path=tmp_path / "run")
    run.write_config(cfg.pretty_text, cfg.to_dict())
    model = timm.create_model(cfg.model.name, width=8, num_classes=10)
    save_atomic({"format": FORMAT, "model": model.state_dict(), "ema": None}, run.path / "best.pth")
    run.finish("done")
    code, out, err = run_cli_here("export", run.path, "--out", tmp_path / "export")
    assert code == 0, err

    loaded = timm.create_model(f"local-dir:{tmp_path / 'export'}", pretrained=True)
    theirs = create_transform(**resolve_data_config({}, model=loaded))
    ours = build_transform(cfg.data, cfg.aug, is_training=False)
    image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (37, 29, 3), dtype=np.uint8))
    assert ours(image).shape == (3, 20, 20)
    assert torch.equal(theirs(image), ours(image))


def test_a_fine_tune_run_points_to_exporting_its_backbones_run(tmp_path):
    """A fine-tune (a detector around a timm backbone) does not fit timm's classifier layout: one line that says so
    and names the pretraining run to export instead."""
    from harness.core.config import load_config
    from harness.core.rundir import RunDir

    det = "configs/det/mask-rcnn_steps-resnet18-w32_fpn_500it_embedded-coco.py"
    pretrained = tmp_path / "runs" / "steps-digits" / "20261127-090000"
    for start, expected in (
        (pretrained / "best.pth", f"depthbench export {pretrained} --out DIR"),
        (None, "random initialisation"),
    ):
        cfg = load_config(det, [f"model.backbone.init_cfg.checkpoint={str(start) if start else None!r}"])
        run = RunDir.create("det", path=tmp_path / f"finetune-{bool(start)}", engine="mmengine", mode="finetune")
        run.write_config(cfg.pretty_text, cfg.to_dict())
        (run.path / "last.pth").write_bytes(b"an MMEngine checkpoint")
        run.finish("done")
        code, out, err = run_cli_here("export", run.path, "--out", tmp_path / "export")
        assert code == 2 and not out and len(err.strip().splitlines()) == 1, err
        assert "is a fine-tune (MaskRCNN with backbone steps_resnet18_w32)" in err and expected in err, err
        assert not (tmp_path / "export").exists()


def test_an_export_target_that_cannot_be_written_is_one_line(tmp_path):
    """Really unwritable, root included (os.access says yes to root; CI runs as root): refused before the run is
    read, a file created in the nearest existing folder decides."""
    run = tmp_path / "run"
    run.mkdir()  # no config.json: reading the run would be a different line
    (run / "meta.json").write_text('{"status": "done"}')
    (run / "best.pth").write_bytes(b"x")
    folder = tmp_path / "ro"
    folder.mkdir()
    with read_only(folder):
        for out in (folder / "export", folder / "new" / "export"):
            line = _one_line_here("export", run, "--out", out)
            assert f"--out {out}: cannot write in {folder}" in line, line
    assert list(folder.iterdir()) == []
    # a virtual file system: os.access says yes to root there, yet nothing can be created
    assert "--out /proc/depthbench-export: cannot write in /proc" in _one_line_here(
        "export", run, "--out", "/proc/depthbench-export"
    )


def test_an_export_target_that_is_a_link_is_one_line(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "meta.json").write_text('{"status": "done"}')
    (run / "best.pth").write_bytes(b"x")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "elsewhere")
    assert "--out" in _one_line_here("export", run, "--out", tmp_path / "out") and (tmp_path / "elsewhere").is_dir()
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert "is a symbolic link" in _one_line_here("export", run, "--out", tmp_path / "dangling")
    (run / "best.pth").unlink()
    (run / "best.pth").symlink_to(tmp_path / "other.pth")
    assert "best.pth is a symbolic link" in _one_line_here("export", run, "--out", tmp_path / "new")


# ------------------------------------------------------------------------------------------------ sharing weights
def test_export_writes_safetensors_that_timm_and_our_loader_read(tmp_path, cli):
    """Issue 25: `depthbench export RUN --out DIR` -> model.safetensors + config.json in timm's layout; the model is
    rebuilt from the run's config.json (data), never from its config.py."""
    import timm

    import models  # noqa: F401
    from harness.engine.checkpoint import load_weights

    env = {"OMP_NUM_THREADS": "1", "DEPTHBENCH_DATA": str(tmp_path / "data")}
    work = tmp_path / "run"
    trained = cli("train", PRESET, *TINY, "--work-dir", work, env=env)
    assert trained.returncode == 0, trained.stderr[-2000:]
    marker = tmp_path / "pwned"
    (work / "config.py").write_text(f"import os\nos.system('touch {marker}')\n")  # never executed
    out = cli("export", work, "--out", tmp_path / "export")
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in (tmp_path / "export").iterdir()) == ["config.json", "model.safetensors"]
    config = json.loads((tmp_path / "export" / "config.json").read_text())
    assert config["architecture"] == "horesnet10_rk4" and config["model_args"]["width"] == 8
    assert config["depthbench"]["checkpoint"] == "best.pth" and not marker.exists()

    reference = timm.create_model("horesnet10_rk4", width=8, num_classes=10)
    load_weights(reference, work / "best.pth")
    by_name = timm.create_model(f"local-dir:{tmp_path / 'export'}", pretrained=True)
    by_file = timm.create_model(
        "horesnet10_rk4",
        pretrained=True,
        width=8,
        num_classes=10,
        pretrained_cfg_overlay=dict(file=str(tmp_path / "export" / "model.safetensors")),
    )
    ours = timm.create_model("horesnet10_rk4", width=8, num_classes=10)
    load_weights(ours, tmp_path / "export")  # the one loader takes the folder's safetensors
    x = torch.randn(2, 3, 8, 8)
    expected = reference.eval()(x)
    for model in (by_name, by_file, ours):
        assert torch.equal(model.eval()(x), expected)
    again = cli("export", work, "--out", tmp_path / "export")
    assert again.returncode == 2 and "exists and is not an empty folder" in again.stderr
