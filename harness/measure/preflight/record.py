"""The record and the report. Rank 0 puts every rank's checks and the checks of all ranks together into
``preflight.json`` (:data:`FORMAT`) and ``preflight.txt`` in ``<runs>/preflight/<run id>/`` (:func:`write_report`,
:func:`render`); ``depthbench submit --estimate`` (harness/measure/estimate.py) reads the step times back with
:func:`read_records`, every field it computes with checked (:func:`checked_record`)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

from harness.core.files import BadFile, atomic_write, printable, read_json
from harness.core.rundir import new_run_path, runs_root, slurm_meta
from harness.measure.bench import _plain
from harness.measure.preflight.allreduce import allreduce_checks
from harness.measure.layout import Layout
from harness.measure.preflight.common import VERDICTS, Check, Options, Report, size_text
from harness.measure.preflight.environment import same_software_check
from harness.measure.preflight.plan import Plan

FORMAT = "depthbench-preflight/1"
RECORD = "preflight.json"
EXPERIMENT = "preflight"  # records live in <runs>/preflight/<run id>/


def new_record_path() -> Path:
    """A new ``<runs>/preflight/<run id>`` (not created)."""
    return new_run_path(EXPERIMENT, runs_root())


# ----------------------------------------------------------------------------------------------- rank 0: writing
def write_report(
    gathered: list[dict],
    collective: dict,
    plans: list[Plan],
    same: dict,
    layout: Layout,
    opts: Options,
    run_path: Path,
    world: int,
) -> Report:
    """Every rank's checks (``gathered``, one dict per rank) and the checks of all ranks together, as the record
    and its rendering in ``run_path``; the :class:`Report` (exit code 1 when a check failed)."""
    gathered = sorted(gathered, key=lambda g: g["rank"])
    checks = [c for g in gathered for c in g["checks"]]
    checks += same_software_check(gathered)
    checks += allreduce_checks(gathered, collective, [p for p in plans if p.label not in same])
    checks += [
        Check(
            "same-as",
            "ok",
            f"{label}: the same model, batch, precision and data as {first}: measured once",
            config=label,
        )
        for label, first in same.items()
    ]
    counts = {v: sum(c.verdict == v for c in checks) for v in VERDICTS}
    record = {
        "format": FORMAT,
        "time": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "hosts": list(dict.fromkeys(g["node"] for g in gathered)),
        "world_size": world,
        "device": opts.device,
        "device_name": gathered[0]["device_name"],
        "partition": os.environ.get("SLURM_JOB_PARTITION"),
        **slurm_meta(),
        "layout": layout_record(layout),
        "summary": counts,
        "versions": gathered[0]["versions"],
        "allreduce": {
            k: collective.get(k) for k in ("backend", "ranks", "rows", "correct", "error", "transport", "pairs")
        },
        "configs": [_config_entry(plan, gathered, collective) for plan in plans],
        "checks": [asdict(c) for c in checks],
    }
    path = run_path / RECORD
    text = render(checks, record, path)
    atomic_write(path, json.dumps(record, indent=1, default=str))
    atomic_write(run_path / "preflight.txt", text + "\n")
    return Report(checks, record, path, text, 1 if counts["fail"] else 0)


def _config_entry(plan: Plan, gathered: list[dict], collective: dict) -> dict:
    """A config in the record: what it is, and what the ranks measured for it (the slowest step, the slowest
    loader) -- what ``submit --estimate`` reads."""
    per_rank = [g["measured"].get(plan.label, {}) for g in gathered]
    steps = [m["step_ms"] for m in per_rank if m.get("step_ms")]
    loaders = [m["loader_per_s"] for m in per_rank if m.get("loader_per_s")]
    first = per_rank[0]
    grad = (collective.get("grad") or {}).get(plan.label) or {}
    return {
        "label": plan.label,
        "config": plan.target.config,
        "overrides": list(plan.target.overrides),
        **_plain(plan.identity()),
        "batch_size": plan.cfg.batch_size,
        "grad_accum": plan.cfg.grad_accum,
        "world": plan.world,
        "params": plan.params,
        "gmacs": round(plan.macs / 1e9, 4),
        "epochs": plan.cfg.get("epochs"),
        "data_type": plan.cfg.data.type,
        "data_root": first.get("data_root"),
        "train_images": first.get("train_images"),
        "step_ms": max(steps) if steps else None,
        "step_ms_ranks": steps,
        "samples_per_s": round(plan.micro_batch / max(steps) * 1000, 3) if steps else None,
        "peak_mem_mb": first.get("peak_mem_mb"),
        "loader_per_s": min(loaders) if loaders else None,
        "grad_bytes": 4 * plan.params,
        "allreduce_ms": grad.get("time_ms"),
        "checkpoint_bytes": plan.checkpoint_bytes(),
        "checkpoint_write_s": first.get("checkpoint_write_s"),
        "problem": plan.problem,
    }


def layout_record(layout: Layout) -> dict:
    """The planned layout as the record keeps it: nodes x ranks per node (both None when none was planned), the
    time limit and the warning."""
    return {
        "nodes": layout.nodes,
        "ranks_per_node": layout.ranks_per_node if layout.planned else None,
        "time_s": layout.time_s,
        "warning_s": layout.warning_s,
    }


def render(checks: list[Check], record: dict, path: Path | None = None) -> str:
    """The report: one line per check, node by node and rank by rank, then the checks of all ranks together, the
    all-reduce table (nccl-tests' columns) and the tally."""
    layout = record.get("layout") or {}
    lines = [
        f"depthbench preflight: {record['world_size']} rank(s) on {len(record['hosts'])} node(s) "
        f"({', '.join(record['hosts'])}), {record.get('device') or '-'} {record.get('device_name') or ''}; "
        f"{len(record.get('configs') or [])} config(s)"
        + (
            f"; runs planned on {layout.get('nodes')} node(s) x {layout.get('ranks_per_node')} rank(s)"
            if layout.get("nodes")
            else ""
        )
    ]
    width = max((len(c.check) for c in checks), default=8)
    by_rank: dict = {}
    for c in checks:
        if c.rank is not None:
            by_rank.setdefault((c.node, c.rank), []).append(c)
    nodes = list(dict.fromkeys(node for node, _ in sorted(by_rank, key=lambda k: k[1])))
    current = None
    for (node, rank), items in sorted(by_rank.items(), key=lambda kv: (nodes.index(kv[0][0]), kv[0][1])):
        if node != current:
            lines.append(f"node {node}")
            current = node
        lines.append(f"  rank {rank}")
        lines += [f"    {c.verdict:<4}  {c.check:<{width}}  {c.text}" for c in items]
    together = [c for c in checks if c.rank is None]
    if together:
        lines.append("all ranks")
        lines += [f"    {c.verdict:<4}  {c.check:<{width}}  {c.text}" for c in together]
    rows = (record.get("allreduce") or {}).get("rows") or []
    if rows:
        lines.append(
            f"  all-reduce ({record['allreduce']['backend']}, {record['allreduce']['ranks']} ranks, "
            f"float32, slowest rank):"
        )
        lines.append(f"    {'size':>10} {'count':>12} {'time (ms)':>10} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13}")
        lines += [
            f"    {size_text(r['bytes']):>10} {r['count']:>12,} {r['time_ms']:>10,.3f} {r['algbw_gbs']:>13,.3f} "
            f"{r['busbw_gbs']:>13,.3f}"
            for r in rows
        ]
    s = record["summary"]
    lines.append(f"preflight: {s['ok']} ok, {s['warn']} warn, {s['fail']} fail" + (f"; record {path}" if path else ""))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- reading back
def read_records(root: str | Path | None = None) -> list[dict]:
    """Every ``preflight.json`` under ``<runs>/preflight/``, newest first (unreadable ones skipped)."""
    folder = Path(root or runs_root()) / EXPERIMENT
    records = []
    for path in folder.glob(f"*/{RECORD}") if folder.is_dir() else []:
        try:
            record = read_json(path, inside=folder, what="preflight record")
        except (OSError, BadFile):
            continue
        if record.get("format") == FORMAT:
            record = checked_record(record)
            record["path"] = str(path)
            records.append(record)
    return sorted(records, key=lambda r: str(r.get("time")), reverse=True)


def _positive(value, kind=(int, float)) -> bool:
    # compared, not math.isfinite: that raises OverflowError on a 400-digit integer; NaN compares False
    return type(value) in (kind if isinstance(kind, tuple) else (kind,)) and 0 < value < 1e308


# the fields that `submit --estimate` computes with, and what each must be; a record is a file anyone with access
# to the runs folder may have written: NaN, a string or a zero batch must not reach the arithmetic
_CONFIG_FIELDS = {
    "step_ms": _positive,
    "allreduce_ms": _positive,
    "micro_batch": lambda v: _positive(v, int),
    "world": lambda v: _positive(v, int),
    "train_images": lambda v: _positive(v, int),
    "model": lambda v: isinstance(v, str),
    "data_type": lambda v: isinstance(v, str),
    "data_root": lambda v: isinstance(v, str),
    "precision": lambda v: isinstance(v, str),
    "overrides": lambda v: isinstance(v, list) and all(isinstance(o, str) for o in v),
    "model_kwargs": lambda v: isinstance(v, dict),
    "input_size": lambda v: isinstance(v, list),
    "gmacs": _positive,
    "params": lambda v: _positive(v, int),
    "grad_bytes": lambda v: _positive(v, int),
}
_RECORD_FIELDS = ("device", "device_name", "partition", "time")
# the all-reduce rows the estimate's ring arithmetic reads (a message size of 0 bytes, a bandwidth in a string, a
# negative time: the row is left out); and the record's counts
_ALLREDUCE_ROW_FIELDS = {
    "busbw_gbs": lambda v: _positive(v) or v in (0, 0.0) and type(v) is not bool,
    "algbw_gbs": lambda v: _positive(v) or v in (0, 0.0) and type(v) is not bool,
    "time_ms": _positive,
    "count": lambda v: _positive(v, int),
}
_RECORD_COUNTS = {
    "world_size": lambda v: _positive(v, int),
    "hosts": lambda v: isinstance(v, list) and all(isinstance(h, str) for h in v),
}


def checked_record(record: dict) -> dict:
    """A preflight record with every field that estimates use checked: a string field that is not a string is
    dropped, and a config entry with a bad number (NaN, infinite, a string, zero or negative) is left out whole --
    its step time is not a measurement."""
    record = {
        k: printable(v) if k in _RECORD_FIELDS else v
        for k, v in record.items()
        if k not in _RECORD_FIELDS or isinstance(v, str)
    }  # printed by --estimate: no terminal escapes
    configs = record.get("configs")
    record["configs"] = [c for c in configs if _fields_hold(c, _CONFIG_FIELDS)] if isinstance(configs, list) else []
    record = {k: v for k, v in record.items() if k not in _RECORD_COUNTS or _RECORD_COUNTS[k](v)}
    allreduce = record.get("allreduce")
    if isinstance(allreduce, dict):
        rows = allreduce.get("rows")
        record["allreduce"] = {
            **{k: v for k, v in allreduce.items() if k != "ranks" or _positive(v, int)},
            "rows": [r for r in rows if _fields_hold(r, _ALLREDUCE_ROW_FIELDS) and _positive(r.get("bytes"), int)]
            if isinstance(rows, list)
            else [],
        }
    else:
        record.pop("allreduce", None)
    return record


def _fields_hold(entry, checks: dict) -> bool:
    """``entry`` is an object whose every field in ``checks`` that is set passes its check."""
    return isinstance(entry, dict) and all(
        check(entry[key]) for key, check in checks.items() if entry.get(key) is not None
    )
