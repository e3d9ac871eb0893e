"""``depthbench train`` end to end: what the command refuses before training (bad inputs, an epoch without an optimizer
step, unusable resume checkpoints, a work dir that is a file or not writable), a real accuracy on the embedded digits
that ``depthbench eval`` agrees with, and its speed options (issue 27: compile, channels-last, grad checkpointing,
fused optimizer steps, uint8 batches normalised on the device) training tiny models on both engines and resuming
bit-identically. The stopped-and-resumed runs: tests/harness/engine/test_runner.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time

import pytest
import torch

from clitools import start_cli
from fixtures.cli import one_line as _one_line
from fixtures.files import read_only
from harness.core.errors import DepthbenchError
from devices import device_env, device_overrides, on_devices
from fixtures.training import (
    EXIT_PREEMPTED,
    ONE_EPOCH,
    TINY,
    assert_same_training,
    curve,
    finish,
    freeze_run,
    kill_run,
    last_logged_step,
    launch,
    load,
    train,
    training_env,  # noqa: F401 -- the env fixture
    wait_for_step,
)
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
    first = start_cli("train", PRESET, *ONE_EPOCH, "epochs=50", "--work-dir", work, env={**os.environ, **env})
    try:
        deadline = time.monotonic() + 300
        while not (work / "meta.json").exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)  # meta.json is written once the run holds its lock
        # frozen while it holds the lock: however fast the machine, the first run cannot finish under the second
        os.kill(first.pid, signal.SIGSTOP)
        assert first.poll() is None, first.communicate()[1][-2000:]
        second = cli("train", PRESET, *ONE_EPOCH, "--work-dir", work, "--resume", "auto", env=env)
        assert second.returncode == 2
        assert second.stderr.count("\n") == 1 and "is in use by pid" in second.stderr, second.stderr
        meta = json.loads((work / "meta.json").read_text())
        assert meta["status"] == "running" and "resumes" not in meta
    finally:
        first.kill()
        first.communicate()


def test_experiment_override_cannot_escape(tmp_path, cli):
    out = cli("train", PRESET, *ONE_EPOCH, "experiment='../../../../escaped'", env={"DEPTHBENCH_RUNS": str(tmp_path)})
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
    out = cli("train", PRESET, *ONE_EPOCH, override, "--work-dir", tmp_path / "run")
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


# ----------------------------------------------------------------------------------------- speed options (issue 27)
# The tiny setting is fixtures.training's TINY (HO-ResNet-10 digits preset at 8x8, width 8, 160 images, batch 8: 20
# steps per epoch, 2 epochs, last.pth every 3 steps). Compiling costs ~1 min per new graph on a loaded 2-core machine.
# every option at once (grad checkpointing: HO-ResNet's per block of its ODE stage)
ALL_OPTIONS = [
    "--compile",
    "--channels-last",
    "--grad-checkpointing",
    "optim.fused=True",
    "loader.device_normalize=True",
]
DEIT = "configs/deit/deit-tiny-p4_1xb64-30e_digits.py"


def log_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("epoch ") and " step " in line]


# ----------------------------------------------------------------------------------------- exact resume
@pytest.mark.slow
@pytest.mark.tier("integration")
def test_every_option_on_accelerate_resumes_bit_identically_after_sigkill(env, tmp_path):
    """Compiled (+ channels-last, grad checkpointing, fused AdamW... the preset's SGD: fused SGD, uint8 batches):
    an uninterrupted run and one killed mid-epoch and resumed give the same weights and loss curve, bit for bit."""
    reference = tmp_path / "reference"
    out = train(env, reference, *ALL_OPTIONS)
    assert "compiled (inductor), channels-last, grad checkpointing, fused optimizer, uint8 batches" in out
    run = tmp_path / "run"
    proc = launch(env, run, *ALL_OPTIONS)
    wait_for_step(proc, run, 4)
    pids = freeze_run(proc)
    checkpoint = load(run)
    kill_run(proc, pids)
    assert 0 < checkpoint["batch_in_epoch"] < 20 and checkpoint["epoch"] == 0, "not mid-epoch"
    assert not any("_orig_mod" in k for k in checkpoint["model"])  # compiled in place: the eager module's keys
    train(env, run, "--resume", "auto", *ALL_OPTIONS)
    assert_same_training(run, reference)


@pytest.mark.slow
@pytest.mark.tier("integration")
@on_devices("train")
def test_every_option_on_deepspeed_preempts_and_resumes_bit_identically(env, tmp_path, device):
    """Also the GPU check's DeepSpeed training: on CUDA (tests/devices.py) compiled by inductor for the GPU, with
    uint8 batches normalised there."""
    env, overrides = device_env(env, device), TINY + device_overrides(device)
    reference = tmp_path / "reference"
    train(env, reference, "--engine", "deepspeed", *ALL_OPTIONS, overrides=overrides)
    run = tmp_path / "run"
    proc = launch(env, run, "--engine", "deepspeed", *ALL_OPTIONS, overrides=overrides)
    wait_for_step(proc, run, 4)
    proc.send_signal(signal.SIGUSR1)
    rc, out, err = finish(proc)
    assert rc == EXIT_PREEMPTED, err[-3000:]
    assert load(run)["global_step"] == last_logged_step(run) < 40
    train(env, run, "--engine", "deepspeed", "--resume", "auto", *ALL_OPTIONS, overrides=overrides)
    assert_same_training(run, reference)


@pytest.mark.slow
@pytest.mark.tier("integration")
def test_device_normalisation_trains_bit_identically_to_the_cpu_path(env, tmp_path):
    """loader.device_normalize changes where the batch is normalised, not what it is: on a CPU the run is the run
    without it (eager, with workers, so the uint8 batches cross process boundaries)."""
    plain, uint8 = tmp_path / "plain", tmp_path / "uint8"
    train(env, plain, overrides=TINY + ["data.workers=2"])
    train(env, uint8, overrides=TINY + ["data.workers=2", "loader.device_normalize=True", "loader.prefetch_factor=3"])
    assert curve(uint8) == curve(plain)
    got, want = load(uint8), load(plain)
    assert all(torch.equal(got["model"][k], want["model"][k]) for k in want["model"])


@pytest.mark.slow
@pytest.mark.tier("integration")
def test_reduce_overhead_falls_back_on_cpu_with_ema_and_resumes_exactly(env, tmp_path):
    """Issue 40: compile.mode=reduce-overhead (CUDA graphs) is an engine option; on the CPU it compiles in the default
    mode and says so in one line; with EMA a SIGUSR1-preempted run resumes bit-identically. (With grad accumulation
    it is refused: BAD_OPTIONS.)"""
    options = ["--compile-mode", "reduce-overhead"]
    overrides = TINY + ["ema.enable=True"]
    reference = tmp_path / "reference"
    rc, out, err = finish(launch(env, reference, *options, overrides=overrides))
    assert rc == 0, err[-2000:]
    fallback = [line for line in err.splitlines() if "reduce-overhead" in line]
    assert fallback == [
        "depthbench train: compile.mode=reduce-overhead needs CUDA graphs (a CUDA device); "
        "compiling in the default mode on the cpu"
    ]
    assert "compiled (inductor, mode reduce-overhead)" in out
    run = tmp_path / "run"
    proc = launch(env, run, *options, overrides=overrides)
    wait_for_step(proc, run, 4)
    proc.send_signal(signal.SIGUSR1)
    rc, out, err = finish(proc)
    assert rc == EXIT_PREEMPTED, err[-2000:]
    assert load(run)["ema"] is not None
    train(env, run, "--resume", "auto", *options, overrides=overrides)
    assert_same_training(run, reference)
    assert all(torch.equal(load(run)["ema"][k], load(reference)["ema"][k]) for k in load(reference)["ema"])


# ----------------------------------------------------------------------------------------- with the recipe features
@pytest.mark.slow
@pytest.mark.tier("integration")
def test_compiled_mixed_depth_distillation_ema_never_recompiles(env, tmp_path, monkeypatch):
    """SReT's mixed depth (MixedDepthLogits, every branch trained), soft-label distillation, Mixup, EMA and a
    compiled model, in this process: the training forward is compiled once, evaluation (eval mode, another batch
    size, the EMA copy) runs eagerly, and the second epoch reuses the graph -- any recompilation is an error."""
    import timm
    import torch._dynamo

    import models  # noqa: F401
    from harness.commands.train import run as train_run

    teacher = tmp_path / "teacher.pth"
    torch.save({"model": timm.create_model("horesnet10_euler", num_classes=10, width=8).state_dict()}, teacher)
    for name in ("OMP_NUM_THREADS", "DEPTHBENCH_DATA"):
        monkeypatch.setenv(name, env[name])
    handlers = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT)}
    # config.patch restores the flag; monkeypatch's undo would delete it, which hides the option for later tests
    try:
        with torch._dynamo.config.patch(error_on_recompile=True):
            result = train_run(
                DEIT,
                work_dir=tmp_path / "run",
                compile=True,
                overrides=[
                    "epochs=2",
                    "data.train_subset=64",
                    "data.val_subset=24",
                    "batch_size=16",
                    "model.name=SReT_108_mixed_depth",
                    "model.depth=2",
                    "+model.embed_dim=32",
                    "+model.num_heads=2",
                    "+model.mixed_depth=True",
                    "distill.teacher=horesnet10_euler",
                    f"distill.teacher_checkpoint={teacher}",
                    "distill.weight=0.5",
                    "+distill.teacher_kwargs.width=8",
                    "log.tensorboard=False",
                    "ckpt.interval_minutes=None",
                ],
            )
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
        torch._dynamo.reset()
    assert (result.status, result.exit_code) == ("done", 0)
    evals = [r for r in curve(tmp_path / "run") if r["kind"] == "eval"]
    assert len(evals) == 2 and all("ema_top1" in r for r in evals) and evals[0]["images"] == 24
    weights = load(tmp_path / "run", "best.pth")
    assert weights["ema"].keys() == weights["model"].keys() and not any("_orig_mod" in k for k in weights["model"])


@pytest.mark.slow
@pytest.mark.tier("integration")
def test_compiled_scalenet_growth_recompiles_the_grown_model(env, tmp_path):
    """The growth hook changes the architecture at epoch 1: the optimizer is rebuilt and the grown model compiled;
    preempted in that epoch and resumed (the growth replayed before loading), the tying holds."""
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
    proc = launch(env, run, "--compile", "--grad-checkpointing", overrides=overrides, config=DEIT)
    wait_for_step(proc, run, 8 + 2)
    proc.send_signal(signal.SIGUSR1)
    rc, out, err = finish(proc)
    assert rc == EXIT_PREEMPTED, err[-2000:]
    assert "model grown" in out
    train(env, run, "--resume", "auto", "--compile", "--grad-checkpointing", overrides=overrides, config=DEIT)
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


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from harness.tasks.lm import export_kjv

    if shutil.which("bible") is None:
        pytest.fail("the embedded text corpus needs Debian's bible-kjv package: run make setup")
    root = tmp_path_factory.mktemp("text")
    verses = (export_kjv(root / "kjv") / "train.txt").read_text().splitlines()
    (root / "train.txt").write_text("\n".join(verses[:600]) + "\n")
    (root / "valid.txt").write_text("\n".join(verses[600:700]) + "\n")
    return root


@pytest.mark.slow
@pytest.mark.tier("integration")
def test_compiled_language_model_resumes_and_reports_sequences(env, corpus, tmp_path):
    """The LM task compiled (token batches: channels-last and device normalisation do not apply), preempted and
    resumed exactly; its progress lines count sequences, with the epoch's and the run's ETA."""
    config = "configs/stepsnet/steps-lm-w128-d8_1xb32-2e_kjv-lm.py"
    tiny = [
        f"{k}={v}"
        for k, v in {
            "data.type": "text",
            "data.root": corpus,
            "data.train_split": "train.txt",
            "data.val_split": "valid.txt",
            "data.vocab_size": 300,
            "data.seq_len": 16,
            "data.train_subset": 64,
            "data.val_subset": 16,
            "model.vocab_size": 300,
            "model.seq_len": 16,
            "model.steps": "((32,1,1),(48,1,1))",
            "batch_size": 8,
            "epochs": 2,
            "log_interval": 1,
            "ckpt.interval_minutes": None,
            "log.tensorboard": False,
            "ckpt.interval_steps": 3,
        }.items()
    ]
    reference = tmp_path / "reference"
    out = train(env, reference, "--compile", "--channels-last", overrides=tiny, config=config)
    lines = log_lines(out)
    assert lines and all(" seq/s " in line and " img/s" not in line for line in lines)
    # the header gives the size of what was built, not only the registry name the preset shrinks
    size = re.search(r"steps_lm_30m \((\d+\.\d+)M parameters", out)
    assert size and 0 < float(size.group(1)) < 1, out[:2000]
    assert all("epoch eta " in line and "run eta " in line for line in lines)
    run = tmp_path / "run"
    proc = launch(env, run, "--compile", "--channels-last", overrides=tiny, config=config)
    wait_for_step(proc, run, 4)
    proc.send_signal(signal.SIGUSR1)
    assert finish(proc)[0] == EXIT_PREEMPTED
    train(env, run, "--compile", "--channels-last", "--resume", "auto", overrides=tiny, config=config)
    assert curve(run) == curve(reference)


# ----------------------------------------------------------------------------------------- bad input
LM = "configs/stepsnet/transformer-lm-w128-d4_1xb32-2e_kjv-lm.py"
BAD_OPTIONS = {  # config, overrides (TINY: test_train's tiny preset), options, expected text
    "no checkpointing in the model": (
        LM,
        [],
        ["--grad-checkpointing"],
        "model transformer_lm_30m has no set_grad_checkpointing()",
    ),
    "no fused kernel": (PRESET, TINY + ["optim.opt=lamb", "optim.fused=True"], [], "optimizer 'lamb'"),
    "fused and foreach": (PRESET, TINY + ["optim.fused=True", "optim.foreach=True"], [], "exclude each other"),
    "compile mode": (PRESET, TINY, ["--compile-mode", "fastest"], "compile.mode='fastest' is not one of"),
    "cuda graphs and accumulation": (
        PRESET,
        TINY + ["grad_accum=2"],
        ["--compile-mode", "reduce-overhead"],
        "compile.mode='reduce-overhead' with grad_accum=2: CUDA graphs overwrite",
    ),
    "compile backend": (PRESET, TINY + ["compile.enable=True", "compile.backend=tvmx"], [], "compile.backend='tvmx'"),
    "prefetch factor": (PRESET, TINY + ["loader.prefetch_factor=0"], [], "loader.prefetch_factor=0"),
    "not a bool": (PRESET, TINY + ["channels_last=1"], [], "channels_last=1: expected a value like False"),
}


@pytest.mark.slow
@pytest.mark.tier("integration")
@pytest.mark.parametrize("case", BAD_OPTIONS)
def test_bad_speed_options_fail_in_one_line_and_write_nothing(case, tmp_path, capsys, monkeypatch):
    from harness.cli import main

    config, overrides, args, expected = BAD_OPTIONS[case]
    monkeypatch.setenv("DEPTHBENCH_DATA", str(tmp_path / "data"))
    work_dir = tmp_path / "run"
    rc = main(["train", config, "--work-dir", str(work_dir), *args, *overrides])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and err.startswith("depthbench train: error:"), err
    assert expected in err, err
    assert not work_dir.exists()


@pytest.mark.slow
@pytest.mark.tier("integration")
def test_device_normalisation_of_token_data_is_one_line(env, corpus, tmp_path):
    config = "configs/stepsnet/steps-lm-w128-d8_1xb32-2e_kjv-lm.py"
    rc, out, err = finish(
        launch(
            env,
            tmp_path / "run",
            overrides=[
                "data.type=text",
                f"data.root={corpus}",
                "data.train_split=train.txt",
                "data.val_split=valid.txt",
                "data.vocab_size=300",
                "data.seq_len=16",
                "model.vocab_size=300",
                "model.seq_len=16",
                "loader.device_normalize=True",
            ],
            config=config,
        )
    )
    errors = [line for line in err.splitlines() if line.startswith("depthbench train: error:")]
    assert rc == 2 and len(errors) == 1 and "no uint8 mode" in errors[0]
    assert not (tmp_path / "run").exists()


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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.tier("integration")
def test_an_epoch_without_an_optimizer_step_fails_before_writing(env, tmp_path):
    run = tmp_path / "run"
    overrides = [o for o in TINY if not o.startswith("data.train_subset")] + ["data.train_subset=4"]  # < batch 8
    rc, out, err = finish(launch(env, run, overrides=overrides))
    errors = [line for line in err.splitlines() if line.startswith("depthbench train: error:")]
    assert rc == 2 and len(errors) == 1 and "0 batches" in errors[0] and "no optimizer step" in errors[0]
    assert not run.exists()


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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
    with read_only(readonly):  # really unwritable, root included (CI runs as root): the check creates a file
        assert main(["train", PRESET, *TINY, "--work-dir", str(readonly / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{readonly} is not writable" in err
    assert not (readonly / "run").exists()


def test_a_deterministic_run_leaves_torch_s_switches_as_it_found_them(env, tmp_path, monkeypatch):
    """``deterministic=True`` turns torch's deterministic algorithms on and cuDNN's autotuner off for the run only:
    left on, they slowed whatever ran next in the process (the GPU check's benchmarks ran after such a run)."""
    from harness.commands.train import run as train_run

    for name in ("OMP_NUM_THREADS", "DEPTHBENCH_DATA"):
        monkeypatch.setenv(name, env[name])
    before = torch.backends.cudnn.benchmark
    assert not torch.are_deterministic_algorithms_enabled()
    seen = []
    real = torch.use_deterministic_algorithms
    monkeypatch.setattr(torch, "use_deterministic_algorithms", lambda on, **kw: (seen.append(on), real(on, **kw)))
    handlers = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGTERM)}
    try:
        result = train_run(PRESET, work_dir=tmp_path / "run", overrides=TINY + ["deterministic=True", "epochs=1"])
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)
    assert result.exit_code == 0 and seen[0] is True  # it was on for the run
    assert not torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.benchmark == before
