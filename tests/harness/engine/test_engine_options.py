"""The speed options of ``depthbench train`` (issue 27), on CPU: compile, channels-last, grad checkpointing, fused
optimizer steps, uint8 batches normalised on the device -- each trains a tiny model on both engines and resumes
bit-identically; with EMA, distillation, SReT's mixed depth, ScaleNet growth and the LM task. Plus the run's ETA and
units in the progress lines, ``depthbench bench --compare`` and ``--pairs ... --compile``, and the loader benchmark.

The tiny setting is tests/harness/engine/test_train.py's (HO-ResNet-10 digits preset at 8x8, width 8, 160 images, batch 8: 20
steps per epoch, 2 epochs, last.pth every 3 steps). Compiling costs ~1 min per new graph on a loaded 2-core machine
and seconds once torch's compile caches hold it.
"""

import json
import os
import re
import shutil
import signal
from types import SimpleNamespace

import pytest
import torch

from devices import device_env, device_overrides, on_devices
from harness.engine.forked import start_forked
from fixtures.training import (
    EXIT_PREEMPTED,
    PRESET,
    ROOT,
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
    wait_for_step,
)

pytestmark = pytest.mark.slow

# every option at once (grad checkpointing: HO-ResNet's per block of its ODE stage)
ALL_OPTIONS = [
    "--compile",
    "--channels-last",
    "--grad-checkpointing",
    "optim.fused=True",
    "loader.device_normalize=True",
]
DEIT = "configs/deit/deit-tiny-p4_1xb64-30e_digits.py"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    cache = tmp_path_factory.mktemp("data")
    return dict(os.environ, OMP_NUM_THREADS="1", DEPTHBENCH_DATA=str(cache), PYTHONUNBUFFERED="1")


def log_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("epoch ") and " step " in line]


# ----------------------------------------------------------------------------------------- exact resume
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


# ----------------------------------------------------------------------------------------- pieces
def test_fused_and_foreach_optimizer_steps_are_torch_s():
    from mmengine import Config

    from harness.engine.builders import build_optimizer

    cfg = Config.fromfile(str(ROOT / "configs/_base_/schedules/deit_300e.py"))
    model = torch.nn.Linear(4, 2)
    assert build_optimizer(model, cfg).defaults["fused"] is None  # off: torch's default, as before
    cfg.optim.fused = True
    assert build_optimizer(model, cfg).defaults["fused"] is True
    cfg.optim.fused, cfg.optim.foreach = None, True
    assert build_optimizer(model, cfg).defaults["foreach"] is True


def test_the_ema_of_a_model_compiled_in_place_runs_its_own_weights_eagerly():
    """An epoch hook hands build_optimization the module the previous build compiled in place; its EMA (timm's
    ModelEmaV3, a deep copy) must not carry that compiled forward, which would run the training weights: torch's
    nn.Module.__getstate__ leaves it out of copies, which builders.build_optimization relies on."""
    from timm.utils import ModelEmaV3

    graphs = []

    def counting_backend(graph, example_inputs):
        graphs.append(graph)
        return graph.forward

    try:
        model = torch.nn.Linear(3, 2)
        model.compile(backend=counting_backend)
        x = torch.ones(1, 3)
        trained = model(x)
        assert len(graphs) == 1  # compiled in place
        ema = ModelEmaV3(model, decay=0.5)
        with torch.no_grad():
            ema.module.weight.zero_()
            ema.module.bias.fill_(1.0)
        assert torch.equal(ema.module(x), torch.ones(1, 2)) and len(graphs) == 1  # its own weights, eagerly
        assert torch.equal(model(x), trained) and ema.module.state_dict().keys() == model.state_dict().keys()
    finally:
        torch.compiler.reset()


def test_progress_lines_name_the_unit_and_the_run_eta(capsys):
    from harness.engine.loop import RunLog, TrainState, duration

    assert duration(59) == "00:00:59" and duration(90061) == "1d 01:01:01"
    run = SimpleNamespace(log_metrics=lambda **kw: None, log=lambda text: None)
    state = TrainState(epoch=1, global_step=30)
    log = RunLog(run, state, True, tensorboard=False, unit="seq", epochs=4, steps_per_epoch=20)
    log.train_step(
        state, loss=1.0, lr=0.1, grad_norm=None, images_per_s=12.5, step_time=2.0, peak_mem_mb=100, eta_s=20.0
    )
    line = capsys.readouterr().out.strip()
    # epoch 1 of 0..3 has 20 s left; epochs 2 and 3 are 2 x 20 steps x 2 s more
    assert "12.5 seq/s" in line and "epoch eta 00:00:20" in line and "run eta 00:01:40" in line
    bar = log.progress(10, 0, "epoch 1")
    bar.close()


# ----------------------------------------------------------------------------------------- bench
@pytest.mark.tier("integration")
def test_bench_compare_pairs_each_model_with_its_variants(one_thread):
    from harness.commands.bench import run

    result = run(
        ["resnet18"],
        input_size=16,
        batch_size=2,
        mode="train",
        compare=["fused", "channels-last"],
        repeats=2,
        iters=1,
        warmup=1,
        memory=False,
    )
    assert [r["label"] for r in result.rows] == ["resnet18", "resnet18 +fused", "resnet18 +channels-last"]
    assert [r["optimizer"] for r in result.rows] == ["adamw", "adamw-fused", "adamw"]  # fused vs plain AdamW
    assert [r["channels_last"] for r in result.rows] == [False, False, True]
    assert [(p["baseline"], p["candidate"]) for p in result.pairs] == [
        ("resnet18", "resnet18 +fused"),
        ("resnet18", "resnet18 +channels-last"),
    ]
    assert all(p["train_throughput_ratio"] > 0 for p in result.pairs)


def test_bench_pairs_preset_compiled(one_thread, tmp_path, monkeypatch):
    """--pairs with --compile: every preset model compiled (the CSV says so); the memory processes get the options
    they are measured with (compile included). HO-ResNet's preset at width 4 and 8 px, inference."""
    import harness.measure.bench as bench
    from harness.commands.bench import run

    jobs = []
    monkeypatch.setattr(bench, "memory_in_subprocess", lambda p, mode, *a, **kw: jobs.append((p.label, kw)) or 1.0)
    out = tmp_path / "b.csv"
    result = run(
        pairs="horesnet:schemes",
        model_kwargs={"width": 4},
        input_size=8,
        batch_size=2,
        mode="infer",
        compile=True,
        repeats=1,
        iters=1,
        warmup=1,
        out=out,
    )
    assert len(result.pairs) == 3 and all(r["compile"] is True for r in result.rows)
    assert len(jobs) == 4 and all(kw["compile"] is True for _, kw in jobs)
    assert (tmp_path / "b_pairs.csv").exists()


@pytest.mark.tier("integration")
def test_bench_memory_process_runs_the_variant_it_measures(one_thread):
    """The CPU memory process builds the participant with its options (grad checkpointing here) and returns MiB."""
    from harness.measure.bench import Participant, memory_in_subprocess

    p = Participant("resnet18", {}, (3, 16, 16))
    plain = memory_in_subprocess(p, "train", 2, None, False, 1)
    checkpointed = memory_in_subprocess(p, "train", 2, None, False, 1, grad_checkpointing=True, optimizer="adamw-fused")
    assert plain > 0 and checkpointed > 0


@pytest.mark.tier("integration")
def test_bench_grad_checkpointing_needs_the_model_s_support():
    from harness.commands.bench import run
    from harness.core.errors import DepthbenchError

    with pytest.raises(DepthbenchError, match="SReT_T has no set_grad_checkpointing"):
        run(["SReT_T"], input_size=32, batch_size=1, mode="train", grad_checkpointing=True, repeats=1, memory=False)


# ----------------------------------------------------------------------------------------- loader benchmark
@pytest.mark.tier("integration")
def test_loader_benchmark_runs_on_a_tiny_generated_folder(tmp_path):
    # `python -m benchmarks.loader_throughput` (the script as a module: benchmarks/ is a namespace package from the
    # repository root) as a fork of the preloaded server: its torch/timm imports are not what the test is about
    log = tmp_path / "log.txt"
    proc = start_forked(
        "benchmarks.loader_throughput",
        [
            "--root",
            tmp_path / "folder",
            "--images",
            "48",
            "--classes",
            "4",
            "--batch-size",
            "8",
            "--workers",
            "0",
            "1",
            "--batches",
            "4",
            "--rounds",
            "1",
            "--json",
            tmp_path / "r.json",
        ],
        dict(os.environ, OMP_NUM_THREADS="1"),
        log,
        cwd=ROOT,
    )
    proc.join(600)
    assert proc.exitcode == 0, log.read_text()[-3000:]
    result = json.loads((tmp_path / "r.json").read_text())
    loaders = {r["loader"] for r in result["rows"]}
    assert {"depthbench", "depthbench uint8", "timm create_loader", "depthbench, no reseed"} <= loaders
    assert all(r["images_per_s"] > 0 for r in result["rows"])
    assert len(list((tmp_path / "folder" / "train").iterdir())) == 4
