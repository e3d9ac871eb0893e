"""``depthbench eval``: trained weights on a validation set or an evaluation protocol (harness/tasks/protocols.py).

    depthbench eval CONFIG --checkpoint PATH|RUN_DIR [--ema] [--dataset NAME --data DIR] [--input-size N ...]
                    [--pool-mode normal|linear ...] [--analysis SPEC ...] [--out CSV] [--out-run DIR] [--json]
                    [key=value ...]

The model is the config's (with its ``key=value`` overrides); the weights come through
:func:`harness.engine.checkpoint.load_weights` (a run's ``best.pth``/``last.pth`` or any weights file; ``--ema``: the
EMA weights, an error for a run trained without EMA). One row per (pool mode, input size, analysis, metric):
printed as a table, appended to the run directory's ``metrics.jsonl`` as ``{"kind": "eval_suite", ...}`` records
(the checkpoint's run, or ``--out-run``) and, with ``--out``, written as CSV. A record says what was evaluated:
``dataset``, ``input_size``, ``pool_mode`` (TransNeXt; ``normal`` by default), ``analysis``, ``model_overrides``
(model arguments built differently from the run's config, e.g. ``+model.length_scaling=False``); that is how
``depthbench results`` knows the table cell it fills (results/paper_tables.py). Every input is checked before a
model is built. ``--dataset lm-eval``: zero-shot lm-eval tasks of a Llama recipe (harness/tasks/lm_eval.py).

    from harness.commands.eval import run
    result = run("configs/demo/steps-deit-w64-d8_1xb64-8e_digits.py", "results/runs/x/20260101-000000",
                 input_size=[16, 24])     # EvalResult: [{"metric": "top1", "value": ..., ...}, ...]
"""

from __future__ import annotations

import json
import math
import sys
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from harness.core.errors import DepthbenchError

__all__ = ["run", "EvalResult", "add_parser", "main", "table_x"]


def add_parser(subparsers) -> None:
    from harness.core.choices import PROTOCOLS

    e = subparsers.add_parser(
        "eval",
        help="top-1/top-5 of a checkpoint on the validation set or an evaluation "
        "protocol (ImageNet-A/R/Sketch/V2/ReaL/C, multi-size, StepsNet analyses)",
    )
    e.add_argument("config")
    e.add_argument("overrides", nargs="*", metavar="key=value")
    e.add_argument(
        "--checkpoint", required=True, help="last.pth/best.pth of a run, a run directory, or any weights file"
    )
    e.add_argument("--ema", action="store_true", help="evaluate the EMA weights")
    e.add_argument(
        "--dataset",
        default="val",
        choices=(*PROTOCOLS, "lm-eval"),
        help="evaluation protocol (default: the config's validation split); lm-eval: zero-shot tasks of "
        "a Llama recipe (harness/tasks/lm_eval.py)",
    )
    e.add_argument(
        "--tasks",
        nargs="+",
        help="--dataset lm-eval: lm-eval task names (default: ScaleNet Table X's seven; depthbench_tiny_mc is local)",
    )
    e.add_argument("--data", help="the protocol's data set folder (its standard layout)")
    e.add_argument(
        "--input-size",
        type=int,
        nargs="+",
        help="evaluation resolution(s), one row each (default: the config's data.input_size)",
    )
    e.add_argument(
        "--pool-mode",
        nargs="+",
        choices=("normal", "linear"),
        help="TransNeXt inference mode(s) (Table 5); linear keeps the pool at the training size's",
    )
    e.add_argument(
        "--analysis",
        nargs="+",
        metavar="SPEC",
        help="StepsNet Tables 6-7, one row each: none | mask_first=N | mask_last=N | drop_last=STEP:K, "
        "comma-joined, plus stage=S for multi-stage Steps models",
    )
    e.add_argument("--real-labels", help="ReaL labels json (default: the copy bundled with timm)")
    e.add_argument(
        "--corrupt-from",
        help="imagenet-c: generate the corruptions of this image folder into --data "
        "(default on digits configs: the digits val split)",
    )
    e.add_argument("--out", help="also write the rows as CSV here")
    e.add_argument("--out-run", help="run directory to append the rows to (default: the checkpoint's)")
    e.add_argument("--json", action="store_true", help="print the result as JSON")
    e.set_defaults(func=main)


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


def main(args) -> int:
    result = run(
        args.config,
        args.checkpoint,
        overrides=args.overrides,
        ema=args.ema,
        dataset=args.dataset,
        tasks=args.tasks,
        data=args.data,
        input_size=args.input_size,
        pool_mode=args.pool_mode,
        analysis=args.analysis,
        real_labels=args.real_labels,
        corrupt_from=args.corrupt_from,
        out=args.out,
        out_run=args.out_run,
    )
    if result.kind == "plain":
        metrics = result.metrics
        if result.is_main:
            print(
                json.dumps(metrics)
                if args.json
                else f"{metrics['model']} {'EMA ' if args.ema else ''}@{metrics['input_size']}: top-1 "
                f"{metrics['top1']:.2f}  top-5 {metrics['top5']:.2f}  loss {metrics['loss']:.4f}  "
                f"({metrics['images']} images)"
            )
        _say_where(result)
        return 0
    table = _lm_table if result.kind == "lm-eval" else _suite_table
    print("\n".join(json.dumps(r) for r in result.rows) if args.json else table(result.rows))
    sys.stdout.flush()
    _say_where(result)
    return 0


def _say_where(result: EvalResult) -> None:
    """The last line: where the rows went (stderr: stdout is the table or JSON a script reads)."""
    places = [f"{result.recorded / 'metrics.jsonl'}"] if result.recorded else []
    places += [str(result.out)] if result.out else []
    if result.is_main and places:
        print(f"depthbench eval: rows recorded in {' and '.join(places)}", file=sys.stderr, flush=True)


def run(
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
    """Evaluate ``checkpoint`` (a run directory, its best.pth/last.pth, or any weights file) under ``config``
    (with ``key=value`` ``overrides``); the keyword arguments are the command's options.

    ``dataset``: ``val`` (the config's validation split), an ImageNet protocol (harness/tasks/protocols.py, its
    folder ``data``), or ``lm-eval`` (``tasks``; default ScaleNet Table X's). ``input_size``, ``pool_mode``,
    ``analysis``, ``tasks``: one value or a list (one row each). The rows are appended to the checkpoint's run
    (or ``out_run``; opened as its one writer, so a run another process is writing is refused before any work)
    and, with ``out``, written as CSV (its folder checked first). A run's own config is read as data
    (config.json), never executed: only ``config`` is. Bad input raises :class:`DepthbenchError` before any model
    is built. With nothing but the validation split at one size, this is the engine's (distributed) evaluation,
    loss included: ``metrics`` holds its numbers.
    """
    sizes, pool_modes, analyses, tasks = (_as_list(v) for v in (input_size, pool_mode, analysis, tasks))
    out = _check_out(out)
    if dataset == "lm-eval":  # language-model tasks through EleutherAI's harness
        from harness.tasks.lm_eval import run_lm_eval

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
    from harness.core.rundir import checkpoint_run
    from harness.tasks import protocols

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
    from harness.core.rundir import read_config_json

    resolved = read_config_json(run)
    if resolved is None and (Path(run) / "config.py").is_file():
        from results.runs import read_config_fields

        from harness.core.files import BadFile, read_text

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
    from harness.core.rundir import RunDir, checkpoint_run, unlock_run_dir
    from harness.engine.launch import distributed_env

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
    import os

    metrics = run / "metrics.jsonl"
    if metrics.is_symlink():
        return "its metrics.jsonl is a symbolic link (records are never written through one)"
    if not os.access(run, os.W_OK | os.X_OK) or metrics.exists() and not os.access(metrics, os.W_OK):
        return "it is not writable"
    return None


def _check_out(out) -> Path | None:
    """``--out``: a CSV file whose folder exists and can be written; checked before any work."""
    import os

    if not out:
        return None
    path = Path(out).expanduser()
    if path.is_dir():
        raise DepthbenchError(f"--out {out} is a directory; give a file name for the CSV (e.g. {path / 'eval.csv'})")
    if not path.parent.is_dir():
        raise DepthbenchError(f"--out {out}: {path.parent} is not a directory; create it or write elsewhere")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise DepthbenchError(f"--out {out}: {path.parent} is not writable; write the CSV elsewhere")
    return path


@lru_cache(maxsize=1)
def table_x() -> dict[str, tuple[str, str]]:
    """ScaleNet Table X's tasks, ``{lm-eval task: (metric, table column)}``, from the table's one definition
    (results/tables/scalenet.yaml: the evals of its first row; the metrics are the spec's, §2.9). Read once: the
    YAML holds all of ScaleNet's tables. Callers only read the mapping."""
    from results.paper_tables import load_paper

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
    import pandas as pd

    from harness.core.files import atomic_write

    atomic_write(out, pd.DataFrame(rows).to_csv(index=False))
    return Path(out)


def _suite_table(rows: list[dict]) -> str:
    lines = [f"{'dataset':<16} {'size':>5} {'pool':<7} {'analysis':<18} {'metric':<28} {'value':>8}"]
    for r in rows:
        lines.append(
            f"{r['dataset']:<16} {r['input_size']:>5} {str(r['pool_mode'] or '-'):<7} {r['analysis']:<18} "
            f"{r['metric']:<28} {r['value']:>8.2f}"
        )
    return "\n".join(lines)


def _lm_table(rows: list[dict]) -> str:
    lines = [f"{'task':<22} {'metric':<9} {'value':>7} {'stderr':>7} {'samples':>8}"]
    for r in rows:
        stderr = f"{r['stderr']:.2f}" if isinstance(r.get("stderr"), float) and math.isfinite(r["stderr"]) else "-"
        lines.append(f"{r['dataset']:<22} {r['metric']:<9} {r['value']:>7.2f} {stderr:>7} {r['samples'] or '-':>8}")
    return "\n".join(lines)
