"""The architecture audit: every model row of the papers' tables measured and compared with the printed numbers.

One function answers for every architecture cell -- :meth:`Audit.check_row` -- and both ``depthbench verify``
(its table of checks) and ``depthbench results`` (the Params/FLOPs/#Layers cells of the reports) read it, through
one on-disk cache (harness/measure/cache.py: keyed by the code each number depends on, so a cached number is never
stale). Each row that names a model is built on the meta device (no weights, no compute), and every paper column
that names a *measure* below is measured:

=============  =======================================  ===========================================
measure        what                                     passes when
=============  =======================================  ===========================================
``params``     exact parameter count (buffers excluded)  equal
``params_m``   parameters in millions                    within 0.5 % or rounds to the printed value
``flops_g``    GMACs at the row's input size (flops.py)  within 2 % or rounds to the printed value
``macs_m``     conv/linear/matmul MACs (M), no norms     rounds to the printed value
``layers``     #Layers, StepsNet's rule (see below)      equal
``flops_cut``  FLOPs saved vs the unsliced twin, %      within 2 % or rounds to the printed value
               (SReT's slicing; ``flops_cut_pct``)
``blocks``     #Blocks: residual blocks (count_blocks)   equal
``params_inc_m``  params(model) − params(row ``base``), M   within ±0.01 M (a difference of two counts
               (ScaleNet's parameter increments)         printed to 0.01 M)
``params_inc_nonorm_m``  the same, norm-layer params left   as ``params_inc_m``
               out of both (rows whose paper count omits the new layers' LayerNorms)
``det_params_m``  whole detector / segmentor built from     as ``params_m`` / ``flops_g``
``seg_params_m``  the row's config in configs/det|seg
``det_flops_g``   (downstream/audit.py: which config, and
``seg_flops_g``   the papers' dense FLOP conventions)
=============  =======================================  ===========================================

Rows with a ``reason`` (and columns listed in ``unchecked``) are reported with that reason, never skipped
silently. A row's ``flops_model_kwargs`` override its ``model_kwargs`` for ``flops_g`` only (a paper that leaves
a branch out of its FLOPs, e.g. ScaleNet's adapters).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from torch import nn
from tqdm import tqdm

import harness.measure.cache  # model_code looked up when called (a test edits a model's code)
from harness.engine.models import build_model, meta_build
from harness.measure.cache import MeasurementCache, count_key, file_hash
from harness.measure.flops import count_flops, count_params
from models.scalenet_llama import LLAMA_MODELS, build_named_llama
from models.stepsnet import residual_blocks
from results import paper_tables
from results.paper_tables import Row


@dataclass
class Measure:
    fn: Callable[["RowContext"], float]
    rel_tol: float  # relative tolerance; 0 = exact
    unit: str = ""
    abs_tol: float = 0.0  # absolute tolerance (differences of printed numbers)
    dense: bool = False  # measured on the row's detector/segmentor config, not on its (backbone) model


@dataclass
class DenseCounter:
    """How a dense row's whole detector/segmentor is counted (``downstream.audit``). The caller hands it in:
    results and downstream are peers and do not import each other (.importlinter); ``depthbench verify``,
    ``results`` and the demo join them (harness/workflows/audit.py ``dense_counter``)."""

    measure_row: Callable[[str, str, str, str], float]  # (paper, table, row, column) -> the column's value
    cache_key: Callable[[str, str, str], list]  # (paper, table, row) -> what the count depends on


class RowContext:
    """One row's model, built once and shared by all of the row's measures."""

    _models: dict = {}
    _base_counts: dict = {}  # (base model, with norms) → parameter count, for the increment measures

    def __init__(self, row: Row, dense: DenseCounter | None = None):
        self.row, self.dense = row, dense

    @property
    def model(self):
        key = (self.row.model, repr(sorted(self.row.model_kwargs.items())))
        if key not in RowContext._models:
            RowContext._models.clear()  # keep one model alive at a time: Base-size models are big even on meta
            RowContext._models[key] = build_row_model(self.row.model, **self.row.model_kwargs)
        return RowContext._models[key]

    def flops(self) -> int:
        if self.row.flops_model_kwargs:
            model = build_model(self.row.model, **{**self.row.model_kwargs, **self.row.flops_model_kwargs})
            return count_flops(model, self.row.input_size).total
        return count_flops(self.model, self.row.input_size).total

    def increment(self, norms: bool = True) -> int:
        """Parameters of the row's model minus those of its ``base`` model (norm layers left out if not ``norms``)."""
        if not self.row.base:
            raise ValueError("an increment column needs the row's 'base' (the model the increment is over)")
        count = count_params if norms else count_params_outside_norms
        key = (self.row.base, norms)
        if key not in RowContext._base_counts:
            RowContext._base_counts[key] = count(build_model(self.row.base))
        return count(self.model) - RowContext._base_counts[key]


def build_row_model(name: str, **kwargs):
    """A row's model on the meta device: a registered (timm) model, or one of the Hugging Face Llama models of
    ScaleNet Table X (``models.scalenet_llama.LLAMA_MODELS``, built from their config arithmetic)."""
    if name in LLAMA_MODELS:
        with meta_build("meta"):
            return build_named_llama(name, **kwargs)
    return build_model(name, **kwargs)


def count_layers(model) -> int:
    """#Layers as StepsNet's Table 1 counts them (Sec. 4 and Appendix B; docs/stepsnet.md), for any model.

    Every conv or linear layer counts one, and every attention (the q@kᵀ/attn@v products) counts one, so a
    Transformer block is 5 layers (qkv, attention, proj, fc1, fc2). ResNet's 1×1 projection shortcuts
    (``downsample`` convs) are not counted. A model with its own rule defines ``count_layers()``.
    """
    if hasattr(model, "count_layers"):
        return model.count_layers()
    n = 0
    for name, module in model.named_modules():
        if isinstance(module, nn.Conv2d):
            n += 0 if ".downsample." in f".{name}." else 1
        elif isinstance(module, nn.Linear):
            n += 1
        elif type(module).__name__.endswith("Attention"):
            n += 1
    return n


def count_params_outside_norms(model) -> int:
    """Unique parameters not in a normalisation layer (LayerNorm, GroupNorm, BatchNorm, RMSNorm)."""
    norm_types = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._NormBase, nn.RMSNorm)
    in_norms = {id(p) for m in model.modules() if isinstance(m, norm_types) for p in m.parameters(recurse=False)}
    return sum(p.numel() for p in model.parameters() if id(p) not in in_norms)


def count_macs(model, input_size) -> int:
    """Multiply-accumulates of convs, linears and matmuls alone: ``count_flops`` without the norm terms."""
    return sum(n for op, n in count_flops(model, input_size).by_op.items() if "norm" not in op)


def count_blocks(model) -> int:
    """#Blocks: residual blocks (timm's Block/SwinTransformerBlock/BasicBlock/Bottleneck, StepsNet's DecoderBlock),
    or the model's own ``count_blocks()``."""
    return model.count_blocks() if hasattr(model, "count_blocks") else len(residual_blocks(model))


def flops_cut_pct(ctx: RowContext) -> float:
    """FLOPs saved by the row's model against its twin without sliced attention, in % (SReT's "10~30 %").

    The model names its twin with ``unsliced_twin_kwargs`` (constructor kwargs); both count at the row's size.
    """
    twin_kwargs = getattr(ctx.model, "unsliced_twin_kwargs", None)
    if twin_kwargs is None:
        raise ValueError(f"{ctx.row.model} has no unsliced twin ('unsliced_twin_kwargs'); drop this column")
    twin = build_model(ctx.row.model, **{**ctx.row.model_kwargs, **twin_kwargs})
    return 100.0 * (1.0 - ctx.flops() / count_flops(twin, ctx.row.input_size).total)


def _params(ctx: RowContext) -> int:
    return count_params(ctx.model)


def _dense(column: str) -> Callable[[RowContext], float]:
    def measure(ctx: RowContext) -> float:
        return ctx.dense.measure_row(ctx.row.paper_id, ctx.row.table, ctx.row.name, column)

    return measure


# columns that are a whole model's parameter or FLOP count: (kind of count, unit); cached under the key of
# harness.measure.cache.count_key, shared with `depthbench models`
WHOLE_MODEL_COUNTS = {"params": ("params", 1), "params_m": ("params", 1e6), "flops_g": ("flops", 1e9)}
WHOLE_MODEL_COUNTS_FN = {"params": _params, "flops": lambda c: c.flops()}

MEASURES: dict[str, Measure] = {
    "params": Measure(_params, 0.0),
    "params_m": Measure(lambda c: _params(c) / 1e6, 0.005, "M"),
    "flops_g": Measure(lambda c: c.flops() / 1e9, 0.02, "G"),
    "layers": Measure(lambda c: count_layers(c.model), 0.0),
    "flops_cut": Measure(flops_cut_pct, 0.02, "%"),
    "blocks": Measure(lambda c: count_blocks(c.model), 0.0),
    "params_inc_m": Measure(lambda c: c.increment() / 1e6, 0.0, "M", abs_tol=0.01),
    "params_inc_nonorm_m": Measure(lambda c: c.increment(norms=False) / 1e6, 0.0, "M", abs_tol=0.01),
    "macs_m": Measure(lambda c: count_macs(c.model, c.row.input_size) / 1e6, 0.0, "M"),
    # whole detectors/segmentors of the dense tables, built from configs/det and configs/seg (downstream/audit.py)
    "det_params_m": Measure(_dense("det_params_m"), 0.005, "M", dense=True),
    "det_flops_g": Measure(_dense("det_flops_g"), 0.02, "G", dense=True),
    "seg_params_m": Measure(_dense("seg_params_m"), 0.005, "M", dense=True),
    "seg_flops_g": Measure(_dense("seg_flops_g"), 0.02, "G", dense=True),
}


def within(paper: float, ours: float, rel_tol: float, abs_tol: float = 0.0) -> bool:
    """Equal within ``rel_tol`` (or ``abs_tol``), or ``ours`` rounds to the value as printed (its decimals)."""
    decimals = getattr(paper, "decimals", None)
    if abs(ours - paper) <= abs_tol:
        return True
    if rel_tol == 0:
        return round(ours, decimals or 0) == round(float(paper), decimals or 0)
    if abs(ours - paper) <= rel_tol * abs(paper):
        return True
    return decimals is not None and abs(ours - paper) <= 0.5 * 10**-decimals + 1e-9


@dataclass
class Check:
    paper: str
    table: str
    row: str
    column: str
    status: str  # "pass" | "fail" | "reason" | "error"
    paper_value: float | None = None
    ours: float | None = None
    delta_pct: float | None = None
    note: str = ""


@dataclass
class ArchValue:
    """One architecture cell of a report: our value and how it compares (``Check.status``)."""

    ours: float | None
    status: str  # pass | fail | error | reason
    note: str = ""


def measured_columns(row: Row) -> list[str]:
    return [c for c in row.paper if c in MEASURES]


class Audit:
    """The architecture checks of table rows, measured once per code version (harness/measure/cache.py).

    ``check_row(row)`` -> the row's :class:`Check` list (``depthbench verify``); ``row(row)`` -> ``{column:
    ArchValue}`` for a report cell, from the same checks; ``prepare(rows)`` measures what the cache lacks first,
    with progress on stderr. ``measure=False`` reads the cache only (a cell not measured yet is left out)."""

    def __init__(
        self, cache: bool = True, measure: bool = True, progress: bool = True, dense: DenseCounter | None = None
    ):
        self.cache = MeasurementCache(enabled=cache)
        self.path = self.cache.path
        self.measure, self.progress, self.dense = measure, progress, dense

    # ------------------------------------------------------------------ keys and values
    def _key(self, column: str, row: Row) -> str:
        if column in WHOLE_MODEL_COUNTS:  # the same count `depthbench models` makes: one cache entry for both
            kind, _ = WHOLE_MODEL_COUNTS[column]
            kwargs = {**row.model_kwargs, **(row.flops_model_kwargs if kind == "flops" else {})}
            return count_key(self.cache, kind, row.model, kwargs, row.input_size)
        parts = [
            column,
            row.model,
            row.model_kwargs,
            row.input_size,
            row.flops_model_kwargs,
            row.base,
            harness.measure.cache.model_code(row.model),
            harness.measure.cache.model_code(row.base),
            file_hash(str(Path(__file__))),
        ]
        if MEASURES[column].dense:  # the row's own detector/segmentor config and the dense counting code
            parts += self.dense.cache_key(row.paper_id, row.table, row.name)
        return self.cache.key(*parts)

    def _todo(self, row: Row) -> list[str]:
        if row.reason or not row.model:
            return []
        return [
            c
            for c in measured_columns(row)
            if c not in row.unchecked
            and (self.dense or not MEASURES[c].dense)
            and isinstance(row.paper[c], (int, float))
            and not self.cache.has(self._key(c, row))
        ]

    def value(self, column: str, row: Row, ctx: RowContext | None = None) -> dict | None:
        """``{"value": x}`` or ``{"error": line}``; None when not cached and ``measure=False``."""
        if MEASURES[column].dense and self.dense is None:
            return {
                "error": f"{column} counts the row's detector/segmentor: an Audit(dense=...) measures it "
                f"(harness/workflows/audit.py dense_counter)"
            }
        key = self._key(column, row)
        if not self.cache.has(key) and not self.measure:
            return None
        if column in WHOLE_MODEL_COUNTS:  # cached as the raw count, in the column's unit here
            kind, unit = WHOLE_MODEL_COUNTS[column]
            count = self.cache.get(key, lambda: WHOLE_MODEL_COUNTS_FN[kind](ctx or RowContext(row, self.dense)))
            return count if "error" in count else {"value": count["value"] / unit}
        return self.cache.get(key, lambda: MEASURES[column].fn(ctx or RowContext(row, self.dense)))

    def prepare(self, rows: list[Row]) -> None:
        """Measure every row not in the cache yet (a progress bar on a terminal, a line per 10 % otherwise, on
        stderr), then save the cache; an interrupted audit keeps what it measured."""
        todo = [r for r in rows if self._todo(r)]
        if not todo or not self.measure:
            return
        bar, started = None, time.monotonic()
        if self.progress:
            print(
                f"measuring the architecture of {len(todo)} table rows (about a minute for all five papers on 2 "
                f"cores; cached afterwards in {self.path or 'memory'}, shared with depthbench models)",
                file=sys.stderr,
                flush=True,
            )
            if sys.stderr.isatty():
                bar = tqdm(total=len(todo), desc="audit", unit="row", leave=False, file=sys.stderr)
        try:
            step = max(1, len(todo) // 10)
            for i, row in enumerate(todo, 1):
                ctx = RowContext(row, self.dense)
                for column in self._todo(row):
                    self.value(column, row, ctx)
                if bar is not None:
                    bar.update(1)
                elif self.progress and (i % step == 0 or i == len(todo)):
                    print(
                        f"  audit: {i}/{len(todo)} rows measured ({time.monotonic() - started:.0f} s)",
                        file=sys.stderr,
                        flush=True,
                    )
                if i % 20 == 0:
                    self.cache.save()
        finally:
            if bar is not None:
                bar.close()
            self.cache.save()

    def save(self) -> None:
        self.cache.save()

    # ------------------------------------------------------------------ the checks
    def check_row(self, row: Row) -> list[Check]:
        base = dict(paper=row.paper_id, table=row.table, row=row.name)
        if row.reason:
            return [Check(**base, column="-", status="reason", note=row.reason)]
        measured = measured_columns(row)
        if not row.model:
            if measured:
                return [
                    Check(
                        **base,
                        column="-",
                        status="error",
                        note=f"paper values for {measured} but no 'model' and no 'reason'",
                    )
                ]
            return []
        checks, ctx = [], RowContext(row, self.dense)
        for column in measured:
            value = row.paper[column]
            if column in row.unchecked:
                checks.append(
                    Check(**base, column=column, status="reason", paper_value=value, note=row.unchecked[column])
                )
                continue
            if not isinstance(value, (int, float)):
                checks.append(
                    Check(
                        **base,
                        column=column,
                        status="error",
                        note=f"paper value {value!r} is not a number; give an 'unchecked' reason",
                    )
                )
                continue
            entry = self.value(column, row, ctx)
            if entry is None:
                continue
            if "error" in entry:
                checks.append(
                    Check(**base, column=column, status="error", paper_value=float(value), note=entry["error"])
                )
                continue
            ours, measure = entry["value"], MEASURES[column]
            delta = 100.0 * (ours - value) / value if value else 0.0
            passed = within(value, ours, measure.rel_tol, measure.abs_tol)
            checks.append(
                Check(
                    **base,
                    column=column,
                    status="pass" if passed else "fail",
                    paper_value=float(value),
                    ours=ours,
                    delta_pct=delta,
                )
            )
        return checks

    def row(self, row: Row) -> dict[str, ArchValue]:
        """The architecture cells of a table row, from :meth:`check_row` (what ``verify`` says, cell by cell)."""
        if row.reason or not row.model:
            return {}
        return {c.column: ArchValue(c.ours, c.status, c.note) for c in self.check_row(row) if c.column != "-"}


def verify(
    papers: list[str] | None = None,
    files: list[str] | None = None,
    table: str | None = None,
    *,
    cache: bool = True,
    progress: bool = True,
    dense: DenseCounter | None = None,
) -> list[Check]:
    """Every check of the papers' tables (all papers by default; ``files``: other tables YAMLs instead; ``table``:
    one table id; ``dense``: how the dense rows' detectors/segmentors are counted). Bad input (a missing or
    malformed tables file, an unknown paper) raises ``TableError``."""
    sources = [paper_tables.load(f) for f in files or []]
    if not files:
        sources += [paper_tables.load_paper(p) for p in (papers or paper_tables.available_papers())]
    tables = [t for tables in sources for t in tables if table in (None, t.id)]
    if table is not None and not tables:
        raise paper_tables.TableError(f"no table {table!r} in {', '.join(papers or files or ['the papers'])}")
    rows = [row for t in tables for row in t.rows]
    audit = Audit(cache=cache, progress=progress, dense=dense)
    audit.prepare(rows)
    try:
        return [check for row in rows for check in audit.check_row(row)]
    finally:
        audit.save()
