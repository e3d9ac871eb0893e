#!/usr/bin/env python3
"""The GPU check: depthbench's CUDA paths on one bare GPU machine, in under 8 minutes, into one report folder.

    python3 tools/gpu_check.py --out DIR                  # on the GPU machine (tools/gpu_check.sh installs the wheels)
    python3 tools/gpu_check.py --device cpu --tiny --out DIR   # here, and in CI: the same code on tiny sizes

Parts, in this order, each in a process of its own with a time box (a part past its box is killed and reported as
``timeout``; what it had finished is kept): the driver never waits on a hung kernel.

- ``models``  one model of each family at the papers' main sizes (tiny variants with ``--tiny``): forward in fp32
  and under bf16 autocast against a CPU float64 forward of the same weights and input, and a training step
  (forward + backward) in each; tolerances :data:`TOL_FP32`, :data:`TOL_BF16` on max|logits - ref| / max|ref|.
- ``transnext``  TransNeXt's native attention on the device at several input sizes (both pool modes), against the
  CPU; the official ``swattention`` kernels against the native path when that extension imports.
- ``bench``  ``depthbench bench`` (harness/commands/bench.py): StepsNet's equal-FLOPs pairs and TransNeXt-T vs
  Swin-T at batch 64 in bf16, and TransNeXt-T vs Swin-T in fp32 (Table 11's setting), into ``bench.csv`` /
  ``bench_pairs.csv``.
- ``train``  the digits preset for one epoch through ``depthbench train``: Accelerate, and DeepSpeed ZeRO-2 when it
  imports -- each preempted mid-epoch with SIGUSR1 (exit 75, ``last.pth`` mid-epoch), resumed to the end, and (not
  with ``--tiny``) compared with an uninterrupted run.
- ``preflight``  ``depthbench preflight`` (harness/commands/preflight.py) on the digits preset and on StepsNet's
  Steps-DeiT-S recipe (its 224 px model, per-device batch 128, ImageNet augmentation and 10 loader workers, fed
  from the digits exported at 224 px); ``preflight.json``/``preflight.txt`` copied to the report folder.
- ``loader``  the training loader of the DeiT recipe at 224² (RandomResizedCrop, RandAugment m9, random erasing) on
  a generated ImageNet-like JPEG set packed into shards, ``loader.pipeline`` ``cpu`` (timm's transforms in 4 loader
  workers) against ``device`` (4 workers read bytes; nvJPEG decode and the augmentations batched on the GPU):
  finished images/s per GPU and the CPU cores used (benchmarks/loader_throughput.py's code; issue 42's goal:
  6,000 images/s with <= 4 cores). ``--tiny``: 32 px, 2 batches of 8, no workers, on the CPU.
- ``nosync``  (issue 40) the digits preset trained one epoch in this process with every host sync between log
  steps an error (``torch.cuda.set_sync_debug_mode("error")`` outside the loop's sync points; on the CPU, which has
  no such mode, host reads counted by a ``TorchDispatchMode``: zero expected); then the training step of the
  StepsNet equal-FLOPs pairs (Steps-DeiT-S/DeiT-S, Steps-Swin-T/Swin-T, Steps-ResNet-50/ResNet-50) at per-GPU batch
  16, 64 and 128, eager, compiled and ``reduce-overhead`` (CUDA graphs), bf16, AdamW fused -- each pair's
  throughput ratio (``--tiny``: HO-ResNet-10 RK4 vs Euler at batch 2 and 4, fp32, ``aot_eager``).
- ``compile``  ``torch.compile`` of one model per family (forward and training step), compared with the float64
  reference, in parallel processes for the remaining time (``--tiny``: one model, the ``aot_eager`` backend: the
  tracing without minutes of C++ compilation on a CPU).

The report folder gets ``report.json`` (every number), ``report.md`` (tables), ``bench.csv``, ``bench_pairs.csv``,
``preflight.json``, ``preflight.txt`` and ``log.txt``. Exit 0 when no part failed (a timeout is reported, not a
failure), 1 otherwise. Needs torch, timm, accelerate; the parts that read configs (train, preflight) need mmengine,
DeepSpeed is optional: tools/gpu_wheels.sh prepares wheels of what a bare machine lacks. docs/preflight.md.
"""
from __future__ import annotations

import argparse
import copy
import datetime as _dt
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # `python3 tools/gpu_check.py` puts tools/ first, not the checkout
    sys.path.insert(0, str(REPO))

TOL_FP32 = 1e-3   # max|CUDA fp32 logits - CPU float64 logits| / max|CPU float64 logits|, TF32 off
TOL_BF16 = 5e-2   # the same under bf16 autocast (bf16 keeps 8 bits of mantissa: ~4e-3 per rounding)
PARTS = ("models", "transnext", "bench", "train", "preflight", "compile", "loader", "nosync")
# seconds: (time box, least time worth starting it with); the GPU run's boxes sum to 1,230 s beyond the 450 s budget
# because a part that ends early leaves its time to the next (compile, loader, then nosync take what is left, up to
# their boxes; nosync's timings want `--parts nosync --budget 600` of their own)
BOXES = {"models": (100, 40), "transnext": (50, 15), "bench": (110, 40), "train": (110, 40),
         "preflight": (90, 30), "compile": (150, 40), "loader": (120, 60), "nosync": (600, 60)}
BOXES_TINY = {"models": (180, 30), "transnext": (120, 20), "bench": (150, 30), "train": (300, 60),
              "preflight": (180, 30), "compile": (240, 30), "loader": (240, 60), "nosync": (240, 40)}
# issue 40: the step timings (per-GPU batches x modes, bf16); tiny: HO-ResNet-10 RK4 vs Euler at 16 px, fp32
STEP_MODELS = [("deit_small_patch16_224", "steps_deit_small"), ("swin_tiny_patch4_window7_224", "steps_swin_tiny"),
               ("resnet50", "steps_resnet50")]
STEP_MODELS_TINY = [("horesnet10_euler", "horesnet10_rk4")]
STEP_BATCHES, STEP_BATCHES_TINY = (16, 64, 128), (2, 4)
STEP_MODES = ("eager", "default", "reduce-overhead")
PRESET = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"
STEPS_DEIT_S = "configs/stepsnet/steps-deit-small_8xb128-300e_in1k.py"
# (model, keyword arguments, batch, input side or None for the model's own): one per family at the papers' main
# sizes; tiny: small variants of the same code
MODELS = [("steps_deit_small", {}, 2, None), ("steps_swin_tiny", {}, 2, None), ("steps_resnet50", {}, 2, None),
          ("SReT_S", {}, 2, None), ("transnext_tiny", {}, 2, None), ("horesnet58_rk4", {}, 2, None),
          ("scalenet_deit_small_2x", {}, 2, None)]
MODELS_TINY = [("steps_deit_small", {"img_size": 32}, 2, None), ("steps_resnet18_w32", {"num_classes": 10}, 2, 32),
               ("SReT_T", {"img_size": 64}, 2, None), ("transnext_micro", {"img_size": 64}, 2, None),
               ("horesnet10_rk4", {"width": 8, "num_classes": 10}, 2, 16),
               ("scalenet_deit_tiny_2x", {"img_size": 32}, 2, None)]
COMPILE = ["steps_deit_small", "steps_resnet50", "SReT_S", "transnext_tiny", "horesnet58_rk4",
           "scalenet_deit_small_2x"]
COMPILE_TINY = ["horesnet10_rk4"]
# the digits preset shortened: GPU 179 steps of 8 images (preempted at step 30); tiny: test_train's setting
TRAIN = ["epochs=1", "batch_size=8", "log_interval=1", "ckpt.interval_steps=0", "ckpt.interval_minutes=None",
         "log.tensorboard=False", "deterministic=True"]
TRAIN_TINY = ["model.width=8", "data.input_size=8", "data.train_subset=160", "data.val_subset=40", "batch_size=8",
              "epochs=1", "ckpt.interval_steps=3", "ckpt.interval_minutes=None", "log_interval=1",
              "log.tensorboard=False"]


# ================================================================================================ the driver
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="gpu-check", help="report folder (created)")
    parser.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda when visible")
    parser.add_argument("--tiny", action="store_true", help="tiny models and runs (CI; with --device cpu)")
    parser.add_argument("--budget", type=float, default=None, help="seconds for all parts (default 450, tiny 900)")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, from {', '.join(PARTS)}")
    parser.add_argument("--work", help="scratch folder (default: a temporary folder, removed at the end)")
    parser.add_argument("--part", help=argparse.SUPPRESS)    # a part's own process
    parser.add_argument("--model", help=argparse.SUPPRESS)   # compile: one model's process
    parser.add_argument("--box", type=float, default=60, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.part:
        return run_part(args)
    return drive(args)


def drive(args) -> int:
    import tempfile

    started = _now()
    out = Path(args.out).absolute()
    out.mkdir(parents=True, exist_ok=True)
    # scratch (runs, checkpoints, references) outside the report folder, which keeps only what a reader needs
    work = Path(args.work).absolute() if args.work else Path(tempfile.mkdtemp(prefix="depthbench-gpu-check-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    device = args.device or ("cuda" if _cuda_visible() else "cpu")
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        print(f"gpu_check: unknown part(s) {unknown}; choose from {', '.join(PARTS)}", file=sys.stderr)
        return 2
    boxes = BOXES_TINY if args.tiny else BOXES
    budget = args.budget or (900 if args.tiny else 450)
    start = time.monotonic()
    log = open(out / "log.txt", "w")
    say = _sayer(log)
    say(f"gpu_check: {', '.join(parts)} on {device}{' (tiny)' if args.tiny else ''}, budget {budget:.0f} s, "
        f"report -> {out}")
    results = {}
    for i, part in enumerate(parts):
        left = budget - (time.monotonic() - start)
        reserve = sum(boxes[p][1] for p in parts[i + 1:])
        box = min(boxes[part][0], left - reserve) if part != "compile" else min(boxes[part][0], left)
        if box < boxes[part][1]:
            results[part] = {"status": "skip", "seconds": 0, "items": [],
                             "error": f"not started: {max(left, 0):.0f} s left of the {budget:.0f} s budget"}
            say(f"[{part}] skipped: {results[part]['error']}")
            continue
        say(f"[{part}] start (box {box:.0f} s, {left:.0f} s left)")
        results[part] = _run_part_process(part, args, device, work, out, box, log)
        r = results[part]
        say(f"[{part}] {r['status']} in {r['seconds']:.1f} s: " + ", ".join(
            f"{sum(it.get('verdict') == v for it in r['items'])} {v}" for v in ("ok", "warn", "fail", "skip"))
            + (f"; {r['error']}" if r.get("error") else ""))
        for it in r["items"]:  # what failed, on the console too (the full output is in log.txt)
            if it.get("verdict") in ("fail", "warn"):
                say(f"    {it['verdict']} {it.get('name')}: {str(it.get('error') or it.get('reason') or '')[:300]}")
    report = {"format": "depthbench-gpu-check/1", "started": started, "device": device, "tiny": args.tiny,
              "host": socket.gethostname(), "platform": platform.platform(), "budget_s": budget,
              "wall_s": round(time.monotonic() - start, 1), "tolerances": {"fp32": TOL_FP32, "bf16": TOL_BF16},
              "parts": results}
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    (out / "report.md").write_text(markdown(report))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    failed = [p for p, r in results.items() if r["status"] == "fail"]
    say(f"gpu_check: done in {report['wall_s']:.0f} s; " + (f"FAILED: {', '.join(failed)}" if failed else
                                                             "no part failed") + f"; {out / 'report.md'}")
    log.close()
    return 1 if failed else 0


def _sayer(log):
    def say(line: str) -> None:
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()
    return say


def _cuda_visible() -> bool:
    return os.path.exists("/dev/nvidiactl") or bool(os.environ.get("CUDA_VISIBLE_DEVICES"))


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def part_env(device: str, work: Path) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1", DS_ACCELERATOR=device, DEPTHBENCH_RUNS=str(work / "runs"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS for the train part's comparison
    return env


def _run_part_process(part: str, args, device: str, work: Path, out: Path, box: float, log) -> dict:
    """One part in its own process group, killed (with whatever it started) when it outlives ``box``."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--part", part, "--device", device, "--work", str(work),
           "--out", str(out), "--box", f"{box:.0f}"] + (["--tiny"] if args.tiny else [])
    items_file = work / f"{part}.jsonl"
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, env=part_env(device, work), stdout=log, stderr=log,
                            start_new_session=True)
    try:
        code = proc.wait(timeout=box)
        status = None
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        code, status = None, "timeout"
    _reap_group(proc.pid)
    items = _read_items(items_file)
    error = None
    if status == "timeout":
        error = f"killed after its {box:.0f} s box; {len(items)} item(s) finished"
    elif code != 0:
        status, error = "fail", f"the part's process exited {code} (log.txt has its output)"
    else:
        verdicts = {it.get("verdict") for it in items}
        status = "fail" if "fail" in verdicts else ("warn" if "warn" in verdicts else
                                                    "skip" if verdicts == {"skip"} else "ok")
    return {"status": status, "seconds": round(time.monotonic() - start, 1), "items": items, "error": error}


def _reap_group(pgid: int) -> None:
    """Children a part left behind (a compile worker, a training run) go with it."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_items(path: Path) -> list[dict]:
    if not path.exists():
        return []
    items = []
    for line in path.read_text().splitlines():
        try:
            items.append(json.loads(line))
        except ValueError:  # a line cut by the kill
            pass
    return items


# ================================================================================================ a part's process
class Context:
    def __init__(self, args):
        self.device, self.tiny, self.box = args.device, args.tiny, args.box
        self.work, self.out = Path(args.work), Path(args.out)
        self.started = time.monotonic()
        self.items = self.work / f"{args.part}.jsonl"
        self.model = args.model

    def left(self) -> float:
        return self.box - (time.monotonic() - self.started)

    def emit(self, **item) -> dict:
        item.setdefault("verdict", "ok")
        with open(self.items, "a") as fh:
            fh.write(json.dumps(item, default=str) + "\n")
        print(f"  {item['verdict']:<4} {item.get('name', '')}: " + ", ".join(
            f"{k}={v}" for k, v in item.items() if k not in ("name", "verdict")
            and not isinstance(v, (list, dict))), flush=True)
        return item


def run_part(args) -> int:
    ctx = Context(args)
    if args.part == "compile" and args.model:
        ctx.items = ctx.work / f"compile-{args.model}.jsonl"
    fn = {"models": part_models, "transnext": part_transnext, "bench": part_bench, "train": part_train,
          "preflight": part_preflight, "compile": part_compile, "loader": part_loader, "nosync": part_nosync}[args.part]
    try:
        fn(ctx)
    except Exception as e:  # the part's own failure is an item too: the report says what broke
        import traceback

        traceback.print_exc()
        ctx.emit(name=f"{args.part} (part)", verdict="fail", error=f"{type(e).__name__}: {str(e)[:500]}")
    return 0


def _torch_setup(ctx):
    import torch

    if ctx.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # plain fp32 against the float64 reference
        torch.backends.cudnn.allow_tf32 = False
    elif not os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(os.cpu_count() or 1)
    return torch


def _sync(device):
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _first(out):
    import torch

    if isinstance(out, (tuple, list)):
        out = next(o for o in out if torch.is_tensor(o))
    return out


def _loss(out):
    import torch

    outputs = out if isinstance(out, (tuple, list)) else (out,)
    return sum(o.float().mean() for o in outputs if torch.is_tensor(o))


def _build(name: str, kwargs: dict):
    """The model with seeded weights; zero-initialised parameters (heads, layer scales, biases) get small random
    values so that every branch contributes to the logits being compared."""
    import timm
    import torch

    import models  # noqa: F401

    torch.manual_seed(0)
    model = timm.create_model(name, **kwargs)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            if p.numel() and not p.abs().max() > 0:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.02)
    return model


def _input(name: str, kwargs: dict, batch: int, side: int | None = None):
    import torch

    from harness.measure.bench import input_size_of

    size = input_size_of(name, side, kwargs)
    return torch.randn(batch, *size, generator=torch.Generator().manual_seed(2)), size


def _rel(a, ref) -> float:
    a, ref = a.detach().double().cpu(), ref.detach().double().cpu()
    return float((a - ref).abs().max() / ref.abs().max().clamp_min(1e-12))


def _timed(fn, device, repeats: int = 1) -> float:
    """Milliseconds per call (after the calls, synchronised)."""
    _sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    _sync(device)
    return (time.perf_counter() - start) / repeats * 1000


# ------------------------------------------------------------------------------------------------ part: models
def part_models(ctx):
    torch = _torch_setup(ctx)
    ctx.emit(name="environment", **environment(ctx.device))
    autocast_dtype = torch.bfloat16
    for name, kwargs, batch, side in (MODELS_TINY if ctx.tiny else MODELS):
        if ctx.left() < 10:
            ctx.emit(name=name, verdict="skip", reason="not reached in the part's time box")
            continue
        try:
            ctx.emit(**_check_model(torch, ctx, name, kwargs, batch, side, autocast_dtype))
        except Exception as e:
            ctx.emit(name=name, verdict="fail", error=f"{type(e).__name__}: {str(e)[:300]}")
        finally:
            if ctx.device == "cuda":
                torch.cuda.empty_cache()


def _check_model(torch, ctx, name, kwargs, batch, side, dtype) -> dict:
    """Forward in fp32 and bf16 against float64, then a training step in each; a step that raises is reported
    (with the other numbers), not fatal."""
    device = ctx.device
    start = time.perf_counter()
    model = _build(name, kwargs).eval()
    x, size = _input(name, kwargs, batch, side)
    with torch.no_grad():
        ref = _first(copy.deepcopy(model).double()(x.double()))
    ref_s = time.perf_counter() - start
    torch.save({"x": x, "ref": ref, "kwargs": kwargs}, ctx.work / f"ref-{name}.pt")  # for the compile part
    model = model.to(device)
    xd = x.to(device)
    with torch.no_grad():
        fp32 = _rel(_first(model(xd)), ref)
        with torch.autocast(device_type=device, dtype=dtype):
            bf16 = _rel(_first(model(xd)), ref)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    step_ms, finite, errors = {}, True, []
    for precision in ("fp32", "bf16"):
        context = torch.autocast(device_type=device, dtype=dtype) if precision == "bf16" else _null()

        def step():
            with context:
                loss = _loss(model(xd))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)

        try:
            step()  # warm-up (cuDNN picks its kernels)
            step_ms[precision] = round(_timed(step, device, 3), 2)
        except Exception as e:
            errors.append(f"{precision} training step: {type(e).__name__}: {' '.join(str(e).split())[:200]}")
            optimizer.zero_grad(set_to_none=True)
            continue
        finite &= all(bool(torch.isfinite(p).all()) for p in model.parameters())
    ok = fp32 <= TOL_FP32 and bf16 <= TOL_BF16 and finite and not errors
    return {"name": name, "input": "x".join(map(str, size)), "batch": batch, "kwargs": kwargs,
            "fp32_rel_err": float(f"{fp32:.3g}"), "bf16_rel_err": float(f"{bf16:.3g}"),
            "train_fp32_ms": step_ms.get("fp32"), "train_bf16_ms": step_ms.get("bf16"), "finite": finite,
            "reference_s": round(ref_s, 1), **({"error": "; ".join(errors)} if errors else {}),
            "verdict": "ok" if ok else "fail"}


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def environment(device: str) -> dict:
    import importlib.metadata as metadata

    import torch

    info = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda,
            "cpu_count": os.cpu_count()}
    for dist in ("timm", "accelerate", "mmengine", "deepspeed", "numpy"):
        try:
            info[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            info[dist] = None
    if device == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, sm=f"{props.major}{props.minor}", gpu_memory_gib=round(props.total_memory / 2**30, 1),
                    bf16=torch.cuda.is_bf16_supported(), nccl=".".join(map(str, torch.cuda.nccl.version())))
        from harness.measure.preflight import _driver_version

        info["driver"] = _driver_version()
    from models.transnext import swattention_available

    info["swattention"] = swattention_available()
    return info


# ------------------------------------------------------------------------------------------------ part: transnext
def part_transnext(ctx):
    torch = _torch_setup(ctx)
    from models.transnext import swattention_available

    device = ctx.device
    name, kwargs = ("transnext_micro", {"img_size": 64}) if ctx.tiny else ("transnext_tiny", {})
    sizes = [64, 96, 128] if ctx.tiny else [224, 384, 512, 640]
    cpu_sizes = sizes[:2]  # the CPU comparison costs seconds per image at 384+ on the GPU machine's cores
    for pool_mode in ("normal", "linear"):
        model = _build(name, {**kwargs, "pool_mode": pool_mode, "attention_backend": "native"}).eval()
        cpu_model = copy.deepcopy(model)
        model = model.to(device)
        for size in sizes:
            if ctx.left() < 8:
                ctx.emit(name=f"{name} {pool_mode} {size}", verdict="skip", reason="not reached in the time box")
                continue
            x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(size))
            xd = x.to(device)
            with torch.no_grad():
                y = model(xd)
                ms = _timed(lambda: model(xd), device, 3)
                with torch.autocast(device_type=device, dtype=torch.bfloat16):
                    yb = model(xd)
                item = {"name": f"{name} {pool_mode} {size}", "forward_ms": round(ms, 2),
                        "finite": bool(torch.isfinite(y).all() and torch.isfinite(yb).all())}
                if size in cpu_sizes and device != "cpu":
                    ref = cpu_model(x)
                    item["vs_cpu_rel_err"] = float(f"{_rel(y, ref):.3g}")
                    item["bf16_vs_cpu_rel_err"] = float(f"{_rel(yb, ref):.3g}")
            ok = item["finite"] and item.get("vs_cpu_rel_err", 0) <= TOL_FP32 and \
                item.get("bf16_vs_cpu_rel_err", 0) <= TOL_BF16
            ctx.emit(**item, verdict="ok" if ok else "fail")
        if pool_mode == "normal":  # training steps at the second size (the backward of the window taps)
            model.train()
            x = torch.randn(2, 3, sizes[1], sizes[1], device=device)
            for precision in ("fp32", "bf16"):
                if ctx.left() < 10:
                    continue
                context = torch.autocast(device_type=device, dtype=torch.bfloat16) if precision == "bf16" else _null()
                label = f"{name} train step {sizes[1]} {precision}"
                try:
                    with context:
                        loss = model(x).float().mean()
                    loss.backward()
                except Exception as e:
                    ctx.emit(name=label, verdict="fail", error=f"{type(e).__name__}: {' '.join(str(e).split())[:300]}")
                    continue
                finally:
                    model.zero_grad(set_to_none=True)
                ctx.emit(name=label, finite=bool(torch.isfinite(loss)), verdict="ok" if torch.isfinite(loss) else "fail")
            model.eval()
        del model, cpu_model
    if not swattention_available():
        ctx.emit(name="swattention", verdict="skip", reason="the swattention extension does not import here "
                                                             "(build it from the official repository to check it)")
        return
    if device != "cuda":
        ctx.emit(name="swattention", verdict="skip", reason="swattention runs on CUDA tensors only")
        return
    native = _build(name, {**kwargs, "attention_backend": "native"}).eval().to(device)
    kernel = _build(name, {**kwargs, "attention_backend": "swattention"}).eval().to(device)
    for size in sizes[:2]:
        x = torch.randn(2, 3, size, size, device=device)
        with torch.no_grad():
            a, b = native(x), kernel(x)
            ms_native = _timed(lambda: native(x), device, 5)
            ms_kernel = _timed(lambda: kernel(x), device, 5)
        err = _rel(b, a)
        ctx.emit(name=f"swattention vs native {size}", rel_err=float(f"{err:.3g}"), native_ms=round(ms_native, 2),
                 swattention_ms=round(ms_kernel, 2), verdict="ok" if err <= TOL_FP32 else "fail")


# ------------------------------------------------------------------------------------------------ part: bench
def part_bench(ctx):
    from harness.commands.bench import run as bench

    out = ctx.out / "bench.csv"
    if ctx.tiny:
        runs = [dict(models=["horesnet10_rk4", "horesnet10_euler"], model_kwargs={"width": 8, "num_classes": 10},
                     input_size=16, batch_size=2, mode="both", repeats=2, iters=1, warmup=1, memory=False,
                     threads=1, peak_size=256, label="HO-ResNet-10 RK4 vs Euler (tiny, fp32)")]
    else:
        common = dict(batch_size=64, repeats=5, iters=3, warmup=3)
        runs = [dict(pairs="stepsnet:equal-flops", mode="both", amp="bf16", label="StepsNet equal FLOPs, bf16 b64",
                     **common),
                dict(pairs="transnext:competitors", mode="both", amp="bf16", label="TransNeXt-T vs Swin-T, bf16 b64",
                     **common),
                dict(pairs="transnext:competitors", mode="infer", amp=None, label="TransNeXt-T vs Swin-T, fp32 b64 "
                     "(Table 11's setting)", **common)]
    for spec in runs:
        label = spec.pop("label")
        if ctx.left() < 20:
            ctx.emit(name=label, verdict="skip", reason="not reached in the time box")
            continue
        start = time.perf_counter()
        result = bench(device=ctx.device, out=out, **spec)
        rows = [{k: r.get(k) for k in ("label", "precision", "batch_size", "infer_samples_per_sec",
                                       "train_samples_per_sec", "infer_mfu", "train_mfu", "infer_peak_mem_mb",
                                       "train_peak_mem_mb", "infer_gmacs", "device_name")} for r in result.rows]
        pairs = [{k: p.get(k) for k in ("candidate", "baseline", "gmacs_ratio", "infer_throughput_ratio",
                                        "train_throughput_ratio", "infer_memory_ratio", "train_memory_ratio", "claim")}
                 for p in result.pairs]
        ctx.emit(name=label, seconds=round(time.perf_counter() - start, 1), rows=rows, pairs=pairs,
                 peak=result.machine.get(f"peak_gflops_{spec.get('amp') or 'fp32'}"))


# ------------------------------------------------------------------------------------------------ part: nosync
def part_nosync(ctx):
    """Issue 40: no host sync between log steps in a real training run, and the step timings of the pairs."""
    if not _needs_mmengine(ctx, "no-sync training step"):
        _nosync_training(ctx)
    _step_timings(ctx)


def _nosync_training(ctx):
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from harness.commands.train import run as train_run
    from harness.engine import backends, loop

    env = part_env(ctx.device, ctx.work)
    for key in ("DEPTHBENCH_RUNS", "CUBLAS_WORKSPACE_CONFIG"):
        os.environ[key] = env[key]
    cuda = ctx.device == "cuda"
    outside = {"reads": 0, "where": {}}
    state = {"inside": True}  # inside a sync point: from a read of the totals to the next step's start

    class Reads(TorchDispatchMode):  # the CPU's stand-in for set_sync_debug_mode: host reads of tensors
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten._local_scalar_dense.default and not state["inside"]:
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

    real_read, real_begin, real_epoch = (backends.Backend.reduce_and_read, backends.Backend.step_begin,
                                         loop.train_one_epoch)

    def read(self, tensor):
        mark(True)
        return real_read(self, tensor)

    def begin(self):
        real_begin(self)
        state["steps"] = state.get("steps", 0) + 1
        mark(False)

    class HostLoader:  # the input pipeline's own CPU reads (sampling, CPU transforms) are not the step's
        def __init__(self, loader):
            self.loader = loader

        def __getattr__(self, name):
            return getattr(self.loader, name)

        def __len__(self):
            return len(self.loader)

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

    backends.Backend.reduce_and_read, backends.Backend.step_begin, loop.train_one_epoch = read, begin, epoch
    overrides = (TRAIN_TINY if ctx.tiny else TRAIN) + ["log_interval=10", "ckpt.interval_steps=0"]
    start = time.perf_counter()
    try:
        result = train_run(str(REPO / PRESET), work_dir=ctx.work / "nosync-run", overrides=overrides)
        error = None if result.exit_code == 0 else f"exit {result.exit_code}"
    except Exception as e:  # set_sync_debug_mode("error") raises at the syncing call: the report names it
        error = f"{type(e).__name__}: {str(e)[:300]}"
    finally:
        backends.Backend.reduce_and_read, backends.Backend.step_begin, loop.train_one_epoch = (real_read, real_begin,
                                                                                              real_epoch)
        if cuda:
            torch.cuda.set_sync_debug_mode("default")
    check = "set_sync_debug_mode('error')" if cuda else "host reads counted (TorchDispatchMode)"
    verdict = "fail" if error or outside["reads"] or not state.get("steps") else "ok"
    ctx.emit(name=f"no-sync training step ({check} between log steps)", verdict=verdict, error=error,
             steps_checked=state.get("steps", 0), host_reads_between_log_steps=outside["reads"], where=outside["where"],
             seconds=round(time.perf_counter() - start, 1))


def _step_timings(ctx):
    """Milliseconds per training step (forward, backward, fused AdamW) and images/s per pair, batch and mode."""
    torch = _torch_setup(ctx)
    cuda = ctx.device == "cuda"
    batches = STEP_BATCHES_TINY if ctx.tiny else STEP_BATCHES
    pairs = STEP_MODELS_TINY if ctx.tiny else STEP_MODELS
    kwargs = {"width": 8, "num_classes": 10} if ctx.tiny else {}
    side = 16 if ctx.tiny else None
    dtype = torch.bfloat16 if cuda else None
    backend = "inductor" if cuda else "aot_eager"  # the CPU: tracing without minutes of C++ compilation
    rows = []
    for mode in STEP_MODES:
        for baseline, candidate in pairs:
            for batch in batches:
                if ctx.left() < 15:
                    ctx.emit(name=f"step {mode} {candidate} b{batch}", verdict="skip", reason="not reached in the box")
                    continue
                ms = {}
                for name in (baseline, candidate):
                    try:
                        ms[name] = _step_ms(torch, ctx, name, kwargs, batch, side, mode, dtype, backend)
                    except Exception as e:
                        ctx.emit(name=f"step {mode} {name} b{batch}", verdict="fail",
                                 error=f"{type(e).__name__}: {str(e)[:300]}")
                if len(ms) == 2:
                    rows.append({"mode": mode, "batch": batch, "baseline": baseline, "candidate": candidate,
                                 "baseline_ms": round(ms[baseline], 3), "candidate_ms": round(ms[candidate], 3),
                                 "throughput_ratio": round(ms[baseline] / ms[candidate], 3)})
                    ctx.emit(name=f"step {mode} {candidate}/{baseline} b{batch}", **rows[-1])
    ctx.emit(name="step timings", rows=rows, precision="bf16" if dtype else "fp32",
             note=None if cuda else "CPU: reduce-overhead has no CUDA graphs here and runs as the default mode")


def _step_ms(torch, ctx, name, kwargs, batch, side, mode, dtype, backend) -> float:
    """One model's training step in milliseconds (median of timed steps after warm-up/compilation)."""
    import statistics

    model = _build(name, kwargs).to(ctx.device).train()
    images, _ = _input(name, kwargs, batch, side)
    images = images.to(ctx.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    cuda_graphs = mode == "reduce-overhead" and ctx.device == "cuda"
    forward = model
    if mode != "eager":
        forward = torch.compile(model, backend=backend, mode=mode if ctx.device == "cuda" else None)
    autocast = (torch.autocast("cuda", dtype=dtype) if dtype is not None else _null())

    def step():
        if cuda_graphs:
            torch.compiler.cudagraph_mark_step_begin()
        with autocast:
            loss = _loss(forward(images))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(1 if ctx.tiny else 3):
        step()
    times = [_timed(step, ctx.device) for _ in range(2 if ctx.tiny else 10)]
    del model, optimizer, forward
    if ctx.device == "cuda":
        torch.cuda.empty_cache()
    return statistics.median(times)


# ------------------------------------------------------------------------------------------------ part: train
def _needs_mmengine(ctx, what: str) -> bool:
    """Configs are read with mmengine; a machine without it (no wheels carried) skips the part, saying so."""
    import importlib.util

    if importlib.util.find_spec("mmengine") is not None:
        return False
    ctx.emit(name=what, verdict="skip", reason="mmengine is not installed: depthbench reads configs with it (carry "
                                               "it as a wheel: tools/gpu_wheels.sh here, tools/gpu_check.sh there)")
    return True


def part_train(ctx):
    import torch

    if _needs_mmengine(ctx, "train"):
        return
    overrides = TRAIN_TINY if ctx.tiny else TRAIN
    stop_at = 4 if ctx.tiny else 30
    env = part_env(ctx.device, ctx.work)
    engines = [("accelerate", [])]
    probe = subprocess.run([sys.executable, "-c", "import deepspeed"], capture_output=True, text=True, env=env,
                           timeout=120)
    if probe.returncode == 0:
        engines.append(("deepspeed", ["--engine", "deepspeed", "deepspeed.zero_stage=2"]))
    else:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        ctx.emit(name="deepspeed", verdict="skip", reason=f"DeepSpeed does not import here ({last[:200]})")
    for engine, extra in engines:
        if ctx.left() < 30:
            ctx.emit(name=engine, verdict="skip", reason="not reached in the time box")
            continue
        root = ctx.work / f"train-{engine}"
        item = {"name": f"{engine}: digits preset, 1 epoch, preempted and resumed"}
        reference = None
        if not ctx.tiny:
            start = time.perf_counter()
            code, log = _train(env, root / "reference", overrides, extra)
            item["reference_s"] = round(time.perf_counter() - start, 1)
            if code != 0:
                ctx.emit(**item, verdict="fail", error=f"uninterrupted run exited {code}: {log[-400:]}")
                continue
            reference = root / "reference"
        run = root / "run"
        start = time.perf_counter()
        proc = _launch(env, run, overrides, extra)
        step = _wait_for_step(proc, run, stop_at, timeout=max(ctx.left() - 20, 10))
        if step is None:
            ctx.emit(**item, verdict="fail", error=f"no step {stop_at} logged: {_finish(proc)[1][-400:]}")
            continue
        proc.send_signal(signal.SIGUSR1)
        code, log = _finish(proc)
        meta = _meta(run)
        checkpoint = torch.load(run / "last.pth", map_location="cpu", weights_only=True) if (run / "last.pth").exists() else {}
        per_epoch = _steps_per_epoch(run)
        item.update(preempt_exit=code, preempt_status=meta.get("status"), signalled_at_step=step,
                    checkpoint_step=checkpoint.get("global_step"), batch_in_epoch=checkpoint.get("batch_in_epoch"),
                    steps_per_epoch=per_epoch)
        mid = 0 < (checkpoint.get("batch_in_epoch") or 0) < (per_epoch or 10**9) and checkpoint.get("epoch") == 0
        if code != 75 or meta.get("status") != "preempted" or not mid:
            ctx.emit(**item, verdict="fail", error=f"expected exit 75, status preempted and a mid-epoch checkpoint: "
                                                   f"{log[-400:]}")
            continue
        code, log = _train(env, run, overrides, extra, "--resume", "auto")
        item.update(resume_exit=code, status=_meta(run).get("status"), seconds=round(time.perf_counter() - start, 1),
                    images_per_s=_median_rate(run))
        if code != 0 or item["status"] != "done":
            ctx.emit(**item, verdict="fail", error=f"resume exited {code}: {log[-400:]}")
            continue
        verdict = "ok"
        if reference is not None:
            got = torch.load(run / "last.pth", map_location="cpu", weights_only=True)["model"]
            want = torch.load(reference / "last.pth", map_location="cpu", weights_only=True)["model"]
            diff = max(float((got[k].double() - want[k].double()).abs().max()) for k in want if want[k].is_floating_point())
            item.update(max_weight_diff_vs_uninterrupted=float(f"{diff:.3g}"), identical=diff == 0)
            if diff > 1e-3:  # GPU kernels without a deterministic variant drift; a different run does more
                verdict = "warn"
        ctx.emit(**item, verdict=verdict)


def _launch(env, work_dir: Path, overrides, extra, *args):
    """``depthbench train`` in the part's process group (a killed part takes it along); output to a log file."""
    work_dir.parent.mkdir(parents=True, exist_ok=True)
    log_path = work_dir.parent / f"{work_dir.name}.log"
    with open(log_path, "a") as log:
        proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "train", PRESET, *overrides, *extra,
                                 "--work-dir", str(work_dir), *args], cwd=REPO, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
    proc.log_path = log_path
    return proc


def _finish(proc, timeout: float = 300) -> tuple[int, str]:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return proc.returncode, proc.log_path.read_text()[-2000:] if proc.log_path.exists() else ""


def _train(env, work_dir, overrides, extra, *args) -> tuple[int, str]:
    return _finish(_launch(env, work_dir, overrides, extra, *args))


def _logged_step(work_dir: Path) -> int:
    path = work_dir / "metrics.jsonl"
    if not path.exists():
        return 0
    steps = [json.loads(line).get("global_step", 0) for line in path.read_text().splitlines() if line.endswith("}")]
    return max(steps, default=0)


def _wait_for_step(proc, work_dir: Path, step: int, timeout: float) -> int | None:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        seen = _logged_step(work_dir)
        if seen >= step:
            return seen
        if proc.poll() is not None:
            return None
        time.sleep(0.005)
    return None


def _meta(work_dir: Path) -> dict:
    try:
        return json.loads((work_dir / "meta.json").read_text())
    except (OSError, ValueError):
        return {}


def _records(work_dir: Path) -> list[dict]:
    path = work_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")] if path.exists() else []


def _steps_per_epoch(work_dir: Path) -> int | None:
    import re

    log = work_dir / "log.txt"
    match = re.search(r"(\d+) steps/epoch", log.read_text()) if log.exists() else None
    return int(match.group(1)) if match else None


def _median_rate(work_dir: Path) -> float | None:
    rates = sorted(r["images_per_s"] for r in _records(work_dir) if r.get("kind") == "train" and r.get("images_per_s"))
    return round(rates[len(rates) // 2], 1) if rates else None


# ------------------------------------------------------------------------------------------------ part: preflight
def part_preflight(ctx):
    from harness.commands.preflight import run

    if _needs_mmengine(ctx, "depthbench preflight"):
        return
    if ctx.tiny:
        kwargs = dict(configs=[PRESET], overrides=["model.width=8", "data.input_size=8", "batch_size=16"], steps=2,
                      loader_seconds=2.0)
    else:
        # the paper's per-device batch (8 GPUs x 128) and loader on one GPU: Steps-DeiT-S's ImageNet recipe fed from
        # the digits exported at 224 px (no ImageNet here); 10 loader workers as the recipe
        kwargs = dict(configs=[PRESET], with_overrides=[(STEPS_DEIT_S, ["data.type='digits'", "data.root=None",
                                                                        "batch_size=1024", "data.repeated_aug=False"])],
                      nodes=1, gpus_per_node=8, time="2-00:00:00", loader_seconds=10.0)
    report = run(device=ctx.device, work_dir=ctx.work / "preflight", progress=print, **kwargs)
    print(report.text, flush=True)
    for name in ("preflight.json", "preflight.txt"):
        shutil.copy(ctx.work / "preflight" / name, ctx.out / name)
    # on one GPU the 8-GPU layout's own checks (per-device batch) pass, but its ranks share nothing to all-reduce
    checks = [{"check": c.check, "verdict": c.verdict, "config": c.config, "value": c.value, "text": c.text}
              for c in report.checks]
    ctx.emit(name="depthbench preflight", exit_code=report.exit_code, summary=report.record.get("summary"),
             checks=checks, verdict="fail" if report.exit_code else
             ("warn" if report.record.get("summary", {}).get("warn") else "ok"))


# ------------------------------------------------------------------------------------------------ part: loader
def part_loader(ctx):
    """loader.pipeline cpu against device on packed shards (issue 42); see the module docstring."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from loader_throughput import make_folder, pipeline_rate, training_config

    from harness.commands.data import run_pack

    if _needs_mmengine(ctx, "the training loader"):
        return
    images, batch, batches, workers, size = (64, 8, 3, 0, 32) if ctx.tiny else (1500, 128, 10, 4, 224)
    folder = make_folder(ctx.work / "loader-jpegs", images, 10)
    shards = ctx.work / "loader-shards"
    run_pack(folder, shards, shard_size=500)
    for pipeline in ("cpu", "device"):
        cfg = training_config("configs/deit/deit-small_8xb128-300e_in1k.py", shards, 10, workers)
        cfg.data.update(type="shards", input_size=size, pin_memory=ctx.device == "cuda")
        cfg.loader.pipeline = pipeline
        if ctx.left() < 20:
            ctx.emit(name=f"{pipeline} pipeline", verdict="skip", reason="no time left in the part's box")
            continue
        rates = [pipeline_rate(cfg, batch, batches, ctx.device, epoch) for epoch in range(2)]
        best = max(rates, key=lambda r: r["images_per_s"])
        ctx.emit(name=f"{pipeline} pipeline", images_per_s=round(best["images_per_s"], 1),
                 cores=round(best["cores"], 2), workers=workers, batch=batch, input_size=size,
                 goal="6,000 images/s per GPU with <= 4 cores" if ctx.device == "cuda" else "CPU mode: code path only")


# ------------------------------------------------------------------------------------------------ part: compile
def part_compile(ctx):
    if ctx.model:  # one model's process
        return _compile_one(ctx, ctx.model)
    names = COMPILE_TINY if ctx.tiny else COMPILE
    if ctx.tiny:  # one process: the aot_eager backend compiles in seconds
        for name in names:
            _compile_one(ctx, name)
        return
    env = part_env(ctx.device, ctx.work)
    procs = {}
    for name in names:  # in parallel: inductor's compile is CPU-bound, the GPU machine has 16 cores
        procs[name] = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--part", "compile",
                                        "--model", name, "--device", ctx.device, "--work", str(ctx.work), "--out",
                                        str(ctx.out), "--box", f"{ctx.left():.0f}"], cwd=REPO, env=env)
    deadline = time.monotonic() + ctx.left() - 5
    for name, proc in procs.items():
        try:
            proc.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:  # its compile workers go with the part's process group at the end
            proc.kill()
            proc.wait()
        items = _read_items(ctx.work / f"compile-{name}.jsonl")
        if items:
            for it in items:
                ctx.emit(**it)
        else:
            ctx.emit(name=name, verdict="warn", reason=f"not compiled within the part's {ctx.box:.0f} s box")


def _compile_one(ctx, name: str):
    torch = _torch_setup(ctx)
    import torch._dynamo  # noqa: F401

    device = ctx.device
    backend = "aot_eager" if ctx.tiny else "inductor"
    spec = next((m for m in (MODELS_TINY if ctx.tiny else MODELS) if m[0] == name), (name, {}, 2, None))
    kwargs, side = dict(spec[1]), spec[3]
    saved = ctx.work / f"ref-{name}.pt"
    model = _build(name, kwargs).eval().to(device)
    if saved.exists():
        data = torch.load(saved, weights_only=True)
        x, ref, against = data["x"], data["ref"], "CPU float64"
    else:
        x, _ = _input(name, kwargs, 2, side)
        with torch.no_grad():
            ref, against = _first(model(x.to(device))), "eager fp32"
    xd = x.to(device)
    compiled = torch.compile(model, backend=backend)
    start = time.perf_counter()
    with torch.no_grad():
        y = _first(compiled(xd))
    _sync(device)
    compile_infer_s = time.perf_counter() - start
    err = _rel(y, ref)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)

    def step(fn):
        loss = _loss(fn(xd))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)

    start = time.perf_counter()
    step(compiled)
    _sync(device)
    compile_train_s = time.perf_counter() - start
    eager_ms = _timed(lambda: step(model), device, 3)
    compiled_ms = _timed(lambda: step(compiled), device, 3)
    finite = all(bool(torch.isfinite(p).all()) for p in model.parameters())
    ctx.emit(name=name, backend=backend, rel_err=float(f"{err:.3g}"), against=against,
             compile_infer_s=round(compile_infer_s, 1), compile_train_s=round(compile_train_s, 1),
             train_eager_ms=round(eager_ms, 2), train_compiled_ms=round(compiled_ms, 2), finite=finite,
             verdict="ok" if err <= TOL_FP32 and finite else "fail")


# ================================================================================================ the report
def markdown(report: dict) -> str:
    parts = report["parts"]
    env = next((it for it in parts.get("models", {}).get("items", []) if it.get("name") == "environment"), {})
    what = env.get("gpu") or report["device"]
    lines = [f"# depthbench GPU check: {what}, {report['started'][:10]}", "",
             f"Host {report['host']}, {report['platform']}; device {report['device']}"
             + (" (tiny sizes)" if report["tiny"] else "") + f"; wall time {report['wall_s']:.0f} s of a "
             f"{report['budget_s']:.0f} s budget.", ""]
    if env:
        lines += ["Software: " + ", ".join(f"{k} {v}" for k, v in env.items() if k not in ("name", "verdict")), ""]
    lines += [f"Tolerances: max|logits - CPU float64 logits| / max|CPU float64 logits| <= {TOL_FP32:g} in fp32 "
              f"(TF32 off) and <= {TOL_BF16:g} under bf16 autocast.", "",
              "| part | status | seconds | ok | warn | fail | skip | note |", "|---|---|---|---|---|---|---|---|"]
    for name, r in parts.items():
        counts = [sum(it.get("verdict") == v for it in r["items"]) for v in ("ok", "warn", "fail", "skip")]
        lines.append(f"| {name} | {r['status']} | {r['seconds']} | " + " | ".join(map(str, counts))
                     + f" | {r.get('error') or ''} |")
    for name, r in parts.items():
        items = [it for it in r["items"] if it.get("name") != "environment"]
        if not items:
            continue
        lines += ["", f"## {name}", ""]
        if name == "bench":
            for it in items:
                lines += [f"**{it['name']}** ({it.get('seconds', '-')} s; matmul peak {it.get('peak')} GFLOP/s)", ""]
                if it.get("rows"):
                    lines += _table(it["rows"])
                if it.get("pairs"):
                    lines += [""] + _table(it["pairs"])
                lines.append("")
            continue
        if name == "preflight":
            for it in items:
                lines += [f"exit code {it.get('exit_code')}, {it.get('summary')}", ""]
                lines += _table(it.get("checks") or [])
            continue
        lines += _table(items)
    return "\n".join(lines) + "\n"


def _table(items: list[dict]) -> list[str]:
    if not items:
        return []
    keys = list(dict.fromkeys(k for it in items for k in it))
    rows = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for it in items:
        rows.append("| " + " | ".join(_cell(it.get(k)) for k in keys) + " |")
    return rows


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "/").replace("\n", " ")


if __name__ == "__main__":
    sys.exit(main())
