"""Checkpoints: the one weights loader (:func:`load_weights`), atomic writes, and the exact-resume state.

``last.pth`` (written every ``ckpt.interval_steps`` optimizer steps, every ``ckpt.interval_minutes``, at the end
of every epoch and on SIGUSR1/SIGTERM) holds everything a resumed run needs to continue bit for bit::

    format, engine, world_size, epoch, batch_in_epoch (the sampler position, in micro-batches of this epoch),
    samples_in_epoch (the same position as a GLOBAL count of the epoch's samples: what a resume on another
    number of ranks continues from), global_step (optimizer updates), records (metrics.jsonl lines written),
    best, model, optimizer, scheduler, scaler, ema, rng (python/numpy/torch/cuda states of every rank), config

A run resumes on the same number of ranks bit for bit; on another number (Accelerate) with the same samples in the
same order (harness/engine/runner.py ``restore``).

``best.pth`` holds the model (and EMA) weights of the best evaluation so far, for ``depthbench eval``.

Every file is written with :func:`harness.rundir.atomic_write`, so a kill at any moment leaves either the
previous or the new checkpoint, never a torn one. Files contain only tensors and plain Python values and are
read with ``torch.load(weights_only=True)`` -- weights, resume and DeepSpeed's optimizer partitions alike.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from timm.models import clean_state_dict

from harness.core.errors import DepthbenchError
from harness.core.files import BadFile, atomic_write, is_regular, no_link_below, read_json, read_text
from harness.core.rundir import RunDir, checkpoint_run, read_config_json

FORMAT = "depthbench-train/1"
# where the weights sit in the checkpoints we meet: ours/DeiT (model, ema/model_ema), timm (state_dict,
# state_dict_ema), MMEngine (state_dict), DeepSpeed (module); a bare state dict otherwise
WEIGHT_KEYS = ("model", "state_dict", "module")
EMA_KEYS = ("ema", "state_dict_ema", "model_ema")
# what a weights-only load may construct besides tensors and plain values: timm/DeiT training checkpoints keep
# their argparse.Namespace under `args` (timm's own loader allows exactly this one class too)
SAFE_GLOBALS = [argparse.Namespace]


def save_atomic(obj, path: str | Path) -> None:
    """``torch.save`` through the one atomic writer, with the file's SHA-256 in ``<file>.sha256`` beside it.

    The order keeps the pair consistent whenever a kill lands: the new file is written, the sidecar then lists the
    new sum and the old one, the new file replaces the old, and the sidecar is cut to the new sum -- at every
    moment the checkpoint on disk has its sum in the sidecar, so a resume after a kill never sees a false alarm,
    while a byte changed later is reported as corrupt by :func:`read_checkpoint`."""
    path = Path(path)
    sums = checksum_path(path)
    digest = hashlib.sha256()
    old = _listed_sums(sums) if path.is_file() else []

    def write(fh):
        torch.save(obj, _Hashing(fh, digest))

    def record_both():
        atomic_write(sums, "".join(f"{h}  {path.name}\n" for h in [digest.hexdigest(), *old[:1]]))

    try:
        atomic_write(path, write, before_replace=record_both)
        atomic_write(sums, f"{digest.hexdigest()}  {path.name}\n")
    except OSError as e:  # disk full, read-only, quota: one line, and the previous checkpoint is still whole
        raise DepthbenchError(
            f"cannot write the checkpoint {path}: {e.strerror or e}; free space or choose "
            f"another --work-dir (the previous checkpoint, if any, is intact)"
        ) from None


def _listed_sums(sums: Path) -> list[str]:
    try:
        text = read_text(sums, max_bytes=1 << 20, what="checksum file", errors="strict")
        return [line.split()[0] for line in text.splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError, BadFile):
        return []


class _Hashing:
    """A binary file that hashes what is written through it (torch.save writes sequentially)."""

    def __init__(self, fh, digest):
        self.fh, self.digest = fh, digest

    def write(self, data) -> int:
        self.digest.update(data)
        return self.fh.write(data)

    def flush(self):
        return self.fh.flush()


def checksum_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + ".sha256")


def verify_checksum(path: str | Path) -> None:
    """Compare a checkpoint with its ``.sha256`` (when there is one); a mismatch is one line naming the file."""
    path = Path(path)
    sums = checksum_path(path)
    if not sums.is_file():
        return  # written elsewhere (timm, DeiT, an official release): nothing to compare with
    stat, sums_stat = path.stat(), sums.stat()
    version = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, sums_stat.st_mtime_ns)
    if version in _VERIFIED:  # checked once per process (a resume reads its checkpoint twice)
        return
    expected = _listed_sums(sums)
    if not expected:
        raise DepthbenchError(f"{sums} is unreadable; delete it to load {path} unchecked")
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() not in expected:
        raise DepthbenchError(
            f"{path} does not match its checksum ({sums.name}): the file is corrupt or was "
            f"changed after it was written; use another checkpoint (e.g. best.pth / an earlier "
            f"run)"
        )
    _VERIFIED.add(version)


_VERIFIED: set = set()


def remove_stale_temporaries(folder: str | Path) -> None:
    """Delete temporary files left by a process killed while it was writing a checkpoint (or its checksum)."""
    for pattern in (".*.pth.tmp-*", ".*.pth.sha256.tmp-*"):
        for tmp in Path(folder).glob(pattern):
            tmp.unlink(missing_ok=True)


def read_checkpoint(path, *, mmap: bool = False) -> dict:
    """A checkpoint file as a dict, loaded with ``weights_only=True`` onto the CPU. A missing, corrupt, truncated,
    foreign or unsafe file (one that pickles code or other objects) is one :class:`DepthbenchError` line.
    ``mmap=True`` maps the tensors instead of reading them: a cheap check of a large file."""
    name = str(path) if isinstance(path, (str, Path)) else "<in-memory file>"
    if isinstance(path, (str, Path)):
        if not Path(path).is_file():  # follows a link the user named; a FIFO or device is never opened
            raise DepthbenchError(
                f"{name}: not a regular file (a FIFO, device or folder)"
                if os.path.exists(path)
                else f"{name}: no such file"
            )
        verify_checksum(path)
        if Path(path).suffix == ".safetensors":  # tensors only by construction: nothing to unpickle
            return _read_safetensors(Path(path))
    allowed = SAFE_GLOBALS + (deepspeed_state_classes(name) if _deepspeed_classes_named(path) else [])
    try:
        with torch.serialization.safe_globals(allowed):
            try:
                checkpoint = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
            except RuntimeError as e:
                if not (mmap and "mmap" in str(e)):
                    raise
                # only zip-format files map; read the others (and learn what is wrong with a broken one)
                checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # corrupt, truncated, not a torch file, or an unsafe pickle
        raise DepthbenchError(f"{name} is not a readable PyTorch state dict ({_reason(e, path)})") from None
    if not isinstance(checkpoint, Mapping):
        raise DepthbenchError(
            f"{name} holds a {type(checkpoint).__name__}, not a checkpoint or state dict (name -> tensor)"
        )
    return dict(checkpoint)


def _reason(error: Exception, path) -> str:
    """What torch's (many-line) load error means, in one line."""
    text = str(error).strip()
    found = re.findall(r"GLOBAL ([\w.]+)", text)
    if found or "Unsupported global" in text:
        names = set(found)
        try:
            if isinstance(path, (str, Path)):
                names |= set(torch.serialization.get_unsafe_globals_in_checkpoint(str(path)))
        except Exception:
            pass
        return (
            "it pickles Python objects that a weights-only load refuses"
            + (f": {', '.join(sorted(names))}" if names else "")
            + "; only tensors and plain values are accepted"
        )
    if "Weights only load failed" in text:  # not a pickle torch wrote: garbage, text, another format
        detail = re.search(r"WeightsUnpickler error:\s*(.+?)\s*(?:\n\n|Check the documentation|$)", text, re.S)
        return "not a PyTorch file" + (f": {' '.join(detail.group(1).split())}" if detail else "")
    return text.splitlines()[0] if text else type(error).__name__


# ----------------------------------------------------------------------------------------- the weights loader
@dataclass
class LoadReport:
    """What :func:`load_weights` did. ``mismatched``: ``(key, checkpoint_shape, model_shape)``."""

    source: str
    model: str = ""
    loaded: int = 0
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    mismatched: list[tuple[str, tuple, tuple]] = field(default_factory=list)
    excused: list[str] = field(default_factory=list)  # classifier keys not loaded (``ignore_classifier=True``)

    @property
    def complete(self) -> bool:
        return not (self.missing or self.unexpected or self.mismatched)

    def summary(self) -> str:
        """Every key that did not load, grouped (``blocks.{0-11}.attn.qkv.weight``) but never cut short."""
        return f"{self.source} -> {self.model}: " + self.details()

    def details(self) -> str:
        parts = [f"{self.loaded} tensors loaded"]
        if self.missing:
            parts.append(f"{len(self.missing)} missing from the checkpoint: {compress_keys(self.missing)}")
        if self.unexpected:
            parts.append(f"{len(self.unexpected)} unexpected (not in the model): {compress_keys(self.unexpected)}")
        if self.mismatched:
            by_shapes: dict[tuple, list[str]] = {}
            for key, theirs, ours in self.mismatched:
                by_shapes.setdefault((tuple(theirs), tuple(ours)), []).append(key)
            shapes = [
                f"{compress_keys(keys)} (checkpoint {_shape(a)}, model {_shape(b)})"
                for (a, b), keys in by_shapes.items()
            ]
            parts.append(f"{len(self.mismatched)} of another shape: {', '.join(shapes)}")
        if self.excused:
            parts.append(f"classifier not loaded: {compress_keys(self.excused)}")
        return "; ".join(parts)

    def counts(self, first: int = 3) -> str:
        """How many keys did not load, with the first few of each kind: the short form, for a checkpoint of another
        architecture, where the whole list is noise."""

        def some(keys):
            return ", ".join(keys[:first]) + (", ..." if len(keys) > first else "")

        parts = [
            f"{len(keys)} {what} (e.g. {some(keys)})"
            for what, keys in (
                ("missing from the checkpoint", self.missing),
                ("unexpected", self.unexpected),
                ("of another shape", [k for k, _, _ in self.mismatched]),
            )
            if keys
        ]
        return ", ".join(parts)


def checkpoint_model(source) -> str | None:
    """The model a checkpoint file was trained as, when it belongs to a run directory: its config.json's
    ``model.name``, else meta.json's ``model``; None for a weights file outside any run or an in-memory dict."""
    if isinstance(source, Mapping) or not isinstance(source, (str, Path)) or not Path(source).exists():
        return None
    run = checkpoint_run(source)
    if run is None:
        return None
    model = (read_config_json(run) or {}).get("model")
    name = model.get("name") if isinstance(model, dict) else None
    if not isinstance(name, str):
        meta = RunDir(run, writer=False).meta()
        name = meta.get("model") if isinstance(meta.get("model"), str) else None
    return name


def another_architecture(source, model_name: str, report: LoadReport) -> str | None:
    """The line for weights of another architecture: "this checkpoint is from a run of horesnet10_rk4 (meta.json);
    the config builds steps_resnet18 (N missing ..., M unexpected ...)"; None when the checkpoint's run trained
    ``model_name`` too (or is not known), where the complete key list says which arguments differ."""
    origin = checkpoint_model(source)
    if origin is None or origin == model_name:
        return None
    return (
        f"this checkpoint is from a run of {origin} (its run's config.json/meta.json); the config builds "
        f"{model_name} ({report.counts()}); give a checkpoint of {model_name}, or build {origin}"
    )


def _shape(shape) -> str:
    return "x".join(map(str, shape)) or "scalar"


def compress_keys(keys: list[str]) -> str:
    """``blocks.0.x, blocks.1.x, blocks.2.x`` -> ``blocks.{0-2}.x``: lossless (each group is a full product of
    its index ranges), so a long list of keys stays complete and readable."""
    groups = {tuple(k.split(".")) for k in keys}
    width = max((len(g) for g in groups), default=0)
    for position in reversed(range(width)):
        merged: dict[tuple, list[str]] = {}
        for parts in groups:
            if position < len(parts) and parts[position].isdigit():
                merged.setdefault(parts[:position] + ("#",) + parts[position + 1 :], []).append(parts[position])
            else:
                merged.setdefault(parts, [])
        groups = set()
        for pattern, indices in merged.items():
            if not indices:
                groups.add(pattern)
            elif len(indices) == 1:
                groups.add(pattern[:position] + (indices[0],) + pattern[position + 1 :])
            else:
                groups.add(pattern[:position] + (_ranges(sorted(map(int, indices))),) + pattern[position + 1 :])
    return ", ".join(sorted(".".join(g) for g in groups))


def _ranges(numbers: list[int]) -> str:
    spans, start = [], numbers[0]
    for previous, current in zip(numbers, numbers[1:] + [None]):
        if current != previous + 1:
            spans.append(str(start) if start == previous else f"{start}-{previous}")
            start = current
    return "{" + ",".join(spans) + "}"


def _read_safetensors(path: Path) -> dict:
    try:
        return load_file(str(path), device="cpu")
    except (SafetensorError, OSError, ValueError) as e:
        raise DepthbenchError(f"{path} is not a readable safetensors file ({str(e).splitlines()[0][:120]})") from None


# what a directory of weights holds, in the order the loader takes them: an export (depthbench export, timm's
# save_for_hf: safetensors, never unpickled), then a training run's best and last checkpoints
WEIGHT_FILES = ("model.safetensors", "best.pth", "last.pth")


def resolve_source(source) -> Path:
    """A weights path: a file, or a directory -- an export's ``model.safetensors``, else a run's ``best.pth``,
    else its ``last.pth``."""
    path = Path(source).expanduser()
    if path.is_dir():
        for name in WEIGHT_FILES:
            if (path / name).is_file():
                return path / name
        raise DepthbenchError(
            f"{path} is a directory without best.pth or last.pth (or an export's "
            f"model.safetensors); give a checkpoint file, a run directory of depthbench train or a "
            f"folder of depthbench export"
        )
    if not path.is_file():
        raise DepthbenchError(f"{path}: no such checkpoint file")
    return path


def extract_weights(checkpoint: Mapping, *, ema: bool = False, source: str = "the checkpoint") -> dict:
    """The flat ``name -> tensor`` dict inside any checkpoint we meet (see ``WEIGHT_KEYS``/``EMA_KEYS``),
    unwrapped with timm's ``clean_state_dict`` (DDP ``module.``, ``torch.compile`` ``_orig_mod.`` prefixes)."""
    keys = EMA_KEYS if ema else WEIGHT_KEYS
    state = next((checkpoint[k] for k in keys if isinstance(checkpoint.get(k), Mapping)), None)
    if state is None and ema:
        trained_without = any(k in checkpoint and checkpoint[k] is None for k in EMA_KEYS)
        raise DepthbenchError(
            f"{source} holds no EMA weights"
            + (
                " (its run trained with ema.enable=False)"
                if trained_without
                else f" (top-level keys: {', '.join(map(str, checkpoint))})"
            )
            + "; leave out --ema / ema=True"
        )
    if state is None:
        state = checkpoint
    weights = {k: v for k, v in state.items() if torch.is_tensor(v)}
    if not weights:
        raise DepthbenchError(
            f"{source} holds no weights (name -> tensor); top-level keys: {', '.join(map(str, checkpoint)) or 'none'}"
        )
    return clean_state_dict(weights)


def _classifier_prefixes(model) -> tuple[str, ...]:
    classifier = (getattr(model, "pretrained_cfg", None) or {}).get("classifier") or "head"
    names = [classifier] if isinstance(classifier, str) else list(classifier)
    return tuple(f"{c}." for c in names)


def load_weights(
    model: torch.nn.Module, source, *, ema: bool = False, strict: bool = True, ignore_classifier: bool = False
) -> LoadReport:
    """Load weights into ``model``: the one loader of depthbench (train, eval, diagnose, bench, downstream).

    ``source``: a checkpoint file, a run directory (its ``best.pth``, else ``last.pth``) or an in-memory
    checkpoint/state dict, in any layout :func:`extract_weights` knows; ``ema=True`` takes the EMA weights
    (a :class:`DepthbenchError` where there are none). Files are read with ``weights_only=True`` only. The
    weights then pass through the model family's timm ``checkpoint_filter_fn`` (official key layouts,
    position-embedding resizing), found in the module that defines the model's class, and are loaded.

    Tensors whose shape differs are never loaded. ``strict=True``: a missing, unexpected or mis-shaped key raises
    :class:`DepthbenchError` with the complete :meth:`LoadReport.summary` (``ignore_classifier=True`` excuses the
    classifier, e.g. fine-tuning to another number of classes); the model is then partly loaded -- discard it.
    ``strict=False``: loads what fits and returns the report -- print its summary, never ignore it.
    """
    if isinstance(source, Mapping):
        name, checkpoint = "<state dict>", source
    else:
        path = resolve_source(source)
        name, checkpoint = str(path), read_checkpoint(path)
    return load_checkpoint_weights(model, checkpoint, name, ema=ema, strict=strict, ignore_classifier=ignore_classifier)


def load_checkpoint_weights(
    model: torch.nn.Module,
    checkpoint: Mapping,
    name: str,
    *,
    ema: bool = False,
    strict: bool = True,
    ignore_classifier: bool = False,
) -> LoadReport:
    """:func:`load_weights` for a checkpoint already read (``name`` says where it came from in messages)."""
    model_name = (getattr(model, "pretrained_cfg", None) or {}).get("architecture") or type(model).__name__
    weights = extract_weights(checkpoint, ema=ema, source=name)
    filter_fn = getattr(sys.modules.get(type(model).__module__), "checkpoint_filter_fn", None)
    if filter_fn is not None:
        try:
            weights = filter_fn(weights, model)
        except (ValueError, KeyError, RuntimeError) as e:
            raise DepthbenchError(f"{name} does not fit {model_name}: {e}") from None

    own = model.state_dict()
    report = LoadReport(source=name, model=model_name)
    report.mismatched = [
        (k, tuple(v.shape), tuple(own[k].shape))
        for k, v in weights.items()
        if k in own and tuple(v.shape) != tuple(own[k].shape)
    ]
    heads = _classifier_prefixes(model) if ignore_classifier else ()
    skipped = {k for k, _, _ in report.mismatched}
    loadable = {k: v for k, v in weights.items() if k not in skipped}
    try:  # the model's own load hooks (e.g. ScaleNet's tied copies) decide what is missing or unexpected
        result = model.load_state_dict(loadable, strict=False)
    except RuntimeError as e:
        raise DepthbenchError(f"{name} does not fit {model_name}: {e}") from None
    order = {k: i for i, k in enumerate(own)}
    report.missing = sorted(set(result.missing_keys) - skipped, key=lambda k: order.get(k, len(order)))
    report.unexpected = list(result.unexpected_keys)
    if heads:
        report.excused = [k for k in report.missing + report.unexpected + sorted(skipped) if k.startswith(heads)]
        report.missing = [k for k in report.missing if not k.startswith(heads)]
        report.unexpected = [k for k in report.unexpected if not k.startswith(heads)]
        report.mismatched = [m for m in report.mismatched if not m[0].startswith(heads)]
    report.loaded = len(loadable) - len(result.unexpected_keys)
    if strict and not report.complete:
        raise DepthbenchError(
            f"{name} does not fit {model_name}: "
            + (
                another_architecture(name, model_name, report)
                or f"{report.details()}; check the model name and its arguments (model.* in a config)"
            )
        )
    return report


# ----------------------------------------------------------------------------------------- DeepSpeed state
# DeepSpeed's ZeRO optimizer state_dict() holds a few DeepSpeed objects besides tensors: its loss scaler, the ZeRO
# stage enum, fragment addresses. They are saved as they are and read back through torch's weights-only allow-list
# (torch.serialization.safe_globals), which constructs exactly these classes and nothing else: resuming a checkpoint
# somebody shared still unpickles no arbitrary object. A file is checked for their names before it is loaded
# (:func:`_deepspeed_classes_named`), so only a DeepSpeed checkpoint imports DeepSpeed. A DeepSpeed version whose
# state holds another class fails tests/harness/engine/test_backends.py (every ZeRO stage saved and loaded here).
DEEPSPEED_STATE_CLASSES = (
    "deepspeed.runtime.fp16.loss_scaler.LossScaler",
    "deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler",
    "deepspeed.runtime.zero.config.ZeroStageEnum",
    "deepspeed.utils.tensor_fragment.fragment_address",
)


def deepspeed_state_classes(name: str = "a checkpoint") -> list[type]:
    """The classes of :data:`DEEPSPEED_STATE_CLASSES`, for torch's weights-only allow-list (``name``: the file
    that needs them, for the line that says DeepSpeed is missing)."""
    try:
        from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler, LossScaler
    except ImportError:
        raise DepthbenchError(
            f"{name} holds a DeepSpeed optimizer state, which needs DeepSpeed to read; install it "
            "(pip install -e '.[training]')"
        ) from None
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    return [LossScaler, DynamicLossScaler, ZeroStageEnum, fragment_address]


def _deepspeed_classes_named(source) -> bool:
    """Whether a torch file pickles one of DeepSpeed's state classes (its pickle's globals, read without loading)."""
    start = source.tell() if hasattr(source, "tell") else None
    try:
        return bool(set(torch.serialization.get_unsafe_globals_in_checkpoint(source)) & set(DEEPSPEED_STATE_CLASSES))
    except Exception:  # not a zip-format torch file: the load says what it is
        return False
    finally:
        if start is not None:
            source.seek(start)


PLAIN_STATE_TYPES = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device)


def to_cpu(obj):
    """A DeepSpeed optimizer state dict (dicts, lists, tuples, tensors, plain values, DeepSpeed's state objects)
    with every tensor detached on the CPU: what a rank sends to another must not unpickle onto the sender's GPU
    there. Any other object is refused here, at the save, in one line -- a weights-only resume could not read it
    back, and the run should learn that now, not days later when it resumes (a DeepSpeed upgrade that adds a
    class to its state: add it to :data:`DEEPSPEED_STATE_CLASSES` once it is known to hold plain values)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()  # ZeRO's fp32 partitions require grad: no autograd node in the checkpoint
    if isinstance(obj, Mapping):
        return {k: to_cpu(v) for k, v in obj.items()}
    if type(obj) in (list, tuple, torch.Size):
        return type(obj)(to_cpu(v) for v in obj)
    if type(obj) in PLAIN_STATE_TYPES:  # exact types: an int subclass (ZeroStageEnum) is checked by name below
        return obj
    name = f"{type(obj).__module__}.{type(obj).__qualname__}"
    if name not in DEEPSPEED_STATE_CLASSES:
        raise DepthbenchError(
            f"DeepSpeed's optimizer state holds a {name}, which a weights-only resume cannot read back; this "
            "DeepSpeed version is newer than depthbench knows (harness/engine/checkpoint.py DEEPSPEED_STATE_CLASSES): "
            "pin deepspeed to the version in requirements/lock.txt, or use --engine accelerate"
        )
    return obj


# ----------------------------------------------------------------------------------------- RNG states
def rng_state() -> dict:
    """This process's RNG states as tensors and plain values (loadable with ``weights_only=True``)."""
    _, keys, position, has_gauss, gauss = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": {
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(position),
            "has_gauss": int(has_gauss),
            "gauss": float(gauss),
        },
        "torch": torch.get_rng_state(),
    }
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
        return run_checkpoint(run_path) if run_path is not None else None
    path = Path(resume)
    if path.is_dir():
        path = path / "last.pth"
    if not path.is_file():
        raise DepthbenchError(f"--resume {resume}: no checkpoint at {path}")
    return path


def run_checkpoint(run_path: Path, name: str = "last.pth") -> Path | None:
    """``<run>/last.pth`` when it is a regular file of that run; None when there is none; one line when it is a
    link (``--resume auto`` never resumes from another run's checkpoint through a planted link) or a FIFO."""
    candidate = Path(run_path) / name
    no_link_below(candidate, run_path, what=f"the checkpoint to resume ({name})")
    return candidate if is_regular(candidate, inside=run_path) else None


def latest_run(experiment_root: Path, checkpoint_of=lambda run: run / "last.pth") -> Path | None:
    """The newest run directory of an experiment that did not finish and has a checkpoint
    (``checkpoint_of(run)``: its ``last.pth``; downstream runs pass MMEngine's ``last_checkpoint`` file)."""
    runs = []
    for meta in Path(experiment_root).glob("*/meta.json"):
        try:
            status = read_json(meta, inside=meta.parent, what="meta.json").get("status")
        except (OSError, BadFile):
            continue
        checkpoint = checkpoint_of(meta.parent)
        if status != "done" and checkpoint is not None and is_regular(checkpoint, inside=meta.parent):
            runs.append(checkpoint)
    return max(runs, key=lambda c: c.stat().st_mtime, default=Path()).parent if runs else None
