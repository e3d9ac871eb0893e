"""The measuring behind ``depthbench bench`` (harness/commands/bench.py): models measured side by side,
interleaved, against the machine's own limit. :func:`benchmark` runs the whole comparison; :func:`measure` times
one model alone.

What it does, in the order timm's ``benchmark.py`` does it, except that the models are *interleaved*:
warm-up steps for every model, then ``--repeats`` rounds; in each round every model runs ``--iters`` timed steps
(synchronised on CUDA), in the order A B C, then C B A in the next round (so a load trend on a shared machine hits
every model alike). Only ratios between models of one run are trustworthy on a loaded machine; each model's
median and spread over the rounds, and each pair's per-round ratio, are reported.

The machine's limit is measured in the same rounds: a dense ``n x n`` matmul (fp32; bf16/fp16 under ``--amp``)
is one more participant, and a model's *model FLOP utilisation* (MFU) in a round is its achieved FLOP/s divided by
that round's matmul FLOP/s. Convention: ``harness.measure.flops`` counts multiply-accumulates (the papers' "FLOPs", =
timm's GMACs); 1 MAC = 2 FLOPs; a training step (forward + backward) counts 3 x the forward.

Peak memory: on CUDA ``torch.cuda.max_memory_allocated`` during a model's steps minus what was allocated before
them (activations, gradients, workspaces — not the weights). On CPU, one fresh process per model and mode
(``--memory`` on by default; the processes run after the timing, never beside it) measures the peak resident-set
growth over warm-up and one step, with glibc told to return freed blocks (``MALLOC_MMAP_THRESHOLD_``) so RSS
follows live memory. Interleaved models in one process cannot be told apart by RSS on CPU; what each model's
step allocates can: ``{mode}_peak_mib`` (:func:`step_peak_mib`, one more warm step after the timed rounds) is the
peak of tensor memory allocated during a step above what was allocated before it — the profiler's allocation
events on CPU, ``max_memory_allocated`` on CUDA — deterministic on a busy machine, where RSS is not.

Rows follow timm's benchmark CSV (``model``, ``infer_samples_per_sec``, ``infer_step_time``, ``infer_batch_size``,
``infer_img_size``, ``infer_gmacs``, ``train_*``, ``param_count``) plus our columns (spread, GFLOP/s, MFU, peak
memory, machine); the command appends them to ``--out`` (never overwriting earlier rows). Tests never assert
timings.
"""

from __future__ import annotations

import ast
import copy
import datetime
import difflib
import json
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import psutil
import timm
import torch
import torch._dynamo
from torch import nn

from harness.core.config import load_config
from harness.core.errors import DepthbenchError
from harness.engine.launch import configure_threads
from harness.engine.models import build_trained_model, model_kwargs
from harness.measure.bench_report import append_csv, existing_rows
from harness.measure.catalog import default_input_size
from harness.measure.flops import count_flops, count_params, example_inputs
from harness.measure.presets import AMP_DTYPES, COMPARE, MODES, OPTIMIZERS, PAPERS, PRESETS, Pair, Participant

PEAK_LABEL = "matmul peak"


def with_variants(participants: list[Participant], compare: Sequence[str]) -> tuple[list[Participant], list]:
    """``--compare``: each participant with the baseline options of the compared options, followed by one variant
    per option (label ``"<label> +<option>"``); returns them and the (baseline, variant) pairs."""
    base = {k: v for name in compare for k, v in COMPARE[name][0].items()}
    out, pairs = [], []
    for p in participants:
        p.options = {**p.options, **base}
        out.append(p)
        for name in compare:
            variant = copy.deepcopy(p)
            variant.label = f"{p.label} +{name}"
            variant.options = {**p.options, **COMPARE[name][1]}
            out.append(variant)
            pairs.append(
                Pair(
                    p.label, variant.label, f"no paper claim (--compare {name}: the same model and inputs, interleaved)"
                )
            )
    return out, pairs


def input_size_of(name: str, size=None, kwargs: dict | None = None) -> tuple:
    """(C, H, W): ``size`` (a side or H W) if given, else ``img_size`` among the kwargs, else the model's default."""
    default = default_input_size(name)
    if size is None and kwargs and "img_size" in kwargs:
        size = kwargs["img_size"]
    if size is None:
        return tuple(default)
    size = [size] if isinstance(size, int) else list(size)
    if len(size) == 1:
        size = size * 2
    return (default[0], *size[-2:])


def participant_from_config(path: str, overrides=(), extra_kwargs: dict | None = None, size=None) -> Participant:
    """The model a training config trains: ``model.name``, its ``timm.create_model`` arguments as ``depthbench
    train`` passes them (:func:`harness.engine.models.model_kwargs`: every other ``model.*`` key and
    ``data.num_classes``) and ``data.input_size``. :func:`build` rebuilds it from the config itself, growth
    stages included; ``kwargs`` here say what it got (the CSV's ``model_kwargs``) and set the input size."""
    cfg = load_config(path, overrides)
    name = (cfg.get("model") or {}).get("name")
    if not name:
        raise DepthbenchError(f"config {path} sets no model.name; bench needs a model to build")
    kwargs = {**model_kwargs(cfg), **(extra_kwargs or {})}
    data = cfg.get("data") or {}
    if size is None and data.get("input_size"):
        size = data["input_size"]
    return Participant(
        name,
        _plain(kwargs),
        input_size_of(name, size, kwargs),
        label=Path(path).stem,
        config=str(path),
        overrides=tuple(overrides),
    )


def _plain(value):
    """MMEngine ConfigDicts -> plain dicts/lists (literals a subprocess can read back)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value) if isinstance(value, tuple) else [_plain(v) for v in value]
    return value


def build(participant: Participant, device="meta") -> nn.Module:
    """The participant's model (ours or timm's) on ``device``, as :func:`harness.engine.models.build_trained_model`
    builds it: from its config (the trained architecture: ScaleNet's ``model.grow`` expansion applied) or its
    name, with its keyword arguments. Anything wrong is one line naming the model (close names if unknown)."""
    return build_trained_model(
        participant.config,
        participant.overrides,
        name=None if participant.config else participant.name,
        model_kwargs=participant.kwargs,
        device=device,
    )


# -------------------------------------------------------------------------------------------------- stepping
def _loss(out) -> torch.Tensor:
    outputs = out if isinstance(out, (tuple, list)) else (out,)  # SReT mixed depth returns one logit per branch
    return sum(o.float().mean() for o in outputs if torch.is_tensor(o))


class ModelStep:
    """One model in one mode on one device: ``step()`` is one inference forward or one training step
    (forward, backward, SGD with momentum as timm's benchmark, zero grads)."""

    def __init__(
        self,
        model: nn.Module,
        input_size,
        batch_size: int,
        mode: str,
        device="cpu",
        amp_dtype: torch.dtype | None = None,
        channels_last: bool = False,
        compile: bool = False,
        inputs: tuple | None = None,
        grad_checkpointing: bool = False,
        optimizer: str = "sgd",
    ):
        if mode not in ("infer", "train"):
            raise ValueError(f"mode must be 'infer' or 'train', not {mode!r}")
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, not {optimizer!r}")
        self.mode, self.device = mode, torch.device(device)
        model = model.to(self.device)
        inputs = tuple(t.to(self.device) for t in (inputs or example_inputs(model, input_size, batch_size)))
        if channels_last:
            model = model.to(memory_format=torch.channels_last)
            inputs = tuple(t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else t for t in inputs)
        if grad_checkpointing:
            model.set_grad_checkpointing(True)
        model.train(mode == "train")
        self.model, self.inputs = model, inputs
        # fixed shapes: one graph per model, no dynamic-shape kernels (as depthbench train compiles)
        self.forward = torch.compile(model, dynamic=False) if compile else model
        self.autocast = torch.autocast(device_type=self.device.type, dtype=amp_dtype) if amp_dtype else nullcontext()
        self.optimizer = None
        if mode == "train" and optimizer == "sgd":
            self.optimizer = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
        elif mode == "train":  # torch's default (a for-loop on CPU, foreach on CUDA), foreach, or the fused kernel
            kind = {"adamw": {}, "adamw-foreach": {"foreach": True}, "adamw-fused": {"fused": True}}[optimizer]
            self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05, **kind)

    def __call__(self) -> None:
        if self.mode == "infer":
            with torch.inference_mode(), self.autocast:
                self.forward(*self.inputs)
            return
        with self.autocast:
            loss = _loss(self.forward(*self.inputs))
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


class MatmulPeak:
    """The machine's dense-matmul limit: one ``n x n @ n x n`` product per step (2 n^3 FLOPs)."""

    def __init__(self, n: int, dtype: torch.dtype | None = None, device="cpu"):
        self.mm = torch.mm
        dtype = dtype or torch.float32
        generator = torch.Generator(device="cpu").manual_seed(0)
        self.a = torch.randn(n, n, generator=generator).to(device=device, dtype=dtype)
        self.b = torch.randn(n, n, generator=generator).to(device=device, dtype=dtype)
        self.out = torch.empty(n, n, device=device, dtype=dtype)
        self.flops = 2 * n**3

    def __call__(self) -> None:
        self.mm(self.a, self.b, out=self.out)


def peak_matmul_gflops(n: int, dtype: torch.dtype, device="cpu", steps: int = 3) -> float:
    """Best GFLOP/s of ``steps`` single matmuls (a one-off figure for the precision not being benchmarked)."""
    probe = MatmulPeak(n, dtype, device)
    probe()
    best = float("inf")
    for _ in range(steps):
        _synchronize(device)
        start = time.perf_counter()
        probe()
        _synchronize(device)
        best = min(best, time.perf_counter() - start)
    return probe.flops / best / 1e9


def amp_dtype(name: str | None) -> torch.dtype | None:
    """The torch dtype of an ``--amp`` name (None: fp32)."""
    return getattr(torch, AMP_DTYPES[name]) if name else None


def bf16_supported(device) -> bool:
    if torch.device(device).type == "cuda":
        return torch.cuda.is_bf16_supported()
    try:  # oneDNN's bf16 GEMM needs AVX512-BF16/AMX (or AVX512 emulation); torch says whether it has one
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def _synchronize(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def run_interleaved(
    steps: dict[str, Callable[[], None]],
    *,
    warmup: int = 1,
    iters: int = 1,
    repeats: int = 3,
    synchronize: Callable[[], None] = lambda: None,
    chunk=None,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Seconds per step of every callable in every round, the callables interleaved.

    Warm-up: ``warmup`` steps of each (in order). Then ``repeats`` rounds; in each round each callable runs
    ``iters`` timed steps back to back, in the given order on even rounds and reversed on odd rounds (A B, B A,
    A B, ... so a load that rises or falls during the run biases no model). ``chunk(label)`` may return a context
    manager wrapped around each timed chunk (CUDA peak memory uses it). ``clock``: the seconds read around each
    chunk (wall time by default; ``time.process_time`` counts only this process's CPU time, which a loaded
    machine's other jobs distort less). Returns ``{label: [s/step per round]}``.
    """
    labels = list(steps)
    for label in labels:
        for _ in range(warmup):
            steps[label]()
    synchronize()
    times = {label: [] for label in labels}
    for round_index in range(repeats):
        for label in labels if round_index % 2 == 0 else labels[::-1]:
            with chunk(label) if chunk else nullcontext():
                synchronize()
                start = clock()
                for _ in range(iters):
                    steps[label]()
                synchronize()
                times[label].append((clock() - start) / iters)
    return times


class _CudaPeak:
    """Per-label peak of CUDA memory allocated during its chunks, above what was allocated before each chunk."""

    def __init__(self):
        self.peak: dict[str, int] = {}

    @contextmanager
    def __call__(self, label):
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        yield
        torch.cuda.synchronize()
        self.peak[label] = max(self.peak.get(label, 0), torch.cuda.max_memory_allocated() - base)


class _PeakRSS:
    """Peak RSS growth of this process while the context is active (CPU memory of a run), sampled every 2 ms."""

    def __init__(self, interval: float = 0.002):
        self.proc, self.interval, self.peak, self._stop = psutil.Process(), interval, 0, threading.Event()

    def __enter__(self):
        self.base = self.proc.memory_info().rss
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss - self.base)
            time.sleep(self.interval)

    def __exit__(self, *exc):
        self._stop.set()
        self.thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss - self.base)


def step_peak_mib(step: Callable[[], None], device="cpu") -> float:
    """Peak memory allocated during one call of ``step`` above what was allocated before it (MiB): on CUDA the
    caching allocator's ``max_memory_allocated``; on CPU, where torch keeps no allocator statistics, the
    profiler's allocation and free events (``profile_memory``) summed in time order. Counts tensor storage only
    (activations, gradients, workspaces, optimizer state created in the step), not the allocator's caching or the
    interpreter, so unlike RSS growth it is deterministic and the same on a busy machine."""
    if torch.device(device).type == "cuda":
        tracker = _CudaPeak()
        with tracker("step"):
            step()
        return tracker.peak["step"] / 2**20
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    # the raw event list: the public key_averages() gives each op's net memory, not the running total's peak
    changes = sorted(
        (e.start_ns(), e.nbytes())
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU
    )
    running = peak = 0
    for _, nbytes in changes:
        running += nbytes
        peak = max(peak, running)
    return peak / 2**20


def measure(
    model: nn.Module,
    input_size=224,
    batch_size: int = 32,
    mode: str = "infer",
    warmup: int = 3,
    iters: int = 10,
    device: str = "cpu",
    amp_dtype: torch.dtype | None = None,
    inputs: tuple | None = None,
    channels_last: bool = False,
    grad_checkpointing: bool = False,
) -> dict:
    """One model alone: samples/s, ms per step and peak memory (CUDA allocated / CPU RSS growth from before the
    first step), with the engine's channels-last and grad-checkpointing options when asked. For comparisons between
    models use :func:`run_interleaved` (``depthbench bench``)."""
    step = ModelStep(
        model,
        input_size,
        batch_size,
        mode,
        device,
        amp_dtype,
        channels_last=channels_last,
        inputs=inputs,
        grad_checkpointing=grad_checkpointing,
    )
    cuda = step.device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    # CPU: sample from before the first step — once warmed up, the allocator reuses freed memory and the
    # process stops growing, so a peak taken over the timed loop alone reads ~0.
    memory = nullcontext() if cuda else _PeakRSS()
    with memory:
        seconds = run_interleaved(
            {"model": step}, warmup=warmup, iters=iters, repeats=1, synchronize=lambda: _synchronize(device)
        )["model"][0]
    peak = torch.cuda.max_memory_allocated() if cuda else memory.peak
    return {
        "mode": mode,
        "batch_size": batch_size,
        "samples_per_s": batch_size / seconds,
        "step_ms": 1000 * seconds,
        "peak_mem_mb": peak / 2**20,
        "peak_mib": step_peak_mib(step, device),
        "device": str(device),
        "threads": torch.get_num_threads(),
    }


# ------------------------------------------------------------------------------------------------ statistics
def _quantiles(values) -> dict:
    v = np.asarray(values, dtype=float)
    q25, median, q75 = np.percentile(v, [25, 50, 75])
    return {"median": float(median), "q25": float(q25), "q75": float(q75), "min": float(v.min()), "max": float(v.max())}


def summarise(
    times: dict[str, list[float]],
    participants: dict[str, Participant],
    macs: dict[str, int],
    batch_size: int,
    mode: str,
    peak_times: list[float] | None,
    peak_flops: int | None,
) -> dict:
    """Per label: the timm columns of ``mode`` plus spread, achieved GFLOP/s and MFU (per round, then median)."""
    rows = {}
    for label, seconds in times.items():
        if label not in participants:
            continue
        flops_per_step = 2 * macs[label] * batch_size * (3 if mode == "train" else 1)
        rate = _quantiles([batch_size / s for s in seconds])
        step = _quantiles([1000 * s for s in seconds])
        achieved = [flops_per_step / s / 1e9 for s in seconds]
        row = {
            f"{mode}_samples_per_sec": round(rate["median"], 3),
            f"{mode}_step_time": round(step["median"], 3),
            f"{mode}_batch_size": batch_size,
            f"{mode}_img_size": participants[label].input_size[-1],
            f"{mode}_samples_per_sec_q25": round(rate["q25"], 3),
            f"{mode}_samples_per_sec_q75": round(rate["q75"], 3),
            f"{mode}_samples_per_sec_min": round(rate["min"], 3),
            f"{mode}_samples_per_sec_max": round(rate["max"], 3),
            f"{mode}_step_time_q25": round(step["q25"], 3),
            f"{mode}_step_time_q75": round(step["q75"], 3),
            f"{mode}_gflops": round(_quantiles(achieved)["median"], 3),
            f"{mode}_rounds": len(seconds),
        }
        if peak_times:
            peak = [peak_flops / s / 1e9 for s in peak_times]
            row[f"{mode}_mfu"] = round(_quantiles([a / p for a, p in zip(achieved, peak)])["median"], 4)
        rows[label] = row
    return rows


def ratios(times: dict[str, list[float]], baseline: str, candidate: str) -> dict:
    """Candidate ÷ baseline throughput, per round (the two ran back to back), then median and spread."""
    return _quantiles([b / c for b, c in zip(times[baseline], times[candidate])])


# ---------------------------------------------------------------------------------------------- CPU memory
def memory_in_subprocess(
    participant: Participant,
    mode: str,
    batch_size: int,
    amp: str | None,
    channels_last: bool,
    threads: int,
    timeout: float = 1800,
    compile: bool = False,
    grad_checkpointing: bool = False,
    optimizer: str = "sgd",
) -> float:
    """Peak RSS growth (MiB) of warm-up + one step of ``participant`` in a fresh process (see module docstring).
    A compiled model is compiled by an untimed first step outside the measurement (the compiler's own memory
    would otherwise be most of the growth), its optimizer state then cleared so it is allocated inside it."""
    job = repr(
        {
            "spec": participant.spec(),
            "mode": mode,
            "batch_size": batch_size,
            "amp": amp,
            "channels_last": channels_last,
            "threads": threads,
            "compile": compile,
            "grad_checkpointing": grad_checkpointing,
            "optimizer": optimizer,
        }
    )
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": str(threads)}
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-m", "harness.measure.bench", job],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=timeout,
    )
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise DepthbenchError(f"memory measurement of {participant.label} ({mode}) failed: {last}", exit_code=1)
    return float(out.stdout.strip().splitlines()[-1])


def _memory_job(job: str) -> None:
    """Body of the memory subprocess: build, then warm-up + one step under :class:`_PeakRSS`; print MiB."""
    job = ast.literal_eval(job)
    configure_threads(threads=job["threads"])
    spec = job["spec"]
    participant = Participant(
        spec["name"], spec["kwargs"], spec["input_size"], config=spec["config"], overrides=spec["overrides"]
    )
    model = build(participant, device="cpu")
    step = ModelStep(
        model,
        participant.input_size,
        job["batch_size"],
        job["mode"],
        "cpu",
        amp_dtype(job["amp"]),
        job["channels_last"],
        job.get("compile", False),
        grad_checkpointing=job.get("grad_checkpointing", False),
        optimizer=job.get("optimizer", "sgd"),
    )
    if job.get("compile"):
        step()
        if step.optimizer is not None:
            step.optimizer.state.clear()
    with _PeakRSS() as memory:
        step()
        step()
    print(memory.peak / 2**20)


def preset(name: str) -> tuple[list[Participant], list[Pair]]:
    """``paper`` (every group of that paper) or ``paper:group``: participants (deduplicated) and pairs."""
    keys = [k for k in PRESETS if k == name or k.split(":")[0] == name]
    if not keys:
        choices = PAPERS + list(PRESETS)
        close = difflib.get_close_matches(name, choices, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise DepthbenchError(
            f"unknown --pairs preset {name!r}; {hint}choose a paper ({', '.join(PAPERS)}) or "
            f"paper:group ({', '.join(PRESETS)})"
        )
    participants, pairs = {}, []
    for key in keys:
        for p in PRESETS[key][0]:
            participants.setdefault(p.label, p)
        pairs += PRESETS[key][1]
    return list(participants.values()), pairs


# ------------------------------------------------------------------------------------------------ the comparison
# what a step's seconds are read from: wall time, or the CPU time of the process (all its threads: with
# --threads T a step's CPU seconds are about T times its wall seconds on an idle machine, so compare runs of
# equal threads; under load, time spent waiting for a core is not counted)
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


@dataclass
class BenchOptions:
    """How the models are run: ``depthbench bench``'s options (the models themselves are :class:`Participant`)."""

    mode: str = "infer"  # infer | train | both
    batch_size: int = 8
    amp: str | None = None  # bf16 | fp16 (None: fp32)
    channels_last: bool = False
    compile: bool = False
    threads: int | None = None  # CPU threads, the process pinned to as many cores (None: every core)
    device: str | None = None  # cpu | cuda (None: cuda when visible)
    repeats: int = 5  # interleaved rounds
    iters: int = 2  # timed steps per model per round
    warmup: int = 2  # untimed steps per model first
    peak_size: int | None = None  # side of the peak matmul (None: 2048 on CPU, 8192 on CUDA)
    memory: bool = True  # CPU peak memory, one fresh process per model and mode
    grad_checkpointing: bool = False  # the models' set_grad_checkpointing(True) (training memory vs time)
    optimizer: str = "sgd"  # the training step's optimizer (OPTIMIZERS)
    compare: tuple = ()  # COMPARE names: each model also as a variant with that option, paired
    clock: str = "wall"  # CLOCKS: wall time, or the process's CPU time (CPU only; steadier on a loaded machine)


@dataclass
class BenchResult:
    """One row per model (timm's benchmark columns + ours, the machine's included) and one per pair of a preset
    (ratios, the claim); the machine (device, threads, peak GFLOP/s, versions, date); ``out``/``pairs_out``: the
    CSV files the rows were appended to, if any; ``times``: every round's seconds per step (the paired rounds
    ``depthbench claims`` tests efficiency claims on)."""

    rows: list[dict]
    pairs: list[dict]
    modes: tuple[str, ...] = ("infer",)
    machine: dict = field(default_factory=dict)
    out: Path | None = None
    pairs_out: Path | None = None
    times: dict = field(default_factory=dict)  # mode -> label -> seconds per step in each interleaved round


def check_options(options: BenchOptions, input_size=None) -> None:
    """The numbers, before anything is built; fills in the default device."""
    if options.mode not in MODES:
        raise DepthbenchError(f"--mode {options.mode!r}: choose one of {', '.join(MODES)}")
    if options.amp is not None and options.amp not in AMP_DTYPES:
        raise DepthbenchError(f"--amp {options.amp!r}: choose one of {', '.join(AMP_DTYPES)}")
    if options.optimizer not in OPTIMIZERS:
        raise DepthbenchError(f"--optimizer {options.optimizer!r}: choose one of {', '.join(OPTIMIZERS)}")
    unknown = [c for c in options.compare if c not in COMPARE]
    if unknown:
        raise DepthbenchError(f"--compare {' '.join(unknown)}: choose from {', '.join(COMPARE)}")
    if options.clock not in CLOCKS:
        raise DepthbenchError(f"--clock {options.clock!r}: choose one of {', '.join(CLOCKS)}")
    if options.device is None:
        options.device = "cuda" if torch.cuda.is_available() else "cpu"
    if options.clock == "cpu" and options.device != "cpu":
        raise DepthbenchError("--clock cpu: the process's CPU time does not time GPU work; use --clock wall on cuda")
    for option, value, least in (
        ("--batch-size", options.batch_size, 1),
        ("--repeats", options.repeats, 1),
        ("--iters", options.iters, 1),
        ("--warmup", options.warmup, 0),
        ("--threads", options.threads, 1),
        ("--peak-size", options.peak_size, 1),
    ):
        if value is not None and value < least:
            raise DepthbenchError(f"{option} must be at least {least}, not {value}")
    if input_size and (len(input_size) > 2 or min(input_size) < 1):
        raise DepthbenchError(
            f"--input-size takes a side or H W of positive numbers, not {' '.join(map(str, input_size))}"
        )
    if options.device == "cuda" and not torch.cuda.is_available():
        raise DepthbenchError("--device cuda: no CUDA device is visible here; use --device cpu")


def pin_threads(threads: int | None, device: str) -> tuple[int, list[int]]:
    """CPU: use ``threads`` intra-op threads on as many cores, the process pinned to them; returns both."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count()))
    if device != "cpu":
        return torch.get_num_threads(), cores
    threads = threads or len(cores)
    if threads > len(cores):
        raise DepthbenchError(
            f"--threads {threads}: this process may use {len(cores)} cores ({cores}); use at most {len(cores)}"
        )
    configure_threads(threads=threads, pin=True)
    return threads, cores[:threads]


def machine(device: str, threads: int, cores: list[int]) -> dict:
    if device == "cuda":
        name = torch.cuda.get_device_name()
    else:
        name = platform.processor() or platform.machine()
        try:
            with open("/proc/cpuinfo") as fh:
                name = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), name)
        except OSError:
            pass
    return {
        "device": device,
        "device_name": name,
        "threads": threads,
        "cores": " ".join(map(str, cores)) if device == "cpu" else "",
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "torch": torch.__version__,
        "timm": timm.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def resolve(
    models: Sequence[str] = (),
    *,
    config: str | None = None,
    overrides: Sequence[str] = (),
    model_kwargs: dict | None = None,
    pairs: str | None = None,
    input_size=None,
) -> tuple[list[Participant], list[Pair]]:
    """The participants and pairs: a ``pairs`` preset's, then the model ``config`` trains (with its ``key=value``
    ``overrides``), then the named ``models``; ``model_kwargs`` and ``input_size`` (a side or H W) apply to all."""
    kwargs = dict(model_kwargs or {})
    overrides = list(overrides)
    participants, pair_list = [], []
    if pairs:
        participants, pair_list = preset(pairs)
        for p in participants:  # --model-kwargs / --input-size apply to the preset's models too
            p.kwargs = {**p.kwargs, **kwargs}
            if input_size:
                p.input_size = input_size_of(p.name, input_size)
    if config:
        participants.append(participant_from_config(config, overrides, kwargs, input_size))
    elif overrides:
        raise DepthbenchError(
            f"key=value overrides ({' '.join(overrides)}) need --config; model keywords go after --model-kwargs"
        )
    for name in models:
        participants.append(Participant(name, dict(kwargs), input_size_of(name, input_size, kwargs)))
    for p in participants:
        if p.input_size is None or None in p.input_size:
            p.input_size = input_size_of(p.name, p.input_size[-1] if p.input_size else input_size, p.kwargs)
    if not participants:
        raise DepthbenchError(
            "name at least one model, a --config, or a --pairs preset (e.g. depthbench bench resnet18 resnet34)"
        )
    labels = [p.label for p in participants]
    for p in participants:  # the same model twice (a model name and a preset's) gets a distinct label
        if labels.count(p.label) > 1 and p.config:
            p.label = f"{p.label} (config)"
    if len({p.label for p in participants}) < len(participants):
        raise DepthbenchError(
            f"a model is named twice ({', '.join(sorted({x for x in labels if labels.count(x) > 1}))}); name each once"
        )
    return participants, pair_list


def benchmark(
    participants: list[Participant],
    pairs: list[Pair],
    options: BenchOptions,
    *,
    threads: int,
    cores: list[int],
    progress: Callable[[str], None] | None = None,
) -> BenchResult:
    """Measure ``participants`` interleaved with the peak matmul (every mode of ``options.mode``), after building
    and counting each on the meta device (a bad name or keyword fails before any work). ``threads``/``cores``: as
    :func:`pin_threads` set them. ``progress`` gets a line at the start and after each mode."""
    say = progress or (lambda line: None)
    device, batch_size, modes = options.device, options.batch_size, MODES[options.mode]
    precision = options.amp or "fp32"
    if options.compare:
        participants, variant_pairs = with_variants(participants, options.compare)
        pairs = list(pairs) + variant_pairs
    step_options = {
        p.label: {
            "amp": options.amp,
            "channels_last": options.channels_last,
            "compile": options.compile,
            "grad_checkpointing": options.grad_checkpointing,
            "optimizer": options.optimizer,
            **p.options,
        }
        for p in participants
    }
    if any(o["compile"] for o in step_options.values()):
        # every model is compiled in this one process: models of one class (DeiT-S and Steps-DeiT-S, a preset's
        # depth series) share their forward's code, whose cache holds 8 graphs by default
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 4 * len(participants))
    macs, params = {}, {}
    for p in participants:
        model = build(p)
        if step_options[p.label]["grad_checkpointing"] and not callable(getattr(model, "set_grad_checkpointing", None)):
            raise DepthbenchError(
                f"model {p.label} has no set_grad_checkpointing(); leave it out of the grad-checkpointing comparison"
            )
        params[p.label] = count_params(model)
        try:
            macs[p.label] = count_flops(model, inputs=example_inputs(model, p.input_size)).total
        except Exception as e:
            raise DepthbenchError(
                f"model {p.label} does not run on {'x'.join(map(str, p.input_size))} inputs: "
                f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
                f"; choose another --input-size, or pass the size to the model (--model-kwargs "
                f"img_size={p.input_size[-1]})"
            ) from None
    by_label = {p.label: p for p in participants}
    info = machine(device, threads, cores)
    info["clock"] = options.clock
    amp = amp_dtype(options.amp)
    peak_dtype = amp or torch.float32
    peak_size = options.peak_size or (8192 if device == "cuda" else 2048)
    say(
        f"depthbench bench: {len(participants)} model(s) on {info['device_name']} ({device}, "
        f"{threads} thread(s){', cores ' + info['cores'] if device == 'cpu' else ''}), load average "
        f"{info['load_avg_1m']}; batch {batch_size}, {precision}, {options.repeats} rounds x "
        f"{options.iters} steps, interleaved" + (", timed in process CPU time" if options.clock == "cpu" else "")
    )
    results = {p.label: {} for p in participants}
    all_times = {}
    for mode in modes:
        steps = {}
        for p in participants:
            o = step_options[p.label]
            steps[p.label] = ModelStep(
                build(p, device="cpu"),
                p.input_size,
                batch_size,
                mode,
                device,
                amp_dtype(o["amp"]),
                o["channels_last"],
                o["compile"],
                grad_checkpointing=o["grad_checkpointing"],
                optimizer=o["optimizer"],
            )
        probe = MatmulPeak(peak_size, peak_dtype, device)
        steps[PEAK_LABEL] = probe
        cuda_peak = _CudaPeak() if device == "cuda" else None
        times = run_interleaved(
            steps,
            warmup=options.warmup,
            iters=options.iters,
            repeats=options.repeats,
            synchronize=lambda: _synchronize(device),
            chunk=cuda_peak,
            clock=CLOCKS[options.clock],
        )
        # memory beside speed: one more (warm) step of each model, after the timed rounds, never inside them
        for p in participants:
            results[p.label][f"{mode}_peak_mib"] = round(step_peak_mib(steps[p.label], device), 1)
        del steps
        all_times[mode] = times
        for label, row in summarise(times, by_label, macs, batch_size, mode, times[PEAK_LABEL], probe.flops).items():
            results[label].update(row)
            if cuda_peak:
                results[label][f"{mode}_peak_mem_mb"] = round(cuda_peak.peak.get(label, 0) / 2**20, 1)
        peak_gflops = round(_quantiles([probe.flops / s / 1e9 for s in times[PEAK_LABEL]])["median"], 1)
        key = f"peak_gflops_{precision}"  # the machine's limit: the better of the modes' medians
        info[key] = max(info.get(key, 0.0), peak_gflops)
        say(f"depthbench bench: {mode} done; matmul peak {peak_gflops:.1f} GFLOP/s ({precision}, n={peak_size})")
        if device == "cpu" and options.memory:
            for p in participants:
                o = step_options[p.label]
                results[p.label][f"{mode}_peak_mem_mb"] = round(
                    memory_in_subprocess(
                        p,
                        mode,
                        batch_size,
                        o["amp"],
                        o["channels_last"],
                        threads,
                        compile=o["compile"],
                        grad_checkpointing=o["grad_checkpointing"],
                        optimizer=o["optimizer"],
                    ),
                    1,
                )
    if peak_dtype == torch.float32 and bf16_supported(device):  # the bf16 limit too, once, for reference
        info["peak_gflops_bf16"] = round(peak_matmul_gflops(peak_size, torch.bfloat16, device), 1)

    rows = []
    for p in participants:
        row = {
            "model": p.name,
            **results[p.label],
            "infer_gmacs": round(macs[p.label] / 1e9, 3),
            "param_count": round(params[p.label] / 1e6, 3),
            "label": p.label,
            "model_kwargs": json.dumps(p.kwargs, sort_keys=True, default=str) if p.kwargs else "",
            "input_size": "x".join(map(str, p.input_size)),
            "precision": step_options[p.label]["amp"] or "fp32",
            "channels_last": step_options[p.label]["channels_last"],
            "compile": step_options[p.label]["compile"],
            "grad_checkpointing": step_options[p.label]["grad_checkpointing"],
            "optimizer": step_options[p.label]["optimizer"],
            "batch_size": batch_size,
            **info,
        }
        rows.append(row)
    pair_rows = [_pair_row(pair, all_times, results, macs) for pair in pairs]
    return BenchResult(rows, pair_rows, modes, info, times=all_times)


def run_bench(
    models: Sequence[str],
    options: BenchOptions,
    *,
    config: str | Path | None = None,
    overrides: Sequence[str] = (),
    model_kwargs: dict | None = None,
    pairs: str | None = None,
    input_size: int | Sequence[int] | None = None,
    out: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    show: Callable[[BenchResult], None] | None = None,
) -> BenchResult:
    """One ``depthbench bench`` (its ``run``, harness/commands/bench.py, documents the arguments): the options and
    the ``out`` CSV checked before any work, the threads pinned, the participants resolved and measured, the result
    handed to ``show``, then the rows appended to ``out`` (the pairs to ``<name>_pairs.csv``)."""
    sizes = [input_size] if isinstance(input_size, int) else (list(input_size) if input_size else None)
    check_options(options, sizes)
    old_rows = existing_rows(out)
    pairs_path = Path(out).with_name(f"{Path(out).stem}_pairs.csv") if out and (pairs or options.compare) else None
    old_pair_rows = existing_rows(pairs_path, key="candidate") if pairs_path else []
    used_threads, cores = pin_threads(options.threads, options.device)
    participants, pair_list = resolve(
        models,
        config=str(config) if config else None,
        overrides=overrides,
        model_kwargs=model_kwargs,
        pairs=pairs,
        input_size=sizes,
    )
    result = benchmark(participants, pair_list, options, threads=used_threads, cores=cores, progress=progress)
    if show:
        show(result)
    if out:
        result.out = Path(out)
        append_csv(result.out, old_rows, result.rows)
        if pairs_path:
            result.pairs_out = pairs_path
            append_csv(pairs_path, old_pair_rows, [{**r, **result.machine} for r in result.pairs])
    return result


def _pair_row(pair: Pair, all_times, results, macs) -> dict:
    row = {
        "baseline": pair.baseline,
        "candidate": pair.candidate,
        "gmacs_ratio": round(macs[pair.candidate] / macs[pair.baseline], 3),
        "claim": pair.claim,
    }
    for mode, times in all_times.items():
        r = ratios(times, pair.baseline, pair.candidate)
        row.update(
            {
                f"{mode}_throughput_ratio": round(r["median"], 3),
                f"{mode}_ratio_q25": round(r["q25"], 3),
                f"{mode}_ratio_q75": round(r["q75"], 3),
                f"{mode}_ratio_min": round(r["min"], 3),
                f"{mode}_ratio_max": round(r["max"], 3),
            }
        )
        base_mem = results[pair.baseline].get(f"{mode}_peak_mem_mb")
        cand_mem = results[pair.candidate].get(f"{mode}_peak_mem_mb")
        if base_mem and cand_mem:
            row[f"{mode}_memory_ratio"] = round(cand_mem / base_mem, 3)
        base_alloc = results[pair.baseline].get(f"{mode}_peak_mib")
        cand_alloc = results[pair.candidate].get(f"{mode}_peak_mib")
        if base_alloc and cand_alloc:
            row[f"{mode}_peak_mib_ratio"] = round(cand_alloc / base_alloc, 3)
    return row


if __name__ == "__main__":  # the CPU memory subprocess (memory_in_subprocess)
    _memory_job(sys.argv[1])
