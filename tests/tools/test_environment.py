"""The environment `make setup` builds: OpenMMLab with compiled ops, DeepSpeed on CPU, the CLI."""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch
import torchvision

INSTALL_HINT = "run `make setup` (it builds mmcv 2.1.0 with compiled ops and installs mmdet/mmseg)"


def _import(name):
    try:
        return __import__(name, fromlist=["_"])
    except ImportError as e:
        pytest.fail(f"cannot import {name} ({e}); {INSTALL_HINT}")


def test_openmmlab_stack_imports_with_compiled_ops():
    mmcv = _import("mmcv")
    assert mmcv.__version__ == "2.1.0", f"mmcv {mmcv.__version__} installed, mmdet 3.3.0 needs 2.1.0; {INSTALL_HINT}"
    _import("mmcv.ops")
    from mmcv.utils import ext_loader

    ext = ext_loader.load_ext("_ext", ["nms", "roi_align_forward"])  # raises if the C++ ops were not built
    assert hasattr(ext, "nms")
    assert _import("mmdet").__version__ == "3.3.0"
    assert _import("mmseg").__version__ == "1.2.2"
    _import("mmseg.utils")  # needs ftfy/regex, which mmseg does not declare


def _random_boxes(n, size=100.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * size
    wh = torch.rand(n, 2, generator=g) * size / 3 + 1
    return torch.cat([xy, xy + wh], dim=1), torch.rand(n, generator=g)


@pytest.mark.parametrize("iou", [0.3, 0.5, 0.7])
def test_mmcv_nms_matches_torchvision(iou):
    from mmcv.ops import nms

    boxes, scores = _random_boxes(300)
    _, keep = nms(boxes, scores, iou_threshold=iou)
    expected = torchvision.ops.nms(boxes, scores, iou)
    assert len(expected) > 10
    assert torch.equal(keep.sort().values, expected.sort().values)


def test_mmcv_roi_align_matches_torchvision():
    from mmcv.ops import RoIAlign

    g = torch.Generator().manual_seed(1)
    features = torch.randn(2, 8, 32, 32, generator=g)
    boxes, _ = _random_boxes(40, size=100.0, seed=2)
    rois = torch.cat([torch.randint(0, 2, (40, 1), generator=g).float(), boxes], dim=1)
    for aligned in (True, False):
        ours = RoIAlign((7, 7), spatial_scale=0.25, sampling_ratio=2, aligned=aligned)(features, rois)
        ref = torchvision.ops.roi_align(features, rois, (7, 7), spatial_scale=0.25, sampling_ratio=2, aligned=aligned)
        assert ours.abs().sum() > 0
        torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.tier("integration")
def test_deepspeed_initialises_and_steps_on_cpu(tmp_path):
    script = textwrap.dedent("""
        import os, torch, deepspeed
        deepspeed.init_distributed(dist_backend="gloo")
        model = torch.nn.Linear(8, 2)
        config = {"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 1},
                  "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "torch_adam": True}}}
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
        before = model.weight.detach().clone()
        loss = engine(torch.randn(4, 8)).pow(2).mean()
        engine.backward(loss)
        engine.step()
        assert not torch.equal(before, engine.module.weight.detach()), "the step did not change the weights"
        print("DEEPSPEED_OK", deepspeed.get_accelerator().device_name(), torch.distributed.get_backend())
    """)
    env = {
        **os.environ,
        "DS_ACCELERATOR": "cpu",
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(_free_port()),
    }
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path
    )
    assert "DEEPSPEED_OK cpu gloo" in out.stdout, out.stdout[-2000:] + out.stderr[-3000:]


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_depthbench_env_reports_mmcv_ops_loaded(cli):
    out = cli("env", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["mmcv_ops"]["loaded"] is True
    assert report["packages"]["torch"].startswith("2.14")
    assert report["packages"]["mmdet"] == "3.3.0"
    human = cli("env")
    assert re.search(r"^mmcv ops +loaded", human.stdout, re.M), human.stdout
    # one aligned column, wide enough for the longest name (it used to print "mmsegmentation1.2.2")
    assert re.search(r"^mmsegmentation +1\.2\.2$", human.stdout, re.M), human.stdout
    starts = {len(m.group(1)) for m in re.finditer(r"^(\S+(?: \S+)? +)\S", human.stdout, re.M)}
    assert len(starts) == 1, human.stdout


def test_depthbench_models_json_lists_baselines_with_counts(cli):
    out = cli("models", "--json", "--family", "baseline")
    assert out.returncode == 0, out.stderr
    entries = {e["name"]: e for e in json.loads(out.stdout)}
    # parameter counts of the timm baselines as the papers print them (StepsNet Table 1), in millions
    assert abs(entries["resnet50"]["params_m"] - 25.6) < 0.05
    assert abs(entries["deit_small_patch16_224"]["flops_g"] - 4.6) < 0.05
    assert abs(entries["swin_tiny_patch4_window7_224"]["flops_g"] - 4.5) < 0.05
    no_match = cli("models", "no_such_model_*")  # a pattern that matches nothing is bad input: one line, exit 2
    assert no_match.returncode == 2 and len(no_match.stderr.strip().splitlines()) == 1, no_match.stderr
