"""Architecture measurements (parameters, FLOPs, layers, ...) cached on disk, keyed by the code they depend on.

`depthbench models`, `depthbench verify` and `depthbench results` measure the same models; each number is
computed once per version of the code that determines it and then read from ``measurements.json`` in
``$DEPTHBENCH_CACHE`` (default ``~/.cache/depthbench``, beside make setup's wheel cache). A key holds the
measurement's own inputs and hashes of the source files behind it -- the file that registers the model (ours or
timm's), the measuring code, and timm's version -- so editing models/stepsnet.py re-measures StepsNet alone and a
cached number is never stale. A corrupt or unwritable cache costs time, never results.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path
from typing import Callable

import timm

import models  # noqa: F401  (registers the paper models)
from harness.core.files import BadFile, atomic_write, read_bytes, read_json
from harness.measure.flops import image_input_size
from models.scalenet_llama import LLAMA_MODELS

REPO = Path(__file__).resolve().parents[2]
# the code every architecture number depends on, besides the model's own file
MEASURING_CODE = ("harness/measure/flops.py", "harness/measure/cache.py")


def cache_dir() -> Path:
    return Path(os.environ.get("DEPTHBENCH_CACHE") or Path.home() / ".cache" / "depthbench")


@lru_cache(maxsize=None)
def file_hash(path: str) -> str:
    try:
        return hashlib.sha1(read_bytes(path, max_bytes=None)).hexdigest()[:12]
    except (OSError, BadFile):
        return "missing"


@lru_cache(maxsize=None)
def fingerprint() -> str:
    """The shared part of every key: the measuring code and timm's version."""
    parts = [file_hash(str(REPO / name)) for name in MEASURING_CODE]
    try:
        parts.append(version("timm"))
    except Exception:  # no timm metadata: the code alone
        pass
    return "-".join(parts)


@lru_cache(maxsize=None)
def model_code(model: str | None) -> str:
    """A hash of the source file that defines ``model``: the module registering it with timm, or for the Hugging
    Face Llama rows (not timm models) models/scalenet_llama.py. "unknown" for a name nothing defines."""
    if not model:
        return ""
    try:
        if model in LLAMA_MODELS:
            return file_hash(str(REPO / "models" / "scalenet_llama.py"))
        fn = timm.models.get_model_entrypoint(model)
        return file_hash(sys.modules[fn.__module__].__file__)
    except Exception:  # unknown model: its measurement is an error entry, keyed by name alone
        return "unknown"


def count_key(cache: "MeasurementCache", kind: str, model: str, kwargs: dict | None = None, input_size=None) -> str:
    """The key of one whole-model count -- ``kind`` "params" (independent of the input size) or "flops" at
    ``input_size`` -- of ``model`` built with ``kwargs``. One key for every command that counts a model:
    ``depthbench models`` (harness/measure/catalog.py) and the audit of ``verify``/``results`` (results/audit.py)
    share the numbers, so whichever runs first measures and the other reads."""
    size = list(image_input_size(input_size)) if kind == "flops" else None
    return cache.key(
        "count", kind, model, json.dumps(kwargs or {}, sort_keys=True, default=str), size, model_code(model)
    )


class MeasurementCache:
    """``cache.get(key_parts, compute)``: the stored value, or ``compute()`` stored under the key. Values are
    ``{"value": float}`` or ``{"error": "one line"}`` (a model that does not build is a result too). ``save()``
    merges with what other processes wrote meanwhile and writes atomically."""

    def __init__(self, enabled: bool = True, name: str = "measurements.json"):
        self.path = cache_dir() / name if enabled else None
        self.values: dict = self._read()
        self.dirty = False

    def _read(self) -> dict:
        if self.path is None:
            return {}
        try:
            values = read_json(self.path, what="measurement cache")
        except (OSError, BadFile):
            return {}  # missing, corrupt, a link or a FIFO: rebuilt, never trusted (nor waited on)
        # only well-formed entries: {"value": finite number} or {"error": text}
        return {
            k: v
            for k, v in values.items()
            if isinstance(v, dict)
            and (
                isinstance(v.get("error"), str)
                or (type(v.get("value")) in (int, float) and -1e308 < v["value"] < 1e308)
            )
        }

    @staticmethod
    def key(*parts) -> str:
        return json.dumps([fingerprint(), *parts], sort_keys=True, default=str)

    def has(self, key: str) -> bool:
        return key in self.values

    def get(self, key: str, compute: Callable[[], float]) -> dict:
        if key not in self.values:
            try:
                self.values[key] = {"value": float(compute())}
            except Exception as e:  # a model that fails to build or run: a failed cell, not a crash
                first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                self.values[key] = {"error": f"{type(e).__name__}: {first}"[:200]}
            self.dirty = True
        return self.values[key]

    def save(self) -> None:
        if not (self.path and self.dirty):
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            merged = {**self._read(), **self.values}
            atomic_write(self.path, json.dumps(merged, indent=0, sort_keys=True))
            self.dirty = False
        except OSError as e:  # an unwritable cache costs time, not results
            print(
                f"depthbench: warning: cannot write the measurement cache {self.path} ({e.strerror})", file=sys.stderr
            )
