"""Checkpoints of ``depthbench train``: atomic writes, the exact-resume state, and safe loading.

``last.pth`` (written every ``ckpt.interval_steps`` optimizer steps, every ``ckpt.interval_minutes``, at the end
of every epoch and on SIGUSR1/SIGTERM) holds everything a resumed run needs to continue bit for bit::

    format, engine, world_size, epoch, batch_in_epoch (the sampler position, in micro-batches of this epoch),
    global_step (optimizer updates), records (metrics.jsonl lines written), best, model, optimizer, scheduler,
    scaler, ema, rng (python/numpy/torch/cuda states of every rank), config (the resolved config text)

``best.pth`` holds the model (and EMA) weights of the best evaluation so far, for ``depthbench eval``.

Every file is written to a temporary name, fsynced and renamed over the old one, so a kill at any moment leaves
either the previous or the new checkpoint, never a torn one. Files contain only tensors and plain Python
values, so they load with ``torch.load(weights_only=True)``. The one exception is DeepSpeed's ZeRO optimizer
partitions, which hold DeepSpeed objects: they are stored as serialised bytes inside the checkpoint and
unpickled (``weights_only=False``) only when resuming, i.e. only from our own trusted run directory.
"""
from __future__ import annotations

import io
import os
import random
from pathlib import Path

import numpy as np
import torch

FORMAT = "depthbench-train/1"


def save_atomic(obj, path: str | Path) -> None:
    """``torch.save`` to a temporary file in the same folder, fsync, rename over ``path``, fsync the folder."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        torch.save(obj, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def remove_stale_temporaries(folder: str | Path) -> None:
    """Delete temporary files left by a process killed while it was writing a checkpoint."""
    for tmp in Path(folder).glob(".*.pth.tmp-*"):
        tmp.unlink(missing_ok=True)


def load(path: str | Path) -> dict:
    """A checkpoint or weights file, loaded with ``weights_only=True`` onto the CPU."""
    return torch.load(path, map_location="cpu", weights_only=True)


def pack_trusted(obj) -> torch.Tensor:
    """Serialise any picklable object into a uint8 tensor (for DeepSpeed's optimizer partitions)."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)


def unpack_trusted(blob: torch.Tensor):
    """Inverse of :func:`pack_trusted`; unpickles arbitrary objects, so use only on our own resume files."""
    return torch.load(io.BytesIO(blob.numpy().tobytes()), map_location="cpu", weights_only=False)


def model_weights(path: str | Path, prefer_ema: bool = False) -> dict:
    """The model state dict of a checkpoint of ours (``model``/``ema``), timm/DeiT (``model``, ``state_dict``,
    ``state_dict_ema``), MMEngine (``state_dict``) or a bare state dict; ``module.`` prefixes (DDP) are stripped.
    Loaded with ``weights_only=True``. Raises ValueError (one line naming ``path``) for a file that is not a
    readable PyTorch checkpoint or holds no weights."""
    try:
        checkpoint = load(path)
    except Exception as e:  # corrupt, truncated, not a torch file, or an unsafe pickle
        reason = str(e).strip().splitlines()[0][:120] if str(e).strip() else type(e).__name__
        raise ValueError(f"{path} is not a readable PyTorch state dict ({reason})") from None
    if not isinstance(checkpoint, dict):
        raise ValueError(f"{path} holds a {type(checkpoint).__name__}, not a state dict (name -> tensor)")
    keys = (("ema", "state_dict_ema", "model_ema") if prefer_ema else ()) + ("model", "state_dict", "module")
    state = next((checkpoint[k] for k in keys if isinstance(checkpoint.get(k), dict)), None)
    if state is None:
        if prefer_ema:
            raise ValueError(f"{path} holds no EMA weights (keys: {', '.join(map(str, list(checkpoint)[:8]))})")
        state = checkpoint
    weights = {k.removeprefix("module."): v for k, v in state.items() if torch.is_tensor(v)}
    if not weights:
        raise ValueError(f"{path} holds no state dict (expected name -> tensor)")
    return weights


# ----------------------------------------------------------------------------------------- RNG states
def rng_state() -> dict:
    """This process's RNG states as tensors and plain values (loadable with ``weights_only=True``)."""
    _, keys, position, has_gauss, gauss = np.random.get_state()
    state = {"python": random.getstate(),
             "numpy": {"keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(position),
                       "has_gauss": int(has_gauss), "gauss": float(gauss)},
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))
    n = state["numpy"]
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# ----------------------------------------------------------------------------------------- resume
def find_resume(resume: str | None, run_path: Path | None) -> Path | None:
    """The checkpoint to resume from: ``auto`` -> the run directory's ``last.pth`` if it exists; a path -> that
    file (or that run directory's ``last.pth``)."""
    if resume is None:
        return None
    if resume == "auto":
        candidate = run_path / "last.pth" if run_path is not None else None
        return candidate if candidate is not None and candidate.is_file() else None
    path = Path(resume)
    if path.is_dir():
        path = path / "last.pth"
    if not path.is_file():
        raise FileNotFoundError(f"--resume {resume}: no checkpoint at {path}")
    return path


def latest_run(experiment_root: Path) -> Path | None:
    """The newest run directory of an experiment that has a ``last.pth`` and did not finish."""
    import json

    runs = []
    for meta in Path(experiment_root).glob("*/meta.json"):
        try:
            status = json.loads(meta.read_text()).get("status")
        except (OSError, ValueError):
            continue
        if status != "done" and (meta.parent / "last.pth").is_file():
            runs.append(meta.parent)
    return max(runs, key=lambda p: (p / "last.pth").stat().st_mtime, default=None)
