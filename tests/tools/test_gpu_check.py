"""The GPU check: depthbench's CUDA paths on one bare GPU machine (tools/gpu_check.sh, docs/preflight.md).

Each test runs on ``cuda`` at the papers' sizes and on ``cpu`` at tiny sizes (tests/devices.py: the ``device``
marker, the time limits, the report); CI runs the CPU variants. Parts:

- ``models``: one model per family, forward in fp32 and under bf16 autocast against a CPU float64 forward of the
  same weights and input, and a training step in each precision;
- ``transnext``: TransNeXt's native attention at several input sizes (both pool modes) against the CPU, training
  steps in fp32 and bf16, and the official ``swattention`` kernels against it where they import;
- ``bench``: ``depthbench bench`` (StepsNet's equal-FLOPs pairs, TransNeXt-T vs Swin-T) into ``bench.csv``;
- ``train``: tests/harness/engine/test_runner.py's and tests/harness/commands/test_train.py's preempt/resume
  tests, on the device;
- ``preflight``: ``depthbench preflight`` (the digits preset; on CUDA also Steps-DeiT-S's recipe at its per-device
  batch 128 and 10 loader workers, fed from the digits at 224 px);
- ``loader``: the DeiT recipe's training loader on packed shards, ``loader.pipeline`` ``cpu`` against ``device``
  (issue 42: images/s per GPU and CPU cores used);
- ``nosync``: (issue 40) a training epoch with every host sync between log steps an error, and the training step
  of the StepsNet equal-FLOPs pairs, eager, compiled and ``reduce-overhead`` (the compiled modes on CUDA are long:
  run on their own, ``alone``);
- ``compile``: ``torch.compile`` of one model per family (forward and training step) against float64.

The check found a defect before it ever ran on a GPU: TransNeXt's fused ConvGLU (models/transnext.py,
``_GatedConvFC``) recomputed its depthwise convolution in backward outside autocast, so a training step under bf16
autocast failed (bf16 input, fp32 bias) -- and TransNeXt's recipes train in bf16. Fixed; a test below keeps it so.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import weakref
from pathlib import Path
from unittest import mock

import pytest
import torch

from devices import (
    CALL_END_S,
    CALL_START_S,
    GPU_CHECK_FILES,
    LIMITS_S,
    MIN_START_S,
    RESERVED_S,
    TOL_BF16,
    TOL_FP32,
    device_param,
    kept_for_later,
    on_devices,
    start_limit,
)
from gpu_steps import (
    TIMED_STEPS,
    WARM_UP_STEPS,
    _compiled_job,
    autocast_or_not,
    build,
    clock_fields,
    error_line,
    example,
    first,
    in_processes,
    lock_time_s,
    loss_of,
    plain_fp32,
    rel_err,
    release_device_memory,
    spawned,
    step_ms,
    steps_under_lock,
    timed_ms,
    timing_s,
)

pytestmark = pytest.mark.tier("system")

ROOT = Path(__file__).resolve().parents[2]
PRESET = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"
STEPS_DEIT_S = "configs/stepsnet/steps-deit-small_8xb128-300e_in1k.py"
# (model, keyword arguments, batch, input side or None for the model's own): one per family at the papers' main
# sizes on CUDA; on the CPU small variants of the same code
MODELS = {
    "cuda": [
        ("steps_deit_small", {}, 2, None),
        ("steps_swin_tiny", {}, 2, None),
        ("steps_resnet50", {}, 2, None),
        ("SReT_S", {}, 2, None),
        ("transnext_tiny", {}, 2, None),
        ("horesnet58_rk4", {}, 2, None),
        ("scalenet_deit_small_2x", {}, 2, None),
    ],
    "cpu": [
        ("steps_deit_small", {"img_size": 32}, 2, None),
        ("steps_resnet18_w32", {"num_classes": 10}, 2, 32),
        ("SReT_T", {"img_size": 64}, 2, None),
        ("transnext_micro", {"img_size": 64}, 2, None),
        ("horesnet10_rk4", {"width": 8, "num_classes": 10}, 2, 16),
        ("scalenet_deit_tiny_2x", {"img_size": 32}, 2, None),
    ],
}
# compiled against float64 (compile-check, call 2's budget): not Steps-ResNet-50 and TransNeXt-T, whose training
# steps call 1 compiles already (the pairs) and whose forward and step compiles did not fit compile-check's time
COMPILE = {
    "cuda": ["steps_deit_small", "SReT_S", "horesnet58_rk4", "scalenet_deit_small_2x"],
    "cpu": ["horesnet10_rk4"],
}
# the digits preset for the no-sync epoch: CUDA 179 steps of 8 images; CPU test_train's tiny setting (20 steps)
TRAIN = {
    "cuda": ["epochs=1", "batch_size=8", "log.tensorboard=False", "deterministic=True"],
    "cpu": [
        "model.width=8",
        "data.input_size=8",
        "data.train_subset=160",
        "data.val_subset=40",
        "batch_size=8",
        "epochs=1",
        "log.tensorboard=False",
    ],
}
# issue 40's step timings: the StepsNet equal-FLOPs pairs and TransNeXt-T against Swin-T at the recipes' per-GPU
# batch, bf16; CPU HO-ResNet-10 RK4 vs Euler
STEP_PAIRS = {
    "cuda": [
        ("deit_small_patch16_224", "steps_deit_small"),
        ("swin_tiny_patch4_window7_224", "steps_swin_tiny"),
        ("resnet50", "steps_resnet50"),
        ("swin_tiny_patch4_window7_224", "transnext_tiny"),
    ],
    "cpu": [("horesnet10_euler", "horesnet10_rk4")],
}
# each model of the pairs once, in the pairs' order
STEP_MODELS = {
    device: list(dict.fromkeys(name for pair in pairs for name in pair)) for device, pairs in STEP_PAIRS.items()
}
STEP_BATCHES = {"cuda": (128,), "cpu": (2, 4)}
# eager, and compiled with CUDA graphs (what a compiled step at these sizes runs as; on the CPU, which has no CUDA
# graphs, the default mode). The default mode on CUDA was left out after the first GPU session: its seven graphs and
# reduce-overhead's did not fit one call
STEP_MODES = ("eager", "reduce-overhead")
# the goal's step: DeiT-S's recipe at per-GPU batch 128 in bf16 through the engine (the run's own loop, backend,
# criterion, mixup, fused AdamW), its first batch repeated so that only the step is timed; CPU: DeiT-Tiny/4 digits
ENGINE_STEP = {
    "cuda": (
        "configs/deit/deit-small_8xb128-300e_in1k.py",
        [
            "data.type='digits'",
            "batch_size=128",
            "data.repeated_aug=False",
            "precision='bf16'",
            "optim.fused=True",
            "epochs=4",
        ],
    ),
    "cpu": (
        "configs/deit/deit-tiny-p4_1xb64-30e_digits.py",
        ["batch_size=8", "data.train_subset=80", "data.val_subset=16", "epochs=2"],
    ),
}
ENGINE_STEP_GOAL_MS = 15.0
# the engine's compiled DeiT-S step is not started with less of call 1 left (tests/devices.py, min_start_s): its
# run is the eager one's (~30 s estimated in docs/preflight.md: the engine's step never ran on a GPU) plus the
# step's compile (evaluation runs eager), 20.6 s for DeiT-S's step on the H200 (26 Nov 2026,
# benchmarks/results/gpu-h200-2026-11-26-engine-options: 'deit_s compiled' warmup_s); with the 20 s any test may
# start with it could only time out, where "not started" says what happened
ENGINE_COMPILED_MIN_START_S = 60
JPEGS = {"cuda": 2048, "cpu": 64}  # generated ImageNet-like JPEGs the loader tests read (jpeg_shards)


@pytest.fixture(scope="session")
def gpu_out(request, tmp_path_factory) -> Path:
    """The report folder (``--gpu-check-out``; else a temporary one): bench.csv, preflight.json/txt."""
    out = request.config.getoption("gpu_check_out")
    return Path(out).absolute() if out else tmp_path_factory.mktemp("gpu-check")


@pytest.fixture
def runs_here(tmp_path, tmp_path_factory, monkeypatch):
    """For a run in this process: runs and the exported digits under pytest's temporary folders."""
    monkeypatch.setenv("DEPTHBENCH_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("DEPTHBENCH_DATA", str(tmp_path_factory.getbasetemp() / "gpu-check-data"))
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS for deterministic=True
    return tmp_path


@pytest.fixture(scope="session")
def jpeg_shards(tmp_path_factory):
    """``jpeg_shards(images)``: ImageNet-like JPEGs (benchmarks/loader_throughput.py's ``make_folder``, 10 classes)
    packed into shards of 500, made once per session for the tests that read them -- 2,048 of them take ~30 s of one
    core, and the first GPU session's two loader tests each making their own ran the second out of its time."""
    made = {}

    def shards(images: int) -> Path:
        if images not in made:
            sys.path.insert(0, str(ROOT / "benchmarks"))
            try:
                from loader_throughput import make_folder
            finally:
                sys.path.remove(str(ROOT / "benchmarks"))
            from harness.commands.data import run_pack

            base = tmp_path_factory.mktemp(f"jpegs-{images}")
            run_pack(make_folder(base / "folder", images, 10), base / "shards", shard_size=500)
            made[images] = base / "shards"
        return made[images]

    return shards


@pytest.fixture(autouse=True)
def tf32_as_it_was():
    """A test that turns TF32 off (:func:`plain_fp32`) leaves it as it found it for the next (bench's fp32 rows)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


# ------------------------------------------------------------------------------------------------ helpers
def float64_reference(name: str, kwargs: dict, batch: int, side, folder: Path) -> Path:
    """The model's CPU float64 logits on a fixed input, saved once per session (models and compile read it)."""
    path = folder / f"ref-{name}.pt"
    if not path.exists():
        model = build(name, kwargs).eval().double()
        x, size = example(name, kwargs, batch, side)
        start = time.perf_counter()
        with torch.no_grad():
            ref = first(model(x.double()))
        torch.save({"x": x, "ref": ref, "size": size, "seconds": time.perf_counter() - start}, path)
    return path


@pytest.fixture(scope="session")
def references(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("float64-references")


# ------------------------------------------------------------------------------------------------ part: models
@pytest.mark.parametrize(
    "device, spec",
    [device_param(kind, spec, part="models", id=f"{kind}-{spec[0]}") for kind in MODELS for spec in MODELS[kind]],
)
def test_model_matches_float64_and_trains(device, spec, references, record):
    """Forward in fp32 and bf16 against the CPU float64 forward, then a training step in each precision."""
    name, kwargs, batch, side = spec
    plain_fp32(device)
    saved = torch.load(float64_reference(name, kwargs, batch, side, references), weights_only=True)
    model = build(name, kwargs).eval().to(device)
    x = saved["x"].to(device)
    with torch.no_grad():
        fp32 = rel_err(first(model(x)), saved["ref"])
        with autocast_or_not(device, "bf16"):
            bf16 = rel_err(first(model(x)), saved["ref"])
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    step_ms = {}
    for precision in ("fp32", "bf16"):

        def step():
            with autocast_or_not(device, precision):
                loss = loss_of(model(x))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)

        step()  # warm-up (cuDNN picks its kernels)
        step_ms[precision] = round(timed_ms(step, device, 3), 2)
    finite = all(bool(torch.isfinite(p).all()) for p in model.parameters())
    record(
        name=name,
        input="x".join(map(str, saved["size"])),
        batch=batch,
        kwargs=kwargs,
        fp32_rel_err=float(f"{fp32:.3g}"),
        bf16_rel_err=float(f"{bf16:.3g}"),
        train_fp32_ms=step_ms["fp32"],
        train_bf16_ms=step_ms["bf16"],
        finite=finite,
        reference_s=round(saved["seconds"], 1),
    )
    assert fp32 <= (TOL_FP32 if device == "cuda" else 1e-5) and bf16 <= TOL_BF16, (fp32, bf16)
    assert finite and step_ms["fp32"] > 0 and step_ms["bf16"] > 0


# ------------------------------------------------------------------------------------------------ part: transnext
TRANSNEXT = {
    "cuda": ("transnext_tiny", {}, [224, 384, 512, 640]),
    "cpu": ("transnext_micro", {"img_size": 64}, [64, 96, 128]),
}


@on_devices("transnext")
def test_transnext_native_attention_at_several_sizes(device, record):
    """Both pool modes at each size: finite in fp32 and bf16; on CUDA against the CPU at the first two sizes (the
    CPU costs seconds per image at 384 px and more)."""
    name, kwargs, sizes = TRANSNEXT[device]
    plain_fp32(device)
    for pool_mode in ("normal", "linear"):
        cpu_model = build(name, {**kwargs, "pool_mode": pool_mode, "attention_backend": "native"}).eval()
        model = copy.deepcopy(cpu_model).to(device)
        for size in sizes:
            x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(size))
            xd = x.to(device)
            with torch.no_grad():
                y = model(xd)
                ms = timed_ms(lambda: model(xd), device, 3)
                with autocast_or_not(device, "bf16"):
                    yb = model(xd)
                row = {
                    "name": f"{name} {pool_mode} {size}",
                    "forward_ms": round(ms, 2),
                    "finite": bool(torch.isfinite(y).all() and torch.isfinite(yb).all()),
                }
                if device != "cpu" and size in sizes[:2]:  # measured before the row is written (rows.jsonl has it)
                    ref = cpu_model(x)
                    row.update(
                        vs_cpu_rel_err=float(f"{rel_err(y, ref):.3g}"),
                        bf16_vs_cpu_rel_err=float(f"{rel_err(yb, ref):.3g}"),
                    )
                item = record(**row)
            assert item["finite"] and item["forward_ms"] > 0, item
            assert item.get("vs_cpu_rel_err", 0) <= TOL_FP32 and item.get("bf16_vs_cpu_rel_err", 0) <= TOL_BF16, item


@on_devices("transnext")
def test_transnext_trains_under_bf16_autocast(device, record):
    """A training step at the second size in fp32 and in bf16 (the backward of the window taps; the fused ConvGLU's
    recomputation under the forward's autocast state)."""
    name, kwargs, sizes = TRANSNEXT[device]
    plain_fp32(device)
    model = build(name, {**kwargs, "attention_backend": "native"}).train().to(device)
    x = torch.randn(2, 3, sizes[1], sizes[1], device=device)
    for precision in ("fp32", "bf16"):
        with autocast_or_not(device, precision):
            loss = model(x).float().mean()
        loss.backward()
        model.zero_grad(set_to_none=True)
        record(name=f"{name} train step {sizes[1]} {precision}", finite=bool(torch.isfinite(loss)))
        assert torch.isfinite(loss), precision


@pytest.mark.parametrize("device", [device_param("cuda", part="transnext", alone=True)])
def test_swattention_matches_native_attention(device, record):
    """The official swattention kernels (CUDA tensors only) against the native path. An optional extension, so the
    test runs only when asked for (``alone``: tools/gpu_check.sh OUT -m "device(kind='cuda', alone=True)" -k
    swattention); asked for where the extension does not import, it fails saying how to get it."""
    from models.transnext import swattention_available

    if not swattention_available():
        pytest.fail(
            "the swattention extension does not import here: build and install it from TransNeXt's official "
            "repository (its swattention_extension folder, pip install .) on this CUDA machine, then rerun"
        )
    name, kwargs, sizes = TRANSNEXT[device]
    plain_fp32(device)
    native = build(name, {**kwargs, "attention_backend": "native"}).eval().to(device)
    kernel = build(name, {**kwargs, "attention_backend": "swattention"}).eval().to(device)
    for size in sizes[:2]:
        x = torch.randn(2, 3, size, size, device=device)
        with torch.no_grad():
            err = rel_err(kernel(x), native(x))
            record(
                name=f"swattention vs native {size}",
                rel_err=float(f"{err:.3g}"),
                native_ms=round(timed_ms(lambda: native(x), device, 5), 2),
                swattention_ms=round(timed_ms(lambda: kernel(x), device, 5), 2),
            )
        assert err <= TOL_FP32, (size, err)


# ------------------------------------------------------------------------------------------------ part: bench
BENCH_COMMON = dict(batch_size=64, repeats=5, iters=3, warmup=3)
BENCH = {
    "cuda": [
        ("StepsNet equal FLOPs, bf16 b64", dict(pairs="stepsnet:equal-flops", mode="both", amp="bf16", **BENCH_COMMON)),
        (
            "TransNeXt-T vs Swin-T, bf16 b64",
            dict(pairs="transnext:competitors", mode="both", amp="bf16", **BENCH_COMMON),
        ),
        (
            "TransNeXt-T vs Swin-T, fp32 b64 (Table 11's setting)",
            dict(pairs="transnext:competitors", mode="infer", amp=None, **BENCH_COMMON),
        ),
    ],
    "cpu": [
        (
            "HO-ResNet-10 RK4 vs Euler (tiny, fp32)",
            dict(
                models=["horesnet10_rk4", "horesnet10_euler"],
                model_kwargs={"width": 8, "num_classes": 10},
                input_size=16,
                batch_size=2,
                mode="both",
                repeats=2,
                iters=1,
                warmup=1,
                memory=False,
                threads=1,
                peak_size=256,
            ),
        )
    ],
}


@pytest.mark.parametrize(
    "device, label, spec",
    [
        device_param(kind, label, spec, part="bench", id=f"{kind}-{i}")
        for kind in BENCH
        for i, (label, spec) in enumerate(BENCH[kind])
    ],
)
def test_bench_writes_timm_csv(device, label, spec, gpu_out, record):
    from harness.commands.bench import run as bench

    out = gpu_out / "bench.csv"
    result = bench(device=device, out=out, **spec)
    rows = [
        {
            k: r.get(k)
            for k in (
                "label",
                "precision",
                "batch_size",
                "infer_samples_per_sec",
                "train_samples_per_sec",
                "infer_mfu",
                "train_mfu",
                "infer_peak_mem_mb",
                "train_peak_mem_mb",
                "infer_gmacs",
                "device_name",
            )
        }
        for r in result.rows
    ]
    pairs = [
        {
            k: p.get(k)
            for k in (
                "candidate",
                "baseline",
                "gmacs_ratio",
                "infer_throughput_ratio",
                "train_throughput_ratio",
                "infer_memory_ratio",
                "train_memory_ratio",
                "claim",
            )
        }
        for p in result.pairs
    ]
    record(name=label, rows=rows, pairs=pairs, peak=result.machine.get(f"peak_gflops_{spec.get('amp') or 'fp32'}"))
    assert rows and all(r["infer_samples_per_sec"] > 0 for r in rows) and out.exists()
    if device == "cpu":
        with open(out, newline="") as fh:
            written = list(csv.DictReader(fh))
        assert [r["label"] for r in rows] == [r["model"] for r in written] == ["horesnet10_rk4", "horesnet10_euler"]
        assert all(float(r["infer_samples_per_sec"]) > 0 and float(r["train_samples_per_sec"]) > 0 for r in written)
        assert {r["device"] for r in written} == {"cpu"} and {r["batch_size"] for r in written} == {"2"}


# ------------------------------------------------------------------------------------------------ part: preflight
@on_devices("preflight")
def test_preflight(device, gpu_out, runs_here, record):
    """``depthbench preflight``; on CUDA the paper's per-device batch (8 GPUs x 128) and loader of Steps-DeiT-S's
    ImageNet recipe on one GPU, fed from the digits exported at 224 px (no ImageNet here), 10 loader workers."""
    from harness.commands.preflight import run

    if device == "cpu":
        kwargs = dict(
            configs=[PRESET],
            overrides=["model.width=8", "data.input_size=8", "batch_size=16"],
            steps=2,
            loader_seconds=2.0,
        )
    else:
        kwargs = dict(
            configs=[PRESET],
            with_overrides=[(STEPS_DEIT_S, ["data.type='digits'", "batch_size=1024", "data.repeated_aug=False"])],
            nodes=1,
            gpus_per_node=8,
            time="2-00:00:00",
            loader_seconds=10.0,
        )
    report = run(device=device, work_dir=runs_here / "preflight", progress=print, **kwargs)
    print(report.text, flush=True)
    for name in ("preflight.json", "preflight.txt"):
        shutil.copy(runs_here / "preflight" / name, gpu_out / name)
    # on one GPU the 8-GPU layout's own checks (per-device batch) pass, but its ranks share nothing to all-reduce
    checks = [
        {"check": c.check, "verdict": c.verdict, "config": c.config, "value": c.value, "text": c.text}
        for c in report.checks
    ]
    summary = report.record.get("summary") or {}
    record(
        name="depthbench preflight",
        exit_code=report.exit_code,
        summary=summary,
        checks=checks,
        verdict="warn" if summary.get("warn") else "ok",
    )
    assert report.exit_code == 0, report.text
    written = json.loads((gpu_out / "preflight.json").read_text())
    assert written["summary"] == summary and written["configs"][0]["model"] == "horesnet10_rk4"
    assert "preflight: " in (gpu_out / "preflight.txt").read_text()


# ------------------------------------------------------------------------------------------------ part: loader
@on_devices("bench")  # the loaders alone: after the goals' own measurement (the pipeline in a training epoch)
def test_loader_pipelines_on_shards(device, jpeg_shards, monkeypatch, record):
    """``loader.pipeline`` ``cpu`` (timm's transforms in 4 loader workers) against ``device`` (4 workers read bytes;
    nvJPEG decode and the augmentations batched on the GPU) on a generated ImageNet-like JPEG set packed into shards:
    finished images/s per GPU and CPU cores used (benchmarks/loader_throughput.py's code; issue 42's goal: 6,000
    images/s with <= 4 cores). CPU: 32 px, batches of 8, no workers."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from loader_throughput import pipeline_rate, training_config

    batch, batches, workers, size = (128, 10, 4, 224) if device == "cuda" else (8, 3, 0, 32)
    shards = jpeg_shards(JPEGS[device])
    for pipeline in ("cpu", "device"):
        cfg = training_config("configs/deit/deit-small_8xb128-300e_in1k.py", shards, 10, workers)
        cfg.data.update(type="shards", input_size=size, pin_memory=device == "cuda")
        cfg.loader.pipeline = pipeline
        rates = [pipeline_rate(cfg, batch, batches, device, epoch) for epoch in range(2)]
        best = max(rates, key=lambda r: r["images_per_s"])
        record(
            name=f"{pipeline} pipeline",
            images_per_s=round(best["images_per_s"], 1),
            cores=round(best["cores"], 2),
            workers=workers,
            batch=batch,
            input_size=size,
            goal="6,000 images/s per GPU with <= 4 cores" if device == "cuda" else "CPU mode: code path only",
        )
        assert best["images_per_s"] > 0 and best["cores"] > 0, best


# ------------------------------------------------------------------------------------------------ part: nosync
class LoaderWrapper:
    """The training data loader under the device loader, wrapped: every attribute but the iteration is its own
    (sampler, batch_size, length), so the engine sees the same loader."""

    def __init__(self, loader):
        self.loader = loader

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def __len__(self):
        return len(self.loader)


@pytest.mark.parametrize("engine", ["accelerate", "deepspeed"])
@on_devices("nosync")
def test_no_host_sync_between_log_steps(device, engine, runs_here, monkeypatch, record):
    """Issue 40: the digits preset trains one epoch in this process with every host sync between log steps an error
    (``torch.cuda.set_sync_debug_mode("error")`` outside the loop's sync points; the CPU has no such mode: there
    host reads and tensors made from host data -- blocking host-to-device copies on CUDA -- are counted by a
    ``TorchDispatchMode``, zero expected). Explicit device syncs (``torch.cuda.synchronize``, event and stream
    ``synchronize``, DeepSpeed's accelerator ``synchronize``: its throughput timer's) raise there on both."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from harness.commands.train import run as train_run
    from harness.engine import backends, loop

    cuda = device == "cuda"
    outside = {"reads": 0, "where": {}}
    state = {"inside": True, "steps": 0}  # inside a sync point: from a read of the totals to the next step's start

    class Reads(TorchDispatchMode):  # the CPU's stand-in for set_sync_debug_mode: host reads of tensors, and
        # tensors made from host data (torch.tensor/as_tensor/from_numpy: a blocking host-to-device copy on CUDA)
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if (
                func in (torch.ops.aten._local_scalar_dense.default, torch.ops.aten.lift_fresh.default)
                and not state["inside"]
            ):
                import traceback

                outside["reads"] += 1
                frame = traceback.extract_stack()[-3]
                where = f"{Path(frame.filename).name}:{frame.lineno}"
                outside["where"][where] = outside["where"].get(where, 0) + 1
            return func(*args, **(kwargs or {}))

    def mark(inside: bool):
        state["inside"] = inside
        if cuda:
            torch.cuda.set_sync_debug_mode("default" if inside else "error")

    real_read, real_begin, real_epoch = (
        backends.Backend.reduce_and_read,
        backends.Backend.step_begin,
        loop.train_one_epoch,
    )

    def read(self, tensor):
        mark(True)
        return real_read(self, tensor)

    def begin(self):
        real_begin(self)
        state["steps"] += 1
        mark(False)

    class HostLoader(LoaderWrapper):  # the input pipeline's own CPU reads (sampling, CPU transforms) are not the step's
        def __iter__(self):
            before, state["inside"] = state["inside"], True
            batches = iter(self.loader)
            state["inside"] = before
            while True:
                before, state["inside"] = state["inside"], True
                batch = next(batches, None)
                state["inside"] = before
                if batch is None:
                    return
                yield batch

    def epoch(objects, loader, *args, **kwargs):
        inner, loader.loader = loader.loader, HostLoader(loader.loader)
        try:
            if cuda:
                return real_epoch(objects, loader, *args, **kwargs)
            with Reads():
                return real_epoch(objects, loader, *args, **kwargs)
        finally:
            loader.loader = inner
            mark(True)

    def forbid_outside(owner, name):  # explicit device syncs, which set_sync_debug_mode does not flag
        real = getattr(owner, name)

        def guarded(*args, **kwargs):
            if not state["inside"]:
                outside["reads"] += 1
                outside["where"][name] = outside["where"].get(name, 0) + 1
                raise RuntimeError(f"{name} between log steps")
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, guarded)

    forbid_outside(torch.cuda, "synchronize")
    forbid_outside(torch.cuda.Event, "synchronize")
    forbid_outside(torch.cuda.Stream, "synchronize")
    if engine == "deepspeed":  # DeepSpeed syncs through its accelerator (a no-op on the CPU one: patched too)
        from deepspeed.accelerator import get_accelerator

        forbid_outside(get_accelerator(), "synchronize")
    monkeypatch.setattr(backends.Backend, "reduce_and_read", read)
    monkeypatch.setattr(backends.Backend, "step_begin", begin)
    monkeypatch.setattr(loop, "train_one_epoch", epoch)
    overrides = TRAIN[device] + ["log_interval=10", "ckpt.interval_steps=0", "ckpt.interval_minutes=None"]
    start = time.perf_counter()
    try:  # set_sync_debug_mode("error") raises at the syncing call: the assertion below names it
        result = train_run(str(ROOT / PRESET), work_dir=runs_here / "nosync-run", overrides=overrides, engine=engine)
    finally:
        if cuda:
            torch.cuda.set_sync_debug_mode("default")
    check = "set_sync_debug_mode('error')" if cuda else "host reads counted (TorchDispatchMode)"
    record(
        name=f"no-sync training step, {engine} ({check} between log steps)",
        exit_code=result.exit_code,
        steps_checked=state["steps"],
        host_reads_between_log_steps=outside["reads"],
        where=outside["where"],
        seconds=round(time.perf_counter() - start, 1),
    )
    assert result.exit_code == 0 and outside["reads"] == 0, outside
    assert state["steps"] > 0 and (cuda or state["steps"] == 20)  # the CPU's tiny setting: 160 images / 8


def timed_jobs(jobs: list[tuple], device: str, limit_s: float = 0.0, started: float | None = None):
    """``(job, result)`` for each ``step_ms`` job as it is measured. On CUDA, eager or compiled: every job in a
    spawned process of its own (a fresh CUDA context each), all warming up -- compiling: inductor's graph lowering
    is single-threaded Python, the GPU machine has 16 cores, the seven steps at batch 128 take ~60 GB of its 139 --
    at once, with the cores shared out as inductor's compile threads, then timed one at a time once all are ready
    (the first GPU session timed eager steps in four processes whose warm-up ran beside another's timing). Each
    eager step is profiled in its own process after it is timed, so no process is timed with the profiler's GPU
    tracing (CUPTI) attached, which stays attached after a profile and slows what follows -- this one's later
    timings included (DeiT-S through the engine). A job that fails gives ``{"error": ...}`` and lets the others go
    on. On the CPU: one after another in this process. ``limit_s``: the test's time limit, which the processes'
    wait leaves room in to time every step. Each result has its job's ``compile_s`` and ``ready_s`` (from
    ``started``, the test's ``time.time()``: gpu_steps.clock_fields), a failed job's too."""
    started = time.time() if started is None else started
    if device != "cuda":
        for job in jobs:
            clock = {}
            try:
                result = step_ms(*job, clock=clock)
            except Exception as e:  # one model failing costs the others nothing (the test fails at its end)
                clock["stopped"] = time.time()
                result = {"error": error_line(e)}
            yield job, {**result, **clock_fields(clock, started, time.time())}
    else:
        wait_s = max(0.0, limit_s - timing_s(jobs) - 15)
        timeout_s = max(1.0, limit_s - 10) if limit_s else None
        yield from in_processes(jobs, wait_s=wait_s, timeout_s=timeout_s, started=started)


def test_compiling_processes_time_their_steps_and_a_failing_one_costs_the_others_nothing():
    """The compiled pairs' machinery on the CPU (on CUDA the same with seven models): each job in a spawned process
    with the shared lock and barrier; a job that fails (here a model that does not exist) is an ``error`` result and
    arrives at the barrier, so the others are timed once both are ready, without waiting out their 600 s."""
    good = ("cpu", "horesnet10_euler", {"width": 8, "num_classes": 10}, 2, 16, "reduce-overhead")
    bad = ("cpu", "no_such_model", {}, 2, 16, "reduce-overhead")
    eager = good[:-1] + ("eager",)  # as on CUDA: eager steps too, each profiled in its own process after its timing
    started = time.time()
    with mock.patch.dict(os.environ, OMP_NUM_THREADS="1"):
        results = {job[1::4]: result for job, result in in_processes([good, bad, eager], wait_s=600, started=started)}
    assert "no_such_model" in results["no_such_model", "reduce-overhead"]["error"], results
    compiled, plain = results["horesnet10_euler", "reduce-overhead"], results["horesnet10_euler", "eager"]
    assert compiled["step_ms"] > 0 and "beside_compiling" not in compiled, results
    assert plain["step_ms"] > 0 and plain["aten_ops"] > 0 and "profile_error" not in plain, results
    # each job's times from its process (the failed one built no model: neither compiled nor ready)
    assert compiled["compile_s"] > 0 and plain["compile_s"] > 0, results
    assert 0 < compiled["ready_s"] < time.time() - started and 0 < plain["ready_s"] < time.time() - started, results
    failed = results["no_such_model", "reduce-overhead"]
    assert failed["compile_s"] is None and failed["ready_s"] is None and "compile_unfinished_s" not in failed


def test_a_job_that_runs_out_of_gpu_memory_gives_its_memory_back_before_it_returns():
    """A job whose step fails (here a simulated CUDA out-of-memory error) is an ``error`` result, and its process
    empties its CUDA cache once what the failed step held is freed -- not while the exception's traceback still holds
    it -- so the processes still compiling or waiting for the lock get that memory."""
    import gpu_steps

    class Activations:
        pass

    held, emptied, calls = [], [], []

    def out_of_memory(*job, **kwargs):
        activations = Activations()  # a local of the failed step's frame, as its model and activations are
        held.append(weakref.ref(activations))
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    def empty_cache():
        calls.append("empty_cache")
        emptied.append(held[0]() is None)

    collect = gpu_steps.gc.collect
    job = ("cuda", "steps_swin_tiny", {}, 128, None, "reduce-overhead")
    with (
        mock.patch.object(gpu_steps, "step_ms", out_of_memory),
        mock.patch.object(torch.cuda, "is_initialized", return_value=True),
        mock.patch.object(torch.cuda, "empty_cache", empty_cache),
        mock.patch("torch._dynamo.reset", lambda: calls.append("reset")),
        mock.patch.object(gpu_steps.gc, "collect", lambda: calls.append("collect") or collect()),
    ):
        result = gpu_steps._timed(job)
    assert result == {"error": "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"}, result
    assert emptied == [True], emptied
    # what dynamo's caches alone held (its graphs' pools) collected before the cache is emptied
    assert calls == ["collect", "reset", "collect", "empty_cache"], calls


def test_a_job_whose_memory_release_fails_keeps_its_own_error():
    """A sticky CUDA error (an illegal memory access) raises again when the failed job's process empties its
    cache: the job's row still says what failed it, with the release's error beside it, instead of the exception
    ending the pool's results for every job."""
    import gpu_steps

    def illegal_access(*job, **kwargs):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    def sticky():
        raise RuntimeError("CUDA error: an illegal memory access was encountered (again)")

    job = ("cuda", "transnext_tiny", {}, 128, None, "reduce-overhead")
    with (
        mock.patch.object(gpu_steps, "step_ms", illegal_access),
        mock.patch.object(torch.cuda, "is_initialized", return_value=True),
        mock.patch.object(torch.cuda, "empty_cache", sticky),
        mock.patch("torch._dynamo.reset"),
    ):
        result = gpu_steps._timed(job)
    assert result["error"] == "RuntimeError: CUDA error: an illegal memory access was encountered", result
    assert result["release_error"].endswith("illegal memory access was encountered (again)"), result


def test_a_job_whose_function_raises_is_an_error_and_the_others_still_report():
    """``spawned``: an exception out of one job's function (here math.sqrt(-1) in its process) is that job's
    ``error`` result; the jobs after it are still reported."""
    import math

    results = dict(spawned(math.sqrt, [4.0, -1.0, 9.0]))
    assert results == {4.0: 2.0, -1.0: {"error": "ValueError: math domain error"}, 9.0: 3.0}, results


def test_a_job_that_fails_before_the_barrier_still_counts_as_ready():
    """A job that fails before the processes' barrier (out of memory while compiling) arrives at it anyway, so the
    others still wait for the rest to compile before any is timed, rather than being let go at once."""
    import threading

    import gpu_steps

    barrier = threading.Barrier(2)  # this job, and one other that compiles on

    def fails_compiling(*job, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory")

    job = ("cuda", "steps_swin_tiny", {}, 128, None, "reduce-overhead")
    with (
        mock.patch.object(gpu_steps, "step_ms", fails_compiling),
        mock.patch.object(gpu_steps, "_ALL_READY", barrier),
        mock.patch.object(gpu_steps, "_DEADLINE", time.time() + 60),
        mock.patch.object(gpu_steps, "release_device_memory"),
    ):
        result = gpu_steps._timed(job)
    assert "error" in result
    barrier.wait(timeout=30)  # the other one: passes (the failed one arrived), where an aborted barrier raises
    assert not barrier.broken


def test_a_job_cut_off_or_failed_in_its_compile_keeps_how_long_it_compiled():
    """The compiled pairs' reserve (RESERVED_S) is sized from the jobs' rows: a job cut off at the test's limit while
    it still compiles has ``compile_unfinished_s`` (how long it had compiled, read from the moments its process
    shares), ``compile_s`` and ``ready_s`` null; one compiled and ready but not yet timed has both; one whose step
    fails in its compile, the seconds until the failure."""
    import gpu_steps

    compiling, waiting = (("cuda", name, {}, 128, None, "reduce-overhead") for name in ("resnet50", "steps_swin_tiny"))
    started = time.time() - 200  # the test's start

    def cut_off(function, jobs, context, initializer, initargs, timeout_s):  # the processes' moments, then the limit
        moments, positions = initargs[-1], {job[1]: position for position, job in jobs}  # by model name
        gpu_steps._SharedClock(moments, positions["resnet50"])["warm_up"] = started + 10
        clock = gpu_steps._SharedClock(moments, positions["steps_swin_tiny"])
        clock["warm_up"], clock["warmed"], clock["ready"] = started + 10, started + 130, started + 130
        for job in jobs:
            yield job, {"error": f"not finished in {timeout_s:.0f} s"}

    with mock.patch.object(gpu_steps, "spawned", cut_off):
        found = gpu_steps.in_processes([compiling, waiting], wait_s=150, timeout_s=190, started=started)
        results = {job[1]: result for job, result in found}
    cut, ready = results["resnet50"], results["steps_swin_tiny"]
    assert cut["compile_s"] is None and cut["ready_s"] is None and 189 < cut["compile_unfinished_s"] < 200, cut
    assert ready["compile_s"] == 120 and ready["ready_s"] == 130 and "compile_unfinished_s" not in ready, ready

    def fails_compiling(*job, clock, **kwargs):
        clock["warm_up"] = time.time() - 30
        raise torch.OutOfMemoryError("CUDA out of memory")

    moments = [0.0] * len(gpu_steps.MOMENTS)
    with (
        mock.patch.object(gpu_steps, "step_ms", fails_compiling),
        mock.patch.object(gpu_steps, "_MOMENTS", moments),
        mock.patch.object(gpu_steps, "release_device_memory"),
    ):
        gpu_steps._timed(compiling)
    later = time.time() + 100  # the result read later: the failure's moment counts, not the reading's
    fields = clock_fields(gpu_steps._SharedClock(moments, 0), started, later)
    assert 29 < fields["compile_unfinished_s"] < 40 and fields["ready_s"] is None, fields


def test_equal_jobs_keep_their_own_times():
    """A model timed twice in one call (equal jobs) has two rows with their own times: each job's moments are kept
    in the slot of its position, not of the first job equal to it. The processes run here one after another, both
    before their results are read (as processes that finish at once)."""
    import gpu_steps

    job = ("cuda", "resnet50", {}, 128, None, "reduce-overhead")
    started = time.time()
    arrivals = iter([started + 5, started + 9])

    def ready_at(*job, clock, **kwargs):
        clock["ready"] = next(arrivals)
        return {"step_ms": 1.0}

    def in_this_process(function, jobs, context, initializer, initargs, timeout_s):  # both run before either is read
        initializer(*initargs)
        yield from list(zip(jobs, map(function, jobs)))

    globals_set_by_hold = dict.fromkeys(("_TIMING_LOCK", "_ALL_READY", "_DEADLINE", "_MOMENTS"))
    with (
        mock.patch.multiple(gpu_steps, **globals_set_by_hold),  # put back after the in-process "processes"
        mock.patch.object(gpu_steps, "spawned", in_this_process),
        mock.patch.object(gpu_steps, "step_ms", ready_at),
    ):
        results = [result for _, result in gpu_steps.in_processes([job, job], wait_s=60, started=started)]
    assert [result["ready_s"] for result in results] == [5, 9], results


@pytest.mark.parametrize("mode", STEP_MODES)
def test_a_job_takes_under_the_timing_lock_the_steps_its_lock_time_allows_for(mode):
    """The processes' wait leaves each job ``lock_time_s`` (gpu_steps): its steps under the lock
    (``steps_under_lock``) at the slowest step's time, and what comes beside them. Counted here on the CPU (CUDA's
    counts are the same constants): every step ``step_ms`` takes under the lock is one that allows for, and a
    compiled job's first, compiling, step is the only one outside it."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    class Lock:  # records whether a step is taken under it
        held = False

        def __enter__(self):
            Lock.held = True

        def __exit__(self, *exc):
            Lock.held = False

    taken = {True: 0, False: 0}  # steps under the lock, and outside it

    def count(optimizer, args, kwargs):
        taken[Lock.held] += 1

    handle = register_optimizer_step_post_hook(count)
    try:
        result = step_ms("cpu", "horesnet10_euler", {"width": 8, "num_classes": 10}, 2, 16, mode, lock=Lock())
    finally:
        handle.remove()
    assert result["step_ms"] > 0
    assert taken == {True: steps_under_lock("cpu", mode), False: int(mode != "eager")}, taken


@pytest.mark.parametrize("mode", STEP_MODES)
def test_the_timed_steps_run_in_two_windows_between_synchronisations(mode):
    """``step_ms`` times its steps as a run trains, syncing around them, not after each: a sync per step leaves the
    GPU idle while the next step's kernels are launched, a cost only launch-bound (eager) steps would pay. They run in
    two windows of equal size, one sync between them, so that a spike in one (beside another process's compile)
    shows in ``step_ms_windows``, whose mean is ``step_ms``. Counted on the CPU, where ``step_ms`` calls ``sync`` as
    on CUDA."""
    import gpu_steps
    from torch.optim.optimizer import register_optimizer_step_post_hook

    events = []
    real_sync = gpu_steps.sync
    handle = register_optimizer_step_post_hook(lambda *args: events.append("step"))
    try:
        with mock.patch.object(gpu_steps, "sync", lambda device: events.append("sync") or real_sync(device)):
            result = step_ms("cpu", "horesnet10_euler", {"width": 8, "num_classes": 10}, 2, 16, mode)
    finally:
        handle.remove()
    steps = [i for i, event in enumerate(events) if event == "step"]
    # before the timed ones: a compiled job's compiling step or an eager job's first step, and the warm-up steps
    timed = steps[1 + WARM_UP_STEPS["cpu"] :][: TIMED_STEPS["cpu"]]
    assert len(timed) == TIMED_STEPS["cpu"] > 1, events
    half = len(timed) // 2
    first, second = events[timed[0] : timed[half - 1] + 1], events[timed[half] : timed[-1] + 1]
    assert "sync" not in first + second and "sync" in events[timed[half - 1] : timed[half]], events
    assert events[timed[0] - 1] == events[timed[-1] + 1] == "sync", events
    windows = result["step_ms_windows"]
    assert len(windows) == 2 and all(w > 0 for w in windows), result
    assert result["step_ms"] == pytest.approx(sum(windows) / 2, abs=1e-3), result


def test_the_processes_wait_leaves_every_job_its_time_under_the_lock():
    """On CUDA the seven jobs wait for each other at most until their timings still fit before the results are cut
    off (10 s before the test's limit): at the parts' limits, each job's steps under the lock at the slowest step
    measured on the H200 (TransNeXt-T's eager step, 298 ms on 29 Nov 2026:
    benchmarks/results/gpu-h200-2026-11-29-check/call1/rows.jsonl) and an eager job's first step's autotuning
    (TransNeXt-T's 3.3 s warm-up there on 26 Nov, docs/benchmarks.md) still fit after the wait --
    eager jobs take two more steps under the lock than compiled ones, and the autotuning; and each job's allowance
    (``lock_time_s``) covers them, so the constants cannot drift below what was measured."""
    asked = {}

    def processes(jobs, wait_s, timeout_s=None, started=None):
        asked[jobs[0][5]] = wait_s, timeout_s
        yield from ()

    names = STEP_MODELS["cuda"]
    with mock.patch(f"{__name__}.in_processes", processes):
        for mode, part in (("eager", "step"), ("reduce-overhead", "compile")):
            list(timed_jobs([("cuda", name, {}, 128, None, mode) for name in names], "cuda", LIMITS_S[part]))
    assert set(asked) == set(STEP_MODES), asked
    for mode, (wait_s, timeout_s) in asked.items():
        one_job_s = steps_under_lock("cuda", mode) * 0.298 + (3.3 if mode == "eager" else 0.0)
        assert lock_time_s(mode) >= one_job_s, (mode, lock_time_s(mode), one_job_s)
        assert wait_s > 0 and timeout_s - wait_s >= len(names) * one_job_s, (mode, wait_s, timeout_s)


@pytest.mark.parametrize(
    "device, mode",
    [
        device_param(kind, mode, part="step" if mode == "eager" else "compile", id=f"{kind}-{mode}")
        for kind in ("cuda", "cpu")
        for mode in STEP_MODES
    ],
)
def test_step_timings_of_the_equal_flops_pairs(device, mode, record, request):
    """Each pair's training step at the per-GPU batch, and the throughput ratio candidate/baseline (issue 55's goals:
    StepsNet >= 0.9x its baseline at batch 128 compiled, TransNeXt-T >= 0.6x Swin-T). Eager, then compiled with CUDA
    graphs (the graphs compiled in parallel processes), both in the GPU check's first call. Each model's time is a
    row as soon as it is measured, with its compile's (warm-up's) seconds and when it was ready (RESERVED_S's
    sizing)."""
    started = time.time()  # ready_s counts from here: the compiled pairs' reserve is this test's time
    if device == "cuda":  # what the engine's DeiT-S steps before it left in this process, for the pairs' processes
        try:
            release_device_memory()
        except Exception as e:  # a sticky CUDA error here: the pairs' processes have CUDA contexts of their own
            record(name="pytest process's GPU memory given back", release_error=error_line(e))
    plain_fp32(device)
    kwargs, side = ({}, None) if device == "cuda" else ({"width": 8, "num_classes": 10}, 16)
    names = STEP_MODELS[device]
    jobs = [(device, name, kwargs, batch, side, mode) for batch in STEP_BATCHES[device] for name in names]
    measured, failed = {}, {}
    limit = request.node.get_closest_marker("timeout")  # the part's, cut to the call's budget (tests/devices.py)
    with contextlib.closing(timed_jobs(jobs, device, limit.args[0] if limit else 0.0, started)) as finished:
        for (_, name, _, batch, _, _), took in finished:
            label = f"{name} training step, {mode}, batch {batch}"
            if "error" in took:
                failed[name, batch] = took["error"]
                record(name=label, mode=mode, **took, verdict="fail")  # release_error where giving memory back failed
            else:
                measured[name, batch] = took
                record(name=label, mode=mode, **dict(took, step_ms=round(took["step_ms"], 3)))

    def ratio(key: str, baseline: str, candidate: str, batch: int) -> dict:  # candidate / baseline, where measured
        values = measured[baseline, batch].get(key), measured[candidate, batch].get(key)
        return {f"{key}_ratio": round(values[1] / values[0], 3)} if None not in values and values[0] else {}

    rows = [
        {
            "mode": mode,
            "batch": batch,
            "baseline": baseline,
            "candidate": candidate,
            "baseline_ms": round(measured[baseline, batch]["step_ms"], 3),
            "candidate_ms": round(measured[candidate, batch]["step_ms"], 3),
            "throughput_ratio": round(measured[baseline, batch]["step_ms"] / measured[candidate, batch]["step_ms"], 3),
            **ratio("aten_ops", baseline, candidate, batch),
            **ratio("kernels", baseline, candidate, batch),
        }
        for baseline, candidate in STEP_PAIRS[device]
        for batch in STEP_BATCHES[device]
        if (baseline, batch) in measured and (candidate, batch) in measured
    ]
    note = "CPU: reduce-overhead has no CUDA graphs here and runs as the default mode" if device == "cpu" else None
    record(
        name=f"step timings, {mode}",
        rows=rows,
        precision="bf16" if device == "cuda" else "fp32",
        note=note,
        goal="StepsNet >= 0.9x its baseline compiled" if mode != "eager" else None,
    )
    assert not failed, failed
    # each model's row says its mode: an eager row's compile_s is its warm-up, not a compile
    steps = [item for key, item in request.node.user_properties if key == "gpu_check" and "step_ms" in item]
    assert len(steps) == len(jobs) and all(item["mode"] == mode for item in steps), steps
    # every job's compile (eager: warm-up) and readiness timed, within this test (RESERVED_S's sizing)
    took_s = time.time() - started
    assert all(0 <= m["compile_s"] <= took_s and 0 <= m["ready_s"] <= took_s for m in measured.values()), measured
    assert [r["batch"] for r in rows] == [b for _ in STEP_PAIRS[device] for b in STEP_BATCHES[device]]
    assert all(r["baseline_ms"] > 0 and r["candidate_ms"] > 0 and r["throughput_ratio"] > 0 for r in rows)
    if mode == "eager":  # profiled: what each step dispatched (and launched, on CUDA)
        unprofiled = {f"{k[0]}, batch {k[1]}": v["profile_error"] for k, v in measured.items() if "profile_error" in v}
        assert not unprofiled, unprofiled
        assert all(r["aten_ops_ratio"] > 0 and (device == "cpu" or r["kernels_ratio"] > 0) for r in rows), rows


class RepeatFirstBatch(LoaderWrapper):
    """A training loader that yields its first batch for a whole epoch: the engine's step timed without the input
    pipeline (the batch still goes through the device loader's copy each step)."""

    def __iter__(self):
        first = next(iter(self.loader))
        for _ in range(len(self.loader)):
            yield first


def train_records(work_dir: Path, kind: str = "train") -> list[dict]:
    return [r for r in map(json.loads, (work_dir / "metrics.jsonl").read_text().splitlines()) if r["kind"] == kind]


@pytest.mark.parametrize(
    "device, compiled",
    [
        # both in the step part, before the compiled pairs: the pairs wait for their slowest of seven compiles and
        # may take all of call 1's rest, where this is one model's compile (DeiT-S's step: 20.6 s on the H200);
        # each is cut to leave the pairs their reserve (tests/devices.py, RESERVED_S)
        device_param(
            kind,
            compiled,
            id=f"{kind}-{'compiled' if compiled else 'eager'}",
            part="step",
            min_start_s=ENGINE_COMPILED_MIN_START_S if compiled else None,
            # where the eager run took long, the compiled one takes as long and its compile more
            min_start_after=f"test_deit_small_step_through_the_engine[{kind}-eager]" if compiled else None,
        )
        for kind in ("cuda", "cpu")
        for compiled in (False, True)
    ],
)
def test_deit_small_step_through_the_engine(device, compiled, runs_here, monkeypatch, record):
    """The goal's number: DeiT-S's training step at per-GPU batch 128 in bf16 through ``depthbench train`` (goal
    <= 15 ms on an H100/H200), from the run's own log (its step time between log steps, the first epoch left out:
    cuDNN's autotuning and the compilation)."""
    from harness.commands.train import run as train_run
    from harness.engine import loop

    real_epoch = loop.train_one_epoch

    def epoch(objects, loader, *args, **kwargs):
        inner, loader.loader = loader.loader, RepeatFirstBatch(loader.loader)
        try:
            return real_epoch(objects, loader, *args, **kwargs)
        finally:
            loader.loader = inner

    monkeypatch.setattr(loop, "train_one_epoch", epoch)
    config, overrides = ENGINE_STEP[device]
    overrides = overrides + [
        "log_interval=5",
        "ckpt.interval_steps=0",
        "ckpt.interval_minutes=None",
        "log.tensorboard=False",
    ]
    if compiled:  # on the CPU aot_eager: the tracing without minutes of C++ compilation
        overrides += ["compile.enable=True"] + ([] if device == "cuda" else ["compile.backend='aot_eager'"])
    work_dir = runs_here / "engine-step"
    result = train_run(str(ROOT / config), work_dir=work_dir, overrides=overrides)
    steps = [r["step_time"] * 1000 for r in train_records(work_dir) if r["epoch"] >= 1]
    step = statistics.median(steps)
    cuda = device == "cuda"
    record(
        name=f"DeiT-S training step through the engine ({'compiled' if compiled else 'eager'})",
        mode="default" if compiled else "eager",  # compile.mode=None: inductor's default
        step_ms=round(step, 2),
        windows=len(steps),
        goal_ms=ENGINE_STEP_GOAL_MS if cuda else None,
        verdict="warn" if cuda and step > ENGINE_STEP_GOAL_MS else "ok",
    )
    assert result.exit_code == 0 and steps and step > 0


@on_devices("loader")
def test_device_pipeline_feeds_a_training_epoch(device, runs_here, jpeg_shards, record):
    """The device pipeline (``loader.pipeline='device'``: JPEG bytes decoded and augmented on the GPU) feeding DeiT-S's
    recipe for real (issue 42's goal: >= 6,000 images/s per GPU with <= 4 loader workers, during a training epoch):
    the images/s between log steps of the second epoch (the first warms up), against the step alone
    (test_deit_small_step_through_the_engine)."""
    from harness.commands.train import run as train_run

    cuda = device == "cuda"
    batch, workers, size = (128, 4, 224) if cuda else (8, 0, 32)
    shards = jpeg_shards(JPEGS[device])
    config = ENGINE_STEP["cuda"][0] if cuda else ENGINE_STEP["cpu"][0]
    overrides = [
        f"data.root={shards}",
        "data.type='shards'",
        "data.num_classes=10",
        f"data.workers={workers}",
        "data.repeated_aug=False",
        f"data.input_size={size}",
        f"data.pin_memory={cuda}",
        "loader.pipeline='device'",
        f"batch_size={batch}",
        "epochs=2",
        "log_interval=4",
        "ckpt.interval_steps=0",
        "ckpt.interval_minutes=None",
        "log.tensorboard=False",
    ]
    overrides += ["precision='bf16'", "optim.fused=True"] if cuda else ["model.img_size=32", "aug.pipeline='imagenet'"]
    work_dir = runs_here / "pipeline-epoch"
    result = train_run(str(ROOT / config), work_dir=work_dir, overrides=overrides)
    rates = [r["images_per_s"] for r in train_records(work_dir) if r["epoch"] == 1]
    rate = statistics.median(rates)
    record(
        name="device pipeline in a training epoch (DeiT-S recipe)" if cuda else "device pipeline (CPU mode)",
        images_per_s=round(rate, 1),
        workers=workers,
        batch=batch,
        input_size=size,
        windows=len(rates),
        goal="6,000 images/s per GPU with <= 4 cores" if cuda else "CPU mode: code path only",
        verdict="warn" if cuda and rate < 6000 else "ok",
    )
    assert result.exit_code == 0 and rate > 0


# ------------------------------------------------------------------------------------------------ part: compile
@on_devices("compile-check")
def test_compiled_models_match_float64(device, references, record, request):
    """One model per family compiled, forward and training step. On CUDA the models compile at once, each in a
    spawned process (``gpu_steps.spawned``). The test's time limit (pytest-timeout) is the only one; leaving it
    stops the processes."""
    started = time.monotonic()  # pytest-timeout's clock starts here too: the references below come out of its limit
    specs = {spec[0]: spec for spec in MODELS[device]}
    jobs = [
        (device, name, specs[name][1], str(float64_reference(*specs[name], references))) for name in COMPILE[device]
    ]
    # each result recorded as it arrives: a time-out keeps the models already compiled
    limit = request.node.get_closest_marker("timeout")
    # the results so far recorded before the limit
    timeout_s = max(1.0, limit.args[0] - 10 - (time.monotonic() - started)) if limit else None
    finished = (
        spawned(_compiled_job, jobs, timeout_s=timeout_s)
        if device == "cuda"
        else ((job, _compiled_job(job)) for job in jobs)
    )
    with contextlib.closing(finished):
        results = [
            record(**dict(result, name=job[1]), **({"verdict": "fail"} if "error" in result else {}))
            for job, result in finished
        ]
    assert not [r for r in results if "error" in r], results
    assert sorted(r["name"] for r in results) == sorted(COMPILE[device])
    for result in results:
        assert result["rel_err"] <= (TOL_FP32 if device == "cuda" else 1e-5) and result["finite"], result


# ------------------------------------------------------------------------------------------------ the runner
def test_gpu_check_sh_runs_the_selected_tests_and_writes_the_report(tmp_path):
    """tools/gpu_check.sh in its CPU mode on one cheap test (later pytest options win over its own): the report
    folder gets report.json (the test's outcome and measurements, by part) and report.md; the exit code is
    pytest's."""
    out = tmp_path / "out"
    env = dict(os.environ, PYTHON=sys.executable, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [
            "bash",
            "tools/gpu_check.sh",
            str(out),
            "--device",
            "cpu",
            "-m",
            "device(kind='cpu', part='models')",
            "-k",
            "horesnet10_rk4",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert report["format"] == "depthbench-gpu-check/2" and report["device"] == "cpu" and report["tiny"]
    assert list(report["parts"]) == ["models"] and report["environment"]["torch"]
    part = report["parts"]["models"]
    (test,) = part["tests"]
    assert test["test"].endswith("test_model_matches_float64_and_trains[cpu-horesnet10_rk4]")
    assert part["status"] == test["verdict"] == "ok" and part["seconds"] > 0
    (item,) = part["items"]
    assert item["name"] == "horesnet10_rk4" and item["verdict"] == "ok" and item["fp32_rel_err"] <= 1e-5
    assert sorted(p.name for p in out.iterdir()) == ["log.txt", "report.json", "report.md", "rows.jsonl"]
    (row,) = map(json.loads, (out / "rows.jsonl").read_text().splitlines())  # written when measured, not at the end
    assert row["name"] == "horesnet10_rk4" and row["fp32_rel_err"] == item["fp32_rel_err"]
    assert row["test"] == test["test"]
    assert "1 passed" in (out / "log.txt").read_text()
    text = (out / "report.md").read_text()
    assert text.startswith("# depthbench GPU check: cpu, ") and "| models | ok |" in text
    assert "Tolerances: max|logits - CPU float64 logits|" in text


def gpu_check_sh(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "tools/gpu_check.sh", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def echoing_python(tmp_path) -> dict:
    """The environment in which gpu_check.sh's python only echoes its arguments (pytest's command line) and touches
    ``tmp_path / "ran"``: the script's plan, without running it."""
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\ntouch {tmp_path / "ran"}\necho "$*"\n')
    fake.chmod(0o755)
    return dict(os.environ, PYTHON=str(fake), DEPTHBENCH_WHEEL_SITE=str(tmp_path / "site"))


def planned_call(out, env: dict, *args: str) -> tuple[float, int]:
    """The tests' budget gpu_check.sh gives pytest for a CUDA call, and the device tool's timeout_s it prints."""
    proc = gpu_check_sh(str(out), *args, env=env)
    assert proc.returncode == 0, proc.stderr
    (line,) = [line for line in proc.stdout.splitlines() if "-m pytest" in line]
    (timeout,) = re.findall(r"the device tool's timeout_s=(\d+)", proc.stdout)
    return float(line.split("--gpu-check-budget ")[1].split()[0]), int(timeout)


def test_call_2_fits_the_device_time_that_call_1_left(tmp_path, echoing_python):
    """The device time counts what ``timeout_s`` does not see: a slow start (here 90 s), the transfers and the pause
    before call 2. With ``--device-left`` (the ``budget_left_s`` of call 1's reply) call 2's tests' budget is cut so
    that the call, its start and end included, ends before the ``timeout_s`` it prints, and that timeout with the
    pause before the call and the transfers ends before the device time does; the fixed 360 s would not."""
    slow_start_s, transfers_s, pause_s = 90, 10, 30
    _, timeout_1 = planned_call(tmp_path / "out1", echoing_python, "--call", "1")
    left = 15 * 60 - slow_start_s - timeout_1 - transfers_s  # call 1 ran to its timeout_s
    assert pause_s + transfers_s + 360 > left  # the fixed timeout_s would outlast the device time
    # budget_left_s: a float
    budget, timeout_2 = planned_call(tmp_path / "out2", echoing_python, "--call", "2", "--device-left", f"{left}.4")
    assert pause_s + transfers_s + timeout_2 <= left, (timeout_2, left)
    assert MIN_START_S <= budget and CALL_START_S + budget + CALL_END_S <= timeout_2, (budget, timeout_2)


def test_call_2_is_not_started_with_too_little_device_time_left(tmp_path, echoing_python):
    """Under a test's least start (MIN_START_S) for the tests once the call's start, end and transfers are taken
    out, gpu_check.sh says so in one line and exits 2 before installing anything or starting pytest."""
    left = str(CALL_START_S + CALL_END_S + MIN_START_S + 10)
    proc = gpu_check_sh(str(tmp_path / "out"), "--call", "2", "--device-left", left, env=echoing_python)
    assert proc.returncode == 2 and not proc.stdout, proc
    (message,) = proc.stderr.splitlines()
    assert f"--device-left {left}: too little device time left for call 2" in message, message
    assert "give_back()" in message and not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()


def test_the_operator_s_instructions_keep_to_120_characters_a_line():
    """tools/gpu_check.sh and docs/preflight.md's "The two calls, exactly" (up to its table, whose rows are one line
    each) are read where they are run: each line fits 120 characters, as the code's do."""
    doc = (ROOT / "docs" / "preflight.md").read_text()
    section = doc.split("### The two calls, exactly")[1].split("\n| number")[0]
    script = (ROOT / "tools" / "gpu_check.sh").read_text()
    long = [line for line in (section + "\n" + script).splitlines() if len(line) > 120]
    assert section.count("\n") > 20 and not long, long


def test_gpu_check_sh_refuses_a_call_it_does_not_know(tmp_path):
    proc = subprocess.run(
        ["bash", "tools/gpu_check.sh", str(tmp_path / "out"), "--call", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "give --call 1 or --call 2" in proc.stderr and not (tmp_path / "out").exists()


def test_the_two_calls_fit_the_device_time_and_call_1_measures_the_goals_first(tmp_path, echoing_python):
    """Two calls in the GPU machine's 15 minutes, start-up included: their budgets (380 s and 320 s of tests) with
    the machine's start (~30 s) and each call's install and pytest start (~15 s) leave over a minute. Call 1 runs
    the pairs' steps eager, the engine's DeiT-S step eager and compiled (the <= 15 ms goal), and last the pairs
    compiled (issue 55's goals), which wait for their slowest compile: where every test before them runs to its
    (cut) limit, they still start with their reserve, and their processes wait for each other longer than the
    slowest compile took on the H200 (Steps-Swin-T's row 132 s into its test on 29 Nov 2026,
    benchmarks/results/gpu-h200-2026-11-29-check/call2/rows.jsonl); call 2 starts with the device pipeline in a
    training epoch."""
    budgets = {call: planned_call(tmp_path / f"out{call}", echoing_python, "--call", call)[0] for call in ("1", "2")}
    assert budgets["1"] + budgets["2"] + 30 + 2 * CALL_START_S <= 15 * 60 - 60, budgets
    # the device tool's timeout_s for each call (docs/preflight.md) holds its budget and what comes before and after
    # it, and the two calls' timeouts with the machine's start fit the 15 minutes: a call that hangs after its tests
    # is stopped, one that runs to its budget's end is not
    doc = (ROOT / "docs" / "preflight.md").read_text()
    calls = re.findall(
        r"gpu_check\.sh \"\$OUT\" --call (\d)(?: --device-left (\d+))?', carry=\[\"\.whl\"\], timeout_s=(\d+)\)", doc
    )
    assert [call for call, _, _ in calls] == ["1", "2"], calls
    (_, no_left, timeout_1), (_, left, timeout_2) = calls
    assert not no_left and float(timeout_1) >= CALL_START_S + budgets["1"] + CALL_END_S, (timeout_1, budgets)
    # call 2's example: the timeout_s gpu_check.sh prints for its --device-left
    assert (
        int(timeout_2) == planned_call(tmp_path / "out2-left", echoing_python, "--call", "2", "--device-left", left)[1]
    )
    assert 30 + float(timeout_1) + CALL_START_S + budgets["2"] + CALL_END_S <= 15 * 60, (timeout_1, budgets)

    limits = tmp_path / "limits_of_the_call.py"  # a plugin: each test's time limit, as the call's pytest sets it
    limits.write_text(
        "import json, pathlib\nfrom devices import MIN_START_S\n\n"
        "def pytest_collection_finish(session):\n"
        "    found = {i.nodeid.split('::')[-1]: [i.get_closest_marker('timeout').args[0],\n"
        "                 i.get_closest_marker('device').kwargs['part'],\n"
        "                 i.get_closest_marker('device').kwargs.get('min_start_s', MIN_START_S)]\n"
        "             for i in session.items}\n"
        "    out = pathlib.Path(session.config.getoption('gpu_check_out'))\n"
        "    (out / 'limits.json').write_text(json.dumps(found))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))

    def collected(call: str) -> tuple[list[str], dict[str, float]]:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:randomly",
                "-p",
                "no:cacheprovider",
                "-p",
                "limits_of_the_call",
                "-n",
                "0",
                "--co",
                "-q",
                "-m",
                f"device(kind='cuda', call={call}) and not device(alone=True)",
                "--gpu-check-out",
                str(tmp_path / f"co{call}"),
                *GPU_CHECK_FILES,
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        tests = [line.split("::")[-1] for line in proc.stdout.splitlines() if "::" in line]
        return tests, json.loads((tmp_path / f"co{call}" / "limits.json").read_text())

    (first, limits_1), (second, _) = collected("1"), collected("2")
    assert first == [
        "test_step_timings_of_the_equal_flops_pairs[cuda-eager]",
        "test_deit_small_step_through_the_engine[cuda-eager]",
        "test_deit_small_step_through_the_engine[cuda-compiled]",
        "test_step_timings_of_the_equal_flops_pairs[cuda-reduce-overhead]",
    ], first
    parts_1 = {part for _, part, _ in limits_1.values()}
    started_at_worst = 0.0  # the budget spent before a test starts where every test before it ran to its limit
    for test in first[:-1]:
        limit, part, minimum = limits_1[test]
        cut = start_limit(limit, budgets["1"] - started_at_worst, kept_for_later(part, parts_1), minimum)
        assert test != first[0] or cut == limit, (test, cut)  # the eager pairs: their whole limit
        started_at_worst += cut or 0.0  # a test not started takes nothing
    left_for_the_pairs = budgets["1"] - started_at_worst
    assert left_for_the_pairs >= RESERVED_S["compile"], (left_for_the_pairs, limits_1)
    waits = []
    names = STEP_MODELS["cuda"]
    with mock.patch(f"{__name__}.in_processes", lambda jobs, wait_s, **_: waits.append(wait_s) or iter(())):
        jobs = [("cuda", name, {}, 128, None, "reduce-overhead") for name in names]
        list(timed_jobs(jobs, "cuda", start_limit(limits_1[first[-1]][0], left_for_the_pairs)))
    assert waits[0] >= 132, (waits, left_for_the_pairs)
    # the engine's compiled step, where the eager step before it ran long and left it 30 s above the pairs' reserve,
    # is not started: it would only time out (one model's compile, 20.6 s on the H200, is in its run)
    limit, part, minimum = limits_1["test_deit_small_step_through_the_engine[cuda-compiled]"]
    assert start_limit(limit, RESERVED_S["compile"] + 30, kept_for_later(part, parts_1), minimum) is None
    assert second[0] == "test_device_pipeline_feeds_a_training_epoch[cuda]", second
    assert "test_compiled_models_match_float64[cuda]" in second and not set(first) & set(second)


def test_a_call_runs_within_its_budget_and_keeps_what_it_measured(tmp_path):
    """A call's budget cuts each test's time limit to what is left and starts no test near the end: the test that
    runs out of time is reported as such, the one after it is not started, and the rows measured before stay."""
    tests = tmp_path / "tests"
    tests.mkdir()
    for helper in ("conftest.py", "devices.py", "tiers.py", "clitools.py", "cpu_seconds.csv"):
        shutil.copy(ROOT / "tests" / helper, tests / helper)
    shutil.copytree(ROOT / "tests" / "fixtures", tests / "fixtures")  # conftest's shared builders
    (tests / "test_budget.py").write_text(
        "import time\nimport pytest\nfrom devices import device_param, on_devices\n\n"
        "@on_devices('nosync')\ndef test_measures(device, record):\n    record(name='first', x=1)\n\n"
        "@on_devices('preflight')\ndef test_too_long(device, record):\n    record(name='second', x=2)\n"
        "    time.sleep(60)\n\n"
        "@on_devices('train')\ndef test_after(device):\n    pass\n\n"
        "@pytest.mark.parametrize('device', [device_param('cpu', part='loader', min_start_s=60)])\n"
        "def test_needs_a_minute(device):\n    pass\n"
    )
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    start = time.monotonic()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-p",
            "no:xdist",
            "-m",
            "device(kind='cpu')",
            "--gpu-check-out",
            str(out),
            "--gpu-check-budget",
            "25",
            "--rootdir",
            str(tmp_path),
            str(tests),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert time.monotonic() - start < 55
    report = json.loads((out / "report.json").read_text())
    verdicts = {t["test"].split("::")[1]: t["verdict"] for part in report["parts"].values() for t in part["tests"]}
    assert verdicts == {
        "test_needs_a_minute[cpu]": "skip",  # its part first: 25 s left, over MIN_START_S but under its own minute
        "test_measures[cpu]": "ok",
        "test_too_long[cpu]": "timeout",
        "test_after[cpu]": "skip",
    }
    (needy,) = report["parts"]["loader"]["tests"]
    assert needy["reason"].startswith("not started: too little time left") and "at least 60 s" in needy["reason"]
    rows = [json.loads(line)["name"] for line in (out / "rows.jsonl").read_text().splitlines()]
    assert rows == ["first", "second"]


def test_the_engine_s_compiled_step_needs_its_eager_sibling_s_time_and_a_compile_to_start(tmp_path):
    """The engine's compiled DeiT-S step repeats its eager sibling's run and adds a compile: where the eager step
    took 80 s, the compiled one is not started with 100 s left (over its static 60 s minute, under 80 + 25 s);
    where it took 30 s, the static minute holds and it starts, its limit cut to what is left."""
    from devices import AFTER_SIBLING_S, Report

    eager, compiled = (
        f"tests/tools/test_gpu_check.py::test_deit_small_step_through_the_engine[cuda-{mode}]"
        for mode in ("eager", "compiled")
    )
    (params,) = [mark.args[1] for mark in test_deit_small_step_through_the_engine.pytestmark]
    marks = {param.id: param.marks[0].kwargs for param in params}  # the device markers, as the tests carry them

    class Item:  # what the Report reads of a collected test, and the marks it adds
        nodeid = compiled

        def __init__(self):
            self.added = []

        def get_closest_marker(self, name):
            return pytest.mark.timeout(LIMITS_S["step"]).mark

        def add_marker(self, mark, append=True):
            self.added.append(mark.mark)

    found = {}
    for eager_s in (80.0, 30.0):
        report = Report(tmp_path / "out", budget_s=100.0)
        report.selected = {eager: marks["cuda-eager"], compiled: marks["cuda-compiled"]}
        report.tests = {eager: {"outcome": "passed", "seconds": eager_s, "items": []}}
        item = Item()
        hook = report.pytest_runtest_protocol(item, None)
        next(hook)
        found[eager_s] = item.added
    (skipped,), (limited,) = found[80.0], found[30.0]
    assert skipped.name == "skip" and f"at least {80 + AFTER_SIBLING_S} s" in skipped.kwargs["reason"], skipped
    assert limited.name == "timeout" and 99 < limited.args[0] <= 100, limited


def test_the_report_groups_outcomes_by_part():
    """A failed test fails its part, a timeout is named, a skipped CUDA variant does not make the report CUDA's, and
    a selected test that never started (the session's time limit) is reported, not dropped."""
    from devices import assemble

    selected = {
        "t::a[cpu]": {"kind": "cpu", "part": "models"},
        "t::a[cuda]": {"kind": "cuda", "part": "models"},
        "t::b[cpu]": {"kind": "cpu", "part": "bench"},
        "t::c[cpu]": {"kind": "cpu", "part": "compile"},
        "t::d[cpu]": {"kind": "cpu", "part": "loader"},
    }
    tests = {
        "t::a[cpu]": {"outcome": "passed", "seconds": 1.0, "items": [{"name": "m", "x": 1}]},
        "t::a[cuda]": {"outcome": "skipped", "seconds": 0.0, "items": [], "reason": "no CUDA device here"},
        "t::b[cpu]": {"outcome": "failed", "seconds": 2.0, "items": [{"name": "b"}], "error": "assert 0"},
        "t::c[cpu]": {"outcome": "timeout", "seconds": 9.0, "items": [], "error": "Timeout (>9.0s)"},
    }
    report = assemble(selected, tests, started="2026-11-28T00:00:00Z", wall_s=12.0)
    assert report["device"] == "cpu" and report["tiny"]
    parts = report["parts"]
    assert list(parts) == ["compile", "loader", "bench", "models"]  # the check's order: what decides the goals first
    assert [parts[p]["status"] for p in parts] == ["timeout", "skip", "fail", "ok"]
    assert [t["verdict"] for t in parts["models"]["tests"]] == ["ok", "skip"]
    assert parts["models"]["items"] == [{"name": "m", "x": 1, "verdict": "ok", "test": "t::a[cpu]"}]
    assert parts["bench"]["items"][0]["verdict"] == "fail" and parts["bench"]["tests"][0]["error"] == "assert 0"
    assert "not started" in parts["loader"]["tests"][0]["reason"]
