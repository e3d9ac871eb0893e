"""Collect run directories (the contract of ``harness/core/rundir.py``) into one pandas DataFrame.

One row per run, whatever its status: ``running``, ``failed`` and ``preempted`` runs are kept and flagged, never
dropped. What a run is comes from its own files only:

- ``meta.json``: status, experiment, run id, start/end, git commit, Slurm fields, ``config_file``, ``command``
  (its ``key=value`` overrides) and ``scale`` (a reduced-scale run's label, e.g. "embedded digits 16px, 20 epochs";
  a ``depthbench test`` run (``mode`` test) is labelled by the checkpoint it tested: :func:`test_label`);
  ``model``/``model_kwargs``/``task`` when the writer records them (downstream runs);
- ``config.py`` (the resolved config): ``model`` (name + kwargs), ``epochs``, ``seed``, ``optim.lr``, ``data``;
- ``metrics.jsonl``: the ``{"kind": "eval", ...}`` records (top1/top5/loss for pretraining; bbox_mAP/segm_mAP/
  mIoU/mAcc for downstream, mmengine's ``coco/`` prefixes dropped) and ``depthbench test``'s ``{"kind": "test"}``
  ones (a test run's metrics), reduced per run by ``best``/``last``/``mean``;
  and ``depthbench eval``'s ``{"kind": "eval_suite", ...}`` rows (robustness sets, ImageNet-C, other input sizes,
  pool modes, StepsNet analyses), kept in the ``suite`` column as ``{suite_key(...): value}``, the newest record
  of each key winning (re-evaluating replaces a number; ``--reduce`` is about training evaluations only).

Problems (a garbage metrics line, a directory without meta.json, the same run twice, ...) never stop the
collection: each is recorded once in :class:`Problems` and the other runs are kept.

Speed: 10,000 run directories take ~6 s of CPU time to collect (benchmarks/results_aggregate.py; README, Results),
split over one process per CPU from PARALLEL_MIN_RUNS directories on. That is why
config.py is not executed (MMEngine's Config.fromfile takes ~20 ms a file): only the few top-level
assignments we need are parsed, and only the eval lines of metrics.jsonl are decoded (eval_suite lines only in
the files that have any, found by one substring search).
"""

from __future__ import annotations

import ast
import difflib
import json
import math
import multiprocessing
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pandas as pd
import timm

import models  # noqa: F401  (registers the paper models with timm)
from harness.core.files import MAX_LOG_BYTES, BadFile, loads_json, printable, read_text
from harness.core.rundir import STATUSES

REPO = Path(__file__).resolve().parent.parent
# old model name -> current name: add an entry when a registered model is renamed, so its old runs still match
MODEL_RENAMES: dict[str, str] = {}
RUN_FILES = ("meta.json", "metrics.jsonl", "config.py")
CONFIG_KEYS = ("_base_", "model", "epochs", "seed", "optim", "data", "experiment")
# eval metrics whose higher value is worse (everything else: higher is better)
LOWER_IS_BETTER = {"loss", "ppl", "mce"}
# mmdet's CocoMetric logs AP as a fraction; the papers print percent
FRACTION_METRICS = re.compile(r"^(bbox|segm)_mAP(_\w+)?$")
PRIMARY_METRICS = ("top1", "bbox_mAP", "mIoU", "ppl")
MEAN_LAST = 5  # --reduce mean: the mean of a run's last 5 evaluations
EVAL_KINDS = ("eval", "test")  # metrics.jsonl records that hold a run's evaluation (test: depthbench test's)
# overrides that do not change what a run measures (paths, logging, engine); any other override marks the run
# as not at the paper's setting
NEUTRAL_OVERRIDES = re.compile(
    r"^(seed|experiment|deterministic|engine|precision|log_interval|eval_interval|"
    r"log\..*|ckpt\..*|deepspeed\..*|data\.(root|path|workers|num_workers|shards).*)$"
)


@dataclass
class Problems:
    """What went wrong while collecting, one entry per (run, problem); printed as one summary."""

    items: list = field(default_factory=list)

    def add(self, path, message: str) -> None:
        entry = (str(path), message)
        if entry not in self.items:
            self.items.append(entry)

    def __len__(self) -> int:
        return len(self.items)

    def summary(self) -> str:
        if not self.items:
            return "no problems found in the run directories"
        by_message = {}
        for path, message in self.items:
            by_message.setdefault(message, []).append(path)
        lines = [f"{len(self.items)} problem(s) in the run directories (the other runs are all used):"]
        for message, paths in by_message.items():
            where = paths[0] if len(paths) == 1 else f"{len(paths)} runs ({paths[0]}, ...)"
            lines.append(printable(f"  {where}: {message}"))  # names and messages come from the runs' files
        return "\n".join(lines)


def find_run_dirs(roots) -> list[Path]:
    """Run directories under each root: the root itself, ``<root>/<run>`` or ``<root>/<experiment>/<run>``."""
    found = []
    for root in roots:
        root = Path(os.path.realpath(root))
        if not root.is_dir():
            continue
        if _is_run_dir(root):
            found.append(root)
            continue
        for child in _subdirs(root):
            if _is_run_dir(child):
                found.append(child)
            else:
                found += [grand for grand in _subdirs(child) if _is_run_dir(grand)]
    return found


def _subdirs(path: Path) -> list[Path]:
    try:
        with os.scandir(path) as it:
            # a linked folder is not followed: it could lead out of the runs root, or in a circle
            return sorted(Path(e.path) for e in it if e.is_dir(follow_symlinks=False) and not e.name.startswith("."))
    except OSError:
        return []


def _is_run_dir(path: Path) -> bool:
    return any(os.path.lexists(os.path.join(path, name)) for name in RUN_FILES)


def read_config_fields(text: str) -> dict:
    """The top-level ``model``/``epochs``/``seed``/``optim``/``data``/``_base_`` assignments of a resolved config,
    as Python values (``dict(...)`` calls included), without executing the file."""
    statements, current = {}, None
    for line in text.splitlines():
        m = _ASSIGNMENT.match(line)
        if m:
            current = m.group(1) if m.group(1) in CONFIG_KEYS else None
            if current:
                statements[current] = [line]
        elif current and line[:1] in (" ", "\t", ")", "]", "}"):
            statements[current].append(line)
        else:
            current = None
    values = {}
    for key, lines in statements.items():
        value = _statement_value("\n".join(lines))
        if value is not _UNPARSABLE:
            values[key] = value
    return values


_UNPARSABLE = object()


@lru_cache(maxsize=4096)
def _statement_value(source: str):
    """One ``key = <literal or dict(...)>`` statement's value; cached: runs of one recipe repeat the same lines."""
    try:
        return _literal(ast.parse(source).body[0].value)
    except (SyntaxError, ValueError, IndexError, AttributeError, TypeError, RecursionError, MemoryError):
        return _UNPARSABLE


_ASSIGNMENT = re.compile(r"^([A-Za-z_]\w*)\s*=")


def _literal(node):
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        return {kw.arg: _literal(kw.value) for kw in node.keywords}
    if isinstance(node, ast.Name):  # a variable of an unresolved config (a resolved one has none): keep its name
        return f"<{node.id}>"
    return ast.literal_eval(node)


def _metric_name(key: str) -> str:
    return key.rsplit("/", 1)[-1]


def read_evals(path: Path, problems: Problems, reduce: str = "best") -> tuple[list[dict], int]:
    """The eval records ``reduce`` needs from a metrics.jsonl (normalised metric names, percent) and the number of
    evaluations; bad lines are reported and skipped."""
    records, n, _ = read_metrics(path, problems, reduce)
    return records, n


def read_metrics(path: Path, problems: Problems, reduce: str = "best") -> tuple[list[dict], int, dict]:
    """:func:`read_evals`'s records and count, plus the eval_suite values (:func:`read_suite`); the file is read
    once.

    Only the lines ``reduce`` needs are decoded (all of them for ``best``'s ranking would dominate the time of
    10,000 runs): the last (``last``), the last MEAN_LAST (``mean``), or, for ``best``, the primary metric of every
    eval line is read with a regular expression and the winning line alone is decoded.
    """
    try:
        text = read_text(path, inside=path.parent, what="metrics.jsonl", max_bytes=MAX_LOG_BYTES)
    except OSError as e:
        problems.add(path.parent, f"cannot read metrics.jsonl ({e.strerror})")
        return [], 0, {}
    except BadFile as e:
        problems.add(path.parent, f"metrics.jsonl unreadable ({_why(e)})")
        return [], 0, {}
    all_lines = text.split("\n")
    body = text.rstrip("\n")
    if not body or (body[0] == "{" and body[-1] == "}" and body.count("\n") == body.count("}\n{")):
        bad = []  # every line is {...}: the common case, checked at C speed
    else:
        bad = [i for i, line in enumerate(all_lines, 1) if line and (line[0] != "{" or line[-1] != "}")]
    lines = [line for line in all_lines if ('"eval"' in line or '"test"' in line) and line[-1:] == "}"]
    records, undecodable = [], 0
    for line in reversed(lines):  # newest first; the ones reduce() needs
        record = _decode_eval(line)
        if record is None:
            undecodable += 1
            continue
        records.insert(0, record)
        if reduce == "last" or (reduce == "mean" and len(records) == MEAN_LAST):
            break
        if reduce == "best":
            records = [_best_record(lines, record) or record]
            break
    suite = {}
    if '"eval_suite"' in text:
        suite, bad_suite = read_suite(text)
        undecodable += bad_suite
    if bad or undecodable:
        first = bad[0] if bad else None
        n = len(bad) + undecodable
        where = f"line {first}" if n == 1 and first else f"{n} lines" + (f" (first: {first})" if first else "")
        problems.add(path.parent, f"metrics.jsonl {where} not JSON (truncated or garbage); skipped, the rest is used")
    return records, len(lines), suite


def canonical_analysis(spec) -> str:
    """``depthbench eval --analysis`` spec in one spelling: parts sorted, ``none``/empty -> ``none``."""
    parts = sorted(p.strip().replace(" ", "") for p in str(spec or "none").split(",") if p.strip())
    parts = [p for p in parts if p != "none"]
    return ",".join(parts) or "none"


def suite_key(
    dataset="val", input_size=None, pool_mode=None, analysis="none", model_overrides=None, metric="top1"
) -> str:
    """The identity of one ``eval_suite`` number: what was evaluated (protocol, input size, TransNeXt pool mode,
    StepsNet analysis, model arguments changed at evaluation time) and which metric. No pool mode is TransNeXt's
    default, ``normal``."""
    size = int(input_size) if isinstance(input_size, (int, float)) and not isinstance(input_size, bool) else None
    overrides = json.dumps(model_overrides, sort_keys=True, default=str) if model_overrides else "{}"
    return _suite_key(
        str(dataset or "val"), size, str(pool_mode or "normal"), str(analysis or "none"), overrides, str(metric)
    )


@lru_cache(maxsize=65536)
def _suite_key(dataset: str, size, pool_mode: str, analysis: str, overrides: str, metric: str) -> str:
    """Cached: a results call builds the same few keys for every run (10,000 runs x ~20 evaluations)."""
    return "|".join((dataset, str(size), pool_mode, canonical_analysis(analysis), overrides, metric))


def _suite_lines(text: str):
    """The lines that name eval_suite, found with str.find (C speed: they are a few lines of a long file)."""
    pos = text.find('"eval_suite"')
    while pos != -1:
        start = text.rfind("\n", 0, pos) + 1
        end = text.find("\n", pos)
        end = len(text) if end == -1 else end
        yield text[start:end]
        pos = text.find('"eval_suite"', end)


def read_suite(text: str) -> tuple[dict, int]:
    """``{suite_key: value}`` of a metrics.jsonl's eval_suite lines (newest wins) and the number of them that
    are not JSON (a line cut short is not counted here: the caller's line check already has it); a record without
    a finite value is left out."""
    values, bad = {}, 0
    for line in _suite_lines(text):
        if line[:1] != "{" or line[-1:] != "}":
            continue
        try:
            r = load_json(line)
        except ValueError:
            bad += 1
            continue
        value = r.get("value") if isinstance(r, dict) and r.get("kind") == "eval_suite" else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            key = suite_key(
                r.get("dataset", r.get("protocol")),
                r.get("input_size"),
                r.get("pool_mode"),
                r.get("analysis"),
                r.get("model_overrides"),
                r.get("metric"),
            )
            values[key] = float(value)
    return values, bad


def _decode_eval(line: str) -> dict | None:
    try:
        record = load_json(line)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("kind", record.get("type")) not in EVAL_KINDS:
        return None
    return {
        _metric_name(k): _percent(_metric_name(k), v)
        for k, v in record.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def _best_record(lines: list[str], last: dict) -> dict | None:
    """The eval line whose primary metric (the first of PRIMARY_METRICS the run logs) is best, decoded."""
    primary = next((m for m in PRIMARY_METRICS if m in last), None)
    if primary is None:
        return None
    value = re.compile(r'"(?:[^"]*/)?' + re.escape(primary) + r'":\s*(-?[0-9.eE+-]+|NaN|-?Infinity)')
    sign = -1.0 if primary in LOWER_IS_BETTER else 1.0
    best, best_line = None, None
    for line in lines:
        m = value.search(line)
        if not m:
            continue
        try:
            v = sign * float(m.group(1))
        except ValueError:
            continue
        if v == v and (best is None or v > best):  # NaN never wins
            best, best_line = v, line
    return _decode_eval(best_line) if best_line else None


def _percent(name: str, value):
    return 100.0 * value if FRACTION_METRICS.match(name) and 0 <= value <= 1 else value


def reduce_evals(evals: list[dict], how: str) -> dict:
    """One value per metric from a run's evaluations: the ``best`` record (by its primary metric), the ``last``,
    or the ``mean`` of the last MEAN_LAST."""
    if not evals:
        return {}
    if how == "last":
        return dict(evals[-1])
    if how == "mean":
        tail = evals[-MEAN_LAST:]
        keys = {k for r in tail for k in r}
        return {k: sum(r[k] for r in tail if k in r) / sum(k in r for r in tail) for k in keys}
    if how == "best":
        primary = next((m for m in PRIMARY_METRICS if any(m in r for r in evals)), None)
        if primary is None:
            return dict(evals[-1])
        sign = -1 if primary in LOWER_IS_BETTER else 1
        return dict(max((r for r in evals if primary in r), key=lambda r: sign * r[primary]))
    raise ValueError(f"reduce must be best, last or mean, not {how!r}")


def overrides_of(command: str | None) -> list[str]:
    """The ``key=value`` overrides of the command line a run was started with."""
    if not command:
        return []
    return [
        tok
        for tok in command.split()
        if "=" in tok and not tok.startswith("-") and re.match(r"^\+?[A-Za-z_][\w.]*=", tok)
    ]


def normalise_config(path: str | None) -> str | None:
    """A config path relative to the repository (as tables write it), whatever the run's working directory."""
    if not path:
        return None
    p = Path(os.path.normpath(path))
    if p.is_absolute():
        try:
            return str(p.relative_to(REPO))
        except ValueError:  # another checkout (a cluster's): from its configs/ folder on
            parts = p.parts
            if "configs" in parts:
                return str(Path(*parts[len(parts) - 1 - parts[::-1].index("configs") :]))
            return str(p)
    return str(p)


# what a JSON file of a run may hold; anything else (a 5,000-digit number, 1,000 nested lists) is refused
JSON_ERRORS = (ValueError, RecursionError, TypeError)


def load_json(text: str):
    """``json.loads`` that turns every way a hostile or corrupt file can fail into ValueError."""
    try:
        return loads_json(text, expect=None)
    except BadFile as e:
        raise ValueError(_why(e)) from None


def _why(error: BadFile) -> str:
    """A BadFile's reason without the file's name (the problem list names the run)."""
    return str(error).split(" is ", 1)[-1][:100]


def _text(value) -> str | None:
    """A field that must be text (a name, a path, a command): anything else counts as missing."""
    return value if isinstance(value, str) else None


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def read_run(path: Path, problems: Problems, reduce: str = "best") -> dict:
    """One run directory as a flat record (never raises: problems are recorded, and a run whose files cannot be
    read at all is kept as an ``unknown`` record)."""
    try:
        return _read_run(path, problems, reduce)
    except Exception as e:  # a file shaped in a way nothing above foresaw: this run is a problem, the others count
        problems.add(path, f"unreadable run ({type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''})")
        return {"path": str(path), "experiment": path.parent.name, "run_id": path.name, "status": "unknown"}


def _read_run(path: Path, problems: Problems, reduce: str) -> dict:
    record = {"path": str(path), "experiment": path.parent.name, "run_id": path.name, "status": "unknown"}
    meta = {}
    meta_file = path / "meta.json"
    try:
        meta = load_json(read_text(meta_file, inside=path, what="meta.json"))
        if not isinstance(meta, dict):
            raise ValueError("not an object")
    except BadFile as e:
        meta = {}
        problems.add(path, f"meta.json unreadable ({_why(e)}); status unknown")
    except FileNotFoundError:
        problems.add(path, "no meta.json (not written by depthbench, or copied incompletely); status unknown")
    except (ValueError, OSError) as e:
        meta = {}
        problems.add(path, f"meta.json unreadable ({str(e).splitlines()[0][:80]}); status unknown")
    wrong = [
        k
        for k in (
            "experiment",
            "run_id",
            "status",
            "model",
            "config_file",
            "command",
            "scale",
            "task",
            "mode",
            "checkpoint",
            "tested_run",
        )
        if meta.get(k) is not None and not isinstance(meta[k], str)
    ]
    if wrong:
        problems.add(path, f"meta.json fields of the wrong type ({', '.join(wrong)}: not text); ignored")
    status = _text(meta.get("status")) or "unknown"
    record.update(
        experiment=_text(meta.get("experiment")) or record["experiment"],
        run_id=_text(meta.get("run_id")) or path.name,
        status=status if status in STATUSES else "unknown",
        start=_text(meta.get("start")),
        end=_text(meta.get("end")),
        git_commit=_text(meta.get("git_commit")),
        engine=_text(meta.get("engine")),
        world_size=_number(meta.get("world_size")),
        slurm_job_id=_text(meta.get("slurm_job_id")),
        slurm_array_task_id=_text(meta.get("slurm_array_task_id")),
        slurm_restart_count=_number(meta.get("slurm_restart_count")),
        scale=test_label(meta) if meta.get("mode") == "test" else _text(meta.get("scale")),
        task=_text(meta.get("task")),
        config_file=normalise_config(_text(meta.get("config_file"))),
        overrides=" ".join(overrides_of(_text(meta.get("command")))),
        config_changes=config_changes_text(meta.get("config_changes")),
    )
    cfg = {}
    config_file = path / "config.py"
    if os.path.lexists(config_file):
        try:
            cfg = read_config_fields(read_text(config_file, inside=path, what="config.py"))
        except (OSError, BadFile):
            problems.add(path, "config.py unreadable (not a regular file of the run, or not readable)")
    config_name, config_kwargs = model_identity(cfg.get("model"))
    name = _text(meta.get("model")) or config_name
    kwargs = meta.get("model_kwargs")
    if not isinstance(kwargs, dict):
        kwargs = config_kwargs
    if not record["config_file"]:  # runs name their experiment after the config by default
        record["config_file"] = config_by_stem().get(record["experiment"])
    record.update(
        model=name,
        model_kwargs=json.dumps(kwargs, sort_keys=True, default=str),
        epochs=_number(cfg.get("epochs", meta.get("epochs"))),
        seed=_number(cfg.get("seed", meta.get("seed"))),
        lr=_number(cfg["optim"].get("lr")) if isinstance(cfg.get("optim"), dict) else None,
        dataset=_dataset(cfg.get("data")),
        input_size=_input_size(cfg.get("data")),
    )
    if not name and status != "unknown" and not record["experiment"].startswith("diagnose"):
        problems.add(path, "no model name in meta.json or config.py; the run cannot be matched to a table row")
    metrics_file = path / "metrics.jsonl"
    evals, n_evals, suite = read_metrics(metrics_file, problems, reduce) if metrics_file.exists() else ([], 0, {})
    record["n_evals"] = n_evals
    record["suite"] = suite or None
    values = reduce_evals(evals, reduce)
    values.pop("global_step", None)
    values.pop("images", None)
    if "epoch" in values:
        record["eval_epoch"] = values.pop("epoch")
    record.update({f"metric.{k}": v for k, v in values.items() if isinstance(v, (int, float)) and math.isfinite(v)})
    return record


def config_changes_text(changes) -> str | None:
    """meta.json's ``config_changes`` (keys a resume changed, allowed with ``--allow-changes``) as one line, e.g.
    "epochs 4 -> 2"; None when the run kept its config."""
    if not isinstance(changes, list):
        return None
    text = "; ".join(
        printable(f"{c.get('key')} {c.get('old')!r} -> {c.get('new')!r}") for c in changes if isinstance(c, dict)
    )
    return text or None


def test_label(meta: dict) -> str:
    """A ``depthbench test`` run's label: the checkpoint it tested (``<run>/<file>``) and that run's setting (the
    ``scale`` the test recorded from it), e.g. "test of 20261127-101500/last.pth: embedded coco-shapes 128px, 40
    iterations". Always a label, so a test is never taken for a run at the paper's setting or for another seed of
    the fine-tune it tested."""
    checkpoint, run = _text(meta.get("checkpoint")), _text(meta.get("tested_run"))
    name = Path(checkpoint).name if checkpoint else "a checkpoint"
    where = f"{Path(run).name}/{name}" if run else (checkpoint or name)
    scale = _text(meta.get("scale"))
    return f"test of {where}" + (" with TTA" if meta.get("tta") is True else "") + (f": {scale}" if scale else "")


def model_identity(model) -> tuple[str | None, dict]:
    """(timm model name, its kwargs) of a config's ``model`` dict: a pretraining config's ``name`` and the other
    keys, or a downstream (mmdet/mmseg) config's backbone — downstream's ``DepthbenchBackbone(model_name=...,
    model_kwargs=...)``, or a stock backbone's ``type``."""
    if not isinstance(model, dict):
        return None, {}
    backbone = model.get("backbone")
    if isinstance(backbone, dict):
        kwargs = backbone.get("model_kwargs")
        return backbone.get("model_name") or backbone.get("type"), kwargs if isinstance(kwargs, dict) else {}
    return model.get("name"), {
        k: v for k, v in model.items() if k not in ("name", "pretrained", "type", "expand", "grow")
    }


@lru_cache(maxsize=1)
def config_by_stem() -> dict:
    """Config file stem -> path under configs/ (stems that occur once)."""
    found = {}
    for path in sorted((REPO / "configs").rglob("*.py")):
        found.setdefault(path.stem, []).append(str(path.relative_to(REPO)))
    return {stem: paths[0] for stem, paths in found.items() if len(paths) == 1 and not stem.startswith("_")}


def _dataset(data) -> str | None:
    if not isinstance(data, dict):
        return None
    name = data.get("dataset") or data.get("name") or data.get("type")
    size = data.get("input_size")
    return f"{name} {size}px" if name and size else name


def _input_size(data) -> int | None:
    """The training resolution (``data.input_size``): eval_suite numbers default to it."""
    size = data.get("input_size") if isinstance(data, dict) else None
    if isinstance(size, (list, tuple)) and size:
        size = size[-1]
    return int(size) if isinstance(size, (int, float)) and not isinstance(size, bool) else None


PARALLEL_MIN_RUNS = 2000  # below this, starting processes costs more than it saves


def read_runs(paths: list[Path], problems: Problems, reduce: str = "best", workers: int | None = None) -> list[dict]:
    """:func:`read_run` of every path, in order. From PARALLEL_MIN_RUNS run directories on (or with ``workers``
    > 1), split over one process per CPU (forkserver): the work is file reads and small parses, one core's worth per
    process, and a shared machine gives each process its own share of the CPUs."""
    if workers is None:
        workers = min(os.cpu_count() or 1, 8) if len(paths) >= PARALLEL_MIN_RUNS else 1
    if workers <= 1 or len(paths) < 2 or "forkserver" not in multiprocessing.get_all_start_methods():
        return [read_run(path, problems, reduce) for path in paths]
    size = -(-len(paths) // (4 * workers))  # contiguous chunks keep the order; 4 a worker even out the load
    chunks = [(paths[i : i + size], reduce) for i in range(0, len(paths), size)]
    # forkserver, not fork: forking a process that already runs threads (torch's, a tokenizer's) can deadlock the
    # child on a lock some thread held (it hung the test suite); the server starts clean and forks from there
    with multiprocessing.get_context("forkserver").Pool(workers) as pool:
        parts = pool.map(_read_chunk, chunks)
    records = []
    for chunk_records, chunk_problems in parts:
        records += chunk_records
        for path, message in chunk_problems:
            problems.add(path, message)
    return records


def _read_chunk(job) -> tuple[list[dict], list]:
    paths, reduce = job
    problems = Problems()
    return [read_run(path, problems, reduce) for path in paths], problems.items


def collect(
    roots, reduce: str = "best", problems: Problems | None = None, workers: int | None = None
) -> tuple[pd.DataFrame, Problems]:
    """All runs under ``roots`` as one DataFrame (one row per run) and the problems met (``workers``: see
    :func:`read_runs`)."""
    problems = problems if problems is not None else Problems()
    if reduce not in ("best", "last", "mean"):
        raise ValueError(f"reduce must be best, last or mean, not {reduce!r}")
    paths = list(dict.fromkeys(find_run_dirs(roots)))  # a directory reached twice (overlapping --runs) once
    seen_ids, records = {}, []
    for path, record in zip(paths, read_runs(paths, problems, reduce, workers)):
        identity = (record["experiment"], record["run_id"], record["start"])
        if record["start"] and identity in seen_ids:
            problems.add(path, f"duplicate of {seen_ids[identity]} (same experiment, run id and start); counted once")
            continue
        seen_ids[identity] = str(path)
        records.append(record)
    frame = pd.DataFrame.from_records(records)
    if frame.empty:
        frame = pd.DataFrame(
            columns=[
                "path",
                "experiment",
                "run_id",
                "status",
                "model",
                "model_kwargs",
                "config_file",
                "scale",
                "overrides",
                "seed",
                "epochs",
            ]
        )
    return frame, problems


def metric_columns(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if c.startswith("metric.")]


def load_curves(path: str | Path) -> pd.DataFrame:
    """Every record of one run's metrics.jsonl (training curves); bad lines skipped."""
    rows = []
    try:
        text = read_text(Path(path, "metrics.jsonl"), inside=path, what="metrics.jsonl", max_bytes=MAX_LOG_BYTES)
    except (OSError, BadFile):
        return pd.DataFrame()
    for line in text.splitlines():
        try:
            record = load_json(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            rows.append(
                {
                    _metric_name(k): (
                        _percent(_metric_name(k), v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
                    )
                    for k, v in record.items()
                }
            )
    return pd.DataFrame(rows)


def check_runs(frame: pd.DataFrame, problems: Problems, renames: dict | None = None) -> None:
    """Report runs whose config file no longer exists or whose model is no longer registered (renamed?)."""
    if frame.empty:
        return

    renames = MODEL_RENAMES if renames is None else renames
    missing_configs = {
        c for c in frame["config_file"].dropna().unique() if not (REPO / c).is_file() and not Path(c).is_file()
    }
    names = [m for m in frame["model"].dropna().unique() if isinstance(m, str)]
    unknown = {m for m in names if m not in renames and not timm.is_model(m)}
    registered = timm.list_models() if unknown else []
    for record in frame[["path", "config_file", "model"]].itertuples(index=False):
        if record.config_file in missing_configs:
            problems.add(record.path, f"its config {record.config_file} no longer exists; matched by model name only")
        if record.model in unknown:
            close = difflib.get_close_matches(record.model, registered, n=1)
            hint = f" (closest now: {close[0]}; add it to results.runs.MODEL_RENAMES)" if close else ""
            problems.add(
                record.path,
                f"model {record.model} is not registered any more (renamed?){hint}; "
                "the run is kept but matched by config only",
            )
        elif record.model in renames:
            problems.add(record.path, f"model {record.model} was renamed to {renames[record.model]}; matched as such")
