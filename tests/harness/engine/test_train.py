"""``depthbench train`` end to end, on CPU, with real processes and real signals.

Reliability (issue 8): (a) SIGKILL mid-epoch + ``--resume auto`` gives bit-identical weights and loss curve,
with 1 and 2 processes; (b) SIGUSR1 -> checkpoint, status ``preempted``, identical resume; (c) a kill during a
checkpoint write never leaves ``last.pth`` unreadable (tests/harness/engine/test_checkpoint.py); (d) DeepSpeed
ZeRO-2 on 2 processes trains and resumes; (e) bad inputs fail in one line, non-zero, writing nothing. Plus:
non-finite loss handling, a real accuracy on the embedded digits, and ``depthbench eval``. (a), (b), Ctrl-C, elastic
resumes and ranks dying with their launcher are checked on one run per number of processes, stopped in each way in
turn (the ``interrupted`` fixture).

The tiny setting: the embedded HO-ResNet digits preset at 8x8 with 8 channels, 160 training images, global
batch 8 -> 20 optimizer steps per epoch, 2 epochs, ``last.pth`` every 3 steps.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from devices import device_env, device_overrides, on_devices
from fixtures.training import (
    ROOT,
    PRESET,
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


SECOND_CTRL_C = """
import os, signal, time
from harness.engine.loop import install_stop_handlers, stop_requested
install_stop_handlers(announce=False)
os.kill(os.getpid(), signal.SIGINT)
time.sleep(0.1)
assert stop_requested()
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
except KeyboardInterrupt:
    print("stopped at once")
"""


@pytest.mark.tier("integration")
def test_a_second_ctrl_c_stops_at_once():
    out = subprocess.run([sys.executable, "-c", SECOND_CTRL_C], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "stopped at once", out.stderr[-2000:]


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


SRUN_3_TASKS = {"SLURM_PROCID": "0", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "3", "MASTER_ADDR": "127.0.0.1"}
BAD_INPUTS = {  # overrides, options, expected text, environment
    "unknown model": (["model.name=horesnet10_rk5"], [], "horesnet10_rk4", {}),
    "missing dataset": (["data.type=folder", "data.root=/nonexistent/imagenet"], [], "/nonexistent/imagenet", {}),
    "batch vs world size": ([], ["--nproc", "3"], "not divisible", {}),
    # task 0 of an srun step with 3 tasks: the world size comes from SLURM_*, before any process group exists
    "batch vs srun tasks": ([], [], "not divisible by 3 processes", SRUN_3_TASKS),
    "unknown override key": (["optim.lrr=0.2"], [], "optim.lr", {}),
    "EMA metric without EMA": (["ckpt.best_metric=ema_top1"], [], "ema.enable", {}),
    "missing resume checkpoint": ([], ["--resume", "/nonexistent/run"], "no checkpoint at /nonexistent/run", {}),
    "no processes": ([], ["--nproc", "0"], "--nproc 0: give the number of processes to start, 1 or more", {}),
    "negative processes": ([], ["--nproc", "-1"], "--nproc -1", {}),
}


@pytest.mark.tier("integration")
@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_inputs_fail_in_one_line_and_write_nothing(case, tmp_path, capsys, monkeypatch):
    from harness.cli import main

    overrides, args, expected, environ = BAD_INPUTS[case]
    monkeypatch.setenv("DEPTHBENCH_DATA", str(tmp_path / "data"))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_STEP_ID", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    work_dir = tmp_path / "run"
    rc = main(["train", PRESET, "--work-dir", str(work_dir), *args, *overrides])  # overrides may follow options
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert len(err.splitlines()) == 1 and err.startswith("depthbench train: error:") and expected in err
    assert not work_dir.exists()


@pytest.mark.tier("integration")
def test_an_epoch_without_an_optimizer_step_fails_before_writing(env, tmp_path):
    run = tmp_path / "run"
    overrides = [o for o in TINY if not o.startswith("data.train_subset")] + ["data.train_subset=4"]  # < batch 8
    rc, out, err = finish(launch(env, run, overrides=overrides))
    errors = [line for line in err.splitlines() if line.startswith("depthbench train: error:")]
    assert rc == 2 and len(errors) == 1 and "0 batches" in errors[0] and "no optimizer step" in errors[0]
    assert not run.exists()


@pytest.mark.tier("integration")
def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(env, tmp_path):
    run = tmp_path / "run"
    overrides = [o for o in TINY if not o.startswith("ckpt.interval_steps")] + [
        "ckpt.interval_steps=1",
        "optim.lr=30",
    ]  # diverges within the schema's lr bound (100)
    rc, out, err = finish(launch(env, run, overrides=overrides))
    assert rc == 1
    assert "loss is nan" in out or "loss is inf" in out
    assert out.strip().splitlines()[-1].endswith(f"; the run (its last good checkpoint, last.pth): {run}")  # issue 58
    assert json.loads((run / "meta.json").read_text())["status"] == "failed"
    checkpoint = load(run)
    assert checkpoint["global_step"] >= 1  # some steps were good, and were checkpointed
    assert all(torch.isfinite(t).all() for t in checkpoint["model"].values() if t.is_floating_point())


@pytest.mark.tier("integration")
def test_digits_preset_reaches_a_real_accuracy_and_eval_agrees(env, tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()  # a run directory whose first attempt was killed before its first checkpoint: it starts anew
    (run / "metrics.jsonl").write_text(json.dumps({"kind": "train", "epoch": 0, "global_step": 7}) + "\n")
    # the preset, shortened to 4 epochs (lr decay at epoch 3); the full preset reaches ~99 %. In this process,
    # through the programmatic entry point the Slurm/results code calls (harness.train.run, CONTRACTS.md)
    from harness.commands.train import run as train_run

    for name in ("OMP_NUM_THREADS", "DEPTHBENCH_DATA"):
        monkeypatch.setenv(name, env[name])
    handlers = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGTERM)}
    try:
        result = train_run(PRESET, work_dir=run, overrides=["epochs=4", "sched.decay_milestones=[3]"])
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    assert (result.status, result.exit_code, result.run_dir) == ("done", 0, run)
    assert curve(run)[0]["global_step"] == 5  # log_interval 5: the stale step-7 line is gone
    evals = [r for r in curve(run) if r["kind"] == "eval"]
    best = max(evals, key=lambda r: r["top1"])
    assert best["top1"] > 60.0  # 10 classes: chance is 10 %
    assert best["images"] == 360  # the whole validation split
    assert result.best_metric == pytest.approx(best["top1"])
    epochs = [r for r in curve(run) if r["kind"] == "epoch"]
    assert len(epochs) == 4 and epochs[-1]["train_top1"] > epochs[0]["train_top1"]
    assert (run / "best.pth").exists() and (run / "config.py").exists()
    from harness.cli import main

    monkeypatch.setenv("DEPTHBENCH_DATA", env["DEPTHBENCH_DATA"])
    assert main(["eval", PRESET, "--checkpoint", str(run / "best.pth"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["top1"] == pytest.approx(best["top1"]) and result["images"] == 360
    torn = tmp_path / "torn.pth"
    torn.write_bytes((run / "best.pth").read_bytes()[:1000])
    assert main(["eval", PRESET, "--checkpoint", str(torn)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a readable PyTorch state dict" in err
    # --ema on a run trained without EMA: an error, not the plain weights under an "EMA" label
    assert main(["eval", PRESET, "--checkpoint", str(run), "--ema"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "best.pth holds no EMA weights" in err


@pytest.mark.tier("integration")
def test_deit_recipe_features(env, tmp_path):
    """The DeiT digits preset with mixup, EMA, bf16 autocast, soft-label distillation, TensorBoard."""
    teacher = tmp_path / "teacher.pth"
    import timm

    import models  # noqa: F401

    torch.save({"model": timm.create_model("horesnet10_euler", num_classes=10, width=8).state_dict()}, teacher)
    run = tmp_path / "run"
    train(
        env,
        run,
        config="configs/deit/deit-tiny-p4_1xb64-30e_digits.py",
        overrides=[
            "epochs=1",
            "data.train_subset=64",
            "data.val_subset=32",
            "batch_size=16",
            "model.depth=1",
            "precision=bf16",
            "distill.teacher=horesnet10_euler",
            f"distill.teacher_checkpoint={teacher}",
            "distill.weight=0.5",
            "+distill.teacher_kwargs.width=8",
        ],
    )
    evals = [r for r in curve(run) if r["kind"] == "eval"]
    assert "ema_top1" in evals[0] and 0 <= evals[0]["ema_top1"] <= 100
    assert list((run / "tb").glob("events.out.tfevents.*"))
    ema = load(run, "best.pth")["ema"]
    model = load(run, "best.pth")["model"]
    assert ema.keys() == model.keys() and any(not torch.equal(ema[k], model[k]) for k in model)


@pytest.mark.tier("integration")
def test_scalenet_growth_hook_survives_preemption(env, tmp_path):
    """WSPT as a growth schedule: the model is expanded at the start of epoch 1 (optimizer rebuilt), preempted
    in that epoch, and resumed: the growth is replayed before loading, and the weight tying must hold."""
    run = tmp_path / "run"
    overrides = [
        "epochs=2",
        "data.train_subset=64",
        "data.val_subset=16",
        "data.input_size=8",
        "batch_size=8",
        "model.img_size=8",
        "model.depth=2",
        "+model.embed_dim=32",
        "+model.num_heads=2",
        "ema.enable=False",
        "log_interval=1",
        "log.tensorboard=False",
        "ckpt.interval_minutes=None",
        "+model.grow={'stages': [{'epoch': 1, 'k': 2, 'adjust': 'adapter', 'rank': 4}]}",
    ]
    config = "configs/deit/deit-tiny-p4_1xb64-30e_digits.py"
    proc = launch(env, run, overrides=overrides, config=config)
    wait_for_step(proc, run, 8 + 2)  # 8 steps per epoch: two steps into the grown model's first epoch
    proc.send_signal(signal.SIGUSR1)
    rc, out, err = finish(proc)
    assert rc == EXIT_PREEMPTED, err[-2000:]
    assert "model grown" in out
    grown = load(run)["model"]
    assert any(k.startswith("blocks.3.") for k in grown) and not any(k.startswith("blocks.4.") for k in grown)
    out = train(env, run, "--resume", "auto", overrides=overrides, config=config)
    assert json.loads((run / "meta.json").read_text())["status"] == "done"
    import timm

    import models  # noqa: F401
    from models.scalenet import assert_tied, expand

    model = expand(
        timm.create_model(
            "deit_tiny_patch16_224", img_size=8, patch_size=4, depth=2, embed_dim=32, num_heads=2, num_classes=10
        ),
        k=2,
        adjust="adapter",
        rank=4,
    )
    model.load_state_dict(load(run)["model"])
    assert_tied(model)
    assert model.blocks[1].attn.qkv.weight is model.blocks[0].attn.qkv.weight  # interleaved copy of block 0


def crafted_checkpoints(tmp_path, marker) -> dict:
    """Resume files that must be refused: garbage, torn, weights only, a DeepSpeed checkpoint whose optimizer
    partitions would run code (a pickled os.system), and one in the plain-record format of an earlier depthbench."""

    class Evil:
        def __reduce__(self):
            return os.system, (f"touch {marker}",)

    base = {
        "format": "depthbench-train/1",
        "engine": "deepspeed",
        "world_size": 1,
        "epoch": 0,
        "batch_in_epoch": 0,
        "model": {},
        "rng": [],
        "config": "",
    }
    files = {
        "garbage": b"not a checkpoint",
        "weights only": {"model": {"w": torch.ones(1)}},
        "pickled code": {**base, "optimizer": {"zero_stage": 2, "partitions": [{"loss_scaler": Evil()}]}},
        # DeepSpeed's objects as the plain records of depthbench before issue 57
        "old format": {
            **base,
            "optimizer": {
                "zero_stage": 2,
                "partitions": [{"loss_scaler": {"__object__": "x.LossScaler", "state": {}}}],
            },
        },
    }
    paths = {}
    for name, content in files.items():
        paths[name] = tmp_path / f"{name.replace(' ', '_')}.pth"
        if isinstance(content, bytes):
            paths[name].write_bytes(content)
        else:
            torch.save(content, paths[name])
    torn = tmp_path / "torn.pth"
    torch.save({"model": {"w": torch.zeros(100_000)}}, torn)
    torn.write_bytes(torn.read_bytes()[:5000])
    paths["torn"] = torn
    return paths


@pytest.mark.tier("integration")
def test_unusable_resume_checkpoints_are_one_line_before_anything_is_written(tmp_path, capsys, monkeypatch):
    from harness.core import rundir
    from harness.cli import main

    monkeypatch.setenv("DEPTHBENCH_DATA", str(tmp_path / "data"))
    monkeypatch.setattr(rundir, "DEFAULT_ROOT", tmp_path / "runs")
    marker = tmp_path / "pwned"
    expected = {
        "garbage": "not a PyTorch file",
        "torn": "not a readable PyTorch state dict",
        "weights only": "not a depthbench training checkpoint",
        "pickled code": "weights-only load refuses",
        "old format": "in the format of an earlier depthbench",
    }
    for name, path in crafted_checkpoints(tmp_path, marker).items():
        engine = ["--engine", "deepspeed"] if name in ("pickled code", "old format") else []
        rc = main(["train", PRESET, *TINY, "--resume", str(path), *engine])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and len(err.splitlines()) == 1 and expected[name] in err and str(path) in err, (name, err)
    assert not marker.exists() and not (tmp_path / "runs").exists()  # nothing ran, no stray run directory

    # an existing run: `--resume auto` on a broken last.pth must not touch it (its meta.json keeps its status)
    run = tmp_path / "run"
    run.mkdir()
    (run / "meta.json").write_text(json.dumps({"status": "preempted"}))
    (run / "last.pth").write_bytes(b"torn")
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    assert main(["train", PRESET, *TINY, "--work-dir", str(run), "--resume", "auto"]) == 2
    assert "last.pth is not a readable PyTorch state dict" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
    # ... nor on a last.pth of another architecture (the config now asks for width 16)
    import timm

    import models  # noqa: F401

    width8 = timm.create_model("horesnet10_rk4", width=8, num_classes=10).state_dict()
    torch.save(
        {
            "format": "depthbench-train/1",
            "engine": "accelerate",
            "world_size": 1,
            "epoch": 1,
            "batch_in_epoch": 0,
            "model": width8,
            "optimizer": {},
        },
        run / "last.pth",
    )
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    assert main(["train", PRESET, *TINY, "model.width=16", "--work-dir", str(run), "--resume", "auto"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{run / 'last.pth'} does not fit horesnet10_rk4" in err
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before


@pytest.mark.tier("integration")
def test_work_dir_that_is_a_file_or_not_writable(tmp_path, capsys, monkeypatch):
    from harness.cli import main

    monkeypatch.setenv("DEPTHBENCH_DATA", str(tmp_path / "data"))
    afile = tmp_path / "file"
    afile.write_text("x")
    assert main(["train", PRESET, *TINY, "--work-dir", str(afile)]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err
    readonly = tmp_path / "readonly"
    readonly.mkdir()
    # we run as root in CI, which writes anywhere: ask the same question the check asks, answered "no"
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == readonly else real_access(p, mode))
    assert main(["train", PRESET, *TINY, "--work-dir", str(readonly / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{readonly} is not writable" in err
    assert not (readonly / "run").exists()
