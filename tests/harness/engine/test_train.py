"""``depthbench train`` stopped and resumed, on CPU, with real processes and real signals.

Reliability (issue 8): (a) SIGKILL mid-epoch + ``--resume auto`` gives bit-identical weights and loss curve,
with 1 and 2 processes; (b) SIGUSR1 -> checkpoint, status ``preempted``, identical resume; (d) DeepSpeed ZeRO-2 on 2
processes trains and resumes. (a), (b), Ctrl-C, elastic resumes and ranks dying with their launcher are checked on
one run per number of processes, stopped in each way in turn (the ``interrupted`` fixture). (c) a kill during a
checkpoint write: tests/harness/engine/test_checkpoint.py; (e) bad inputs: tests/harness/commands/test_train.py.

The tiny setting: the embedded HO-ResNet digits preset at 8x8 with 8 channels, 160 training images, global
batch 8 -> 20 optimizer steps per epoch, 2 epochs, ``last.pth`` every 3 steps.
"""

import json
import os
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from devices import device_env, device_overrides, on_devices
from fixtures.training import (
    TINY,
    STEPS_PER_EPOCH,
    TOTAL_STEPS,
    EXIT_PREEMPTED,
    launch,
    finish,
    train,
    last_logged_step,
    wait_for_step,
    curve,
    load,
    assert_same_training,
    freeze_run,
    wait_gone,
    _stat,
    _alive,
)


pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    cache = tmp_path_factory.mktemp("data")
    return dict(os.environ, OMP_NUM_THREADS="1", DEPTHBENCH_DATA=str(cache), PYTHONUNBUFFERED="1")


@pytest.fixture(scope="module")
def reference(env, tmp_path_factory):
    """Uninterrupted runs, by number of processes (and device: tests/devices.py)."""
    runs = {}

    def get(nproc, device="cpu"):
        if (nproc, device) not in runs:
            runs[nproc, device] = tmp_path_factory.mktemp(f"reference{nproc}-{device}")
            train(
                device_env(env, device),
                runs[nproc, device],
                "--nproc",
                str(nproc),
                overrides=TINY + device_overrides(device),
            )
        return runs[nproc, device]

    return get


# One run per number of processes is stopped in each way in turn -- a Slurm preemption (SIGUSR1), a Ctrl-C
# (SIGINT; with --nproc to the launcher, which forwards it), then a crash mid-epoch (SIGKILL) -- each stop 4 steps
# into the previous resume, all in epoch 0. The tests below each check one stop, and that the run, resumed after
# the last one, is the uninterrupted run bit for bit: one run's training for all of them (a stop on 2 ranks costs
# two fresh interpreters, ~10 CPU-s) instead of a run each.
STOPS = {1: ("SIGUSR1", "SIGINT", "SIGKILL"), 2: ("SIGINT", "SIGKILL")}


@dataclass
class Stop:
    """What one stop left: the launcher's exit code and console, the run's status, its last.pth and last logged
    step; for SIGKILL, the run's processes (launcher first), those still alive 60 s after the kill, and each
    frozen process's parent, process group and command line, by pid."""

    returncode: int
    out: str
    err: str
    status: str
    checkpoint: dict
    last_step: int
    pids: list = field(default_factory=list)
    outlived: list = field(default_factory=list)
    frozen: dict = field(default_factory=dict)


def stop_run(env, run, nproc, how, resume) -> Stop:
    """Start (or resume) the run on ``nproc`` processes, let it train 4 more steps, and stop it with ``how``."""
    proc = launch(env, run, "--nproc", str(nproc), *(["--resume", "auto"] if resume else []))
    wait_for_step(proc, run, last_logged_step(run) + 4)
    pids, checkpoint, frozen = [], None, {}  # for SIGKILL: last.pth as the kill found it (a stop writes its own)
    if how == "SIGKILL":
        pids = freeze_run(proc)  # freeze every process of the run, then look at it and its last checkpoint
        frozen = {
            pid: (int(_stat(pid)[1]), int(_stat(pid)[2]), Path(f"/proc/{pid}/cmdline").read_bytes()) for pid in pids
        }
        checkpoint = load(run)
        # the launcher's process group, as a crash would: the ranks (process groups of their own) are not in it
        # and must die with it (the parent-death signal, harness.engine.launch.die_with_launcher)
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        proc.send_signal(getattr(signal, how))
    rc, out, err = finish(proc)
    outlived = []
    if pids:
        deadline = time.monotonic() + 60
        while (outlived := [pid for pid in pids if _alive(pid)]) and time.monotonic() < deadline:
            time.sleep(0.01)
        for pid in outlived:  # an orphan holds the run directory: end it, the tests report it
            os.kill(pid, signal.SIGKILL)
        wait_gone(outlived, 60, "a SIGKILLed process lived on")
    status = json.loads((Path(run) / "meta.json").read_text())["status"]
    return Stop(rc, out, err, status, checkpoint or load(run), last_logged_step(run), pids, outlived, frozen)


@pytest.fixture(scope="module")
def interrupted(env, tmp_path_factory):
    """By number of processes: the run stopped in each way of STOPS in turn (each stop's Stop, by signal name), and
    ``resumed(ranks)``: a copy of it, killed as the last stop left it, resumed on ``ranks`` processes to its end."""
    runs = {}

    def get(nproc):
        if nproc not in runs:
            run, stops, copies = tmp_path_factory.mktemp(f"interrupted{nproc}") / "run", {}, {}
            for i, how in enumerate(STOPS[nproc]):
                stops[how] = stop_run(env, run, nproc, how, resume=i > 0)
                if how != "SIGKILL":
                    assert stops[how].returncode == EXIT_PREEMPTED, stops[how].err[-2000:]  # or nothing to resume

            def resumed(ranks):
                if ranks not in copies:
                    copies[ranks] = tmp_path_factory.mktemp(f"interrupted{nproc}-resumed{ranks}") / "run"
                    shutil.copytree(run, copies[ranks], symlinks=True)
                    train(env, copies[ranks], "--nproc", str(ranks), "--resume", "auto")
                return copies[ranks]

            runs[nproc] = SimpleNamespace(run=run, stops=stops, resumed=resumed)
        return runs[nproc]

    return get


@pytest.mark.tier("integration")
@pytest.mark.parametrize("nproc", [1, 2])
def test_sigkill_mid_epoch_and_resume_is_bitwise_identical(interrupted, reference, nproc):
    runs = interrupted(nproc)
    killed = runs.stops["SIGKILL"]
    assert 0 < killed.checkpoint["batch_in_epoch"] < STEPS_PER_EPOCH and killed.checkpoint["epoch"] == 0, (
        "not mid-epoch"
    )
    assert not killed.outlived, "a process of the run outlived its launcher"
    assert killed.status == "running"  # killed: nobody wrote an end
    run = runs.resumed(nproc)
    assert_same_training(run, reference(nproc))
    meta = json.loads((run / "meta.json").read_text())
    # one resume per stop, the last from the SIGKILL's checkpoint
    assert meta["status"] == "done" and meta["world_size"] == nproc and len(meta["resumes"]) == len(STOPS[nproc])
    assert meta["resumes"][-1]["global_step"] == killed.checkpoint["global_step"]
    assert not list(run.glob(".*tmp*"))


@pytest.mark.tier("integration")
@pytest.mark.parametrize("before, after", [(2, 1), (1, 2)])
def test_elastic_resume_on_another_number_of_ranks(interrupted, before, after):
    """Issue 41: a run killed mid-epoch on N ranks continues on M: from the checkpoint's global sample position
    (the sampler's order is the same on any rank count: tests/harness/engine/test_data.py), to the end, saying so. Its numbers
    are not compared with an uninterrupted run: the digits model's BatchNorm normalises over each rank's
    micro-batch, so 1 and 2 ranks train differently even on the same samples."""
    runs = interrupted(before)
    checkpoint = runs.stops["SIGKILL"].checkpoint
    assert 0 < checkpoint["batch_in_epoch"] < STEPS_PER_EPOCH and checkpoint["epoch"] == 0, "not mid-epoch"
    assert checkpoint["samples_in_epoch"] == checkpoint["batch_in_epoch"] * 8  # global: batch_size / grad_accum
    run = runs.resumed(after)
    assert (
        f"resumed on {after} ranks from {before}: same samples in the same order from epoch 0 batch "
        f"{checkpoint['batch_in_epoch']}" in (run / "log.txt").read_text()
    )
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "done" and meta["world_size"] == after
    resume = meta["resumes"][-1]  # the earlier ones: the run's own stops, on `before` ranks
    assert (resume["ranks"], resume["from_ranks"], resume["global_step"]) == (after, before, checkpoint["global_step"])
    steps = [
        r["global_step"]
        for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
        if r["kind"] == "train"
    ]
    assert steps == list(range(1, TOTAL_STEPS + 1))  # every step once: the epoch continued where it stopped
    assert load(run)["global_step"] == TOTAL_STEPS


@pytest.mark.tier("integration")
def test_ranks_die_with_a_killed_launcher(interrupted):
    """``kill -9`` of ``train --nproc 2``'s launcher (its process group): its ranks (process groups of their own) die
    with it instead of living on as orphans that hold the run directory (frozen here, so an orphan would never
    end), so ``--resume auto`` works right after."""
    runs = interrupted(2)
    killed = runs.stops["SIGKILL"]
    assert len(killed.pids[1:]) >= 2, killed.pids
    launcher = killed.pids[0]
    ranks = [pid for pid, (parent, _, _) in killed.frozen.items() if parent == launcher]
    assert len(ranks) == 2, killed.frozen
    for rank in ranks:  # forks of the launcher (its command line, not `python -m harness.cli`), each its own group
        assert killed.frozen[rank][1:] == (rank, killed.frozen[launcher][2]), killed.frozen
    assert not killed.outlived, "the ranks outlived their launcher"
    assert json.loads((runs.resumed(2) / "meta.json").read_text())["status"] == "done"


@pytest.mark.tier("integration")
@on_devices("train")
def test_sigusr1_checkpoints_marks_preempted_and_resumes_identically(env, interrupted, reference, tmp_path, device):
    """Also the GPU check's training part (tests/devices.py): on the CPU the SIGUSR1 stop of the shared interrupted
    run; on CUDA the same stop and resume of a run of its own (the shared run is a CPU run)."""
    if device == "cpu":
        runs = interrupted(1)
        stop, resume = runs.stops["SIGUSR1"], lambda: runs.resumed(1)
    else:
        env, overrides = device_env(env, device), TINY + device_overrides(device)
        run = tmp_path / "run"
        proc = launch(env, run, overrides=overrides)
        wait_for_step(proc, run, 4)
        proc.send_signal(signal.SIGUSR1)
        rc, out, err = finish(proc)
        stop = Stop(
            rc, out, err, json.loads((run / "meta.json").read_text())["status"], load(run), last_logged_step(run)
        )

        def resume():
            train(env, run, "--resume", "auto", overrides=overrides)
            return run

    assert stop.returncode == EXIT_PREEMPTED, stop.err[-2000:]
    assert stop.status == "preempted"
    # the step during which the signal came was finished and is the checkpoint (not the last periodic one)
    assert stop.checkpoint["global_step"] == stop.last_step < TOTAL_STEPS
    assert "--resume auto" in stop.out
    assert_same_training(resume(), reference(1, device))


@pytest.mark.tier("integration")
@pytest.mark.parametrize("nproc", [1, 2])
def test_ctrl_c_is_a_preemption_and_a_second_one_stops_at_once(interrupted, reference, nproc):
    """Issue 26: the first Ctrl-C (SIGINT; with --nproc to the launcher, which forwards it) checkpoints at the next
    step and exits 75 with the resume hint, and the run resumes bit-identically."""
    runs = interrupted(nproc)
    stop = runs.stops["SIGINT"]
    assert stop.returncode == EXIT_PREEMPTED, stop.err[-2000:]
    assert "stopping after this step to write a checkpoint" in stop.err and "--resume auto" in stop.out
    assert stop.status == "preempted"
    assert stop.checkpoint["global_step"] == stop.last_step and 0 < stop.checkpoint["batch_in_epoch"]
    assert_same_training(runs.resumed(nproc), reference(nproc))


@pytest.mark.tier("integration")
def test_deepspeed_zero2_two_processes_trains_and_resumes(env, reference, tmp_path):
    args = ("--engine", "deepspeed", "--nproc", "2")
    run = tmp_path / "run"
    proc = launch(env, run, *args)
    wait_for_step(proc, run, 4)
    proc.send_signal(signal.SIGTERM)  # to the launcher, which forwards it to both ranks
    rc, out, err = finish(proc)
    assert rc == EXIT_PREEMPTED, err[-3000:]
    checkpoint = load(run)
    assert checkpoint["engine"] == "deepspeed" and len(checkpoint["optimizer"]["partitions"]) == 2  # ZeRO shards
    rc, out, err = finish(launch(env, run, "--engine", "deepspeed", "--nproc", "1", "--resume", "auto"))
    assert (
        rc == 2
        and err.count("\n") == 1
        and "ZeRO optimizer partitions of 2 processes and this run has 1: resume on 2 processes" in err
    ), err  # DeepSpeed is not elastic: one line, nothing written
    assert load(run)["global_step"] == checkpoint["global_step"]
    train(env, run, *args, "--resume", "auto")
    meta = json.loads((run / "meta.json").read_text())
    assert meta["engine"] == "deepspeed" and meta["status"] == "done" and meta["world_size"] == 2
    # Same recipe, same numbers: in fp32 with 2 ranks the ZeRO-2 run -- preempted and resumed -- reproduces the
    # uninterrupted Accelerate/DDP run bit for bit (averaging two gradients is exact in either order), and both
    # engines write the same metrics and the same checkpoint contents.
    accelerate = reference(2)
    assert curve(run) == curve(accelerate)
    got, want = load(run), load(accelerate)
    assert got.keys() == want.keys() and got["global_step"] == TOTAL_STEPS
    assert all(torch.equal(got["model"][k], want["model"][k]) for k in want["model"])
