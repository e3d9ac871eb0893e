"""The script that produced gpu_results.json beside it (kept as the record of the run): training step times of DeiT-S and TransNeXt-T at the
papers' per-GPU batch (128), bf16 autocast, eager and compiled; grad checkpointing's memory; fused vs foreach vs
for-loop AdamW; the CUDA DeviceLoader path (uint8 + side-stream prefetch) equal to the CPU-normalised batch; the
training loader's images/s per worker on this machine's CPU."""
import json
import os
import sys
import time
import traceback
from pathlib import Path

import torch

OUT = Path(os.environ.get("OUT", "/tmp/out"))
OUT.mkdir(parents=True, exist_ok=True)
T0 = time.time()
DEADLINE = float(os.environ.get("BUDGET_S", "500"))
R = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None, "cpus": os.cpu_count()}


def log(*a):
    print(f"[{time.time() - T0:6.1f}s]", *a, flush=True)


def save():
    (OUT / "gpu_results.json").write_text(json.dumps(R, indent=1, default=str))


def left():
    return DEADLINE - (time.time() - T0)


class A(dict):
    def __getattr__(self, k):
        try:
            return self[k]
        except KeyError:
            raise AttributeError(k) from None

    def __setattr__(self, k, v):
        self[k] = v


def step_time(name, batch=128, compile=False, ckpt=False, steps=10, warmup=3, amp=True, **kw):
    import timm

    import models  # noqa: F401

    torch.manual_seed(0)
    model = timm.create_model(name, num_classes=1000, **kw).cuda().train()
    if ckpt:
        model.set_grad_checkpointing(True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    fwd = torch.compile(model, dynamic=False) if compile else model
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (batch,), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss = torch.nn.functional.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    t = time.time()
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    warm_s = time.time() - t
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        torch.cuda.synchronize()
        s = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - s)
    times.sort()
    ms = 1000 * times[len(times) // 2]
    out = {"ms": round(ms, 2), "img_s": round(batch / ms * 1000, 1), "min_ms": round(1000 * times[0], 2),
           "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2), "warmup_s": round(warm_s, 1)}
    del model, opt, fwd
    torch.cuda.empty_cache()
    return out


def optimizer_steps():
    import timm

    model = timm.create_model("deit_small_patch16_224").cuda()
    res = {}
    for kind, kw in (("for-loop", {"foreach": False}), ("foreach", {"foreach": True}), ("fused", {"fused": True})):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **kw)
        for p in model.parameters():
            p.grad = torch.randn_like(p)
        for _ in range(3):
            opt.step()
        torch.cuda.synchronize()
        s = time.perf_counter()
        for _ in range(20):
            opt.step()
        torch.cuda.synchronize()
        res[kind] = round((time.perf_counter() - s) / 20 * 1000, 3)
    return res


def loader_cfg(root, workers, device_normalize, input_size=224, batch=64):
    ns = {}
    exec((Path("configs/_base_/datasets/imagenet.py")).read_text(), ns)
    data, aug = A(ns["data"]), A(ns["aug"])
    data.update(root=str(root), num_classes=20, workers=workers, repeated_aug=False, input_size=input_size,
                train_subset=None, val_subset=None)
    return A(data=data, aug=aug, seed=0, loader=A(device_normalize=device_normalize, prefetch_factor=None,
                                                  persistent_workers=False))


def main():
    sys.path.insert(0, str(Path.cwd()))
    sys.path.insert(0, str(Path.cwd() / "benchmarks"))
    log(R)
    # --- loader: CUDA DeviceLoader equality, then per-worker throughput on this CPU
    try:
        from loader_throughput import make_folder

        from harness.engine.data import DeviceLoader, build_loaders, set_train_epoch

        root = make_folder(Path("/tmp/lb2400"), 2400, 20)
        log("folder made")
        batches = {}
        for dn in (False, True):
            cfg = loader_cfg(root, 4, dn)
            cfg.aug.reprob = 1.0
            train, val = build_loaders(cfg, 0, 1, 16)
            set_train_epoch(train, 1, start_batch=3)
            got = [b for _, b in zip(range(3), DeviceLoader(train, "cuda", channels_last=True))]
            got += [b for _, b in zip(range(2), DeviceLoader(val, "cuda"))]
            batches[dn] = [(x.float().cpu(), y.cpu(), x.device.type, x.is_contiguous(memory_format=torch.channels_last))
                           for x, y in got]
        diffs = [float((a[0] - b[0]).abs().max()) for a, b in zip(batches[False], batches[True])]
        R["device_normalize_cuda"] = {"max_abs_diff": max(diffs), "per_batch": diffs,
                                      "targets_equal": all(torch.equal(a[1], b[1]) for a, b in
                                                           zip(batches[False], batches[True])),
                                      "on": batches[True][0][2], "channels_last": batches[True][0][3]}
        log("device normalize", R["device_normalize_cuda"])
        save()
        rates = {}
        for workers in (1, 2, 4, 8, 12):
            for dn in (False, True):
                cfg = loader_cfg(root, workers, dn)
                train, _ = build_loaders(cfg, 0, 1, 16)
                set_train_epoch(train, workers)
                it = iter(train)
                skip = 2 * workers
                n = skip + max(20, 6 * workers)
                for i in range(n):
                    next(it)
                    if i == skip:
                        s = time.perf_counter()
                rates[f"{workers}w{' uint8' if dn else ''}"] = round((n - skip - 1) * 16 / (time.perf_counter() - s), 1)
                del it
            log("loader", workers, rates)
        R["loader_img_s"] = rates
        save()
    except Exception:
        R["loader_error"] = traceback.format_exc()[-2000:]
        log(R["loader_error"])
    # --- optimizer steps
    if os.environ.get("SKIP_OPT"):
        pass
    else:
      try:
        R["adamw_step_ms_deit_s"] = optimizer_steps()
        log("adamw", R["adamw_step_ms_deit_s"])
      except Exception:
        R["adamw_error"] = traceback.format_exc()[-2000:]
    save()
    # --- step times
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    plan = [("transnext_t eager fp32/tf32", "transnext_tiny", {"amp": False}),
            ("deit_s eager fp32/tf32", "deit_small_patch16_224", {"amp": False}),
            ("transnext_t compiled fp32/tf32", "transnext_tiny", {"compile": True, "amp": False})]
    R["steps"] = {}
    for label, name, kw in ([] if os.environ.get("SKIP_STEPS") else plan):
        if left() < (150 if "compiled" in label else 30):
            R["steps"][label] = "skipped (time)"
            continue
        try:
            R["steps"][label] = step_time(name, **kw)
        except Exception:
            R["steps"][label] = "error: " + traceback.format_exc()[-1500:]
        log(label, R["steps"][label])
        save()
    log("done")


if __name__ == "__main__":
    main()
