"""harness/engine/runner.py's run plan, preemption and resume, through ``depthbench train`` on real interrupted runs.

Issue 58 items 1-3: a resumed run keeps its config (a changed key is one line naming it, old -> new, unless allowed
with ``--allow-changes``, which meta.json and ``results`` record); ``--resume auto`` says which run it continues or why
it starts a new one; the preemption message is the whole command that continues the run, and that command works as
printed (the run directory names its config); a resume trims the training records after its checkpoint.

Reliability (issue 8), with real processes and real signals: (a) SIGKILL mid-epoch + ``--resume auto`` gives
bit-identical weights and loss curve, with 1 and 2 processes; (b) SIGUSR1 -> checkpoint, status ``preempted``,
identical resume; DeepSpeed ZeRO-2 on 2 processes trains and resumes. (a), (b), Ctrl-C, elastic resumes and ranks
dying with their launcher are checked on one run per number of processes, stopped in each way in turn (the
``interrupted`` fixture; the uninterrupted runs: ``reference``), in the module-scoped ``env`` of
tests/fixtures/training.py. The tiny setting: the embedded HO-ResNet digits preset at 8x8 with 8 channels, 160
training images, global batch 8 -> 20 optimizer steps per epoch, 2 epochs, ``last.pth`` every 3 steps."""

import json
import os
import shlex
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from clitools import start_cli
from devices import device_env, device_overrides, on_devices
from fixtures.training import (
    EXIT_PREEMPTED,
    PRESET,
    STEPS_PER_EPOCH,
    TINY,
    TOTAL_STEPS,
    _alive,
    _stat,
    assert_same_training,
    curve,
    finish,
    freeze_run,
    last_logged_step,
    launch,
    load,
    train,
    training_env,  # noqa: F401 -- the env fixture: the stopped and resumed runs' (reference, interrupted)
    wait_for_step,
    wait_gone,
)

pytestmark = [pytest.mark.slow, pytest.mark.tier("integration")]


@pytest.fixture
def runs_env(tmp_path):
    """The environment of a test with a runs folder and a data cache of its own."""
    return dict(
        os.environ,
        OMP_NUM_THREADS="1",
        DEPTHBENCH_RUNS=str(tmp_path / "runs"),
        DEPTHBENCH_DATA=str(tmp_path / "data"),
        PYTHONUNBUFFERED="1",
    )


def depthbench(env, *args):
    return start_cli(*args, env=env, new_session=True)


def stop_after_steps(proc, run_root: Path, steps: int, sig) -> tuple[int, str, str, Path]:
    """Let the run log ``steps`` more steps than it had, then send ``sig`` (a user's Ctrl-C, a preemption)."""

    def logged():
        runs = list(run_root.glob("*/*/metrics.jsonl")) or list(run_root.glob("metrics.jsonl"))
        return (sum(1 for line in runs[0].read_text().splitlines() if '"train"' in line) if runs else 0), runs

    start, _ = logged()
    while (found := logged())[0] < start + steps:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.01)
    proc.send_signal(sig)
    rc, out, err = finish(proc)
    return rc, out, err, found[1][0].parent


def continue_line(out: str) -> list[str]:
    """The command the preemption message prints (after "continue with: ")."""
    line = next(line for line in out.splitlines() if line.startswith("preempted:"))
    command = shlex.split(line.split("continue with: ", 1)[1])
    assert command[:2] == ["depthbench", "train"], line
    return command[2:]


def test_resume_keeps_the_config_says_what_it_resumes_and_prints_a_working_command(runs_env, tmp_path):
    runs = Path(runs_env["DEPTHBENCH_RUNS"])
    rc, out, err, run = stop_after_steps(depthbench(runs_env, "train", PRESET, *TINY), runs, 4, signal.SIGINT)
    assert rc == EXIT_PREEMPTED, err[-2000:]
    config_before = (run / "config.json").read_text()

    # item 1: another epochs on resume is refused, in one line naming each changed key, and nothing is touched
    rc, out, err = finish(depthbench(runs_env, "train", PRESET, *TINY, "epochs=1", "--resume", "auto"))
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "epochs 2 -> 1" in err and "sched.decay_milestones" in err  # the rescaled schedule, too
    assert "--allow-changes epochs" in err
    assert (run / "config.json").read_text() == config_before
    assert json.loads((run / "meta.json").read_text())["status"] == "preempted"

    # item 2: --resume auto without --work-dir says which run it continues; item 3: the printed command continues it
    proc = depthbench(runs_env, "train", PRESET, *TINY, "--resume", "auto")
    rc, out, err, same = stop_after_steps(proc, runs, 3, signal.SIGTERM)
    assert rc == EXIT_PREEMPTED and same == run, err[-2000:]
    assert f"--resume auto: continuing {run}, the newest unfinished run" in out
    args = continue_line(out)
    assert args == ["--work-dir", str(run), "--resume", "auto"]

    # exactly the printed command continues the run (its config from the run), here with a change allowed
    rc, out, err = finish(depthbench(runs_env, "train", *args, "log_interval=2", "--allow-changes", "log_interval"))
    assert rc == 0, err[-2000:]
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "done" and len(meta["resumes"]) == 2
    assert [(c["key"], c["old"], c["new"]) for c in meta["config_changes"]] == [("log_interval", 1, 2)]
    assert "config changed on resume (--allow-changes): log_interval 1 -> 2" in out

    # ... and `results` shows the change beside the run
    from results.runs import Problems, read_run

    assert read_run(run, Problems())["config_changes"] == "log_interval 1 -> 2"

    # item 2: nothing unfinished to continue: it says so and why, and starts a new run
    rc, out, err = finish(
        depthbench(runs_env, "train", PRESET, *TINY, "epochs=1", "data.train_subset=16", "--resume", "auto")
    )
    assert rc == 0, err[-2000:]
    experiment = runs / Path(PRESET).stem
    assert (
        f"--resume auto: no unfinished run of {Path(PRESET).stem} with a checkpoint in {experiment}; starting "
        f"a new run" in out
    )
    assert len(list(experiment.iterdir())) == 2


@pytest.mark.tier("integration")
def test_resume_trims_training_records_but_keeps_depthbench_eval_records(tmp_path):
    from harness.engine.runner import _trim_lines

    metrics = tmp_path / "metrics.jsonl"
    lines = [
        {"kind": "train", "step": 1},
        {"kind": "eval", "top1": 10.0},  # before the checkpoint: kept
        {"kind": "train", "step": 2},  # after it: dropped
        {"kind": "eval_suite", "dataset": "imagenet-c", "metric": "mce", "value": 50.0},  # depthbench eval
        {"kind": "eval", "top1": 11.0},
    ]
    metrics.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"kind": "tra')  # + a torn line
    assert _trim_lines(metrics, keep=2) == 3
    assert [json.loads(line) for line in metrics.read_text().splitlines()] == [lines[0], lines[1], lines[3]]


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
