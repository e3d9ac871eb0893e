"""Architecture columns (params, FLOPs, #layers, #blocks, ...) of the table rows, from ``depthbench verify``'s
measures, cached so a report does not rebuild every model each time.

Cache entries are keyed by (column, model, model kwargs, input size, FLOPs kwargs, base) *and* a hash of the code
the number depends on: the source file that registers the row's model (and its base's), harness/flops.py,
harness/verify.py and the timm version. Editing models/stepsnet.py re-measures the StepsNet rows only; a cached
number is never stale. File: ``audit.json`` in ``$DEPTHBENCH_CACHE`` or ``~/.cache/depthbench`` (where
``make setup`` keeps its wheel cache).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from results.paper_tables import Row

REPO = Path(__file__).resolve().parent.parent


@dataclass
class ArchValue:
    ours: float | None
    status: str  # pass | fail | error | reason
    note: str = ""


def cache_dir() -> Path:
    return Path(os.environ.get("DEPTHBENCH_CACHE") or Path.home() / ".cache" / "depthbench")


@lru_cache(maxsize=None)
def _file_hash(path: str) -> str:
    try:
        return hashlib.sha1(Path(path).read_bytes()).hexdigest()[:12]
    except OSError:
        return "missing"


@lru_cache(maxsize=None)
def fingerprint() -> str:
    """The shared part of every key: the measuring code and timm's version."""
    parts = [_file_hash(str(REPO / "harness" / name)) for name in ("flops.py", "verify.py")]
    try:
        from importlib.metadata import version

        parts.append(version("timm"))
    except Exception:  # no timm metadata: the code alone
        pass
    return "-".join(parts)


@lru_cache(maxsize=None)
def model_code(model: str | None) -> str:
    """A hash of the source file that registers ``model`` (ours or timm's)."""
    if not model:
        return ""
    try:
        import timm

        import models  # noqa: F401  (registers the paper models)

        fn = timm.models.get_model_entrypoint(model)
        return _file_hash(sys.modules[fn.__module__].__file__)
    except Exception:  # unknown model: its measurement is an error entry, keyed by name alone
        return "unknown"


def measured_columns(row: Row) -> list[str]:
    from harness.verify import MEASURES

    return [c for c in row.paper if c in MEASURES]


def _key(column: str, row: Row) -> str:
    return json.dumps([column, row.model, row.model_kwargs, row.input_size, row.flops_model_kwargs, row.base,
                       fingerprint(), model_code(row.model), model_code(row.base)], sort_keys=True, default=str)


class Audit:
    """``Audit().row(row)`` → ``{column: ArchValue}`` for every measured column of a table row."""

    def __init__(self, cache: bool = True, measure: bool = True, progress: bool = True):
        self.path = cache_dir() / "audit.json" if cache else None
        self.values: dict = {}
        if self.path and self.path.exists():
            try:
                self.values = json.loads(self.path.read_text())
            except (ValueError, OSError):
                self.values = {}  # a corrupt cache is rebuilt, never trusted
        self.measure, self.progress, self.dirty = measure, progress, False

    def prepare(self, rows: list[Row]) -> None:
        """Measure every row not in the cache yet (with a progress bar on a terminal), then save the cache."""
        todo = [r for r in rows if not r.reason and r.model and
                any(_key(c, r) not in self.values for c in measured_columns(r) if c not in r.unchecked)]
        if not todo or not self.measure:
            return
        if self.progress:
            print(f"measuring the architecture of {len(todo)} table rows (cached afterwards in {self.path or 'memory'})",
                  file=sys.stderr, flush=True)
            if sys.stderr.isatty():
                from tqdm import tqdm

                todo = tqdm(todo, desc="audit", unit="row", leave=False)
        try:
            for i, row in enumerate(todo, 1):
                self._measure_row(row)
                if i % 20 == 0:
                    self.save()  # an interrupted audit keeps what it measured
        finally:
            self.save()

    def _measure_row(self, row: Row) -> None:
        from harness.verify import MEASURES, RowContext

        ctx = RowContext(row)
        for column in measured_columns(row):
            key = _key(column, row)
            if column in row.unchecked or key in self.values:
                continue
            try:
                self.values[key] = {"ours": float(MEASURES[column].fn(ctx))}
            except Exception as e:  # a model that fails to build is a failed cell, as in verify
                self.values[key] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]}
            self.dirty = True

    def save(self) -> None:
        if not (self.path and self.dirty):
            return
        from harness.rundir import atomic_write

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, json.dumps(self.values, indent=0, sort_keys=True))
            self.dirty = False
        except OSError as e:  # an unwritable cache costs time, not results
            print(f"depthbench results: warning: cannot write the audit cache {self.path} ({e.strerror})",
                  file=sys.stderr)

    def row(self, row: Row) -> dict[str, ArchValue]:
        from harness.verify import MEASURES, within

        out = {}
        for column in measured_columns(row):
            paper = row.paper[column]
            if row.reason:
                continue
            if column in row.unchecked:
                out[column] = ArchValue(None, "reason", row.unchecked[column])
                continue
            entry = self.values.get(_key(column, row))
            if entry is None:
                if self.measure and row.model:
                    self._measure_row(row)
                    entry = self.values.get(_key(column, row))
                if entry is None:
                    continue
            if "error" in entry:
                out[column] = ArchValue(None, "error", entry["error"])
            elif not isinstance(paper, (int, float)):
                out[column] = ArchValue(entry["ours"], "reason", f"paper value {paper!r} is not a number")
            else:
                measure = MEASURES[column]
                ok = within(paper, entry["ours"], measure.rel_tol, measure.abs_tol)
                out[column] = ArchValue(entry["ours"], "pass" if ok else "fail")
        return out
