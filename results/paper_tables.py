"""The paper tables: ``results/tables/<paper>.yaml`` — schema, loader and validation.

One file per paper. Every table the paper prints is transcribed with the paper's own numbers, and each
row says which registered model (and/or config) reproduces it, or why it cannot be reproduced::

    paper: stepsnet                      # file stem, lower case
    title: Step by Step Network          # the paper's title
    tables:
      - id: "1"                          # the paper's table number/label, as printed ("1", "5a", "IV")
        caption: ImageNet-1K comparison
        columns:                         # key -> header; the keys are used in rows' `paper:` maps
          layers: "#Layers"
          params_m: "#Params (M)"
          flops_g: "FLOPs (G)"
          top1: "Top-1 (%)"
        defaults: {input_size: 224}      # optional: fields every row inherits unless it sets them
        rows:
          - name: DeiT-S                 # the row label as printed
            model: deit_small_patch16_224   # registered timm name (ours or timm's) ...
            model_kwargs: {}             # ... built with these kwargs
            input_size: 224              # side, [H, W] or [C, H, W]: the resolution FLOPs are counted at
            paper: {layers: 62, params_m: 22.1, flops_g: 4.6, top1: 79.9}
            config: configs/deit/...py   # optional: the config that trains this row; the row's model_kwargs
                                         # apply on top (depthbench train CONFIG +model.<key>=<value>)
            unchecked: {flops_g: "reason"}  # optional: columns not checked, with the reason shown
            base: deit_small_patch16_224  # optional: the model increment measures (params_inc_m) subtract
            flops_model_kwargs: {}       # optional: model_kwargs overrides used only when counting FLOPs
          - name: Something unbuildable
            reason: "why this row cannot be built or checked"   # shown by verify, never skipped silently

Evaluation-only cells (robustness sets, ImageNet-C, other input sizes, TransNeXt pool modes, StepsNet analyses)
are filled by ``depthbench eval`` records (``kind: eval_suite``) of the row's runs, not by training. A row says
which record fills which column with a *selector* per column; usually set once in the table's ``defaults``::

        defaults:
          evals:                         # column -> selector; a column not listed is a training metric/text
            in_c: {dataset: imagenet-c, metric: mCE}   # depthbench eval ... --dataset imagenet-c
            in_a: {dataset: imagenet-a}                # metric defaults to top1
            r384: {input_size: 384}                    # ... --input-size 384 (default: the run's training size)
        rows:
          - name: X (Linear Mode)
            eval: {pool_mode: linear}    # selector keys shared by all of this row's evals (--pool-mode linear)
          - name: X (no length scaling)
            eval: {model_kwargs: {length_scaling: false}}   # ... +model.length_scaling=False at evaluation
          - name: Slow path
            evals: {m32: {analysis: "mask_first=32"}}       # --analysis mask_first=32

Selector keys (``SELECTOR_KEYS``): ``dataset`` (a ``depthbench eval --dataset`` protocol, default ``val``),
``metric`` (default ``top1``; ``mCE``, ``relative_mCE``, ``top5``, ...; an lm-eval task's ``acc``/``acc_norm``
with ``dataset: <task>``), ``input_size`` (default: the run's ``data.input_size``; none for a run without one),
``pool_mode`` (default ``normal``), ``analysis`` (default ``none``) and ``model_kwargs`` (model arguments the
evaluation changed from the run's config; default none).

Columns whose key names a *measure* of ``results.audit`` (``params``, ``params_m``, ``flops_g``,
``layers``, ...) are checked by ``depthbench verify``; the others (accuracies, AP, mIoU) are the paper's
results that ``results`` sets beside our runs. Numbers keep the precision they were printed with
(``86.70`` has two decimals): the loader records it, and verify accepts a value that rounds to the
printed one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.core.choices import PROTOCOLS
from harness.core.config_paths import config_named_by
from harness.core.errors import DepthbenchError
from harness.core.files import BadFile, read_yaml as read_bounded_yaml

TABLES_DIR = Path(__file__).resolve().parent / "tables"
ROW_FIELDS = {
    "name",
    "model",
    "model_kwargs",
    "input_size",
    "paper",
    "config",
    "reason",
    "unchecked",
    "note",
    "base",
    "flops_model_kwargs",
    "eval",
    "evals",
}
SELECTOR_KEYS = {"dataset", "metric", "input_size", "pool_mode", "analysis", "model_kwargs"}
EVAL_DATASETS = set(PROTOCOLS)  # depthbench eval --dataset choices
TABLE_FIELDS = {"id", "caption", "columns", "defaults", "rows", "note"}


class TableError(DepthbenchError):
    """A malformed tables file, an unknown paper or table; the message names the file and the place."""


class PrintedNumber(float):
    """A float that remembers how many decimals the paper printed."""

    decimals: int
    text: str

    def __new__(cls, text: str):
        text = str(text)  # copy/pickle rebuild from __getnewargs__ (the text); a plain number also works
        self = super().__new__(cls, text)
        self.text = text
        mantissa = text.lower().split("e")[0]
        self.decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
        return self

    def __getnewargs__(self):  # copy.deepcopy (dataclasses.asdict) and pickle rebuild from the printed text
        return (self.text,)


class _Loader(yaml.SafeLoader):
    pass


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    text = loader.construct_scalar(node).replace("_", "")
    if text.lower().lstrip("+-") in (".inf", ".nan"):
        return float(text.replace(".", ""))
    return PrintedNumber(text)


_Loader.add_constructor("tag:yaml.org,2002:float", _construct_float)


def read_yaml(path: Path, error: type[Exception], what: str):
    """The document of the YAML file ``path`` (floats as printed: :class:`_Loader`); a missing or malformed file
    raises ``error`` naming it (``what``: e.g. "tables file"), and so does one that is a link's target outside
    depthbench's reach, a FIFO, huge or nested deeper than a table needs (harness.core.files)."""
    try:
        return read_bounded_yaml(path, expect=None, loader=_Loader, what=what)
    except FileNotFoundError:
        raise error(f"{path}: no such {what}") from None
    except BadFile as e:
        raise error(str(e)) from None


@dataclass
class Row:
    table: str
    name: str
    model: str | None = None
    model_kwargs: dict = field(default_factory=dict)
    input_size: Any = 224
    paper: dict = field(default_factory=dict)
    config: Any = None
    reason: str | None = None
    unchecked: dict = field(default_factory=dict)
    note: str | None = None
    base: str | None = None
    flops_model_kwargs: dict = field(default_factory=dict)
    eval: dict = field(default_factory=dict)
    evals: dict = field(default_factory=dict)
    paper_id: str = ""  # the paper whose table holds the row (``paper`` holds its printed numbers)


@dataclass
class Table:
    paper: str
    id: str
    caption: str
    columns: dict
    rows: list[Row]


def load(path: str | Path) -> list[Table]:
    """Load and validate one ``<paper>.yaml``; raises TableError with file and row on any problem."""
    path = Path(path)
    doc = read_yaml(path, TableError, "tables file")
    if not isinstance(doc, dict) or not isinstance(doc.get("tables"), list):
        raise TableError(f"{path}: expected a mapping with 'paper', 'title' and a 'tables' list")
    paper = doc.get("paper") or path.stem
    tables = []
    for i, t in enumerate(doc["tables"]):
        where = f"{path}: table #{i + 1}"
        if not isinstance(t, dict) or "id" not in t or "rows" not in t:
            raise TableError(f"{where}: each table needs 'id', 'caption', 'columns' and 'rows'")
        extra = set(t) - TABLE_FIELDS
        if extra:
            raise TableError(
                f"{where} (id {t['id']}): unknown field(s) {sorted(extra)}; allowed: {sorted(TABLE_FIELDS)}"
            )
        columns = t.get("columns") or {}
        defaults = t.get("defaults") or {}
        rows = []
        for j, r in enumerate(t["rows"]):
            rwhere = f"{path}: table {t['id']} row #{j + 1}"
            if not isinstance(r, dict) or "name" not in r:
                raise TableError(f"{rwhere}: each row needs a 'name'")
            r = {**defaults, **r}
            extra = set(r) - ROW_FIELDS
            if extra:
                raise TableError(
                    f"{rwhere} ({r['name']}): unknown field(s) {sorted(extra)}; allowed: {sorted(ROW_FIELDS)}"
                )
            unknown_cols = set(r.get("paper") or {}) - set(columns)
            if unknown_cols:
                raise TableError(
                    f"{rwhere} ({r['name']}): paper value(s) for undeclared column(s) {sorted(unknown_cols)}"
                )
            _check_selectors(r, columns, f"{rwhere} ({r['name']})")
            if r.get("config") is not None:  # data names no code: only a config inside configs/
                r["config"] = config_named_by(r["config"], f"{rwhere} ({r['name']})", TableError)
            rows.append(
                Row(
                    table=str(t["id"]), paper_id=paper, **{k: v for k, v in r.items() if v is not None or k == "reason"}
                )
            )
        tables.append(Table(paper=paper, id=str(t["id"]), caption=t.get("caption", ""), columns=columns, rows=rows))
    return tables


def _check_selectors(row: dict, columns: dict, where: str) -> None:
    evals, shared = row.get("evals") or {}, row.get("eval") or {}
    if not isinstance(evals, dict) or not isinstance(shared, dict):
        raise TableError(f"{where}: 'evals' maps columns to selectors and 'eval' is one selector (mappings)")
    undeclared = set(evals) - set(columns)
    if undeclared:
        raise TableError(f"{where}: evals for undeclared column(s) {sorted(undeclared)}")
    for column, selector in [(None, shared)] + list(evals.items()):
        selector = selector or {}
        place = f"{where}: eval" + (f"s.{column}" if column else "")
        if not isinstance(selector, dict) or set(selector) - SELECTOR_KEYS:
            bad = sorted(set(selector) - SELECTOR_KEYS) if isinstance(selector, dict) else selector
            raise TableError(f"{place}: unknown selector key(s) {bad}; allowed: {sorted(SELECTOR_KEYS)}")
        dataset = selector.get("dataset", "val")
        # the image protocols are checked by name (a typo fills nothing); other names are lm-eval tasks (the
        # dataset field of `depthbench eval --dataset lm-eval` records, harness/tasks/lm_eval.py)
        if not isinstance(dataset, str) or (dataset.startswith("imagenet") and dataset not in EVAL_DATASETS):
            raise TableError(
                f"{place}: dataset {dataset!r} is not a depthbench eval protocol "
                f"({', '.join(sorted(EVAL_DATASETS))}) or lm-eval task"
            )
        if "model_kwargs" in selector and not isinstance(selector["model_kwargs"], dict):
            raise TableError(f"{place}: model_kwargs must be a mapping")


def available_papers() -> list[str]:
    return sorted(p.stem for p in TABLES_DIR.glob("*.yaml"))


def load_paper(paper: str) -> list[Table]:
    path = TABLES_DIR / f"{paper}.yaml"
    if not path.exists():
        raise TableError(f"no tables for paper {paper!r}; known: {', '.join(available_papers()) or 'none'}")
    return load(path)
