"""``depthbench verify``: audit every model row of the papers' tables against the printed numbers.

The audit itself -- which columns are measured, how, and when a value passes -- is :mod:`results.audit`, the one
answer for every architecture cell (``depthbench results`` shows the same checks in its tables). Measurements are
cached on disk by the code they depend on (harness/measure/cache.py), so a repeated verify only reads them.
Exit status 1 when any checked value fails.
"""

from __future__ import annotations

import json
from dataclasses import asdict


def run(
    papers: list[str] | None = None,
    files: list[str] | None = None,
    table: str | None = None,
    *,
    cache: bool = True,
    progress: bool = True,
) -> list:
    """The :class:`results.audit.Check` list of the papers' tables (see :func:`results.audit.verify`), the dense
    rows counted by downstream (harness/workflows/audit.py)."""
    from harness.workflows.audit import dense_counter
    from results.audit import verify

    return verify(papers, files, table, cache=cache, progress=progress, dense=dense_counter())


def _fmt(value: float | None, column: str) -> str:
    if value is None:
        return ""
    if column in ("params", "layers"):
        return f"{value:,.0f}"
    return f"{value:.3f}".rstrip("0").rstrip(".") if abs(value) < 1000 else f"{value:,.1f}"


def print_report(checks: list, summarised: list | None = None) -> None:
    """The checks as an aligned table, then a one-line summary of ``summarised`` (default: the same checks)."""
    mark = {"pass": "✓", "fail": "✗", "error": "✗", "reason": "—"}
    header = ("paper", "table", "row", "column", "paper", "ours", "delta", "")
    lines = [header]
    for c in checks:
        delta = f"{c.delta_pct:+.2f}%" if c.delta_pct is not None else ""
        lines.append(
            (
                c.paper,
                c.table,
                c.row,
                c.column,
                _fmt(c.paper_value, c.column),
                _fmt(c.ours, c.column),
                delta,
                mark[c.status] + (f" {c.note}" if c.note else ""),
            )
        )
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header) - 1)]
    for line in lines:
        print("  ".join(str(v).ljust(w) for v, w in zip(line, widths)) + "  " + line[-1])
    counts = {s: sum(c.status == s for c in (summarised or checks)) for s in mark}
    hidden = [c for c in (summarised or checks) if c.status == "reason" and c not in checks]  # --failed
    print(
        f"\n{counts['pass']} passed, {counts['fail'] + counts['error']} failed, "
        f"{counts['reason']} not checkable" + (":" if hidden else " (reason shown)")
    )
    for c in hidden:
        print(f"  {c.paper} {c.table} {c.row} {c.column}: {c.note or 'no reason given'}")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "verify",
        help="check models against the papers' parameter/FLOP/layer tables",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--paper", action="append", help="paper(s) to audit (default: all); repeatable")
    p.add_argument("--table", help="only the table with this id")
    p.add_argument("--file", action="append", help="audit this tables YAML instead of results/tables/")
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.add_argument("--failed", action="store_true", help="print only failing rows")
    p.add_argument(
        "--no-cache", action="store_true", help="measure everything again (the cache is neither read nor written)"
    )
    p.set_defaults(func=main)


def main(args) -> int:
    checks = run(args.paper, args.file, args.table, cache=not args.no_cache)
    shown = [c for c in checks if c.status in ("fail", "error")] if args.failed else checks
    if args.json:
        print(json.dumps([asdict(c) for c in shown], indent=1))
    else:
        print_report(shown, checks)
    return 1 if any(c.status in ("fail", "error") for c in checks) else 0
