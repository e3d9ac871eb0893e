"""Render table views (results/compare.py) as Markdown, CSV, LaTeX or HTML, laid out as the paper prints them.

Every numeric cell carries three parts — the paper's value, ours, the delta (ours − paper) — and reads
``paper / ours / Δ`` in text formats. Ours is the mean ± std (n=…) over seeds; "—" where no run exists; a
reduced-scale line is labelled "↳ reduced: <what differs>" and has no delta. Architecture cells (from the verify
audit) end in ✓ (matches the printed number) or ✗.

HTML is written by hand rather than with ``DataFrame.to_html``/Styler because each cell holds three stacked
values with their own classes; pandas would flatten them to one string.
"""

from __future__ import annotations

import csv
import html
import io

from results.compare import Cell, Line, TableView

MARK = {"pass": "✓", "fail": "✗", "error": "✗"}


def fmt_number(value: float, d: int) -> str:
    return f"{value:,.{d}f}" if abs(value) >= 10000 else f"{value:.{d}f}"


def paper_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    d = getattr(value, "decimals", 0 if isinstance(value, int) else 2)
    return fmt_number(float(value), d)


def _digits(cell: Cell) -> int:
    paper = cell.paper
    d = getattr(paper, "decimals", cell.decimals)
    if d is None:
        d = 0 if isinstance(paper, int) and not isinstance(paper, bool) else 2
    if cell.kind == "arch":
        return d if cell.column in ("params", "layers", "blocks") else d + 1
    return max(d, 1)


def ours_text(cell: Cell) -> str:
    if cell.kind == "text":
        return ""
    if cell.kind == "arch":
        if cell.ours is None:
            return "unchecked" if cell.status == "reason" else ("error" if cell.status == "error" else "—")
        return f"{fmt_number(cell.ours, _digits(cell))} {MARK.get(cell.status, '')}".rstrip()
    if cell.ours is None:
        return "—"
    d = _digits(cell)
    text = fmt_number(cell.ours, d)
    if cell.n > 1:
        text += f" ± {fmt_number(cell.std, d)} (n={cell.n})"
    if cell.status:
        text += f" [{cell.status}]"
    return text


def delta_text(cell: Cell) -> str:
    if cell.delta is None:
        return ""
    d = _digits(cell)
    rounded = round(cell.delta, d)
    return "±0" if rounded == 0 else f"{rounded:+.{d}f}"


def cell_text(cell: Cell, note: int | None = None) -> str:
    """``paper / ours / Δ``; ``note``: the number of the footnote that says why the cell is unchecked."""
    parts = [paper_text(cell.paper)] if cell.paper is not None else []
    if cell.kind != "text":
        parts.append(ours_text(cell) + (f" [{note}]" if note else ""))
        if cell.delta is not None:
            parts.append(delta_text(cell))
    return " / ".join(p for p in parts if p)


def footnotes(view: TableView) -> tuple[dict, list[str]]:
    """The reasons of the architecture cells left unchecked (``unchecked:`` in the tables file), as numbered notes
    under the table: ``({(line index, column): number}, [note text, ...])``; one number per distinct reason."""
    numbers, texts = {}, []
    for i, line in enumerate(view.lines):
        for column, cell in line.cells.items():
            if cell.kind == "arch" and cell.status == "reason" and cell.ours is None:
                text = cell.note or "no reason given in the tables file"
                if text not in texts:
                    texts.append(text)
                numbers[(i, column)] = texts.index(text) + 1
    return numbers, texts


def line_label(line: Line) -> str:
    if line.setting is not None:
        return f"↳ reduced: {line.setting}"
    return line.row.name


def _reason(line: Line) -> str:
    return line.row.reason if line.setting is None and line.row.reason else ""


def title(view: TableView) -> str:
    return f"Table {view.table.id}: {view.table.caption}"


def to_markdown(view: TableView) -> str:
    columns = list(view.table.columns)
    headers = ["Row"] + [str(view.table.columns[c]) for c in columns]
    out = [
        f"### {title(view)}",
        "",
        "Cells: paper / ours / Δ (ours − paper); ✓ architecture matches the printed number; — no run.",
        "",
        "| " + " | ".join(_md(h) for h in headers) + " |",
        "|" + "---|" * len(headers),
    ]
    numbers, notes = footnotes(view)
    for i, line in enumerate(view.lines):
        label = line_label(line) + (f" (not reproduced: {_reason(line)})" if _reason(line) else "")
        cells = [cell_text(line.cells[c], numbers.get((i, c))) if c in line.cells else "" for c in columns]
        out.append("| " + " | ".join(_md(v) for v in [label] + cells) + " |")
    if notes:
        out += [""] + [f"[{k}] unchecked: {_md(text)}  " for k, text in enumerate(notes, 1)]
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def csv_records(view: TableView) -> list[dict]:
    """Long format: one record per (line, column) with every part as its own field."""
    records = []
    for line in view.lines:
        for column, cell in line.cells.items():
            records.append(
                {
                    "paper": view.paper,
                    "table": view.table.id,
                    "row": line.row.name,
                    "setting": "paper" if line.setting is None else f"reduced: {line.setting}",
                    "column": column,
                    "header": view.table.columns.get(column, column),
                    "kind": cell.kind,
                    "paper_value": paper_text(cell.paper),
                    "ours": "" if cell.ours is None else round(cell.ours, 6),
                    "std": "" if cell.std is None else round(cell.std, 6),
                    "n": cell.n,
                    "delta": "" if cell.delta is None else round(cell.delta, 6),
                    "status": cell.status,
                    "reason": _reason(line) or cell.note,
                    "runs": " ".join(line.runs),
                }
            )
    return records


def to_csv(views: list[TableView]) -> str:
    records = [r for v in views for r in csv_records(v)]
    buf = io.StringIO()
    fields = [
        "paper",
        "table",
        "row",
        "setting",
        "column",
        "header",
        "kind",
        "paper_value",
        "ours",
        "std",
        "n",
        "delta",
        "status",
        "reason",
        "runs",
    ]
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(records)
    return buf.getvalue()


_TEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "±": r"$\pm$",
    "✓": r"\checkmark{}",
    "✗": r"$\times$",
    "Δ": r"$\Delta$",
    "↳": r"$\hookrightarrow$",
    "—": "---",
    "²": r"$^2$",
    "↓": r"$\downarrow$",
    "↑": r"$\uparrow$",
    "×": r"$\times$",
}


def _tex(text: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in str(text))


def to_latex(view: TableView) -> str:
    """A booktabs table (needs \\usepackage{booktabs,amssymb})."""
    columns = list(view.table.columns)
    out = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{_tex(title(view))} (paper / ours / $\Delta$)}}",
        r"\begin{tabular}{l" + "c" * len(columns) + "}",
        r"\toprule",
        " & ".join(["Row"] + [_tex(view.table.columns[c]) for c in columns]) + r" \\",
        r"\midrule",
    ]
    numbers, notes = footnotes(view)
    for i, line in enumerate(view.lines):
        cells = [cell_text(line.cells[c], numbers.get((i, c))) if c in line.cells else "" for c in columns]
        out.append(" & ".join(_tex(v) for v in [line_label(line)] + cells) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    out += (
        [r"\par\footnotesize " + " ".join(_tex(f"[{k}] unchecked: {text}") for k, text in enumerate(notes, 1))]
        if notes
        else []
    )
    out.append(r"\end{table}")
    return "\n".join(out) + "\n"


def to_html(view: TableView, anchor: str = "") -> str:
    """One ``<table>``: each numeric cell stacks paper, ours and Δ (classes ``paper``, ``ours``, ``delta``)."""
    e = html.escape
    columns = list(view.table.columns)
    out = [
        f'<table class="paper-table" id="{e(anchor)}">' if anchor else '<table class="paper-table">',
        f"<caption>{e(title(view))}</caption>",
        "<thead><tr><th>Row</th>"
        + "".join(f"<th>{e(str(view.table.columns[c]))}</th>" for c in columns)
        + "</tr></thead>",
        "<tbody>",
    ]
    numbers, notes = footnotes(view)
    for i, line in enumerate(view.lines):
        cls = "reduced" if line.setting is not None else ("reason" if _reason(line) else "")
        label = e(line_label(line))
        if _reason(line):
            label += f'<div class="why">not reproduced: {e(_reason(line))}</div>'
        if line.row.note and line.setting is None:
            label += f'<div class="note">{e(line.row.note)}</div>'
        cells = []
        for c in columns:
            cell = line.cells.get(c)
            if cell is None:
                cells.append("<td></td>")
                continue
            parts = f'<span class="paper">{e(paper_text(cell.paper))}</span>' if cell.paper is not None else ""
            if cell.kind != "text":
                ours = ours_text(cell) + (f" [{numbers[(i, c)]}]" if (i, c) in numbers else "")  # [k]: the note
                status = f" {cell.status}" if cell.kind == "arch" and cell.status else ""
                parts += f'<span class="ours{status}" title="{e(cell.note)}">{e(ours)}</span>'
                if cell.delta is not None:
                    sign = "neg" if cell.delta < 0 else "pos"
                    parts += f'<span class="delta {sign}">Δ {e(delta_text(cell))}</span>'
            cells.append(f'<td class="{cell.kind}">{parts}</td>')
        out.append(f'<tr class="{cls}"><th scope="row">{label}</th>' + "".join(cells) + "</tr>")
    out.append("</tbody>")
    if notes:
        out.append(
            f'<tfoot><tr><td colspan="{len(columns) + 1}">'
            + "".join(f'<div class="why">[{k}] unchecked: {e(text)}</div>' for k, text in enumerate(notes, 1))
            + "</td></tr></tfoot>"
        )
    out.append("</table>")
    return "\n".join(out)
