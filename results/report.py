"""The static HTML report: ``index.html``, one page per paper, ``status.html``, ``runs.html`` and, where
``depthbench claims`` has written its report, ``claims.html``.

Self-contained: the CSS is inline in every page, figures are PNG files beside the pages (``figures/``, with their
SVG linked), every link is relative, no script and nothing from the network — it opens from the file system and
from any static server.
"""

from __future__ import annotations

import html
import sys
from pathlib import Path

import pandas as pd

from harness.core.files import BadFile, atomic_write, copy_regular, printable
from results import figures, render
from results.compare import TableView
from results.runs import Problems
from results.status import status_frame, table_status

PAPER_TITLES = figures.PAPER_NAMES
INTEGER_COLUMNS = ("seed", "epochs", "eval_epoch")  # counts: 0 and 8, never 0.0 and 8.0

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
header{background:#24292f;color:#fff;padding:.6rem 1.2rem}header a{color:#fff;margin-right:1rem;text-decoration:none}
header a.here{font-weight:bold;text-decoration:underline}
main{padding:1rem 1.2rem;max-width:110rem}h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem}
table{border-collapse:collapse;margin:.6rem 0 1.4rem;font-size:.82rem;background:#fff}
caption{text-align:left;font-weight:600;padding:.3rem 0}
th,td{border:1px solid #d0d7de;padding:.25rem .45rem;vertical-align:top}thead th{background:#f0f3f6}
tbody th{text-align:left;font-weight:500;max-width:22rem}
td span{display:block;white-space:nowrap}span.paper{color:#57606a}span.ours{font-weight:600}
span.ours.fail,span.ours.error{color:#cf222e}span.ours.pass{color:#1a7f37}
span.delta{font-size:.75rem;color:#57606a}span.delta.neg{color:#9a6700}
td.supported,td.no_worse{color:#1a7f37;font-weight:600}td.contradicted{color:#cf222e;font-weight:600}
td.inconclusive{color:#9a6700;font-weight:600}
tr.reduced th{font-style:italic;color:#6e7781;padding-left:1.2rem}tr.reduced{background:#fff8e6}
tr.reason{background:#f6f8fa}div.why,div.note{font-size:.72rem;color:#6e7781;font-weight:normal}
figure{display:inline-block;margin:.5rem 1rem .5rem 0;background:#fff;border:1px solid #d0d7de;padding:.4rem}
figure img{max-width:42rem;height:auto;display:block}figcaption{font-size:.8rem;color:#57606a}
p.legend{font-size:.85rem;color:#57606a}pre{background:#fff;border:1px solid #d0d7de;padding:.6rem;overflow:auto}
div.wide{max-width:100%;overflow-x:auto}table.runs{width:100%}table.runs td.num{white-space:nowrap;text-align:right}
tfoot td{border:none;background:#fafafa}
"""


def _page(title: str, body: str, here: str, papers: list[str], claims: bool = False) -> str:
    e = html.escape
    nav = [("index.html", "Overview"), ("status.html", "Status")]
    nav += [(f"{p}.html", PAPER_TITLES.get(p, p)) for p in papers]
    nav += [("claims.html", "Claims")] if claims else []
    nav.append(("runs.html", "Runs"))
    links = "".join(f'<a href="{href}"{" class=here" if href == here else ""}>{e(text)}</a>' for href, text in nav)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{e(title)} — depthbench</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="icon" href="data:,"><style>{CSS}</style></head>\n<body><header>{links}</header>'
        f"<main><h1>{e(title)}</h1>\n{body}\n</main></body></html>\n"
    )


def _figure(paths: list[Path], out_dir: Path, caption: str) -> str:
    if not paths:
        return ""
    e = html.escape
    png = next(p for p in paths if p.suffix == ".png")
    svg = next((p for p in paths if p.suffix == ".svg"), None)
    rel = png.relative_to(out_dir).as_posix()
    link = f' (<a href="{e(svg.relative_to(out_dir).as_posix())}">SVG</a>)' if svg else ""
    return f'<figure><img src="{e(rel)}" alt="{e(caption)}"><figcaption>{e(caption)}{link}</figcaption></figure>'


LEGEND = (
    '<p class="legend">Each cell: the paper\'s value (grey), ours (bold; mean ± std over seeds with n), '
    'Δ = ours − paper. Architecture columns come from the <code>depthbench verify</code> audit '
    '(✓ matches the printed number). "—": no run yet. Rows in italics on a yellow background are runs at a '
    'reduced setting — labelled with what differs, never compared with the paper\'s number. Figures: hollow '
    'markers and dashed lines are the paper, filled markers and solid lines are ours.</p>'
)


def _frame_html(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, border=0, escape=True, na_rep="")


def _runs_html(runs: pd.DataFrame, shown: list[str]) -> str:
    """The runs table, written here rather than by ``DataFrame.to_html``: counts print as integers (a column that
    holds a missing value is float in pandas, which printed ``seed 0.0``), metrics with 3 decimals, and long names
    and paths may break after / _ . - = , (``<wbr>``) so the table fits the page instead of scrolling sideways."""
    e = html.escape

    def breakable(text: str) -> str:
        return "".join(e(ch) + ("<wbr>" if ch in "/_.-=," else "") for ch in text)

    def cell(column: str, value) -> str:
        if value is None or (not isinstance(value, (list, dict, tuple)) and pd.isna(value)):
            return "<td></td>"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"<td>{breakable(str(value))}</td>"
        if column in INTEGER_COLUMNS and float(value).is_integer():
            return f'<td class="num">{int(value)}</td>'
        return f'<td class="num">{round(float(value), 3)}</td>'

    head = "".join(f"<th>{breakable(c)}</th>" for c in shown)
    body = "".join(
        "<tr>" + "".join(cell(c, v) for c, v in zip(shown, row)) + "</tr>\n"
        for row in runs[shown].itertuples(index=False, name=None)
    )
    return f'<table class="runs"><thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody></table>'


CLAIMS_LEGEND = (
    '<p class="legend">The papers\' central comparisons re-run at a <b>reduced setting</b> (stated per paper: the '
    'embedded glyphs dataset, small widths, a few epochs on CPU) by <code>depthbench claims</code> — never the '
    'paper\'s setting. Per claim: the paper\'s sentence, both arms\' mean ± std over seeds, the effect (paired per '
    'seed, or Welch) with its repeated confidence interval from the pre-registered sequential plan (Holm across the '
    'run\'s claims), and the verdict: <i>supported</i> / <i>contradicted</i> / <i>equivalent</i> (within the '
    'claim\'s margin) / <i>inconclusive</i> (docs/claims.md). Figures: learning curves (mean, min–max band over '
    'seeds) and the interval at each look.</p>'
)


def _claims_body(claims_dir: Path, results: list, out_dir: Path) -> str:
    """The Claims page from ``depthbench claims``' report (``results``: ``(ClaimResult, setting)`` read from
    ``claims_dir``/claims.json; its figures are copied beside the site so it stays self-contained)."""
    e = html.escape
    figure_dir = out_dir / "figures" / "claims"
    figure_dir.mkdir(parents=True, exist_ok=True)
    body = [CLAIMS_LEGEND]
    if _copy_figure(claims_dir / "figures", "glyphs-samples.png", figure_dir):
        body.append(
            _figure(
                [figure_dir / "glyphs-samples.png"],
                out_dir,
                "The glyphs dataset: training images "
                "(top rows), validation images from held-out typefaces (middle rows) and the same "
                "validation images in the clean variant that the DeiT claims use (bottom row)",
            )
        )

    def arm(stats) -> str:
        return e(f"{stats.arm} {stats.mean:.2f} ± {stats.std:.2f} (n={stats.n})")

    for paper in dict.fromkeys(r.claim.paper for r, _ in results):
        mine = [(r, setting) for r, setting in results if r.claim.paper == paper]
        body.append(f"<h2>{e(PAPER_TITLES.get(paper, paper))}</h2><p class=legend>Setting: {e(mine[0][1])}</p>")
        rows = []
        for r, _ in mine:
            c, i = r.claim, r.interval
            notes = "".join(f"<div class=note>{e(n)}</div>" for n in ([c.note] if c.note else []) + list(r.notes))
            rows.append(
                f"<tr><th>{e(c.text)}{notes}</th><td>Table {e(str(c.source.table))}: "
                f"{e(c.source.numbers())}</td><td>{arm(r.baseline)}</td><td>{arm(r.treatment)}</td>"
                f'<td class="num">{i.diff:+.2f}</td><td>{e(i.bounds())} ({e(i.method)})</td>'
                f'<td class="{e(r.verdict)}">{e(r.verdict)}</td></tr>'
            )
        body.append(
            "<table><thead><tr><th>claim</th><th>paper</th><th>baseline</th><th>treatment</th>"
            f"<th>Δ ({e(mine[0][0].claim.metric)})</th><th>95 % interval</th><th>verdict</th></tr>"
            f"</thead><tbody>{''.join(rows)}</tbody></table>"
        )
        for r, _ in mine:
            name = f"{paper}-{r.claim.id}.png"
            if _copy_figure(claims_dir / "figures", name, figure_dir):
                body.append(_figure([figure_dir / name], out_dir, f"{paper}/{r.claim.id}: {r.verdict}"))
    return "\n".join(body)


def _copy_figure(source: Path, name: str, target: Path) -> bool:
    """Copy the figure ``source/name`` into the site (False when there is none). A claims report is data: the
    name (from its claims.json) must be one plain file name, and the file a regular file inside ``source``, not a
    link (a figure linked to a private file would be published) -- else it is left out, with a warning."""
    if "/" in name or "\\" in name or name.startswith(".") or not name.endswith(".png"):
        print(
            f"depthbench results: warning: claims figure {printable(name)!r} is not a plain file name; left out",
            file=sys.stderr,
        )
        return False
    try:
        copy_regular(source / name, target / name, inside=source, what="claims figure")
    except FileNotFoundError:
        return False
    except BadFile as e:
        print(f"depthbench results: warning: {printable(e)}; left out of the report", file=sys.stderr)
        return False
    return True


def build(
    views: list[TableView],
    runs: pd.DataFrame,
    problems: Problems,
    out_dir: Path,
    bench: pd.DataFrame | None = None,
    diagnose_csvs=(),
    claims: tuple | None = None,
) -> list[Path]:
    """Write the site under ``out_dir``; returns the pages written. ``claims``: ``(folder, results)`` of a
    ``depthbench claims`` report (``results.claims.read_report``) for the Claims page."""
    out_dir = Path(out_dir)
    has_claims = claims is not None
    fig_dir = out_dir / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    papers = list(dict.fromkeys(v.paper for v in views))
    run_paths = list(runs["path"]) if len(runs) else []
    made = {
        "stepsnet_depth": figures.stepsnet_depth(views, fig_dir / "stepsnet_depth"),
        "horesnet_depth": figures.horesnet_depth(views, fig_dir / "horesnet_depth"),
        "horesnet_lr": figures.horesnet_lr(runs, fig_dir / "horesnet_lr"),
        "scalenet_epochs": figures.scalenet_epochs(views, fig_dir / "scalenet_epochs"),
        "sret_lrc": figures.sret_lrc(run_paths, fig_dir / "sret_lrc"),
        "throughput_accuracy": figures.throughput_accuracy(bench, views, fig_dir / "throughput_accuracy"),
        "top1_vs_gflops": figures.top1_vs_gflops(views, fig_dir / "top1_vs_gflops"),
        "training_curves": figures.training_curves(run_paths[:20], fig_dir / "training_curves"),
        "shortcut_ratio": figures.shortcut_ratio(diagnose_csvs, fig_dir / "shortcut_ratio"),
    }
    e = html.escape
    pages = []

    def write(name: str, title: str, body: str) -> None:
        path = out_dir / name
        atomic_write(path, _page(title, body, name, papers, has_claims))  # a planted link is replaced, not followed
        pages.append(path)

    # index
    counts = runs["status"].value_counts().to_dict() if len(runs) else {}
    run_line = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none yet"
    body = [f"<p>{len(runs)} run directories collected ({e(run_line)}). Papers:</p><ul>"]
    for paper in papers:
        s = [table_status(v) for v in views if v.paper == paper]
        body.append(
            f'<li><a href="{paper}.html">{e(PAPER_TITLES.get(paper, paper))}</a> — {len(s)} tables, '
            f"{sum(x.rows for x in s)} rows, {sum(x.verified for x in s)}/{sum(x.checkable for x in s)} "
            f"architecture-verified, {sum(x.run_paper for x in s)} run at the paper's setting, "
            f"{sum(x.run_reduced for x in s)} at a reduced setting only</li>"
        )
    body.append("</ul>")
    body.append(_figure(made["top1_vs_gflops"], out_dir, figures.gflops_title(figures.gflops_papers(views))))
    if len(problems):
        body.append(f"<h2>Problems found in the run directories</h2><pre>{e(problems.summary())}</pre>")
    write("index.html", "depthbench results", "\n".join(body))

    # status
    body = [
        "<p>Per table: rows (a) expressed as a model/config, (b) architecture-verified (of the rows with a "
        "checked architecture column), (c) run at the paper's setting or only at a reduced one, (d) rendered "
        "with ours next to the paper's number.</p>",
        _frame_html(status_frame(views)),
    ]
    reasons = [(s.paper, s.table, n, w) for s in map(table_status, views) for n, w in s.reasons]
    if reasons:
        body.append("<h2>Rows that carry a reason instead of a model</h2>")
        body.append(_frame_html(pd.DataFrame(reasons, columns=["paper", "table", "row", "reason"])))
    write("status.html", "Reproduction status", "\n".join(body))

    # one page per paper
    for paper in papers:
        body = [LEGEND]
        for name, (caption, owner) in figures.FIGURES.items():
            if owner == paper:
                body.append(_figure(made[name], out_dir, caption))
        for view in (v for v in views if v.paper == paper):  # a wide table scrolls by itself, not the page
            body.append(f'<div class="wide">{render.to_html(view, anchor=f"table-{view.table.id}")}</div>')
        write(f"{paper}.html", f"{PAPER_TITLES.get(paper, paper)}: tables and figures", "\n".join(body))

    if has_claims:
        write("claims.html", "The papers' claims at reduced scale", _claims_body(Path(claims[0]), claims[1], out_dir))

    # runs
    body = [
        _figure(made["training_curves"], out_dir, "Training curves (up to 20 runs)"),
        _figure(made["shortcut_ratio"], out_dir, figures.FIGURES["shortcut_ratio"][0]),
    ]
    if len(runs):
        shown = [
            c
            for c in (
                "experiment",
                "run_id",
                "status",
                "model",
                "scale",
                "config_file",
                "overrides",
                "config_changes",
                "seed",
                "epochs",
                "eval_epoch",
                "metric.top1",
                "metric.bbox_mAP",
                "metric.segm_mAP",
                "metric.mIoU",
            )
            if c in runs
        ]
        body.append(_runs_html(runs, shown))
    else:
        body.append("<p>No run directories found.</p>")
    write("runs.html", "Runs", "\n".join(b for b in body if b))
    return pages
