"""The ``step`` check, per rank and CONFIG: a training step of the config's model at its per-device batch and
precision, timed with ``depthbench bench``'s code (harness/measure/bench.py), its peak memory (plus the
optimizer's and EMA's extra state) and whether it fits in the memory the ``memory`` check found free."""

from __future__ import annotations

import torch

from harness.engine.builders import speed_options
from harness.measure.bench import amp_dtype, build, measure
from harness.measure.preflight.common import MIB, Check, Options, Rank, one_line
from harness.measure.preflight.plan import Plan


def step_check(rank: Rank, plan: Plan, opts: Options) -> tuple[Check, dict]:
    """The check, and the numbers the record and the later checks use (``step_ms``, ...; {} when not measured)."""
    try:
        return _measured_step(rank, plan, opts)
    except Exception as e:
        if rank.device == "cuda":
            torch.cuda.empty_cache()
        return rank.check("step", "fail", f"{plan.label}: {one_line(e)}", config=plan.label), {}


def _measured_step(rank: Rank, plan: Plan, opts: Options) -> tuple[Check, dict]:
    if plan.problem:
        return rank.check("step", "fail", f"{plan.label}: {plan.problem}", config=plan.label), {}
    batch, precision = plan.micro_batch, plan.precision
    amp = None if precision == "fp32" else ("bf16" if precision == "fp16" and rank.device == "cpu" else precision)
    # a step predicted far beyond the time box is not started (from the model's FLOPs and this device's matmul
    # rate; a training step reaches ~30 % of it on a GPU, ~10 % on a CPU): a CPU without bf16 units runs autocast
    # ~70x slower than fp32, and an 8-GPU recipe's batch on a CPU takes minutes per step
    efficiency = 0.3 if rank.device == "cuda" else 0.1
    rate = (rank.bf16_gflops if amp == "bf16" else None) or rank.fp32_gflops or 1.0
    per_step = 6 * plan.macs * batch / max(1e9 * efficiency * rate, 1.0)
    if per_step > 3 * opts.step_seconds:
        return rank.check(
            "step",
            "warn",
            f"{plan.label}: not measured: a step at batch {batch} ({precision}) "
            f"would take ~{per_step:,.0f} s on this device (6 x {plan.macs / 1e9:.2f} GMACs x "
            f"{batch} at {efficiency:.0%} of its {rate:,.1f} GFLOP/s); run preflight where the runs "
            f"will run",
            per_step * 1000,
            "ms (predicted)",
            config=plan.label,
            predicted=True,
        ), {}
    model = build(plan.participant, device="cpu")
    try:
        # one cold step first (allocations, cuDNN's choices): the memory peak, and how many timed steps fit the box
        first = measure(
            model,
            plan.participant.input_size,
            batch,
            "train",
            warmup=0,
            iters=1,
            device=rank.device,
            amp_dtype=amp_dtype(amp),
            **plan.speed_options(),
        )
        cold = first["step_ms"] / 1000
        iters = min(opts.steps, int((opts.step_seconds - cold) / max(cold, 1e-4)) - 1)
        if iters >= 1:
            numbers = measure(
                model,
                plan.participant.input_size,
                batch,
                "train",
                warmup=1,
                iters=iters,
                device=rank.device,
                amp_dtype=amp_dtype(amp),
                **plan.speed_options(),
            )
            numbers["peak_mem_mb"] = max(numbers["peak_mem_mb"], first["peak_mem_mb"])
        else:  # only the cold step fit the box: its time is an upper bound
            numbers, iters = first, 0
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return rank.check(
            "step",
            "fail",
            f"{plan.label}: out of GPU memory at batch {batch} per device "
            f"({precision}); lower batch_size, raise grad_accum or use more GPUs (ZeRO: "
            f"--engine deepspeed)",
            0,
            "ms",
            config=plan.label,
        ), {}
    finally:
        del model
        if rank.device == "cuda":
            torch.cuda.empty_cache()
    step_ms, peak = numbers["step_ms"], numbers["peak_mem_mb"] * MIB
    # measure() trains with SGD + momentum (one state); the config's optimizer and EMA may keep more
    extra = 4 * plan.params * (max(0, plan.optimizer_states() - 1) + plan.ema())
    need = peak + extra
    free = rank.free_bytes
    where = "GPU" if rank.device == "cuda" else "host"
    timed = f"{iters} timed" if iters else "1 cold step only: an upper bound"
    timed += "".join(f", {name.replace('_', ' ')}" for name, on in plan.speed_options().items() if on)
    if speed_options(plan.cfg)["compile"]["enable"]:
        timed += ", eager (compile.enable: not timed compiled here)"
    text = (
        f"{plan.label}: {step_ms:,.1f} ms/step at batch {batch} ({precision}, {timed}), "
        f"{batch / step_ms * 1000:,.1f} {plan.unit}/s; peak {need / 2**30:.2f} GiB of "
        + (f"{free / 2**30:.1f} GiB free {where} memory" if free is not None else "? (free memory unknown)")
    )
    numbers = {
        "step_ms": round(step_ms, 3),
        "samples_per_s": round(numbers["samples_per_s"], 3),
        "peak_mem_mb": round(need / MIB, 1),
        "timed_steps": iters,
    }
    if free is None:  # the memory check failed and said why; the step itself ran
        return rank.check("step", "ok", text, numbers["step_ms"], "ms", plan.label, **numbers), numbers
    verdict = "ok" if need <= 0.9 * free else ("warn" if need <= free else "fail")
    if verdict == "warn":
        text += ": fits with under 10 % to spare"
    elif verdict == "fail":
        text += f": does not fit; lower batch_size or raise grad_accum (batch {batch} per device now)"
    else:
        text += ": fits"
    return rank.check("step", verdict, text, numbers["step_ms"], "ms", plan.label, **numbers), numbers
