"""``depthbench verify``: audit every model row of the papers' tables against the printed numbers.

Each row of ``results/tables/<paper>.yaml`` that names a model is built on the meta device (no weights, no
compute), and every paper column that names a *measure* below is measured and compared:

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

Rows with a ``reason`` (and columns listed in ``unchecked``) are printed with that reason, never skipped
silently. A row's ``flops_model_kwargs`` override its ``model_kwargs`` for ``flops_g`` only (a paper that
leaves a branch out of its FLOPs, e.g. ScaleNet's adapters). The exit status is 1 when any checked value fails.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from torch import nn

from harness.flops import build_model, count_flops, count_params
from results import paper_tables
from results.paper_tables import Row


@dataclass
class Measure:
    fn: Callable[["RowContext"], float]
    rel_tol: float  # relative tolerance; 0 = exact
    unit: str = ""
    abs_tol: float = 0.0  # absolute tolerance (differences of printed numbers)


class RowContext:
    """One row's model, built once and shared by all of the row's measures."""
    _models: dict = {}
    _base_counts: dict = {}  # (base model, with norms) → parameter count, for the increment measures

    def __init__(self, row: Row, paper: str = ""):
        self.row = row
        self.paper = paper

    @property
    def model(self) -> nn.Module:
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


def build_row_model(name: str, **kwargs) -> nn.Module:
    """A row's model on the meta device: a registered (timm) model, or one of the Hugging Face Llama models of
    ScaleNet Table X (``models.scalenet_llama.LLAMA_MODELS``, built from their config arithmetic)."""
    from models.scalenet_llama import LLAMA_MODELS, build_named_llama

    if name in LLAMA_MODELS:
        import torch

        with torch.device("meta"):
            return build_named_llama(name, **kwargs)
    return build_model(name, **kwargs)


def count_layers(model: nn.Module) -> int:
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


def count_params_outside_norms(model: nn.Module) -> int:
    """Unique parameters not in a normalisation layer (LayerNorm, GroupNorm, BatchNorm, RMSNorm)."""
    norm_types = (nn.LayerNorm, nn.GroupNorm, nn.modules.batchnorm._NormBase, nn.RMSNorm)
    in_norms = {id(p) for m in model.modules() if isinstance(m, norm_types) for p in m.parameters(recurse=False)}
    return sum(p.numel() for p in model.parameters() if id(p) not in in_norms)


def count_macs(model: nn.Module, input_size) -> int:
    """Multiply-accumulates of convs, linears and matmuls alone: ``count_flops`` without the norm terms."""
    return sum(n for op, n in count_flops(model, input_size).by_op.items() if "norm" not in op)


def count_blocks(model: nn.Module) -> int:
    """#Blocks: residual blocks (timm's Block/SwinTransformerBlock/BasicBlock/Bottleneck, StepsNet's DecoderBlock),
    or the model's own ``count_blocks()``."""
    from models.stepsnet import residual_blocks

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


MEASURES: dict[str, Measure] = {
    "params": Measure(lambda c: count_params(c.model), 0.0),
    "params_m": Measure(lambda c: count_params(c.model) / 1e6, 0.005, "M"),
    "flops_g": Measure(lambda c: c.flops() / 1e9, 0.02, "G"),
    "layers": Measure(lambda c: count_layers(c.model), 0.0),
    "flops_cut": Measure(flops_cut_pct, 0.02, "%"),
    "blocks": Measure(lambda c: count_blocks(c.model), 0.0),
    "params_inc_m": Measure(lambda c: c.increment() / 1e6, 0.0, "M", abs_tol=0.01),
    "params_inc_nonorm_m": Measure(lambda c: c.increment(norms=False) / 1e6, 0.0, "M", abs_tol=0.01),
    "macs_m": Measure(lambda c: count_macs(c.model, c.row.input_size) / 1e6, 0.0, "M"),
}


def _dense(column: str) -> Callable[["RowContext"], float]:
    def measure(ctx: "RowContext") -> float:
        from downstream.audit import measure_row  # imports mmdet/mmseg: only when a dense row is checked

        return measure_row(ctx.paper, ctx.row.table, ctx.row.name, column)
    return measure


# Whole detectors/segmentors of the dense tables, built from configs/det and configs/seg (downstream/audit.py)
DENSE_MEASURES = {"det_params_m": Measure(_dense("det_params_m"), 0.005, "M"),
                  "det_flops_g": Measure(_dense("det_flops_g"), 0.02, "G"),
                  "seg_params_m": Measure(_dense("seg_params_m"), 0.005, "M"),
                  "seg_flops_g": Measure(_dense("seg_flops_g"), 0.02, "G")}
MEASURES.update(DENSE_MEASURES)


def within(paper: float, ours: float, rel_tol: float, abs_tol: float = 0.0) -> bool:
    """Equal within ``rel_tol`` (or ``abs_tol``), or ``ours`` rounds to the value as printed (its decimals)."""
    decimals = getattr(paper, "decimals", None)
    if abs(ours - paper) <= abs_tol:
        return True
    if rel_tol == 0:
        return round(ours, decimals or 0) == round(float(paper), decimals or 0)
    if abs(ours - paper) <= rel_tol * abs(paper):
        return True
    return decimals is not None and abs(ours - paper) <= 0.5 * 10 ** -decimals + 1e-9


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


_measured: dict = {}  # the same model appears in several tables: measure it once per run


def _measure_cached(column: str, measure: Measure, ctx: RowContext) -> float:
    row = ctx.row
    key = (column, row.model, repr(sorted(row.model_kwargs.items())), repr(row.input_size),
           repr(sorted(row.flops_model_kwargs.items())), row.base)
    if column in DENSE_MEASURES:  # measured on the row's own config, not on its (backbone) model
        key += (ctx.paper, row.table, row.name)
    if key not in _measured:
        _measured[key] = float(measure.fn(ctx))
    return _measured[key]


def check_row(paper: str, row: Row) -> list[Check]:
    base = dict(paper=paper, table=row.table, row=row.name)
    if row.reason:
        return [Check(**base, column="-", status="reason", note=row.reason)]
    measured = [c for c in row.paper if c in MEASURES]
    if not row.model:
        if measured:
            return [Check(**base, column="-", status="error",
                          note=f"paper values for {measured} but no 'model' and no 'reason'")]
        return []
    checks = []
    ctx = RowContext(row, paper)
    for column in measured:
        value = row.paper[column]
        if column in row.unchecked:
            checks.append(Check(**base, column=column, status="reason", paper_value=value, note=row.unchecked[column]))
            continue
        if not isinstance(value, (int, float)):
            checks.append(Check(**base, column=column, status="error",
                                note=f"paper value {value!r} is not a number; give an 'unchecked' reason"))
            continue
        measure = MEASURES[column]
        try:
            ours = _measure_cached(column, measure, ctx)
        except Exception as e:  # a model that fails to build or run is a failed row, not a crash
            checks.append(Check(**base, column=column, status="error", paper_value=value,
                                note=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]))
            continue
        delta = 100.0 * (ours - value) / value if value else 0.0
        passed = within(value, ours, measure.rel_tol, measure.abs_tol)
        checks.append(Check(**base, column=column, status="pass" if passed else "fail",
                            paper_value=float(value), ours=ours, delta_pct=delta))
    return checks


def run(papers: list[str] | None = None, files: list[str] | None = None, table: str | None = None,
        progress: bool = True) -> list[Check]:
    sources = [(Path(f).stem, paper_tables.load(f)) for f in files or []]
    if not files:
        sources += [(p, paper_tables.load_paper(p)) for p in (papers or paper_tables.available_papers())]
    rows = [(name, row) for name, tables in sources for t in tables if table in (None, t.id) for row in t.rows]
    if progress and sys.stderr.isatty():
        from tqdm import tqdm
        rows = tqdm(rows, desc="verify", unit="row", leave=False)
    return [check for name, row in rows for check in check_row(name, row)]


def _fmt(value: float | None, column: str) -> str:
    if value is None:
        return ""
    if column in ("params", "layers"):
        return f"{value:,.0f}"
    return f"{value:.3f}".rstrip("0").rstrip(".") if abs(value) < 1000 else f"{value:,.1f}"


def print_report(checks: list[Check], summarised: list[Check] | None = None) -> None:
    """The checks as an aligned table, then a one-line summary of ``summarised`` (default: the same checks)."""
    mark = {"pass": "✓", "fail": "✗", "error": "✗", "reason": "—"}
    header = ("paper", "table", "row", "column", "paper", "ours", "delta", "")
    lines = [header]
    for c in checks:
        delta = f"{c.delta_pct:+.2f}%" if c.delta_pct is not None else ""
        lines.append((c.paper, c.table, c.row, c.column, _fmt(c.paper_value, c.column), _fmt(c.ours, c.column),
                      delta, mark[c.status] + (f" {c.note}" if c.note else "")))
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header) - 1)]
    for line in lines:
        print("  ".join(str(v).ljust(w) for v, w in zip(line, widths)) + "  " + line[-1])
    counts = {s: sum(c.status == s for c in (summarised or checks)) for s in mark}
    print(f"\n{counts['pass']} passed, {counts['fail'] + counts['error']} failed, "
          f"{counts['reason']} not checkable (reason shown)")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("verify", help="check models against the papers' parameter/FLOP/layer tables",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("--paper", action="append", help="paper(s) to audit (default: all); repeatable")
    p.add_argument("--table", help="only the table with this id")
    p.add_argument("--file", action="append", help="audit this tables YAML instead of results/tables/")
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.add_argument("--failed", action="store_true", help="print only failing rows")
    p.set_defaults(func=main)


def main(args) -> int:
    from harness.errors import DepthbenchError

    try:
        checks = run(args.paper, args.file, args.table)
    except paper_tables.TableError as e:  # a missing or malformed tables file, an unknown paper or table
        raise DepthbenchError(str(e)) from None
    shown = [c for c in checks if c.status in ("fail", "error")] if args.failed else checks
    if args.json:
        print(json.dumps([asdict(c) for c in shown], indent=1))
    else:
        print_report(shown, checks)
    return 1 if any(c.status in ("fail", "error") for c in checks) else 0
