"""Issue 25: what a user receives is data. Crafted files never run code, a run directory has one writer, names
cannot leave the runs root, a flipped byte in a checkpoint is found, bad config values and bad run directories are
one line (or one problem), never a traceback or a crash of everything.

Each crafted pickle here would create a file when unpickled; every test checks that the file never appears.
"""

import json
import os
import signal
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from clitools import start_cli
from harness.core.errors import DepthbenchError

ROOT = Path(__file__).resolve().parents[3]
PRESET = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"
TINY = [
    "model.width=8",
    "data.input_size=8",
    "data.train_subset=64",
    "data.val_subset=16",
    "batch_size=8",
    "epochs=1",
    "ckpt.interval_minutes=None",
    "log.tensorboard=False",
]


class _Evil:
    """Unpickling it runs os.system(touch <marker>)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


# ------------------------------------------------------------------------------------------------ datasets
def test_a_crafted_cifar_batch_is_refused_and_runs_nothing(tmp_path):
    from harness.tasks.image import CIFAR10_FILES, CIFAR10Pickle

    marker = tmp_path / "pwned"
    folder = tmp_path / "cifar"
    folder.mkdir()
    good = {"data": np.zeros((2, 3072), dtype=np.uint8), "labels": [0, 1]}
    for name in CIFAR10_FILES:
        (folder / name).write_bytes(pickle.dumps(good))
    assert len(CIFAR10Pickle(folder, train=True)) == 10  # a real batch layout loads
    (folder / "data_batch_3").write_bytes(pickle.dumps({"data": _Evil(marker), "labels": [0]}))
    with pytest.raises(DepthbenchError, match="data_batch_3 is not a CIFAR batch file"):
        CIFAR10Pickle(folder, train=True)
    assert not marker.exists()


# ------------------------------------------------------------------------------------------------ run directories
@pytest.mark.tier("integration")
def test_a_run_directory_has_one_writer_and_a_killed_writer_leaves_no_stale_lock(tmp_path):
    from harness.core.rundir import RunDir, run_dir_in_use

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time; from harness.core.rundir import RunDir; "
                f"RunDir.create('exp', path={str(tmp_path / 'run')!r}); print('locked', flush=True); time.sleep(60)"
            ),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert "pid" in run_dir_in_use(tmp_path / "run")
        with pytest.raises(DepthbenchError, match="is in use by pid"):
            RunDir.open(tmp_path / "run")
    finally:
        holder.kill()  # SIGKILL: the kernel releases the lock
        holder.wait()
    assert run_dir_in_use(tmp_path / "run") is None
    run = RunDir.open(tmp_path / "run")
    run.log_metrics(step=1)
    run.finish("done")


def test_names_cannot_leave_the_runs_root(tmp_path):
    from harness.core.rundir import RunDir, new_run_path

    for name in ("../../x", "a/b", "..", ".hidden", "", "x\ny"):
        with pytest.raises(DepthbenchError, match="is not a plain name"):
            new_run_path(name, tmp_path)
    with pytest.raises(DepthbenchError, match="run id"):
        RunDir.create("exp", run_id="../escape", root=tmp_path)
    assert not (tmp_path.parent / "escape").exists()


def test_appends_never_follow_a_symlink(tmp_path):
    from harness.core.rundir import RunDir

    run = RunDir.create("exp", path=tmp_path / "run")
    target = tmp_path / "elsewhere.txt"
    target.write_text("precious\n")
    (tmp_path / "run" / "metrics.jsonl").symlink_to(target)
    from harness.core.files import BadFile

    with pytest.raises(BadFile, match="symbolic link"):  # one line naming the link, not an OSError
        run.log_metrics(step=1)
    assert target.read_text() == "precious\n"
    run.finish("done")


def test_a_second_train_on_the_same_work_dir_is_one_line(tmp_path, cli):
    env = {"OMP_NUM_THREADS": "1", "DEPTHBENCH_DATA": str(tmp_path / "data")}
    work = tmp_path / "run"
    first = start_cli("train", PRESET, *TINY, "epochs=50", "--work-dir", work, env={**os.environ, **env})
    try:
        deadline = time.monotonic() + 300
        while not (work / "meta.json").exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)  # meta.json is written once the run holds its lock
        # frozen while it holds the lock: however fast the machine, the first run cannot finish under the second
        os.kill(first.pid, signal.SIGSTOP)
        assert first.poll() is None, first.communicate()[1][-2000:]
        second = cli("train", PRESET, *TINY, "--work-dir", work, "--resume", "auto", env=env)
        assert second.returncode == 2
        assert second.stderr.count("\n") == 1 and "is in use by pid" in second.stderr, second.stderr
        meta = json.loads((work / "meta.json").read_text())
        assert meta["status"] == "running" and "resumes" not in meta
    finally:
        first.kill()
        first.communicate()


def test_experiment_override_cannot_escape(tmp_path, cli):
    out = cli("train", PRESET, *TINY, "experiment='../../../../escaped'", env={"DEPTHBENCH_RUNS": str(tmp_path)})
    assert out.returncode == 2 and "is not a plain name" in out.stderr and out.stderr.count("\n") == 1
    assert not any(tmp_path.parent.glob("**/escaped"))


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


# ------------------------------------------------------------------------------------------------ config values
@pytest.mark.parametrize(
    "override, message",
    [
        ("ema.decay=5.0", "ema.decay=5.0: it must be a number in [0, 1)"),
        ("data.workers=-1", "data.workers=-1: it must be an integer in [0, 256]"),  # upper bounds: issue 39
        ("optim.lr=-1.0", "optim.lr=-1.0: it must be a number in (0, 100]"),
        ("epochs=0", "epochs=0: it must be an integer in [1, 100000]"),
    ],
)
def test_config_values_out_of_range_are_one_line_before_any_work(override, message, tmp_path, cli):
    out = cli("train", PRESET, *TINY, override, "--work-dir", tmp_path / "run")
    assert out.returncode == 2 and out.stderr.strip().endswith(message), out.stderr
    assert out.stderr.count("\n") == 1 and not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------------------------ results
def test_results_never_raise_on_what_they_read(tmp_path):
    from results import figures, runs

    def run(name, meta, metrics='{"kind": "eval", "epoch": 0, "top1": 50.0}\n'):
        folder = tmp_path / "exp" / name
        folder.mkdir(parents=True)
        (folder / "meta.json").write_text(meta if isinstance(meta, str) else json.dumps(meta))
        (folder / "metrics.jsonl").write_text(metrics)

    good = {"status": "done", "experiment": "exp", "run_id": "good", "start": "1", "model": "resnet18"}
    run("good", good)
    run("nested", "[" * 100000 + "]" * 100000)
    run("digits", '{"status": "done", "epochs": ' + "9" * 5000 + "}")
    run("list-model", {**good, "run_id": "list-model", "start": "2", "model": ["resnet18"]})
    run("dict-model", {**good, "run_id": "dict-model", "start": "3", "model": {"name": "resnet18"}})
    run("list-experiment", {**good, "run_id": "list-experiment", "start": "4", "experiment": ["a"]})
    run("int-command", {**good, "run_id": "int-command", "start": "5", "command": 7, "config_file": 8})
    run("nested-metrics", {**good, "run_id": "nested-metrics", "start": "6"}, "[" * 100000 + "\n")
    run("exp$\\frac{$", {**good, "run_id": "exp$\\frac{$", "start": "7"})
    frame, problems = runs.collect([tmp_path])
    assert len(frame) == 9
    assert set(frame["status"]) <= {"done", "unknown"}
    flagged = {Path(path).name for path, _ in problems.items}
    assert {
        "nested",
        "digits",
        "list-model",
        "dict-model",
        "list-experiment",
        "int-command",
        "nested-metrics",
    } <= flagged, problems.summary()
    drawn = figures.training_curves(sorted(frame["path"]), tmp_path / "fig" / "curves")
    assert drawn and all(path.stat().st_size > 0 for path in drawn)  # the "$" run's name drawn as text


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
