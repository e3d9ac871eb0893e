"""The work behind ``depthbench eval`` (harness/commands/eval.py parses the command line and prints the rows):
trained weights evaluated on the validation set, an ImageNet protocol (harness/tasks/protocols.py) or zero-shot
lm-eval tasks (harness/tasks/lm_eval.py), every input checked before a model is built, the rows appended to the
run directory as ``eval_suite`` records -- the records ``depthbench results`` reads into the paper tables' cells
(a record says which: dataset, input size, pool mode, analysis, model overrides) -- and, if asked, written as CSV.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import pandas as pd

from harness.core.errors import DepthbenchError
from harness.core.files import BadFile, atomic_write, check_writable_file, read_text, unwritable_file
from harness.core.rundir import RunDir, checkpoint_run, read_config_json, unlock_run_dir
from harness.engine.launch import distributed_env
from harness.tasks import protocols
from harness.tasks.lm_eval import run_lm_eval
from results.paper_tables import load_paper
from results.runs import read_config_fields


class EvalResult(list):
    """One ``depthbench eval``: the list of its ``eval_suite`` rows (records, as appended to the run directory if
    there is one: ``{"dataset", "metric", "value", "input_size", ...}``), with ``metrics``: the plain validation-set
    evaluation's ``{"top1", "top5", "loss", "images", "model", "input_size", ...}`` (None otherwise); ``kind``:
    plain, suite or lm-eval; ``is_main``: this process reports (a launcher's other ranks have no rows); ``out``:
    the CSV written, if any; ``recorded``: the run directory the rows were appended to, if any."""

    def __init__(
        self,
        rows=(),
        metrics: dict | None = None,
        kind: str = "suite",
        is_main: bool = True,
        out: Path | None = None,
        recorded: Path | None = None,
    ):
        super().__init__(rows)
        self.metrics, self.kind, self.is_main, self.out, self.recorded = metrics, kind, is_main, out, recorded

    @property
    def rows(self) -> list[dict]:
        return list(self)

    def __repr__(self) -> str:
        return (
            f"EvalResult(kind={self.kind!r}, rows={list.__repr__(self)}, metrics={self.metrics!r}, "
            f"is_main={self.is_main!r}, out={self.out!r})"
        )


def evaluate(
    config: str | Path,
    checkpoint: str | Path,
    *,
    overrides=(),
    ema: bool = False,
    dataset: str = "val",
    tasks=None,
    data=None,
    input_size=None,
    pool_mode=None,
    analysis=None,
    real_labels=None,
    corrupt_from=None,
    out=None,
    out_run=None,
) -> EvalResult:
    """``depthbench eval`` of ``checkpoint`` under ``config``: the command's ``run`` (harness/commands/eval.py)
    documents every argument. Bad input raises :class:`DepthbenchError` before any model is built."""
    sizes, pool_modes, analyses, tasks = (_as_list(v) for v in (input_size, pool_mode, analysis, tasks))
    out = _check_out(out)
    if dataset == "lm-eval":  # language-model tasks through EleutherAI's harness
        given = [
            ("--input-size", sizes),
            ("--pool-mode", pool_modes),
            ("--analysis", analyses),
            ("--data", data),
            ("--real-labels", real_labels),
            ("--corrupt-from", corrupt_from),
            ("--ema", ema),
        ]
        with _recording(checkpoint, out_run) as record:
            rows = run_lm_eval(
                config,
                checkpoint,
                table=table_x(),
                overrides=overrides,
                tasks=tasks,
                record_into=record,
                image_options=[flag for flag, value in given if value],
            )
            recorded = record.path if record is not None and rows else None
        return EvalResult(rows, kind="lm-eval", out=_write_csv(out, rows), recorded=recorded)
    if tasks:
        raise DepthbenchError("--tasks belongs to --dataset lm-eval")
    if dataset not in protocols.PROTOCOLS:
        raise DepthbenchError(f"--dataset {dataset!r} is not one of {', '.join((*protocols.PROTOCOLS, 'lm-eval'))}")
    plain = (
        dataset == "val"
        and not pool_modes
        and not analyses
        and not out
        and not out_run
        and len(sizes or [None]) == 1
        and not data
        and not real_labels
        and not corrupt_from
    )
    source = Path(checkpoint).expanduser()
    checkpoint_model = run_model_config(checkpoint_run(source) if source.exists() else None)
    with _recording(checkpoint, out_run) as record:
        trained = run_model_config(record.path) if record is not None else checkpoint_model
        if plain:  # the validation set at one size: the engine's distributed evaluation (loss included)
            metrics = protocols.evaluate_checkpoint(
                config, checkpoint, overrides=overrides, ema=ema, input_size=(sizes or [None])[0]
            )
            is_main = metrics.pop("is_main")
            rows = (
                protocols.record_plain(
                    config, checkpoint, metrics, overrides=overrides, ema=ema, record_into=record, trained_model=trained
                )
                if is_main
                else []
            )
            recorded = record.path if record is not None and rows else None
            return EvalResult(rows, metrics, kind="plain", is_main=is_main, recorded=recorded)
        rows = protocols.evaluate_suite(
            config,
            checkpoint,
            overrides=overrides,
            ema=ema,
            protocol=dataset,
            data=data,
            input_sizes=sizes,
            pool_modes=pool_modes,
            analyses=analyses,
            real_labels=real_labels,
            corrupt_from=corrupt_from,
            record_into=record,
            trained_model=trained,
            checkpoint_model=checkpoint_model,
        )
        recorded = record.path if record is not None and rows else None
    return EvalResult(rows, kind="suite", out=_write_csv(out, rows), recorded=recorded)


def run_model_config(run: Path | None) -> dict | None:
    """The ``model`` section of a run's resolved config, read as data and never executed: its ``config.json``, else
    (runs from before config.json) its ``config.py`` parsed statically (:func:`results.runs.read_config_fields`);
    None when there is no run or neither gives a model (comparisons with the run are then skipped)."""
    if run is None:
        return None
    resolved = read_config_json(run)
    if resolved is None and (Path(run) / "config.py").is_file():
        try:
            resolved = read_config_fields(read_text(Path(run) / "config.py", inside=run, what="config.py"))
        except (OSError, RecursionError, MemoryError, BadFile):
            resolved = None
    model = (resolved or {}).get("model")
    return model if isinstance(model, dict) else None


@contextmanager
def _recording(checkpoint, out_run):
    """The run directory the rows are appended to -- ``out_run``, else the checkpoint's run -- held as its one
    writer (harness/core/rundir.py) for the whole evaluation, so a run another process is writing (still training)
    is one line before any work. A checkpoint's run this process cannot write is not an error: the rows are printed
    (and written to ``--out``), and a note says so before the evaluation starts. None when there is no run to
    record into, and on the other ranks of a launched evaluation."""
    path = None
    if out_run:
        path = Path(out_run).expanduser()
        if not (path / "meta.json").is_file():
            raise DepthbenchError(f"--out-run {out_run} is not a run directory (no meta.json)")
        problem = _unwritable(path)
        if problem:
            raise DepthbenchError(f"--out-run {out_run}: {problem}; give a run directory you can write")
    else:
        source = Path(checkpoint).expanduser()
        path = checkpoint_run(source) if source.exists() else None
        problem = _unwritable(path) if path is not None else None
        if problem:
            print(
                f"depthbench eval: note: {path}: {problem}; the rows are printed here and not recorded in the run "
                f"(--out-run DIR records them in another run, --out FILE.csv writes them)",
                file=sys.stderr,
                flush=True,
            )
            path = None
    if path is None or distributed_env()["RANK"] != "0":
        yield None
        return
    run = RunDir.open(path)  # the lock: "in use by pid ..." when the run is being written
    try:
        yield run
    finally:
        unlock_run_dir(path)


def _unwritable(run: Path) -> str | None:
    """Why rows cannot be appended to ``run``'s metrics.jsonl, or None."""
    metrics = run / "metrics.jsonl"
    if metrics.is_symlink():
        return "its metrics.jsonl is a symbolic link (records are never written through one)"
    return unwritable_file(metrics)


def _check_out(out) -> Path | None:
    """``--out``: a CSV file that can be written (missing folders are created); checked before any work."""
    if not out:
        return None
    return check_writable_file(out, "--out", "the CSV (e.g. eval.csv)")


@lru_cache(maxsize=1)
def table_x() -> dict[str, tuple[str, str]]:
    """ScaleNet Table X's tasks, ``{lm-eval task: (metric, table column)}``, from the table's one definition
    (results/tables/scalenet.yaml: the evals of its first row; the metrics are the spec's, §2.9). Read once: the
    YAML holds all of ScaleNet's tables. Callers only read the mapping."""
    table = next(t for t in load_paper("scalenet") if t.id == "X")
    return {
        sel["dataset"]: (sel["metric"], column)
        for column, sel in table.rows[0].evals.items()
        if sel["dataset"] != "average"
    }


def _as_list(value):
    """One option value or several (``input_size=224`` or ``[224, 384]``) as a list; None when not given."""
    if value is None or isinstance(value, (list, tuple)) and not value:
        return None
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _write_csv(out, rows: list[dict]) -> Path | None:
    if not out:
        return None
    out.parent.mkdir(parents=True, exist_ok=True)  # checked before the evaluation (check_writable_file)
    atomic_write(out, pd.DataFrame(rows).to_csv(index=False))
    return out
