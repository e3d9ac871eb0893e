"""The GPU check's model steps (tests/tools/test_gpu_check.py): models built with seeded weights, timed training
steps (eager, and compiled in spawned processes that compile at once and are timed one at a time), a profiled step,
and a compiled model against its float64 reference.

A module of its own, importable by name (``tests`` is on pytest's pythonpath), because the spawned processes import
what they run by its module's name: a test module's (``tests.tools.test_gpu_check``) is not importable where an
installed distribution ships a ``tests`` package of its own (one in this virtual environment does).
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import threading
import time
import traceback
from unittest import mock

import torch

# the steps a job takes under the timing lock (step_ms): the warm-up and the timed ones; eager also its first step
# before them (cuDNN's autotuning: a compiled step's first, compiling, step comes before the lock) and one profiled
# step after them
WARM_UP_STEPS = {"cuda": 3, "cpu": 1}  # cuDNN tuned, CUDA graphs recorded, the allocator warm
TIMED_STEPS = {"cuda": 10, "cpu": 2}
TIMED_WINDOWS = 2  # the timed steps in windows of equal size between synchronisations: a spike shows as their spread
# a training step at batch 128 on the H200, at most: TransNeXt-T's eager step, 298 ms on 29 Nov 2026, the slowest of
# the seven (benchmarks/results/gpu-h200-2026-11-29-check/call1/rows.jsonl)
SLOWEST_STEP_S = 0.3
# a job's time under the lock besides its steps, at most: eager its first step's cuDNN autotuning (TransNeXt-T's
# three eager warm-up steps took 3.3 s on the H200 on 26 Nov 2026, docs/benchmarks.md) and its profiled step's trace
# (an estimate: not measured apart); compiled its result handed back
BESIDE_THE_STEPS_S = {"eager": 3.5, "compiled": 1.1}


# a step job's moments (``time.time()``), in the order a compiled job passes them: its warm-up's start (compiled: its
# first, compiling, step; eager: its first steps under the lock, cuDNN's autotuning), that warm-up done, its arrival
# at the processes' barrier (eager: before its warm-up), and where it failed
MOMENTS = ("warm_up", "warmed", "ready", "stopped")


def steps_under_lock(device: str, mode: str) -> int:
    """The training steps one ``step_ms`` job takes while it holds the timing lock."""
    eager = mode == "eager"
    return eager + WARM_UP_STEPS[device] + TIMED_STEPS[device] + eager


def lock_time_s(mode: str) -> float:
    """The seconds one job holds the timing lock on the H200, at most: eager 8, compiled 5."""
    beside = BESIDE_THE_STEPS_S["eager" if mode == "eager" else "compiled"]
    return steps_under_lock("cuda", mode) * SLOWEST_STEP_S + beside


def timing_s(jobs: list[tuple]) -> float:
    """The seconds :func:`in_processes` takes to time ``jobs`` one at a time once they are all ready, at most: the
    processes stop waiting for each other in time for it within the test's limit."""
    return sum(lock_time_s(job[5]) for job in jobs)


def plain_fp32(device: str) -> None:
    if device == "cuda":  # plain fp32 against the float64 reference
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def first(out):
    return next(o for o in out if torch.is_tensor(o)) if isinstance(out, (tuple, list)) else out


def loss_of(out):
    outputs = out if isinstance(out, (tuple, list)) else (out,)
    return sum(o.float().mean() for o in outputs if torch.is_tensor(o))


def build(name: str, kwargs: dict):
    """The model with seeded weights; zero-initialised parameters (heads, layer scales, biases) get small random
    values so that every branch contributes to the logits being compared."""
    import timm

    import models  # noqa: F401

    torch.manual_seed(0)
    model = timm.create_model(name, **kwargs)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() and not p.abs().max() > 0:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.02)
    return model


def example(name: str, kwargs: dict, batch: int, side: int | None = None):
    from harness.measure.bench import input_size_of

    size = input_size_of(name, side, kwargs)
    return torch.randn(batch, *size, generator=torch.Generator().manual_seed(2)), size


def rel_err(a, ref) -> float:
    a, ref = a.detach().double().cpu(), ref.detach().double().cpu()
    return float((a - ref).abs().max() / ref.abs().max().clamp_min(1e-12))


def timed_ms(fn, device: str, repeats: int = 1) -> float:
    """Milliseconds per call: ``repeats`` calls between two synchronisations, none between them."""
    sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    sync(device)
    return (time.perf_counter() - start) / repeats * 1000


def autocast_or_not(device: str, precision: str):
    return torch.autocast(device_type=device, dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()


def step_ms(
    device: str, name: str, kwargs: dict, batch: int, side, mode: str, lock=None, ready=None, clock=None
) -> dict:
    """One model's training step (forward, backward, fused AdamW): ``step_ms``, the mean of :data:`TIMED_STEPS`
    steps timed after compilation and warm-up in :data:`TIMED_WINDOWS` windows between synchronisations, each
    window's mean in ``step_ms_windows``; bf16 on CUDA, fp32 on the CPU (where
    ``aot_eager`` traces without minutes of C++ compilation, and reduce-overhead has no CUDA graphs); eager, also
    one profiled step (:func:`step_profile`).
    ``lock``: held for the warm-up and the timing (processes sharing the GPU: only one runs steps at a time);
    ``ready``: (barrier, deadline) -- the processes wait at the barrier after their first (compiling, when
    compiled) step, so that no step is timed while another process warms up or compiles (inductor runs kernels on
    the GPU to pick their configurations), until the deadline (``time.time()``), after which the steps ready are
    timed anyway (``beside_compiling``); ``clock``: a mapping the job's moments are written into as they pass
    (:data:`MOMENTS`), so that a caller still has them when the job fails or is cut off (:func:`clock_fields`)."""
    clock = {} if clock is None else clock
    cuda = device == "cuda"
    model = build(name, kwargs).to(device).train()
    images = example(name, kwargs, batch, side)[0].to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    forward = model
    if mode != "eager":
        forward = torch.compile(model, backend="inductor" if cuda else "aot_eager", mode=mode if cuda else None)

    def step():
        if cuda and mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        with autocast_or_not(device, "bf16" if cuda else "fp32"):
            loss = loss_of(forward(images))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    # cuDNN's autotuner on, as a run trains (the engine); a compiled step's convolutions are tuned in its first,
    # compiling, step, beside the other processes' compiling; an eager step's in its first step under the lock, alone
    tuned, torch.backends.cudnn.benchmark = torch.backends.cudnn.benchmark, True
    try:
        if mode != "eager":
            clock["warm_up"] = time.time()
            step()  # compiles; outside the lock, so that the processes compile at once
            sync(device)  # its kernels done before the others are timed
            clock["warmed"] = time.time()
        waited = {}
        clock["ready"] = time.time()
        if ready is not None:
            try:
                ready[0].wait(timeout=max(0.0, ready[1] - time.time()))
            except threading.BrokenBarrierError:
                waited = {"beside_compiling": True}
        with lock or contextlib.nullcontext():
            if mode == "eager":
                clock["warm_up"] = time.time()
            for _ in range(WARM_UP_STEPS[device] + (mode == "eager")):  # eager: its first step too
                step()
            if mode == "eager":  # its warm-up, cuDNN's autotuning: an eager job's compile_s
                sync(device)
                clock["warmed"] = time.time()
            # between synchronisations, as a run trains (it syncs at log steps): a sync after each step would leave
            # the GPU idle while the next step's kernels are launched, which only launch-bound steps pay; in two
            # windows, so that one slowed (beside another process's compile, say) shows against the other
            per_window = TIMED_STEPS[device] // TIMED_WINDOWS
            windows = [timed_ms(step, device, per_window) for _ in range(TIMED_WINDOWS)]
            result = {"step_ms": sum(windows) / len(windows), "step_ms_windows": [round(w, 3) for w in windows]}
            result.update(waited)
            if mode == "eager":
                try:  # the profiler has its own ways to fail (CUPTI): the timing stands without it
                    result.update(step_profile(step, device, result["step_ms"]))
                except Exception as e:
                    result["profile_error"] = error_line(e)
    finally:
        torch.backends.cudnn.benchmark = tuned
    step = model = optimizer = forward = None  # freed (the closure held them) before the cache is emptied
    if cuda:
        torch.cuda.empty_cache()
    return result


def step_profile(step, device: str, step_ms: float) -> dict:
    """One more step under ``torch.profiler`` (issue 55: where an equal-FLOPs model's time goes against its
    baseline's): the ATen ops it dispatched and, on CUDA, the kernels it launched (``kernels``; copies and fills
    counted apart, ``memcpy_memset``), the time the GPU spent in them and that time's share of the timed step
    ``step_ms`` (``gpu_busy_share``: a launch-bound step leaves the GPU idle between short kernels; ``step_ms`` is
    a pipelined step's, so a GPU-bound one can read slightly above 1; the profiled step itself, ``profiled_ms``,
    carries the profiler's own cost), with the three longest kernels. The numbers, not
    the trace (the GPU machine returns at most 8 files)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    cuda = device == "cuda"
    sync(device)
    with profile(activities=[ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]) as prof:
        start = time.perf_counter()
        step()
        sync(device)
        wall_ms = (time.perf_counter() - start) * 1000
    averages = prof.key_averages()
    found = {"aten_ops": sum(e.count for e in averages if e.key.startswith("aten::")), "profiled_ms": round(wall_ms, 2)}
    if cuda:  # device events, less the spans of user annotations (Optimizer.step#AdamW.step) that torch also lists
        events = [e for e in averages if e.device_type == DeviceType.CUDA and not getattr(e, "is_user_annotation", 0)]
        copies = [e for e in events if e.key.startswith(("Memcpy", "Memset"))]
        kernels = [e for e in events if e not in copies]
        busy_ms = sum(e.self_device_time_total for e in events) / 1000  # kernels on several streams: may exceed 1
        longest = sorted(kernels, key=lambda e: e.self_device_time_total, reverse=True)[:3]
        found.update(
            kernels=sum(e.count for e in kernels),
            memcpy_memset=sum(e.count for e in copies),
            gpu_busy_ms=round(busy_ms, 2),
            gpu_busy_share=round(busy_ms / step_ms, 3),
            longest_kernels=[f"{e.key[:60]}: {e.self_device_time_total / 1000:.2f} ms" for e in longest],
        )
    return found


def clock_fields(clock, started: float, now: float) -> dict:
    """A step job's row's times from its moments (``step_ms``'s ``clock``): ``compile_s``, its warm-up's seconds
    (compiled: the compile, until its first step is done; eager: its first steps under the lock), and ``ready_s``,
    the seconds from ``started`` (its test's start) to its arrival at the processes' barrier; each None where the job
    did not get so far. A job stopped in its warm-up (failed, or cut off ``now``) has ``compile_unfinished_s``
    instead: its warm-up's seconds until then, at least what the compile needed."""
    warm_up, warmed, ready = (clock.get(moment) for moment in ("warm_up", "warmed", "ready"))
    fields = {"compile_s": round(warmed - warm_up, 2) if warmed else None, "ready_s": None}
    if warm_up and not warmed:
        fields["compile_unfinished_s"] = round((clock.get("stopped") or now) - warm_up, 2)
    if ready:
        fields["ready_s"] = round(ready - started, 2)
    return fields


class _SharedClock:
    """One job's :data:`MOMENTS` in memory shared with the process that started it, which reads them even when the
    job is cut off (0: not reached)."""

    def __init__(self, moments, index: int):
        self.moments, self.offset = moments, index * len(MOMENTS)

    def __setitem__(self, moment: str, at: float) -> None:
        self.moments[self.offset + MOMENTS.index(moment)] = at

    def get(self, moment: str, default=None):
        return self.moments[self.offset + MOMENTS.index(moment)] or default


_TIMING_LOCK = _ALL_READY = _DEADLINE = _MOMENTS = None


def _hold(lock, barrier, deadline: float, moments=None) -> None:  # a compiling process's initializer
    global _TIMING_LOCK, _ALL_READY, _DEADLINE, _MOMENTS
    _TIMING_LOCK, _ALL_READY, _DEADLINE, _MOMENTS = lock, barrier, deadline, moments


def error_line(e: Exception) -> str:
    """An exception as one line of at most 300 characters: a row's ``error``."""
    return " ".join(f"{type(e).__name__}: {e}".split())[:300]


class _Arrival:
    """The processes' barrier (``step_ms``'s ``ready``), remembering whether this process's job reached it."""

    def __init__(self, barrier):
        self.barrier, self.reached = barrier, False

    def wait(self, timeout=None):
        self.reached = True
        return self.barrier.wait(timeout)


def _arrive(barrier, deadline: float) -> None:
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait(timeout=max(0.0, deadline - time.time()))


def _timed_at(position_and_job: tuple) -> dict:  # in_processes's jobs, each with its position: its moments' slot
    position, job = position_and_job
    return _timed(job, position)


def _timed(job: tuple, position: int = 0) -> dict:
    arrival = _Arrival(_ALL_READY) if _ALL_READY is not None else None
    clock = {} if _MOMENTS is None else _SharedClock(_MOMENTS, position)
    try:
        return step_ms(*job, lock=_TIMING_LOCK, ready=None if arrival is None else (arrival, _DEADLINE), clock=clock)
    except Exception as e:  # one model failing (out of memory, a compile error) costs the others nothing
        clock["stopped"] = time.time()
        traceback.print_exc()  # the whole story, into the call's log (pytest's captured stderr); the row keeps a line
        failed = {"error": error_line(e)}
    # past the except clause its traceback is gone, and with it the failed step's frames and what they held
    try:
        release_device_memory()
    except Exception as e:  # a sticky CUDA error raises again here: the row keeps the job's own error
        failed["release_error"] = error_line(e)
    if arrival is not None and not arrival.reached:
        # it counts as ready, from a thread while this process idles in the pool: breaking the barrier instead would
        # let the others time their steps while the rest still compile
        threading.Thread(target=_arrive, args=(arrival.barrier, _DEADLINE), daemon=True).start()
    return failed


def release_device_memory() -> None:
    """What this process no longer needs on the GPU back to other processes (a failed job's, whose process idles in
    the pool until the pool shuts down; the pytest process's, before the pairs' processes start): its cached blocks,
    and compiled graphs' CUDA graph pools."""
    gc.collect()  # objects in reference cycles (a failed step's)
    if torch.cuda.is_initialized():
        if "torch._dynamo" in sys.modules:  # nothing compiled otherwise: no import of dynamo (seconds) to reset it
            torch._dynamo.reset()
            gc.collect()  # what the compiled graphs' caches alone still held
        torch.cuda.empty_cache()


def in_processes(jobs: list[tuple], wait_s: float, timeout_s: float | None = None, started: float | None = None):
    """:func:`timed_jobs`'s CUDA steps, ``(job, result)`` as each is measured: each job in a spawned process of its
    own, all taking their first (compiling, when compiled) step at once; they wait for each other (for at most
    ``wait_s`` from now) before any is timed, then are timed (and, eager, profiled) one at a time. Every result,
    a failed or cut-off job's too, has the job's times (:func:`clock_fields`; ``ready_s`` from ``started``, the
    test's start, ``time.time()``; default now)."""
    import multiprocessing

    started = time.time() if started is None else started
    context = multiprocessing.get_context("spawn")
    moments = context.Array("d", len(jobs) * len(MOMENTS), lock=False)  # zeros: no moment reached yet
    initargs = (context.Lock(), context.Barrier(len(jobs)), time.time() + wait_s, moments)
    # each job with its position, its moments' slot: equal jobs (a model timed twice) keep a slot each
    positioned = list(enumerate(jobs))
    for (position, job), result in spawned(
        _timed_at, positioned, context, initializer=_hold, initargs=initargs, timeout_s=timeout_s
    ):
        yield job, {**result, **clock_fields(_SharedClock(moments, position), started, time.time())}


def spawned(function, jobs: list[tuple], context=None, initializer=None, initargs=(), timeout_s: float | None = None):
    """``(job, function(job))`` for each job as it finishes, each in a spawned process of its own (a fresh CUDA
    context), all at once, inductor's compile threads sharing out the cores (its graph lowering is single-threaded
    Python; the GPU machine has 16 cores). A job whose function raises is an ``error`` result, the others go on; a
    process that dies ends the pool at once, an ``error`` for each job left, where ``multiprocessing.Pool`` would
    wait for its job until the test's time limit (or, for a process that fails to start, start another for ever);
    leaving early (the time limit) stops the processes still running. After ``timeout_s`` the jobs not finished are
    ``error`` results ("not finished"), so the caller can still write what it has before the test's own limit."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    context = context or multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(len(jobs), mp_context=context, initializer=initializer, initargs=initargs)
    try:
        # spawned as the jobs are submitted: each process reads inductor's thread count from this environment
        with mock.patch.dict(os.environ, TORCHINDUCTOR_COMPILE_THREADS=str(max(1, (os.cpu_count() or 1) // len(jobs)))):
            futures = {pool.submit(function, job): job for job in jobs}
        finished = set()
        try:
            for future in as_completed(futures, timeout=timeout_s):
                finished.add(future)
                try:
                    result = future.result()
                except BrokenProcessPool as e:
                    result = {"error": f"its process died: {e}"}
                except Exception as e:  # the function raised: one job's failure costs the others nothing
                    result = {"error": error_line(e)}
                yield futures[future], result
        except TimeoutError:
            for future in set(futures) - finished:
                yield futures[future], {"error": f"not finished in {timeout_s:.0f} s"}
    finally:
        for process in list((getattr(pool, "_processes", None) or {}).values()):  # private, but no public way
            process.terminate()  # before Python 3.14's terminate_workers()
        pool.shutdown(wait=False, cancel_futures=True)


def compiled_against_float64(device: str, name: str, kwargs: dict, reference: str) -> dict:
    """``torch.compile`` of one model (inductor on CUDA; on the CPU ``aot_eager``: the tracing without minutes of
    C++ compilation): the forward against the float64 reference, the compile times, eager vs compiled steps."""
    import torch._dynamo  # noqa: F401

    plain_fp32(device)
    saved = torch.load(reference, weights_only=True)
    model = build(name, kwargs).eval().to(device)
    x = saved["x"].to(device)
    compiled = torch.compile(model, backend="inductor" if device == "cuda" else "aot_eager")
    start = time.perf_counter()
    with torch.no_grad():
        y = first(compiled(x))
    sync(device)
    compile_infer_s = time.perf_counter() - start
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)

    def step(fn):
        loss_of(fn(x)).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)

    start = time.perf_counter()
    step(compiled)
    sync(device)
    compile_train_s = time.perf_counter() - start
    eager_ms, compiled_ms = timed_ms(lambda: step(model), device, 3), timed_ms(lambda: step(compiled), device, 3)
    return {
        "name": name,
        "backend": "inductor" if device == "cuda" else "aot_eager",
        "rel_err": float(f"{rel_err(y, saved['ref']):.3g}"),
        "against": "CPU float64",
        "compile_infer_s": round(compile_infer_s, 1),
        "compile_train_s": round(compile_train_s, 1),
        "train_eager_ms": round(eager_ms, 2),
        "train_compiled_ms": round(compiled_ms, 2),
        "finite": all(bool(torch.isfinite(p).all()) for p in model.parameters()),
    }


def _compiled_job(job: tuple) -> dict:  # top level: a spawned process imports it by name
    try:
        return compiled_against_float64(*job)
    except Exception as e:  # one model failing costs the others nothing
        return {"name": job[1], "error": error_line(e)}
