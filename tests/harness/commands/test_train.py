"""``depthbench train`` end to end: what the command refuses before training (tests/harness/engine/test_train.py
trains)."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from clitools import start_cli
from fixtures.cli import one_line as _one_line
from fixtures.training import ONE_EPOCH as TINY
from harness.core.errors import DepthbenchError
from clitools import run_cli

pytestmark = pytest.mark.tier(
    "integration", tests=("test_a_second_train_on_the_same_work_dir_is_one_line",)
)  # a second run


def test_train_resume_auto_with_a_linked_last_pth_is_one_line(tmp_path, cli):
    other = tmp_path / "other"
    other.mkdir()
    (other / "last.pth").write_bytes(b"not a checkpoint")
    work = tmp_path / "run"
    work.mkdir()
    (work / "meta.json").write_text('{"status": "preempted"}')
    (work / "last.pth").symlink_to(other / "last.pth")
    out = cli("train", "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py", "--work-dir", work, "--resume", "auto")
    assert "is a symbolic link" in _one_line(out)


# ------------------------------------------------------------------------------------------------ config values
@pytest.mark.parametrize(
    "override, message",
    [
        ("data.mean=[1e999, 0.5, 0.5]", "data.mean=[inf, 0.5, 0.5]: it must be a list of numbers in [0, 1]"),
        ("data.std=[0, 0, 0]", "data.std=[0, 0, 0]: it must be a list of numbers in (0, 1]"),
        ("data.std=[]", "data.std=[]: it must be a list of numbers in (0, 1]"),
        ("optim.lr=1e999", "optim.lr=inf: it must be a number in (0, 100]"),
        ("optim.lr=1000.0", "optim.lr=1000.0: it must be a number in (0, 100]"),
        ("aug.mixup=1e999", "aug.mixup=inf: it must be a number in [0, inf)"),  # NaN/inf: no value of any key
    ],
)
def test_normalisation_and_learning_rate_values_are_typed_and_bounded(override, message, tmp_path):
    from harness.commands.train import run

    work_dir = tmp_path / "run"
    with pytest.raises(DepthbenchError) as error:
        run("configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py", work_dir=work_dir, overrides=[override])
    assert str(error.value) == message and error.value.exit_code == 2 and not work_dir.exists()


PRESET = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"


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


@pytest.mark.tier("integration")
@pytest.mark.slow
def test_test_switches_come_from_the_config_only(tmp_path):
    """The old fault-injection variables do nothing in the product (``DEPTHBENCH_INJECT_FAULT=1`` made ``train``
    SIGKILL itself); the config's ``testing.step_delay_s`` paces the steps with the hang watchdog off (it lived
    inside the watchdog, and ``hang.watchdog=False`` dropped it); a bad value is one line, exit 2."""
    tiny = [
        "model.width=8",
        "data.input_size=8",
        "data.train_subset=32",
        "data.val_subset=8",
        "batch_size=8",
        "epochs=1",
        "log_interval=1",
        "log.tensorboard=False",
        "ckpt.interval_minutes=None",
    ]
    env = {
        "DEPTHBENCH_INJECT_FAULT": "1",
        "DEPTHBENCH_INJECT_STEP_DELAY": "soon",
        "DEPTHBENCH_RUNS": str(tmp_path / "runs"),
        "DEPTHBENCH_DATA": str(tmp_path / "data"),
    }
    out = run_cli(
        "train",
        PRESET,
        *tiny,
        "hang.watchdog=False",
        "testing.step_delay_s=0.3",
        "--work-dir",
        tmp_path / "run",
        env=env,
    )
    assert out.returncode == 0, out.stderr
    steps = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    times = [r["step_time"] for r in steps if r.get("kind") == "train"]
    assert len(times) == 4 and min(times) >= 0.3, times
    bad = run_cli("train", PRESET, *tiny, "testing.kill_at_step=soon", env=env)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "testing.kill_at_step" in bad.stderr, bad.stderr
