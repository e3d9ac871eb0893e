"""The work behind ``depthbench results`` (harness/commands/results.py parses the command line and prints): the
papers' tables regenerated from runs, with the paper's numbers beside ours, as Markdown/CSV/LaTeX text or files
with their figures, the status view, or the static HTML report.

Every input is checked before the audit builds any model and before any run is collected. The architecture columns
come from :class:`results.audit.Audit`; its dense rows (whole detectors/segmentors) are counted by ``dense``, which
the caller hands in (downstream is this package's peer: harness/workflows/audit.py joins them).
"""

from __future__ import annotations

import difflib
import io
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.core.choices import CLAIMS_OUT, RESULTS_FORMATS, RESULTS_REDUCE
from harness.core.errors import DepthbenchError
from harness.core.files import BadFile, atomic_write, check_writable_folder, read_bytes
from harness.core.rundir import runs_root
from results import compare, figures, paper_tables, render, report as site, runs as run_data
from results.audit import Audit, DenseCounter
from results.claims_status import read_report
from results.status import status_text


@dataclass
class ResultsReport:
    """What one ``depthbench results`` produced: ``text``, what it prints on stdout (the tables themselves when no
    ``out`` is given, else the files written); ``files``, every file written; ``tables``, the tables rendered;
    ``runs``, the runs collected; ``summary``, its closing line (the problems found, or how many runs were
    collected from where; printed on stderr)."""

    text: str = ""
    files: list = field(default_factory=list)
    tables: int = 0
    runs: int = 0
    summary: str = ""


def regenerate(
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
    dense: DenseCounter | None = None,
) -> ResultsReport:
    """The tables of ``papers`` (or of the tables YAML ``files``; only ``table`` if given) from the runs under
    ``runs`` (default: the runs folder), as ``depthbench results`` documents its options; ``dense``: how the audit
    counts a dense row's whole detector/segmentor (None: those cells say they were not measured). Nothing is
    printed but the audit's progress bar (stderr). Bad input raises :class:`DepthbenchError` before the audit."""
    if format not in RESULTS_FORMATS:
        raise DepthbenchError(f"--format {format!r}: choose one of {', '.join(RESULTS_FORMATS)}")
    if reduce not in RESULTS_REDUCE:
        raise DepthbenchError(f"--reduce {reduce!r}: choose one of {', '.join(RESULTS_REDUCE)}")
    papers, files, runs, bench = (list(v) if v else None for v in (papers, files, runs, bench))
    tables, bench_frame = _validate(papers, table, files, format, out, runs, bench)
    claims = _claims_report(claims)
    roots = runs or [runs_root()]
    frame, problems = run_data.collect(roots, reduce=reduce)
    run_data.check_runs(frame, problems)
    selected = [t for ts in tables.values() for t in ts if table in (None, t.id)]
    audited = None
    if audit:
        audited = Audit(progress=True, dense=dense)
        audited.prepare([row for t in selected for row in t.rows])
    index = compare.RunIndex(frame, compare.MODEL_RENAMES)
    views = [compare.view_table(t, index, audited) for t in selected]
    out = Path(out) if out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    if not bench:  # where `depthbench bench --out` results are kept
        bench_frame = _bench_frames(
            sorted(Path("results/bench").glob("*.csv")) + sorted(Path("benchmarks/results").glob("*/*.csv")),
            strict=False,
        )
    report = ResultsReport(tables=len(views), runs=len(frame))
    if status:
        text = status_text(views)
        report.text = text
        if out:
            atomic_write(out / "status.txt", text)
            report.files.append(out / "status.txt")
    elif format == "html":
        diagnose_csvs = [
            Path(p) / "shortcut_ratio.csv" for p in frame.get("path", []) if (Path(p) / "shortcut_ratio.csv").is_file()
        ]
        pages = site.build(views, frame, problems, out, bench_frame, diagnose_csvs, claims)
        report.files += list(pages)
        report.text = f"wrote {len(pages)} pages and their figures to {out}/ — open {out / 'index.html'}\n"
    else:
        _write_tables(views, format, out, report)
        if out:
            _write_figures(views, frame, out, bench_frame, report)
    report.summary = (
        problems.summary() if len(problems) else f"{len(frame)} run(s) collected from {', '.join(map(str, roots))}"
    )
    return report


def _validate(papers, table, files, fmt, out, runs, bench):
    """The tables to render and the throughput CSVs, every input checked (before the audit builds any model)."""
    known = paper_tables.available_papers()
    papers = papers or ([] if files else known)
    for paper in papers:
        if paper not in known:
            close = difflib.get_close_matches(paper, known, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise DepthbenchError(f"unknown paper {paper!r}{hint} (known: {', '.join(known)})")
    try:
        tables = {p: paper_tables.load_paper(p) for p in papers}
        for path in files or []:
            loaded = paper_tables.load(path)
            tables[loaded[0].paper if loaded else Path(path).stem] = loaded
    except paper_tables.TableError as e:
        raise DepthbenchError(str(e)) from None
    if table is not None:
        ids = sorted({t.id for ts in tables.values() for t in ts})
        if table not in ids:
            raise DepthbenchError(f"no table {table!r} in {', '.join(tables)}; tables: {', '.join(ids)}")
    if fmt == "html" and not out:
        raise DepthbenchError("--format html writes a site of several files; give --out DIR (e.g. --out report/)")
    if out and Path(out).exists() and not Path(out).is_dir():
        raise DepthbenchError(f"--out {out} is a file; give a directory")
    if out:
        check_writable_folder(out, "--out", "the tables, the status view or the HTML site")
    for path in runs or []:
        if not Path(path).is_dir():
            raise DepthbenchError(f"--runs {path}: no such directory")
    for path in bench or []:
        if not Path(path).is_file():
            raise DepthbenchError(f"--bench {path}: no such file (a CSV from depthbench bench or timm's benchmark.py)")
    return tables, _bench_frames(bench or [], strict=True)  # read now: bad input fails before the audit


def _claims_report(claims):
    """The ``depthbench claims`` report for the Claims page, read before any work: ``(folder, [(ClaimResult,
    setting), ...])`` from the folder given (which must hold a readable claims.json), else from results/claims when
    it holds one, else None."""
    folder = Path(claims) if claims else CLAIMS_OUT
    if not os.path.lexists(folder / "claims.json"):  # there but a link or a FIFO: read_report names it
        if claims:
            raise DepthbenchError(
                f"--claims {claims}: no claims.json there; give the --out folder of a `depthbench claims` run"
            )
        return None
    return folder, read_report(folder / "claims.json")


def _bench_frames(paths, strict: bool):
    """The throughput CSVs in timm's benchmark schema; ``strict``: a bad file is an error, else it is skipped."""
    frames = []
    for path in paths:
        try:
            frame = pd.read_csv(io.BytesIO(read_bytes(path, what="bench CSV")))  # never a FIFO or a huge file
        except (OSError, ValueError, pd.errors.ParserError, BadFile) as e:
            if strict:
                raise DepthbenchError(f"--bench {path} is not a CSV ({str(e).splitlines()[0]})") from None
            continue
        if {"model", "infer_samples_per_sec"} <= set(frame.columns):
            frames.append(frame)
        elif strict:
            raise DepthbenchError(
                f"--bench {path} has no 'model' and 'infer_samples_per_sec' columns "
                "(timm's benchmark CSV, as depthbench bench --out writes it)"
            )
    return pd.concat(frames) if frames else None


def _write_tables(views, fmt, out, report: ResultsReport) -> None:
    if fmt == "csv":
        text = render.to_csv(views)
        if out:
            atomic_write(out / "results.csv", text)
            report.files.append(out / "results.csv")
            report.text += f"wrote {out / 'results.csv'}\n"
        else:
            report.text += text
        return
    one = render.to_markdown if fmt == "md" else render.to_latex
    by_paper = {}
    for view in views:
        by_paper.setdefault(view.paper, []).append(one(view))
    if not out:
        for paper, parts in by_paper.items():
            report.text += (f"## {paper}\n" if fmt == "md" else f"% {paper}") + "\n"
            report.text += "\n".join(parts) + "\n"
        return
    for paper, parts in by_paper.items():
        path = out / f"{paper}.{'md' if fmt == 'md' else 'tex'}"
        atomic_write(path, "\n".join(parts))
        report.files.append(path)
        report.text += f"wrote {path}\n"


def _write_figures(views, frame, out, bench, report: ResultsReport) -> None:
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
    report.files += list(written)
    if written:
        report.text += f"wrote {len(written)} figure files to {fig_dir}\n"
