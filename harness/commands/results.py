"""``depthbench results``: the papers' tables regenerated from runs, with the paper's numbers beside ours.

Examples::

    depthbench results --status                          # how far each paper's reproduction has come
    depthbench results --paper stepsnet --table 1        # one table as Markdown on stdout
    depthbench results --format csv --out out/           # every table, long format, + figures
    depthbench results --format html --out report/       # the static report (open report/index.html)

Runs are read from ``results/runs`` (``$DEPTHBENCH_RUNS``) or the ``--runs`` directories; architecture columns
come from the ``depthbench verify`` audit (cached in ``.cache/depthbench``).

    from harness.commands.results import run
    report = run(papers=["stepsnet"], format="html", out="report/")   # ResultsReport(text, files, tables, runs, ...)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness.core.choices import RESULTS_FORMATS, RESULTS_REDUCE

if TYPE_CHECKING:
    from results.reporting import ResultsReport

__all__ = ["run", "add_parser", "main"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "results",
        help="the papers' tables and figures from runs, paper beside ours",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--paper", action="append", help="paper(s) to show (default: all); repeatable")
    p.add_argument("--table", help="only the table with this id (e.g. 1, 5a, VII)")
    p.add_argument(
        "--file",
        action="append",
        help="a tables YAML to use (instead of results/tables/ unless --paper is given too); repeatable",
    )
    p.add_argument(
        "--runs",
        action="append",
        metavar="DIR",
        help="run directories or roots to collect (default: $DEPTHBENCH_RUNS or results/runs); repeatable",
    )
    p.add_argument(
        "--format", choices=RESULTS_FORMATS, default="md", help="output format (default md; html needs --out)"
    )
    p.add_argument("--out", metavar="DIR", help="write files (tables, figures, the HTML site) here instead of stdout")
    p.add_argument(
        "--reduce",
        choices=RESULTS_REDUCE,
        default="best",
        help="one value per run: the best evaluation, the last, or the mean of the last 5 (default best)",
    )
    p.add_argument("--status", action="store_true", help="print the reproduction status per paper and table")
    p.add_argument(
        "--bench",
        action="append",
        metavar="CSV",
        help="throughput CSVs in timm's benchmark schema (depthbench bench --out) for the throughput-accuracy "
        "figure (default: results/bench/*.csv, benchmarks/results/*/*.csv); repeatable",
    )
    p.add_argument("--no-audit", action="store_true", help="leave the architecture columns out (no model is built)")
    p.add_argument(
        "--claims",
        metavar="DIR",
        help="a `depthbench claims` report folder for the HTML report's Claims "
        "page (default: results/claims when it holds claims.json)",
    )
    p.set_defaults(func=main)


def main(args) -> int:
    from harness.core.files import printable

    report = run(
        papers=args.paper,
        table=args.table,
        files=args.file,
        runs=args.runs,
        format=args.format,
        out=args.out,
        reduce=args.reduce,
        status=args.status,
        bench=args.bench,
        audit=not args.no_audit,
        claims=args.claims,
    )
    sys.stdout.write(printable(report.text, newlines=True))  # run names and fields come from the runs' files
    sys.stdout.flush()
    print(printable(report.summary, newlines=True), file=sys.stderr)
    return 0


def run(
    *,
    papers=None,
    table: str | None = None,
    files=None,
    runs=None,
    format: str = "md",
    out: str | Path | None = None,
    reduce: str = "best",
    status: bool = False,
    bench=None,
    audit: bool = True,
    claims: str | Path | None = None,
) -> ResultsReport:
    """Regenerate the papers' tables from runs, with the paper's numbers beside ours; the keyword arguments are
    the command's options (``papers``, ``files``, ``runs``, ``bench``: lists). ``out``: write the tables (+
    figures), the status view or the HTML site there, else the returned ``text`` holds the tables. Nothing is
    printed but the audit's progress bar (stderr). Bad input raises :class:`DepthbenchError` before the audit.
    ``claims``: the folder of a ``depthbench claims`` report, shown on the HTML report's Claims page.
    """
    from harness.workflows.audit import dense_counter
    from results.reporting import regenerate

    return regenerate(
        papers=papers,
        table=table,
        files=files,
        runs=runs,
        format=format,
        out=out,
        reduce=reduce,
        status=status,
        bench=bench,
        audit=audit,
        claims=claims,
        dense=dense_counter(),
    )
