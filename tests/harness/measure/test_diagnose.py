"""``depthbench diagnose shortcut-ratio`` (harness/commands/diagnose.py, harness/measure/diagnose.py): γ_l = σ_0/σ_l
per residual block."""

import csv
import json

import pytest
import timm
import torch
from torch import nn

import models  # noqa: F401
from harness import cli
from harness.measure.diagnose import load_checkpoint, shortcut_ratio
from harness.core.errors import DepthbenchError
from models.stepsnet import residual_blocks
from fixtures.files import refused as _refused
from fixtures.images import png_folder as _folder

TINY_STEPS = ((32, 1, 2), (48, 1, 1), (64, 1, 1))  # a 4-block Steps-DeiT at test size


pytestmark = pytest.mark.usefixtures("one_thread")


def tiny(name="steps_deit_small", **kwargs):
    kw = (
        dict(img_size=32, num_classes=10, steps=TINY_STEPS)
        if name.startswith("steps")
        else dict(img_size=32, num_classes=10, embed_dim=64, depth=4, num_heads=1)
    )
    return timm.create_model(name, **{**kw, **kwargs}).eval()


def test_one_value_per_block_and_gamma_0_is_1():
    torch.manual_seed(0)
    for model in (tiny(), tiny("deit_small_patch16_224")):
        records = shortcut_ratio(model, (torch.randn(2, 3, 32, 32),))
        assert len(records) == len(residual_blocks(model)) + 1 == 5
        assert records[0]["gamma"] == 1.0 and [r["block"] for r in records] == list(range(5))
        assert records[-1]["depth"] == 1.0 and all(r["gamma"] > 0 for r in records)


def test_blocks_with_zero_residual_branches_keep_gamma_at_1():
    # z_l = z_0 when every residual branch outputs 0, so σ_l = σ_0 exactly: independent of the code under test
    torch.manual_seed(0)
    model = tiny()
    for block in residual_blocks(model):
        for last_layer in (block.attn.proj, block.mlp.fc2):
            nn.init.zeros_(last_layer.weight)
            nn.init.zeros_(last_layer.bias)
    gammas = [r["gamma"] for r in shortcut_ratio(model, (torch.randn(2, 3, 32, 32),))]
    assert gammas == pytest.approx([1.0] * 5)


def test_steps_states_are_full_width():
    model = tiny()
    records = shortcut_ratio(model, (torch.randn(1, 3, 32, 32),))
    assert {r["width"] for r in records} == {64}  # the full width, not the step's 32/48
    assert [r.get("step_width") for r in records[1:]] == [32, 32, 48, 64]


def test_checkpoint_loading_and_one_line_errors(tmp_path):
    torch.manual_seed(0)
    source, target = tiny(), tiny()
    path = tmp_path / "ckpt.pth"
    torch.save({"model": source.state_dict()}, path)
    load_checkpoint(target, str(path))
    assert all(torch.equal(a, b) for a, b in zip(source.state_dict().values(), target.state_dict().values()))

    corrupt = tmp_path / "corrupt.pth"
    corrupt.write_bytes(b"this is not a checkpoint")
    with pytest.raises(DepthbenchError, match="not a readable PyTorch state dict") as info:
        load_checkpoint(target, str(corrupt))
    assert "\n" not in str(info.value)
    with pytest.raises(DepthbenchError, match="does not fit deit_small_patch16_224"):
        load_checkpoint(tiny("deit_small_patch16_224"), str(path))


@pytest.mark.tier("integration")
def test_cli_writes_run_directory_with_csv_and_plot(tmp_path, capsys):
    rc = cli.main(
        [
            "diagnose",
            "shortcut-ratio",
            "deit_tiny_patch16_224",
            "steps_deit_tiny",
            "--input-size",
            "32",
            "--batch-size",
            "2",
            "--out-dir",
            str(tmp_path),
            "--json",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["models"]["deit_tiny_patch16_224"]["blocks"] == 12 and out["models"]["steps_deit_tiny"]["blocks"] == 24
    run = tmp_path / "diagnose-shortcut-ratio"
    (run_dir,) = run.iterdir()
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "done" and meta["models"] == ["deit_tiny_patch16_224", "steps_deit_tiny"]
    rows = list(csv.DictReader(open(run_dir / "shortcut_ratio.csv")))
    assert len(rows) == (12 + 1) + (24 + 1)
    assert [float(r["gamma"]) for r in rows if r["block"] == "0"] == [1.0, 1.0]
    assert len((run_dir / "metrics.jsonl").read_text().splitlines()) == len(rows)
    assert (run_dir / "shortcut_ratio.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.tier("integration")
@pytest.mark.parametrize(
    "args, message",
    [
        (["steps_deit_smal"], "unknown model 'steps_deit_smal'; did you mean steps_deit_small"),
        (["steps_deit_tiny", "--checkpoint", "/nonexistent.pth"], "does not exist"),
        (["steps_deit_tiny", "deit_tiny_patch16_224", "--checkpoint", "-"], "one --checkpoint per model"),
        (["steps_deit_tiny", "--data", "/nonexistent_dir"], "no such directory"),
        (["steps_deit_tiny", "--device", "gpu0"], "not a torch device"),
    ],
)
def test_bad_input_is_one_line(args, message, capsys, tmp_path):
    rc = cli.main(["diagnose", "shortcut-ratio", *args, "--out-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "diagnose-shortcut-ratio").exists()  # failed before any work


@pytest.mark.tier("integration")
def test_image_folder_data(tmp_path, capsys):
    from PIL import Image

    for cls in ("a", "b"):
        (tmp_path / "data" / cls).mkdir(parents=True)
        Image.new("RGB", (40, 40), color=(10, 200, 30) if cls == "a" else (200, 20, 90)).save(
            tmp_path / "data" / cls / "x.png"
        )
    rc = cli.main(
        [
            "diagnose",
            "shortcut-ratio",
            "steps_deit_tiny",
            "--data",
            str(tmp_path / "data"),
            "--input-size",
            "32",
            "--batch-size",
            "2",
            "--out-dir",
            str(tmp_path / "runs"),
            "--json",
        ]
    )
    assert rc == 0 and json.loads(capsys.readouterr().out)["models"]["steps_deit_tiny"]["blocks"] == 24


@pytest.mark.tier("integration")
def test_a_model_trained_with_model_kwargs_is_rebuilt_from_its_config_or_model_kwargs(tmp_path, capsys):
    """The DeiT digits preset trains deit_tiny with img_size=16, patch_size=4, depth=4 and 10 classes: its
    checkpoint fits only that architecture, which --config (or --model-kwargs) rebuilds."""
    config = "configs/deit/deit-tiny-p4_1xb64-30e_digits.py"
    torch.manual_seed(0)
    trained = timm.create_model("deit_tiny_patch16_224", img_size=16, patch_size=4, depth=2, num_classes=10)
    torch.save({"model": trained.state_dict(), "ema": None}, tmp_path / "best.pth")
    common = ["--checkpoint", str(tmp_path / "best.pth"), "--batch-size", "2", "--out-dir", str(tmp_path), "--json"]
    assert cli.main(["diagnose", "shortcut-ratio", "--config", config, "model.depth=2", *common]) == 0
    assert json.loads(capsys.readouterr().out)["models"]["deit_tiny_patch16_224"]["blocks"] == 2
    kwargs = ["--model-kwargs", "img_size=16", "patch_size=4", "depth=2", "num_classes=10"]
    assert cli.main(["diagnose", "shortcut-ratio", "deit_tiny_patch16_224", *kwargs, *common]) == 0
    assert json.loads(capsys.readouterr().out)["models"]["deit_tiny_patch16_224"]["blocks"] == 2
    # the bare name builds the 224px ImageNet model: one line naming what does not fit, exit 2
    assert cli.main(["diagnose", "shortcut-ratio", "deit_tiny_patch16_224", *common]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "does not fit deit_tiny_patch16_224" in err
    assert "missing from the checkpoint: blocks.{2-11}." in err and "head.bias (checkpoint 10, model 1000)" in err


def test_diagnose_reads_an_image_folder_as_every_image_reader_does(tmp_path):
    """``diagnose --data FOLDER`` used torchvision's ImageFolder, which follows a link out of the folder."""
    import timm

    from harness.measure.diagnose import example_batch

    folder = _folder(tmp_path / "folder")
    (folder / "train" / "a" / "out").symlink_to(tmp_path)
    model = timm.create_model("resnet18", num_classes=2)
    _refused(lambda: example_batch(model, str(folder / "train"), 32, 2, 0, "cpu"), "symbolic link out of the data root")
