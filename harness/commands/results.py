"""``depthbench results``: the papers' tables regenerated from runs, with the paper's numbers beside ours.

Examples::

    depthbench results --status                          # how far each paper's reproduction has come
    depthbench results --paper stepsnet --table 1        # one table as Markdown on stdout
    depthbench results --format csv --out out/           # every table, long format, + figures
    depthbench results --format html --out report/       # the static report (open report/index.html)

Runs are read from ``results/runs`` (``$DEPTHBENCH_RUNS``) or the ``--runs`` directories; architecture columns
come from the ``depthbench verify`` audit (cached in ``.cache/depthbench``).
"""
from __future__ import annotations

import sys
from pathlib import Path

from harness.errors import DepthbenchError

FORMATS = ("md", "csv", "tex", "html")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("results", help="the papers' tables and figures from runs, paper beside ours",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("--paper", action="append", help="paper(s) to show (default: all); repeatable")
    p.add_argument("--table", help="only the table with this id (e.g. 1, 5a, VII)")
    p.add_argument("--file", action="append", help="a tables YAML to use (instead of results/tables/ unless --paper "
                                                   "is given too); repeatable")
    p.add_argument("--runs", action="append", metavar="DIR",
                   help="run directories or roots to collect (default: $DEPTHBENCH_RUNS or results/runs); repeatable")
    p.add_argument("--format", choices=FORMATS, default="md", help="output format (default md; html needs --out)")
    p.add_argument("--out", metavar="DIR", help="write files (tables, figures, the HTML site) here instead of stdout")
    p.add_argument("--reduce", choices=("best", "last", "mean"), default="best",
                   help="one value per run: the best evaluation, the last, or the mean of the last 5 (default best)")
    p.add_argument("--status", action="store_true", help="print the reproduction status per paper and table")
    p.add_argument("--bench", action="append", metavar="CSV",
                   help="throughput CSVs in timm's benchmark schema (depthbench bench --out) for the throughput-accuracy "
                        "figure (default: results/bench/*.csv, benchmarks/results/*/*.csv); repeatable")
    p.add_argument("--no-audit", action="store_true", help="leave the architecture columns out (no model is built)")
    p.set_defaults(func=main)


def _validate(args):
    from results import paper_tables

    known = paper_tables.available_papers()
    papers = args.paper or ([] if args.file else known)
    for paper in papers:
        if paper not in known:
            import difflib

            close = difflib.get_close_matches(paper, known, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise DepthbenchError(f"unknown paper {paper!r}{hint} (known: {', '.join(known)})")
    try:
        tables = {p: paper_tables.load_paper(p) for p in papers}
        for path in args.file or []:
            loaded = paper_tables.load(path)
            tables[loaded[0].paper if loaded else Path(path).stem] = loaded
    except paper_tables.TableError as e:
        raise DepthbenchError(str(e)) from None
    if args.table is not None:
        ids = sorted({t.id for ts in tables.values() for t in ts})
        if args.table not in ids:
            raise DepthbenchError(f"no table {args.table!r} in {', '.join(tables)}; tables: {', '.join(ids)}")
    if args.format == "html" and not args.out:
        raise DepthbenchError("--format html writes a site of several files; give --out DIR (e.g. --out report/)")
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        raise DepthbenchError(f"--out {args.out} is a file; give a directory")
    for path in args.runs or []:
        if not Path(path).is_dir():
            raise DepthbenchError(f"--runs {path}: no such directory")
    for path in args.bench or []:
        if not Path(path).is_file():
            raise DepthbenchError(f"--bench {path}: no such file (a CSV from depthbench bench or timm's benchmark.py)")
    args.bench_frame = _bench_frames(args.bench or [], strict=True)  # read now: bad input fails before the audit
    return tables


def _bench_frames(paths, strict: bool):
    """The throughput CSVs in timm's benchmark schema; ``strict``: a bad file is an error, else it is skipped."""
    import pandas as pd

    frames = []
    for path in paths:
        try:
            frame = pd.read_csv(path)
        except (OSError, ValueError, pd.errors.ParserError) as e:
            if strict:
                raise DepthbenchError(f"--bench {path} is not a CSV ({str(e).splitlines()[0]})") from None
            continue
        if {"model", "infer_samples_per_sec"} <= set(frame.columns):
            frames.append(frame)
        elif strict:
            raise DepthbenchError(f"--bench {path} has no 'model' and 'infer_samples_per_sec' columns "
                                  "(timm's benchmark CSV, as depthbench bench --out writes it)")
    return pd.concat(frames) if frames else None


def main(args) -> int:
    tables = _validate(args)
    from results import compare, render, runs as run_data
    from results.audit import Audit
    from results.status import status_text

    roots = args.runs or [run_data.default_root()]
    frame, problems = run_data.collect(roots, reduce=args.reduce)
    run_data.check_runs(frame, problems)
    selected = [t for ts in tables.values() for t in ts if args.table in (None, t.id)]
    audit = None
    if not args.no_audit:
        audit = Audit(progress=True)
        audit.prepare([row for t in selected for row in t.rows])
    index = compare.RunIndex(frame, compare.MODEL_RENAMES)
    views = [compare.view_table(t, index, audit) for t in selected]
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    bench = args.bench_frame if args.bench else _bench_frames(  # where `depthbench bench --out` results are kept
        sorted(Path("results/bench").glob("*.csv")) + sorted(Path("benchmarks/results").glob("*/*.csv")), strict=False)
    if args.status:
        text = status_text(views)
        print(text, end="")
        if out:
            (out / "status.txt").write_text(text)
    elif args.format == "html":
        from results import report

        diagnose_csvs = [Path(p) / "shortcut_ratio.csv" for p in frame.get("path", [])
                         if (Path(p) / "shortcut_ratio.csv").is_file()]
        pages = report.build(views, frame, problems, out, bench, diagnose_csvs)
        print(f"wrote {len(pages)} pages and their figures to {out}/ — open {out / 'index.html'}")
    else:
        _write_tables(views, args.format, out, render)
        if out:
            _write_figures(views, frame, out, bench)
    print(problems.summary() if len(problems) else f"{len(frame)} run(s) collected from {', '.join(map(str, roots))}",
          file=sys.stderr)
    return 0


def _write_tables(views, fmt, out, render) -> None:
    if fmt == "csv":
        text = render.to_csv(views)
        if out:
            (out / "results.csv").write_text(text)
            print(f"wrote {out / 'results.csv'}")
        else:
            sys.stdout.write(text)
        return
    one = render.to_markdown if fmt == "md" else render.to_latex
    by_paper = {}
    for view in views:
        by_paper.setdefault(view.paper, []).append(one(view))
    if not out:
        for paper, parts in by_paper.items():
            print(f"## {paper}\n" if fmt == "md" else f"% {paper}")
            print("\n".join(parts))
        return
    for paper, parts in by_paper.items():
        path = out / f"{paper}.{'md' if fmt == 'md' else 'tex'}"
        path.write_text("\n".join(parts))
        print(f"wrote {path}")


def _write_figures(views, frame, out, bench) -> None:
    from results import figures

    fig_dir = out / "figures"
    written = []
    written += figures.stepsnet_depth(views, fig_dir / "stepsnet_depth")
    written += figures.horesnet_depth(views, fig_dir / "horesnet_depth")
    written += figures.horesnet_lr(frame, fig_dir / "horesnet_lr")
    written += figures.scalenet_epochs(views, fig_dir / "scalenet_epochs")
    written += figures.top1_vs_gflops(views, fig_dir / "top1_vs_gflops")
    written += figures.throughput_accuracy(bench, views, fig_dir / "throughput_accuracy")
    if len(frame):
        written += figures.training_curves(list(frame["path"])[:20], fig_dir / "training_curves")
        written += figures.sret_lrc(list(frame["path"]), fig_dir / "sret_lrc")
    if written:
        print(f"wrote {len(written)} figure files to {fig_dir}")
