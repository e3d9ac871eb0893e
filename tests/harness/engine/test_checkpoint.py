"""The one weights loader (harness.checkpoint.load_weights) and the one atomic writer (harness.core.rundir); a kill
during a checkpoint write never leaves ``last.pth`` unreadable; DeepSpeed's optimizer state read back weights-only."""

import io
import os
import re
import subprocess
import sys
import time

import pytest
import timm
import torch

import models  # noqa: F401
from harness.engine.checkpoint import FORMAT, compress_keys, load_weights, read_checkpoint, save_atomic
from harness.core.errors import DepthbenchError
from harness.core.files import BadFile, atomic_write

from fixtures.training import ROOT

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny(**kwargs):
    return timm.create_model("horesnet10_euler", **{"num_classes": 10, "width": 8, **kwargs})


def trained(seed):
    torch.manual_seed(seed)
    model = tiny()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p))
    return model


def same(a, b):
    return a.state_dict().keys() == b.state_dict().keys() and all(
        torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values())
    )


def expand(pattern: str) -> set[str]:
    """Inverse of the ``{0-2,5}`` notation, written here independently of the code under test."""
    match = re.search(r"\{([^}]*)\}", pattern)
    if not match:
        return {pattern}
    values = []
    for span in match.group(1).split(","):
        lo, _, hi = span.partition("-")
        values += range(int(lo), int(hi or lo) + 1)
    return set().union(*(expand(pattern[: match.start()] + str(v) + pattern[match.end() :]) for v in values))


def listed_keys(summary_part: str) -> set[str]:
    without_shapes = re.sub(r" \([^)]*\)", "", summary_part)
    return set().union(*(expand(p) for p in re.split(r", (?![^{]*\})", without_shapes)))


def test_depthbench_last_and_best_model_and_ema(tmp_path):
    model, ema = trained(0), trained(1)
    last = {
        "format": FORMAT,
        "epoch": 3,
        "model": model.state_dict(),
        "ema": ema.state_dict(),
        "optimizer": {"state": {}, "param_groups": []},
    }
    torch.save(last, tmp_path / "last.pth")
    torch.save({"model": ema.state_dict(), "ema": None, "epoch": 2}, tmp_path / "best.pth")

    target = tiny()
    report = load_weights(target, tmp_path / "last.pth")
    assert same(target, model) and report.complete and report.loaded == len(model.state_dict())
    load_weights(target, tmp_path / "last.pth", ema=True)
    assert same(target, ema)
    load_weights(target, tmp_path)  # a run directory: best.pth first
    assert same(target, ema)
    with pytest.raises(DepthbenchError, match="holds no EMA weights .*ema.enable=False"):
        load_weights(target, tmp_path / "best.pth", ema=True)


def test_timm_deit_mmengine_ddp_and_deepspeed_layouts_and_in_memory(tmp_path):
    model, ema = trained(0), trained(1)
    state = model.state_dict()
    ddp = {f"module.{k}": v for k, v in state.items()}
    compiled = {f"_orig_mod.module.{k}": v for k, v in state.items()}
    layouts = {
        "timm": {"state_dict": state, "state_dict_ema": ema.state_dict(), "epoch": 1},
        "deit": {"model": ddp, "model_ema": ema.state_dict()},
        "mmengine": {"meta": {"epoch": 1}, "state_dict": state},
        "deepspeed": {"module": ddp, "global_steps": 5},
        "bare ddp": ddp,
        "compiled ddp": compiled,
    }
    for name, checkpoint in layouts.items():
        path = tmp_path / f"{name}.pth"
        torch.save(checkpoint, path)
        target = tiny()
        assert load_weights(target, path).complete and same(target, model), name
        target = tiny()
        load_weights(target, checkpoint)
        assert same(target, model), name
    target = tiny()
    load_weights(target, tmp_path / "timm.pth", ema=True)
    assert same(target, ema)


def test_the_family_filter_converts_an_official_layout():
    # official HO-ResNet names each block's layers conv1..conv{2s}, ours stages.{s-1}.conv{1|2} (models/horesnet.py)
    model = trained(0)
    official = {}
    for key, value in model.state_dict().items():
        m = re.match(r"^(layer\d+\.\d+\.)stages\.(\d+)\.(conv|bn)([12])\.(.+)$", key)
        official[f"{m[1]}{m[3]}{2 * int(m[2]) + int(m[4])}.{m[5]}" if m else key] = value
    assert official.keys() != model.state_dict().keys()
    target = tiny()
    load_weights(target, {"model": official})
    assert same(target, model)


def test_a_wrong_architecture_lists_every_key_in_one_line(tmp_path):
    torch.save({"model": tiny(width=16).state_dict()}, tmp_path / "wide.pth")
    target = tiny()
    with pytest.raises(DepthbenchError) as info:
        load_weights(target, tmp_path / "wide.pth")
    message = str(info.value)
    assert "\n" not in message and "wide.pth does not fit horesnet10_euler" in message
    ours, theirs = target.state_dict(), tiny(width=16).state_dict()
    expected = {k for k in ours if ours[k].shape != theirs[k].shape}
    part = re.search(r"(\d+) of another shape: (.*?)(;|$)", message)
    assert int(part[1]) == len(expected) > 20
    assert listed_keys(part[2]) == expected  # every mismatched key, none cut off
    assert "(checkpoint 16x3x3x3, model 8x3x3x3)" in message

    deeper = timm.create_model("horesnet18_euler", num_classes=10, width=8).state_dict()
    with pytest.raises(DepthbenchError) as info:
        load_weights(tiny(), deeper)
    part = re.search(r"(\d+) unexpected \(not in the model\): (.*?)(;|$)", str(info.value))
    assert listed_keys(part[2]) == set(deeper) - set(ours)


def test_classifier_may_differ_when_asked_and_strict_false_reports(tmp_path):
    source = trained(0)
    state = source.state_dict()
    imagenet = {
        **state,
        "linear.weight": torch.zeros(1000, state["linear.weight"].shape[1]),
        "linear.bias": torch.zeros(1000),
    }
    with pytest.raises(DepthbenchError, match=r"linear\.weight \(checkpoint 1000x8, model 10x8\), linear\.bias "):
        load_weights(tiny(), imagenet)
    target = tiny()
    head = target.linear.weight.clone()
    report = load_weights(target, imagenet, ignore_classifier=True)
    assert report.complete and report.excused == ["linear.bias", "linear.weight"]
    assert torch.equal(target.linear.weight, head) and torch.equal(target.conv1.weight, source.conv1.weight)

    partial = {k: v for k, v in state.items() if not k.startswith("layer1.1.")}
    target = tiny()
    report = load_weights(target, partial, strict=False)
    # torch's BatchNorm tolerates a missing num_batches_tracked (older checkpoints have none)
    assert (
        set(report.missing)
        == {k for k in state if k.startswith("layer1.1.") and not k.endswith("num_batches_tracked")}
        != set()
    )
    assert report.loaded == len(partial) and "missing from the checkpoint: layer1.1." in report.summary()


def test_corrupt_truncated_foreign_and_unsafe_files_are_one_line_and_run_nothing(tmp_path):
    good = tmp_path / "good.pth"
    torch.save({"model": tiny().state_dict()}, good)
    (tmp_path / "corrupt.pth").write_bytes(b"this is not a checkpoint")
    (tmp_path / "torn.pth").write_bytes(good.read_bytes()[:1000])
    torch.save([1, 2, 3], tmp_path / "list.pth")
    torch.save({"epoch": 3, "note": "no weights"}, tmp_path / "foreign.pth")
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            import os

            return os.system, (f"touch {marker}",)

    torch.save({"model": tiny().state_dict(), "payload": Evil()}, tmp_path / "evil.pth")
    expected = {
        "corrupt.pth": "not a readable PyTorch state dict",
        "torn.pth": "not a readable PyTorch state dict",
        "list.pth": "holds a list",
        "foreign.pth": "holds no weights",
        "evil.pth": "pickles Python objects that a weights-only load refuses",
        "missing.pth": "no such",
    }
    for name, text in expected.items():
        with pytest.raises(DepthbenchError) as info:
            load_weights(tiny(), tmp_path / name)
        assert text in str(info.value) and name in str(info.value) and "\n" not in str(info.value), name
    assert not marker.exists()
    with pytest.raises(DepthbenchError, match="without best.pth or last.pth"):
        load_weights(tiny(), tmp_path)
    assert read_checkpoint(io.BytesIO(good.read_bytes()))["model"].keys() == tiny().state_dict().keys()


def test_compress_keys_is_lossless():
    keys = [f"blocks.{i}.attn.{p}.weight" for i in (0, 1, 2, 5) for p in ("qkv", "proj")] + [
        "head.weight",
        "layer1.10.x",
    ]
    text = compress_keys(keys)
    assert "blocks.{0-2,5}.attn.proj.weight" in text
    assert set().union(*(expand(p) for p in text.split(", "))) == set(keys)


def test_one_atomic_writer_for_text_bytes_and_checkpoints(tmp_path):
    atomic_write(tmp_path / "a.txt", "text")
    atomic_write(tmp_path / "b.bin", b"\x00\x01")
    save_atomic({"w": torch.ones(2)}, tmp_path / "c.pth")
    assert (tmp_path / "a.txt").read_text() == "text" and (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert torch.equal(torch.load(tmp_path / "c.pth", weights_only=True)["w"], torch.ones(2))

    def fails(fh):
        fh.write(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "a.txt", fails)
    assert (tmp_path / "a.txt").read_text() == "text"  # the old file survives, no temporary left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.bin", "c.pth", "c.pth.sha256"]


def test_a_checkpoint_of_another_architecture_names_both_models_in_a_short_line(tmp_path):
    """Issue 58 item 6: weights from a run of another architecture (fine-tuning from the wrong run) are one short
    line naming the run's model (its config.json) and the one the config builds, with counts and the first keys --
    not the whole key list; the training resume and downstream's pretrained loading share the loader."""
    import json

    run = tmp_path / "run"
    run.mkdir()
    (run / "meta.json").write_text(json.dumps({"status": "done", "experiment": "x"}))
    (run / "config.json").write_text(json.dumps({"model": {"name": "horesnet18_euler", "width": 8}}))
    save_atomic(
        {"model": timm.create_model("horesnet18_euler", num_classes=10, width=8).state_dict()}, run / "best.pth"
    )
    with pytest.raises(DepthbenchError) as info:
        load_weights(tiny(), run / "best.pth")
    message = str(info.value)
    assert "\n" not in message and len(message) < 700, message
    assert "this checkpoint is from a run of horesnet18_euler" in message
    assert "the config builds horesnet10_euler" in message
    unexpected = re.search(r"(\d+) unexpected \(e\.g\. ([^)]*)\)", message)
    assert int(unexpected[1]) > 3 and unexpected[2].count(", ") == 3 and unexpected[2].endswith("...")


def test_resume_auto_never_follows_a_last_pth_link_to_another_run(tmp_path):
    import torch

    from harness.engine.checkpoint import find_resume, save_atomic

    other = tmp_path / "other"
    other.mkdir()
    save_atomic({"w": torch.ones(1)}, other / "last.pth")
    run = tmp_path / "run"
    run.mkdir()
    (run / "meta.json").write_text('{"status": "running"}')
    (run / "last.pth").symlink_to(other / "last.pth")
    with pytest.raises(BadFile, match="last.pth.* is a symbolic link"):
        find_resume("auto", run)
    (run / "last.pth").unlink()
    assert find_resume("auto", run) is None
    save_atomic({"w": torch.ones(1)}, run / "last.pth")
    assert find_resume("auto", run) == run / "last.pth"


# ------------------------------------------------------------------------------------------------ checkpoints
def test_a_flipped_byte_in_a_checkpoint_is_found(tmp_path):
    from harness.engine.checkpoint import load_weights, read_checkpoint, save_atomic

    model = torch.nn.Linear(4, 3)
    path = tmp_path / "best.pth"
    save_atomic({"model": model.state_dict()}, path)
    assert (tmp_path / "best.pth.sha256").read_text().split()[1] == "best.pth"
    load_weights(torch.nn.Linear(4, 3), path)  # whole: loads
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 8] = bytes(8)  # eight zeroed bytes inside the tensor data still unpickle fine
    path.write_bytes(bytes(data))
    with pytest.raises(DepthbenchError, match="best.pth does not match its checksum"):
        read_checkpoint(path)


def test_a_full_disk_while_writing_a_checkpoint_is_one_line_and_keeps_the_old_one(tmp_path, monkeypatch):
    import errno

    from harness.engine import checkpoint

    path = tmp_path / "last.pth"
    checkpoint.save_atomic({"w": torch.ones(2)}, path)

    def full(fh):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint.torch, "save", lambda obj, fh: full(fh))
    with pytest.raises(DepthbenchError, match="cannot write the checkpoint .*No space left on device"):
        checkpoint.save_atomic({"w": torch.zeros(2)}, path)
    monkeypatch.undo()
    assert torch.equal(checkpoint.read_checkpoint(path)["w"], torch.ones(2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pth", "last.pth.sha256"]


def test_deepspeed_state_goes_to_the_cpu_detached_and_refuses_what_a_resume_cannot_read(tmp_path):
    """checkpoint.to_cpu (what every rank sends rank 0 of its ZeRO state): tensors detached on the CPU, DeepSpeed's
    allow-listed objects as they are -- an fp16 DynamicLossScaler saved and read back weights-only -- and any other
    object refused at the save in one line naming its class (a resume days later could not unpickle it)."""
    from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum

    from harness.engine.checkpoint import to_cpu

    partition = torch.ones(3, requires_grad=True) * 2  # a non-leaf, as ZeRO's fp32 partitions on a GPU
    state = {
        "loss_scaler": DynamicLossScaler(
            init_scale=2.0**16,
            scale_window=1000,
            min_scale=1,
            delayed_shift=2,
            consecutive_hysteresis=False,
            dtype=torch.float16,
        ),
        "zero_stage": ZeroStageEnum.gradients,
        "partition": [partition],
        "shape": torch.Size([3]),
        "dtype": torch.float16,
    }
    sent = to_cpu(state)
    assert not sent["partition"][0].requires_grad and sent["partition"][0].grad_fn is None
    save_atomic({"optimizer": sent}, tmp_path / "last.pth")
    back = read_checkpoint(tmp_path / "last.pth")["optimizer"]
    assert isinstance(back["loss_scaler"], DynamicLossScaler) and back["loss_scaler"].cur_scale == 2.0**16
    assert back["zero_stage"] is ZeroStageEnum.gradients and back["shape"] == torch.Size([3])

    class NewInDeepSpeed:  # a class a later DeepSpeed might put in its state
        pass

    with pytest.raises(DepthbenchError, match=r"holds a .*NewInDeepSpeed, which a weights-only resume cannot") as e:
        to_cpu({"partitions": [{"new": NewInDeepSpeed()}]})
    assert "\n" not in str(e.value)


WRITER = """
import sys, torch
from harness.engine.checkpoint import save_atomic
version = 0
while True:
    version += 1
    save_atomic({"version": version, "data": torch.full((8_000_000,), float(version))}, sys.argv[1])
    print(version, flush=True)
"""


@pytest.mark.slow
@pytest.mark.tier("integration")
def test_kill_during_checkpoint_write_never_leaves_an_unreadable_last_pth(tmp_path):
    from harness.engine.checkpoint import read_checkpoint, remove_stale_temporaries

    path = tmp_path / "last.pth"
    for trial in range(3):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ, OMP_NUM_THREADS="1"),
        )
        assert writer.stdout.readline().strip()  # one complete checkpoint exists
        start = time.monotonic()
        while not list(tmp_path.glob(".last.pth.tmp-*")):  # the next write is under way
            assert time.monotonic() - start < 60
        writer.kill()
        writer.wait()
        assert list(tmp_path.glob(".last.pth.tmp-*")), "the kill did not land during a write"
        checkpoint = read_checkpoint(path)  # whole, and its checksum agrees whenever the kill landed
        assert checkpoint["version"] >= 1 and torch.all(checkpoint["data"] == checkpoint["version"])
        remove_stale_temporaries(tmp_path)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pth", "last.pth.sha256"]


@pytest.mark.slow
@pytest.mark.tier("integration")
def test_deepspeed_optimizer_state_loads_weights_only_with_exactly_its_own_classes(tmp_path):
    """DeepSpeed's state objects are saved as they are and read back by torch's weights-only allow-list; any other
    class -- DeepSpeed's own included -- is refused in one line, and a file without them never imports DeepSpeed."""
    from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig, ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    from harness.core.errors import DepthbenchError
    from harness.engine.checkpoint import read_checkpoint, save_atomic

    scaler = DynamicLossScaler(2.0**16, 1000, 1.0, delayed_shift=2, consecutive_hysteresis=False)
    scaler.cur_iter = 7
    state = {
        "zero_stage": ZeroStageEnum.gradients,
        "loss_scaler": scaler,
        "map": {"w": fragment_address(numel=4, start=2)},
        "t": [torch.ones(2)],
        "pair": (1, "a"),
    }
    save_atomic({"optimizer": state}, tmp_path / "ds.pth")
    back = read_checkpoint(tmp_path / "ds.pth")["optimizer"]
    assert back["zero_stage"] is ZeroStageEnum.gradients and back["map"]["w"] == fragment_address(numel=4, start=2)
    assert type(back["loss_scaler"]) is DynamicLossScaler and vars(back["loss_scaler"]) == vars(scaler)
    assert torch.equal(back["t"][0], torch.ones(2)) and back["pair"] == (1, "a")

    torch.save({"optimizer": {"config": DeepSpeedZeroConfig()}}, tmp_path / "other.pth")
    with pytest.raises(DepthbenchError, match="weights-only load refuses: deepspeed.runtime.zero.config"):
        read_checkpoint(tmp_path / "other.pth")

    torch.save({"model": {"w": torch.ones(1)}}, tmp_path / "plain.pth")
    probe = "import sys; from harness.engine.checkpoint import read_checkpoint as r; r(sys.argv[1]); "
    probe += "print('deepspeed' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe, tmp_path / "plain.pth"], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr[-2000:]
