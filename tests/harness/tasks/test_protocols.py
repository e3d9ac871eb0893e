"""``depthbench eval`` protocols (harness/tasks/protocols.py): tiny folders in each data set's standard layout, the
200-class masking against timm's own label files, the mCE arithmetic by hand, multi-size TransNeXt inference in
both pool modes, the StepsNet analyses, CIFAR-100, and bad input."""

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision.transforms as T
from PIL import Image

import models  # noqa: F401
from harness.cli import main
from harness.core.errors import DepthbenchError

ROOT = Path(__file__).resolve().parents[3]
STEPS = f"{ROOT}/configs/demo/steps-deit-w64-d8_1xb64-8e_digits.py"  # steps_deit_tiny, 16 px, width 64
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def data_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


@pytest.fixture(autouse=True)
def _data_env(monkeypatch, data_cache):
    monkeypatch.setenv("DEPTHBENCH_DATA", str(data_cache))


def build(config, *overrides):
    from harness.engine.builders import build_model
    from harness.core.config import load_config

    torch.manual_seed(0)
    return build_model(load_config(config, list(overrides)), pretrained=False).eval()


def imagenet_model(tmp_path):
    """The Steps-DeiT demo model with a 1000-class head, its weights saved as a plain state dict."""
    model = build(STEPS, "data.num_classes=1000")
    path = tmp_path / "weights.pth"
    torch.save(model.state_dict(), path)
    return model, path


def fake_run(path):
    from harness.core.rundir import RunDir

    RunDir.create("eval", path=path)
    return path


def eval_rows(run):
    return [
        json.loads(line)
        for line in (run / "metrics.jsonl").read_text().splitlines()
        if json.loads(line)["kind"] == "eval_suite"
    ]


def images(n, size=20, seed=0):
    rng = np.random.RandomState(seed)
    return [Image.fromarray(rng.randint(0, 255, (size, size, 3), dtype=np.uint8)) for _ in range(n)]


def logits_of(model, pictures):
    """The model's logits on PIL images with the digits recipe's evaluation transform, written out here."""
    transform = T.Compose([T.Resize((16, 16)), T.ToTensor(), T.Normalize((0.5,) * 3, (0.5,) * 3)])
    with torch.no_grad():
        return model(torch.stack([transform(p) for p in pictures]))


def synsets():
    from timm.data import ImageNetInfo

    return ImageNetInfo("imagenet-1k").label_names()


def timm_subset(which):
    import pkgutil

    return pkgutil.get_data("timm.data", f"_info/imagenet_{which}_synsets.txt").decode().split()


# ----------------------------------------------------------------------------------------- arithmetic
def test_200_class_masking_matches_timms_indices():
    from harness.tasks.protocols import restrict_to_subset, subset_indices

    names = synsets()
    for which in ("a", "r"):
        indices = [names.index(s) for s in timm_subset(which)]
        assert len(indices) == 200 and subset_indices(f"imagenet-{which}") == indices
        logits = torch.randn(4, 1000)
        restricted = restrict_to_subset(logits, subset_indices(f"imagenet-{which}"))
        expected = torch.tensor(indices)[logits[:, indices].argmax(1)]
        assert torch.equal(restricted.argmax(1), expected)


def test_mce_arithmetic_by_hand():
    from harness.tasks.protocols import CORRUPTIONS, corruption_errors

    alexnet = {
        "gaussian_noise": 0.886428,
        "shot_noise": 0.894468,
        "impulse_noise": 0.922640,
        "defocus_blur": 0.819880,
        "glass_blur": 0.826268,
        "motion_blur": 0.785948,
        "zoom_blur": 0.798360,
        "snow": 0.866816,
        "frost": 0.826572,
        "fog": 0.819324,
        "brightness": 0.564592,
        "contrast": 0.853204,
        "elastic_transform": 0.646056,
        "pixelate": 0.717840,
        "jpeg_compression": 0.606500,
    }  # Hendrycks & Dietterich 2019, AlexNet errors
    errors = {(c, s): alexnet[c] for c in CORRUPTIONS for s in range(1, 6)}
    for s, e in zip(range(1, 6), (0.5, 0.6, 0.7, 0.8, 0.9)):
        errors[("gaussian_noise", s)] = e  # mean 0.7
    out = corruption_errors(errors, clean_error=0.43478)
    # CE_gauss = 0.7 / 0.886428 = 0.78968625; the other 14 are 1 -> mCE = 14.78968625 / 15
    assert out["CE/gaussian_noise"] == pytest.approx(0.78968625, abs=1e-7)
    assert out["mCE"] == pytest.approx(0.98597908, abs=1e-7)
    # relative: (0.7 - 0.43478) / (0.886428 - 0.43478) = 0.26522 / 0.451648 = 0.58722722; the others are 1 at
    # AlexNet's own clean error (100 - 56.522 % top-1)
    assert out["relative_mCE"] == pytest.approx(14.58722722 / 15, abs=1e-7)


def test_alexnet_clean_error_is_torchvisions_published_top1():
    """Relative mCE's E^AlexNet_clean: the torchvision AlexNet the ImageNet-C paper evaluated, as its weights'
    published metrics say (printed 43.5 % in Hendrycks & Dietterich 2019)."""
    import torchvision  # a dependency of timm

    from harness.tasks.protocols import ALEXNET_CLEAN_ERROR

    top1 = torchvision.models.AlexNet_Weights.IMAGENET1K_V1.meta["_metrics"]["ImageNet-1K"]["acc@1"]
    assert ALEXNET_CLEAN_ERROR == pytest.approx(1 - top1 / 100, abs=1e-9)
    assert round(100 * ALEXNET_CLEAN_ERROR, 1) == 43.5


# ----------------------------------------------------------------------------------------- folder protocols
def test_imagenet_a_r_sketch_v2_real_on_tiny_layouts(tmp_path, capsys):
    model, weights = imagenet_model(tmp_path)
    pics = images(2)
    logits = logits_of(model, pics)
    names = synsets()
    run = fake_run(tmp_path / "run")
    expected = {}
    for which in ("a", "r"):  # image 0 in the class the 200-way argmax picks, image 1 in another -> 50 %
        subset = timm_subset(which)
        root = tmp_path / f"imagenet-{which}"
        for s in subset:
            (root / s).mkdir(parents=True)
        idx = [names.index(s) for s in subset]
        best = subset[int(logits[0, idx].argmax())]
        other = next(s for s in subset if s != subset[int(logits[1, idx].argmax())])
        pics[0].save(root / best / "a.jpg", format="PNG")  # lossless under ImageNet-A's .jpg names
        pics[1].save(root / other / "b.jpg", format="PNG")
        expected[f"imagenet-{which}"] = (root, 50.0)
    for protocol, folder_of in (("imagenet-sketch", lambda i: names[i]), ("imagenet-v2", str)):
        root = tmp_path / protocol
        for i in range(1000):
            (root / folder_of(i)).mkdir(parents=True)
        pics[0].save(root / folder_of(int(logits[0].argmax())) / "a.jpeg", format="PNG")
        pics[1].save(root / folder_of((int(logits[1].argmax()) + 1) % 1000) / "b.jpeg", format="PNG")
        expected[protocol] = (root, 50.0)
    root = tmp_path / "val"
    root.mkdir()
    for i, p in enumerate(images(3)):
        p.save(root / f"ILSVRC2012_val_{i + 1:08d}.JPEG")
    real_logits = logits_of(model, [Image.open(root / f"ILSVRC2012_val_{i:08d}.JPEG") for i in (1, 2)])
    labels = [[int(real_logits[0].argmax())], [(int(real_logits[1].argmax()) + 1) % 1000], []]
    (tmp_path / "real.json").write_text(json.dumps(labels))
    expected["imagenet-real"] = (root, 50.0)
    for protocol, (root, top1) in expected.items():
        extra = ["--real-labels", str(tmp_path / "real.json")] if protocol == "imagenet-real" else []
        assert (
            main(
                [
                    "eval",
                    STEPS,
                    "data.num_classes=1000",
                    "--checkpoint",
                    str(weights),
                    "--dataset",
                    protocol,
                    "--data",
                    str(root),
                    "--out-run",
                    str(run),
                    *extra,
                ]
            )
            == 0
        )
        rows = {r["metric"]: r for r in eval_rows(run) if r["protocol"] == protocol}
        assert rows["top1"]["value"] == pytest.approx(top1), protocol
        assert rows["top1"]["images"] == 2 and rows["top1"]["input_size"] == 16
    assert "imagenet-real" in capsys.readouterr().out


def test_imagenet_c_generated_from_a_folder_gives_an_mce_table(tmp_path):
    from harness.tasks.protocols import CORRUPTIONS

    clean = tmp_path / "clean"
    for cls, pic in zip(("0", "1"), images(2, size=16)):
        (clean / cls).mkdir(parents=True)
        pic.save(clean / cls / "x.png")
    model = build(STEPS)
    weights = tmp_path / "w.pth"
    torch.save(model.state_dict(), weights)
    run = fake_run(tmp_path / "run")
    generated = tmp_path / "clean-c"
    assert (
        main(
            [
                "eval",
                STEPS,
                "--checkpoint",
                str(weights),
                "--dataset",
                "imagenet-c",
                "--corrupt-from",
                str(clean),
                "--data",
                str(generated),
                "--out-run",
                str(run),
                "--out",
                str(tmp_path / "c.csv"),
            ]
        )
        == 0
    )
    for c in CORRUPTIONS:
        for s in range(1, 6):
            out = generated / c / str(s)
            assert sorted(p.name for p in out.iterdir()) == ["0", "1"] and (out / "0" / "x.png").is_file()
    noisy = np.asarray(Image.open(generated / "gaussian_noise" / "5" / "0" / "x.png"))
    assert noisy.shape == (32, 32, 3) and not np.array_equal(
        noisy, np.asarray(Image.open(clean / "0" / "x.png").resize((32, 32)))
    )
    rows = {r["metric"]: r["value"] for r in eval_rows(run)}
    assert all(rows[f"error/{c}"] in (0.0, 50.0, 100.0) or 0 <= rows[f"error/{c}"] <= 100 for c in CORRUPTIONS)
    alexnet_fog, alexnet_gauss = 0.819324, 0.886428
    assert rows["CE/fog"] == pytest.approx(rows["error/fog"] / alexnet_fog)
    assert rows["CE/gaussian_noise"] == pytest.approx(rows["error/gaussian_noise"] / alexnet_gauss)
    assert rows["mCE"] == pytest.approx(np.mean([rows[f"CE/{c}"] for c in CORRUPTIONS]))
    assert "relative_mCE" in rows and "clean_error" in rows
    import pandas as pd

    table = pd.read_csv(tmp_path / "c.csv")
    assert set(table["metric"]) == set(rows) and (table["protocol"] == "imagenet-c").all()


# ----------------------------------------------------------------------------------------- multi-size, pool modes
def test_transnext_multi_size_in_both_pool_modes(tmp_path, capsys):
    config = tmp_path / "transnext_digits.py"
    config.write_text(
        f"_base_ = ['{ROOT}/configs/deit/deit-tiny-p4_1xb64-30e_digits.py']\n"
        "model = dict(_delete_=True, name='transnext_micro', depths=(1, 1, 1, 1), "
        "embed_dims=(16, 32, 64, 128), num_heads=(1, 2, 4, 8), img_size=32)\n"
        "data = dict(input_size=32, val_subset=20)\n"
    )
    model = build(str(config))
    weights = tmp_path / "w.pth"
    torch.save(model.state_dict(), weights)
    run = fake_run(tmp_path / "run")
    assert (
        main(
            [
                "eval",
                str(config),
                "--checkpoint",
                str(weights),
                "--input-size",
                "40",
                "50",
                "--pool-mode",
                "normal",
                "linear",
                "--out-run",
                str(run),
            ]
        )
        == 0
    )
    rows = [r for r in eval_rows(run) if r["metric"] == "top1"]
    assert [(r["pool_mode"], r["input_size"]) for r in rows] == [
        ("normal", 40),
        ("normal", 50),
        ("linear", 40),
        ("linear", 50),
    ]
    assert all(0 <= r["value"] <= 100 and r["images"] == 20 for r in rows)
    assert "linear" in capsys.readouterr().out
    # the two modes are the same weights: equal at the training size, different pools at 50 px (7x7 vs fixed 1x1)
    normal, linear = (
        build(str(config), f"+model.pool_mode={m}", "+model.pretrain_size=32") for m in ("normal", "linear")
    )
    linear.load_state_dict(normal.state_dict())
    x32, x50 = torch.randn(1, 3, 32, 32), torch.randn(1, 3, 50, 50)
    with torch.no_grad():
        assert torch.allclose(normal(x32), linear(x32), atol=1e-5)
        assert not torch.allclose(normal(x50), linear(x50), atol=1e-4)


# ----------------------------------------------------------------------------------------- StepsNet analyses
def test_the_plain_evaluation_is_recorded_like_the_suite(tmp_path, capsys):
    model = build(STEPS, "data.val_subset=12")
    run = fake_run(tmp_path / "run")
    torch.save(model.state_dict(), run / "w.pth")
    assert main(["eval", STEPS, "data.val_subset=12", "--checkpoint", str(run / "w.pth")]) == 0  # the plain path
    assert "(12 images)" in capsys.readouterr().out
    plain = {r["metric"]: r for r in eval_rows(run)}
    assert set(plain) == {"top1", "top5", "loss"}
    assert plain["top1"]["dataset"] == "val" and plain["top1"]["input_size"] == 16
    assert plain["top1"]["analysis"] == "none" and plain["top1"]["model_overrides"] == {}
    other = fake_run(tmp_path / "other")
    assert (
        main(
            [
                "eval",
                STEPS,
                "data.val_subset=12",
                "--checkpoint",
                str(run / "w.pth"),
                "--analysis",
                "none",
                "--out-run",
                str(other),
            ]
        )
        == 0
    )  # the suite path, same weights and images
    suite = {r["metric"]: r["value"] for r in eval_rows(other)}
    assert suite["top1"] == pytest.approx(plain["top1"]["value"]) and suite["top5"] == pytest.approx(
        plain["top5"]["value"]
    )


def test_stepsnet_analyses_change_exactly_what_they_should(tmp_path):
    from models.stepsnet import stepsnet_analysis, stepsnet_modules

    model = build(STEPS, "data.val_subset=12")
    weights = tmp_path / "w.pth"
    torch.save(model.state_dict(), weights)
    run = fake_run(tmp_path / "run")
    assert (
        main(
            [
                "eval",
                STEPS,
                "data.val_subset=12",
                "--checkpoint",
                str(weights),
                "--analysis",
                "none",
                "mask_first=0",
                "mask_first=8",
                "drop_last=2:1",
                "--out-run",
                str(run),
            ]
        )
        == 0
    )
    rows = [r for r in eval_rows(run) if r["metric"] == "top1"]
    assert [r["analysis"] for r in rows] == ["none", "mask_first=0", "mask_first=8", "drop_last=2:1"]
    assert rows[0]["value"] == rows[1]["value"]
    net = stepsnet_modules(model)[0]
    seen = []
    net.steps[0][0].register_forward_pre_hook(lambda m, a: seen.append(a[0].clone()))
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        plain = model(x)
        with stepsnet_analysis(model, mask_first=0):
            assert torch.equal(model(x), plain)
        with stepsnet_analysis(model, mask_first=8):
            masked = model(x)
        with stepsnet_analysis(model, mask_last=8):
            fast_masked = model(x)
    # mask_first zeroes exactly the first 8 channels of step 1's input; mask_last leaves step 1's input alone
    assert torch.count_nonzero(seen[2][..., :8]) == 0 and torch.equal(seen[2][..., 8:], seen[0][..., 8:])
    assert torch.equal(seen[3], seen[0]) and not torch.equal(masked, plain) and not torch.equal(fast_masked, plain)


# ----------------------------------------------------------------------------------------- CIFAR-100
def test_cifar100_pickle_layout(tmp_path):
    from harness.core.config import load_config
    from harness.core.errors import DataError
    from harness.engine.data import build_dataset, check_data

    cfg = load_config(
        STEPS, ["data.type=cifar100", f"data.root={tmp_path / 'c100'}", "data.num_classes=100", "data.val_split=test"]
    )
    with pytest.raises(DataError, match="CIFAR-100's python-pickle files"):
        check_data(cfg.data)
    folder = tmp_path / "c100" / "cifar-100-python"
    folder.mkdir(parents=True)
    rng = np.random.RandomState(0)
    for name, n in (("train", 6), ("test", 4)):
        batch = {
            "data": rng.randint(0, 255, (n, 3072), dtype=np.uint8),
            "fine_labels": [99, 3, 7, 50, 1, 2][:n],
            "coarse_labels": [0] * n,
        }
        (folder / name).write_bytes(pickle.dumps(batch))
    check_data(cfg.data)
    test = build_dataset(cfg.data, cfg.aug, "test", is_training=False)
    assert len(test) == 4 and [test[i][1] for i in range(4)] == [99, 3, 7, 50]
    assert len(build_dataset(cfg.data, cfg.aug, "train", is_training=True)) == 6


# ----------------------------------------------------------------------------------------- bad input
def test_bad_input_is_one_line_before_any_model_is_built(tmp_path, capsys, monkeypatch):
    import harness.engine.builders

    monkeypatch.setattr(harness.engine.builders, "build_model", lambda *a, **k: pytest.fail("model built"))
    weights = tmp_path / "w.pth"
    weights.write_bytes(b"")
    ten_synsets = tmp_path / "a"
    for s in timm_subset("a")[:10]:
        (ten_synsets / s).mkdir(parents=True)
    other = fake_run(tmp_path / "other")
    (other / "config.py").write_text("model = dict(name='horesnet10_euler')\n")
    cases = [
        (["--dataset", "imagenet-a", "--data", str(tmp_path / "nope"), "data.num_classes=1000"], "does not exist"),
        (["--dataset", "imagenet-a", "--data", str(ten_synsets), "data.num_classes=1000"], "200 class folders"),
        (["--dataset", "imagenet-r", "--data", str(ten_synsets)], "model has 10 classes"),
        (["--dataset", "imagenet-sketch"], "needs --data"),
        (["--analysis", "mask_first=x"], "expected none or comma-joined"),
        (["--pool-mode", "linear"], "TransNeXt's inference mode"),
        (["--input-size", "0"], "positive image side"),
        (["--analysis", "none", "--checkpoint", str(tmp_path / "missing.pth")], "no such file or run directory"),
        (["--input-size", "16", "24"], "does not take data.input_size=24"),  # Steps-DeiT's fixed 16 px
    ]
    for extra, message in cases:
        assert main(["eval", STEPS, "--checkpoint", str(weights), *extra]) == 2, extra
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, (extra, err)
    assert main(["eval", STEPS, "--checkpoint", str(other), "--analysis", "none"]) == 2
    err = capsys.readouterr().err.strip()
    assert "is a horesnet10_euler run but the config builds steps_deit_tiny" in err
    with pytest.raises(DepthbenchError, match="ImageNet-C's layout"):
        from harness.tasks.protocols import check_dataset

        check_dataset("imagenet-c", tmp_path, 10)
