"""``depthbench submit`` gives every rank the cores its loader workers need (issue 42): ``--cpus-per-task`` is the
config's data.workers + 1 unless given, and a smaller given value is one warning line naming both numbers. Dry
runs only: no cluster."""

import pytest
from clitools import run_cli_here as cli

pytestmark = pytest.mark.tier("integration")

PRESET = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"
TINY = ["model.width=8", "data.input_size=8", "data.train_subset=160", "data.val_subset=40", "batch_size=8", "epochs=2"]


@pytest.fixture(autouse=True)
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("DEPTHBENCH_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("DEPTHBENCH_DATA", str(tmp_path / "data"))


def cpus_lines(script: str) -> list[str]:
    return [line for line in script.splitlines() if line.startswith("#SBATCH --cpus-per-task")]


def test_cpus_per_task_follows_the_config_s_loader_workers():
    code, out, err = cli("submit", PRESET, *TINY, "data.workers=6", "--dry-run")
    assert code == 0, err
    assert cpus_lines(out) == ["#SBATCH --cpus-per-task=7"] and "cpus-per-task" not in err


def test_a_given_value_is_kept_and_a_smaller_one_warned_about_in_one_line():
    code, out, err = cli("submit", PRESET, *TINY, "data.workers=6", "--cpus-per-task", 12, "--dry-run")
    assert code == 0 and cpus_lines(out) == ["#SBATCH --cpus-per-task=12"] and "cpus-per-task" not in err
    code, out, err = cli("submit", PRESET, *TINY, "data.workers=6", "--cpus-per-task", 4, "--dry-run")
    assert code == 0 and cpus_lines(out) == ["#SBATCH --cpus-per-task=4"]
    warnings = [line for line in err.splitlines() if "--cpus-per-task" in line]
    assert len(warnings) == 1 and "--cpus-per-task 4" in warnings[0] and "7 cores" in warnings[0]
    assert warnings[0].startswith("depthbench submit: warning:")


def srun_line(script: str) -> str:
    lines = script.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("srun "))
    return " ".join(lines[start : start + 2])


@pytest.mark.parametrize("gpus", [0, 4])
def test_srun_hands_each_rank_its_cores_and_on_gpus_the_closest_gpu(gpus):
    """Slurm >= 22.05 does not pass sbatch's --cpus-per-task on to srun: the step must ask for it itself, or the
    rank's loader workers share one core; on a GPU partition every rank sees all of its node's GPUs (NCCL needs its
    peers visible; DeepSpeed and Accelerate index GPUs by the raw LOCAL_RANK) -- never one GPU a task."""
    code, out, err = cli("submit", PRESET, *TINY, "data.workers=6", "--gpus-per-node", gpus, "--dry-run")
    assert code == 0, err
    srun = srun_line(out)
    assert "${SLURM_CPUS_PER_TASK:+--cpus-per-task=$SLURM_CPUS_PER_TASK}" in srun
    assert ("--gpu-bind=none" in srun) == bool(gpus) and "single:" not in srun, srun
