"""The reproduction status: per paper and table, how far each row has come.

(a) *expressed* — the row names a model/config (rows with a ``reason`` cannot be);
(b) *verified* — every checked architecture column matches the paper (of the rows that have one);
(c) *run* — a run fills a result column, at the paper's setting or only at a reduced one (with its labels);
(d) *rendered* — at least one number of ours stands next to the paper's.
Rows that carry a reason instead are listed with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from results.compare import TableView


@dataclass
class TableStatus:
    paper: str
    table: str
    rows: int = 0
    expressed: int = 0
    checkable: int = 0
    verified: int = 0
    run_paper: int = 0
    run_reduced: int = 0
    rendered: int = 0
    scales: list = field(default_factory=list)
    reasons: list = field(default_factory=list)  # (row name, reason)
    failing: list = field(default_factory=list)  # rows whose architecture check fails


def table_status(view: TableView) -> TableStatus:
    s = TableStatus(view.paper, view.table.id)
    mains = [line for line in view.lines if line.setting is None]
    reduced = {}
    for line in view.lines:
        if line.setting is not None and any(c.n for c in line.cells.values()):
            reduced.setdefault(line.row.name, []).append(line.setting)
    for line in mains:
        row = line.row
        s.rows += 1
        if row.reason:
            s.reasons.append((row.name, row.reason))
            continue
        if row.model or row.config:
            s.expressed += 1
        checked = [c for c in line.cells.values() if c.kind == "arch" and c.status in ("pass", "fail", "error")]
        if checked:
            s.checkable += 1
            if all(c.status == "pass" for c in checked):
                s.verified += 1
            else:
                s.failing.append(row.name)
        ran = any(c.kind == "result" and c.n for c in line.cells.values())
        if ran:
            s.run_paper += 1
        elif row.name in reduced:
            s.run_reduced += 1
        if (
            any(c.ours is not None and isinstance(c.paper, (int, float)) for c in line.cells.values())
            or row.name in reduced
        ):
            s.rendered += 1
    s.scales = sorted({label for labels in reduced.values() for label in labels})
    return s


def status_frame(views: list[TableView]) -> pd.DataFrame:
    records = []
    for v in views:
        s = table_status(v)
        records.append(
            {
                "paper": s.paper,
                "table": s.table,
                "rows": s.rows,
                "expressed": s.expressed,
                "verified": f"{s.verified}/{s.checkable}",
                "run (paper setting)": s.run_paper,
                "run (reduced only)": s.run_reduced,
                "rendered": s.rendered,
                "with reason": len(s.reasons),
            }
        )
    return pd.DataFrame.from_records(records)


def status_text(views: list[TableView]) -> str:
    """The status as aligned text: one line per table, paper totals, then the rows with reasons."""
    statuses = [table_status(v) for v in views]
    frame = status_frame(views)
    lines = [
        "Reproduction status — rows per table: expressed as a model/config (a), architecture verified (b), "
        "run (c), rendered beside the paper's number (d)",
        "",
        frame.to_string(index=False),
        "",
    ]
    for paper in dict.fromkeys(s.paper for s in statuses):
        group = [s for s in statuses if s.paper == paper]
        total = lambda attr: sum(getattr(s, attr) for s in group)  # noqa: E731
        lines.append(
            f"{paper}: {total('rows')} rows, {total('expressed')} expressed, {total('verified')}/"
            f"{total('checkable')} verified, {total('run_paper')} run at the paper's setting + "
            f"{total('run_reduced')} at a reduced scale only, {total('rendered')} rendered, "
            f"{sum(len(s.reasons) for s in group)} with a reason"
        )
    scales = sorted({x for s in statuses for x in s.scales})
    if scales:
        lines += ["", "reduced settings seen: " + "; ".join(scales)]
    failing = [(s.paper, s.table, name) for s in statuses for name in s.failing]
    if failing:
        lines += ["", "architecture checks failing (depthbench verify --failed shows why):"]
        lines += [f"  {p} table {t}: {name}" for p, t, name in failing]
    reasons = [(s.paper, s.table, name, why) for s in statuses for name, why in s.reasons]
    if reasons:
        lines += ["", "rows with a reason instead of a model:"]
        lines += [f"  {p} table {t}: {name} — {why}" for p, t, name, why in reasons]
    return "\n".join(lines) + "\n"
