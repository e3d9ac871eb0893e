"""Join the collected runs to the paper tables: per row and column, the paper's value, ours and the delta.

How a run is matched to a table row (the rule users can predict):

1. a run whose config file is the row's ``config``, or whose model is the row's ``model``, is a candidate;
2. it is used only where it logged a metric one of the table's result columns reads (``COLUMN_METRICS``):
   a pretraining run never fills a detection column, even for the same backbone;
3. it is at the *paper's setting* only when nothing says otherwise: no ``meta.json["scale"]``, the row's own
   config (when the row names one), the row's model kwargs, and no command-line override beyond paths and
   logging. Otherwise it is *reduced*, shown on its own line under the row with its label (the run's
   ``scale``, or what differs: "config horesnet10-rk4_1xb64-20e_digits.py; overrides epochs=2") and no delta —
   never presented as the paper's setting.

Runs at the same setting are seeds: ours is their mean ± std (sample std) with n. Only ``done`` runs count when
there are any; otherwise the running/preempted/failed ones are shown, flagged with their status.

Evaluation-only cells (a row's ``evals``: robustness sets, ImageNet-C, other input sizes, pool modes, StepsNet
analyses) read the run's ``depthbench eval`` numbers (``eval_suite`` records) instead of its training evaluation:
the cell's selector (:func:`cell_selector`) names the protocol, input size (default: the run's training size),
pool mode, analysis, model arguments changed at evaluation time and metric, and exactly that record fills it.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pandas as pd

from harness.core.wording import plural
from results.paper_tables import Row, Table
from results.runs import LOWER_IS_BETTER, MODEL_RENAMES, NEUTRAL_OVERRIDES, REPO, suite_key  # noqa: F401
from results.runs import model_identity, read_config_fields

# table column key -> eval metric it reads (after runs.py's normalisation)
COLUMN_METRICS = {
    "top1": "top1",
    "acc": "top1",
    "in1k": "top1",
    "top5": "top5",
    "ap_b": "bbox_mAP",
    "ap_b50": "bbox_mAP_50",
    "ap_b75": "bbox_mAP_75",
    "ap_m": "segm_mAP",
    "ap_m50": "segm_mAP_50",
    "ap_m75": "segm_mAP_75",
    "ap": "bbox_mAP",
    "ap50": "bbox_mAP_50",
    "ap75": "bbox_mAP_75",
    "miou": "mIoU",
    "macc": "mAcc",
    "ppl": "ppl",
}
# model kwargs that are training knobs, not architecture (a run may set them without leaving the paper's setting)
TRAINING_KWARGS = {
    "drop_path_rate",
    "drop_rate",
    "attn_drop_rate",
    "proj_drop_rate",
    "pos_drop_rate",
    "num_classes",
    "pretrained_cfg",
    "pretrained_cfg_overlay",
}


@dataclass
class Cell:
    column: str
    kind: str  # "arch" (measured by verify), "result" (a run's metric) or "text"
    paper: object = None
    ours: float | None = None
    std: float | None = None
    n: int = 0
    delta: float | None = None
    status: str = ""  # arch: pass/fail/error/reason; result: statuses of the runs used ("done", "running")
    note: str = ""
    decimals: int | None = None  # printed precision of the paper's column (reduced lines carry no paper value)


@dataclass
class Line:
    """One rendered line: a paper row (``setting`` None) or the reduced-scale runs under it."""

    row: Row
    cells: dict
    setting: str | None = None
    runs: list = field(default_factory=list)


@dataclass
class TableView:
    table: Table
    lines: list

    @property
    def paper(self) -> str:
        return self.table.paper


def result_columns(table: Table) -> list[str]:
    """Columns filled from runs: a training metric (COLUMN_METRICS) or an evaluation of some row (``evals``)."""
    evaluated = {c for row in table.rows for c in row.evals}
    return [c for c in table.columns if c in COLUMN_METRICS or c in evaluated]


def cell_selector(row: Row, column: str) -> dict | None:
    """What ``depthbench eval`` record fills (row, column): the row's ``eval`` with the column's ``evals`` entry
    over it, or None for a column the training evaluation fills."""
    if column not in row.evals:
        return None
    return {**row.eval, **(row.evals[column] or {})}


def suite_value(run: dict, selector: dict, row: Row):
    """The run's eval_suite number for ``selector`` (None when it has none). The input size defaults to the
    run's training size (Table 1 is evaluated at the resolution the model was trained at); for a run that
    records none, a record without a size or at the row's size."""
    suite = run.get("suite")
    if not suite:
        return None
    sizes = [selector.get("input_size", run.get("input_size"))]
    if sizes[0] is None:  # a run without data.input_size (language models: none) or an older run: the row's
        sizes.append(row.input_size if isinstance(row.input_size, int) else list(row.input_size or [None])[-1])
    for size in sizes:
        key = suite_key(
            selector.get("dataset", "val"),
            size,
            selector.get("pool_mode"),
            selector.get("analysis", "none"),
            selector.get("model_kwargs"),
            selector.get("metric", "top1"),
        )
        if key in suite:
            return suite[key]
    return None


def decimals(value) -> int:
    d = getattr(value, "decimals", None)
    if d is not None:
        return d
    if isinstance(value, int):
        return 0
    return 2


@lru_cache(maxsize=None)
def config_model_kwargs(config: str) -> str | None:
    """The model kwargs a config file sets, ``_base_`` files merged in (JSON), or None when it cannot be read.

    Read with runs.read_config_fields rather than MMEngine's Config.fromfile: ~60 recipes at ~50 ms each would
    be most of the time of a results call, and only the ``model`` dict is needed (merged as MMEngine merges).
    """
    model = _config_model(REPO / config, 0)
    if model is None:
        return None
    return json.dumps(model_identity(model)[1], sort_keys=True, default=str)


def _config_model(path: Path, depth: int) -> dict | None:
    try:
        fields = read_config_fields(path.read_text())
    except OSError:
        return None
    bases = fields.get("_base_") or []
    model = {}
    for base in [bases] if isinstance(bases, str) else bases:
        if depth < 8 and isinstance(base, str) and "::" not in base:  # mmdet::... stock files carry no timm model
            model.update(_config_model((path.parent / base).resolve(), depth + 1) or {})
    own = fields.get("model")
    if isinstance(own, dict):
        _merge(model, own)
    return model


def _merge(base: dict, update: dict) -> None:
    """Nested dict merge, as MMEngine merges a config over its ``_base_``."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict) and not value.get("_delete_"):
            _merge(base[key], value)
        else:
            base[key] = value


def _arch_kwargs(kwargs: dict) -> dict:
    return {k: v for k, v in kwargs.items() if k not in TRAINING_KWARGS and v is not None}


def setting_of(run: dict, row: Row, known_configs: set | None = None) -> str | None:
    """None when the run is at the row's (the paper's) setting, else the label that says how it differs."""
    if run.get("scale"):
        return str(run["scale"])
    reasons = []
    run_config = run.get("config_file")
    if row.config and run_config != row.config:
        reasons.append(f"config {Path(run_config).name}" if run_config else "no config recorded")
    try:
        kwargs = json.loads(run.get("model_kwargs") or "{}")
    except ValueError:
        kwargs = {}
    expected = {}
    if row.config and run_config == row.config:
        expected = json.loads(config_model_kwargs(row.config) or "{}")
    expected.update(row.model_kwargs)
    differ = {k: v for k, v in _arch_kwargs(kwargs).items() if _arch_kwargs(expected).get(k) != v}
    differ.update({k: None for k in _arch_kwargs(expected) if k not in kwargs})
    if differ and not (row.config and run_config != row.config):  # a different config already says it
        reasons.append("model " + ", ".join(f"{k}={v}" for k, v in sorted(differ.items(), key=lambda kv: kv[0])))
    overrides = [
        o
        for o in (run.get("overrides") or "").split()
        if not NEUTRAL_OVERRIDES.match(o.lstrip("+").split("=", 1)[0]) and o.lstrip("+") != f"model.name={row.model}"
    ]
    if overrides:
        reasons.append("overrides " + " ".join(overrides))
    if not reasons:
        return None
    epochs = run.get("epochs")
    epochs = plural(epochs, "epoch") if isinstance(epochs, (int, float)) and not isinstance(epochs, bool) else None
    where = ", ".join(x for x in (run.get("dataset"), epochs) if x)
    return "; ".join(([where] if where else []) + reasons)


class RunIndex:
    """The runs DataFrame indexed by model and config, for matching many rows quickly."""

    def __init__(self, runs: pd.DataFrame, renames: dict | None = None):
        # pandas fills a field one run lacks with NaN; a record says None instead
        self.records = [
            {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()}
            for r in (runs.to_dict("records") if len(runs) else [])
        ]
        self.by_model, self.by_config = defaultdict(list), defaultdict(list)
        renames = renames or {}
        for i, r in enumerate(self.records):
            model = r.get("model")
            if isinstance(model, str):
                self.by_model[renames.get(model, model)].append(i)
            if isinstance(r.get("config_file"), str):
                self.by_config[r["config_file"]].append(i)

    def candidates(self, row: Row) -> list[dict]:
        ids = set(self.by_model.get(row.model, [])) if row.model else set()
        if row.config:
            ids |= set(self.by_config.get(row.config, []))
        return [self.records[i] for i in sorted(ids)]


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _value_of(row: Row, column: str):
    """run -> its number for (row, column): the eval_suite record the cell's selector names, or the training
    evaluation's metric."""
    selector = cell_selector(row, column)
    if selector is not None:
        return lambda run: suite_value(run, selector, row)
    metric = f"metric.{COLUMN_METRICS[column]}"
    return lambda run: run.get(metric)


def _result_cell(column: str, paper, runs: list[dict], compare: bool, value_of) -> Cell:
    with_value = [r for r in runs if _finite(value_of(r))]
    done = [r for r in with_value if r.get("status") == "done"]
    used = done or with_value
    cell = Cell(column, "result", paper=paper)
    if not used:
        return cell
    values = [float(value_of(r)) for r in used]
    cell.ours, cell.n = statistics.fmean(values), len(values)
    cell.std = statistics.stdev(values) if len(values) > 1 else None
    counts = Counter(r.get("status", "unknown") for r in runs)
    cell.status = "" if set(counts) == {"done"} else ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    changed = [r["config_changes"] for r in used if r.get("config_changes")]
    if changed:  # a run whose config changed mid-way (--allow-changes) is not the experiment it started as
        cell.status = ", ".join(
            filter(
                None, [cell.status, f"{len(changed)} config changed on resume ({'; '.join(dict.fromkeys(changed))})"]
            )
        )
    if compare and _finite(paper):
        cell.delta = cell.ours - float(paper)
    return cell


def view_table(table: Table, index: RunIndex, audit=None) -> TableView:
    """The table with ours beside the paper's numbers: one line per row, plus one per reduced setting run."""
    results = result_columns(table)
    lines = []
    for row in table.rows:
        arch = audit.row(row) if audit is not None and row.model and not row.reason else {}
        columns = [c for c in results if c in COLUMN_METRICS or c in row.evals]  # this row's run-filled columns
        cells = {}
        for column in table.columns:
            paper = row.paper.get(column)
            if column in arch:
                a = arch[column]
                cells[column] = Cell(
                    column,
                    "arch",
                    paper=paper,
                    ours=a.ours,
                    n=1 if a.ours is not None else 0,
                    delta=(a.ours - float(paper)) if a.ours is not None and _finite(paper) else None,
                    status=a.status,
                    note=a.note,
                )
            elif column in columns:
                cells[column] = Cell(column, "result", paper=paper)
            else:
                cells[column] = Cell(column, "text", paper=paper)
        line = Line(row, cells)
        lines.append(line)
        if row.reason or not columns:
            continue
        value_of = {c: _value_of(row, c) for c in columns}
        # rows of this table with the same model (an ablation's steps: model kwargs tell them apart)
        siblings = (
            [o for o in table.rows if o is not row and o.model == row.model and not o.reason] if row.model else []
        )
        groups = defaultdict(list)
        for run in index.candidates(row):
            if any(_finite(value_of[c](run)) for c in columns):
                setting = setting_of(run, row)
                if setting is not None and any(setting_of(run, o) is None for o in siblings):
                    continue  # exactly another row of this table (another ablation step): shown there only
                groups[setting].append(run)
        for setting in sorted(groups, key=lambda s: (s is not None, s or "")):
            runs = groups[setting]
            target = line if setting is None else Line(row, {c: Cell(c, "result") for c in columns}, setting)
            target.runs = [r["path"] for r in runs]
            for column in columns:
                paper = row.paper.get(column) if setting is None else None  # reduced: nothing to compare with
                target.cells[column] = _result_cell(column, paper, runs, setting is None, value_of[column])
                target.cells[column].decimals = getattr(row.paper.get(column), "decimals", None)
            if setting is not None:
                lines.append(target)
    return TableView(table, lines)


def lower_is_better(column: str, row: Row | None = None) -> bool:
    selector = cell_selector(row, column) if row is not None else None
    metric = selector.get("metric", "top1") if selector is not None else COLUMN_METRICS.get(column, column)
    return metric.lower() in LOWER_IS_BETTER
