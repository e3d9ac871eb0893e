"""``depthbench bench``'s rows as text and as CSV: the table, the ratios and the pairs the command prints, and the
``--out`` CSV the rows are appended to (timm's benchmark columns plus ours; its existing rows kept, the file checked
before any work)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from harness.core.errors import DepthbenchError
from harness.core.files import MAX_LOG_BYTES, BadFile, atomic_write, check_writable_file, read_text


# ------------------------------------------------------------------------------------------------ the CSV
def existing_rows(path: str | Path | None, key: str = "model") -> list[dict]:
    """Existing rows of ``--out`` (kept), after checking the file can be written; before any work. ``key``: the
    column every such CSV has (``model``; the pairs file: ``candidate``)."""
    if not path:
        return []
    out = check_writable_file(path, "--out", "the benchmark CSV (e.g. bench.csv)")
    if not out.exists():
        return []
    try:
        text = read_text(out, max_bytes=MAX_LOG_BYTES, what="--out", errors="strict")  # no FIFO, no link
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    except (OSError, UnicodeDecodeError, csv.Error, BadFile) as e:
        raise DepthbenchError(
            f"--out {out} exists and is not a readable CSV ({e}); rows are appended to an "
            f"existing file, so choose another name"
        ) from None
    if rows and key not in rows[0]:
        raise DepthbenchError(
            f"--out {out} exists and is not a depthbench/timm benchmark CSV (no '{key}' column); choose another name"
        )
    return rows


def append_csv(path: Path, old_rows: list[dict], rows: list[dict]) -> None:
    """``old_rows`` (what :func:`existing_rows` read) and ``rows`` written as ``path``, every column of both."""
    columns = list(dict.fromkeys([c for r in old_rows + rows for c in r]))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    writer.writerows(old_rows + rows)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(Path(path), buffer.getvalue())
    except OSError as e:  # the disk filled up or the folder went away during the run; the table was shown
        raise DepthbenchError(
            f"cannot write {path}: {e.strerror or e}; the results are printed above", exit_code=1
        ) from None


# ------------------------------------------------------------------------------------------------ the table
def format_table(rows: list[dict], modes) -> str:
    width = max(len(r["label"]) for r in rows)
    lines = [
        f"{'model':<{width}}  {'mode':<5} {'samples/s':>9} {'[q25 - q75]':>17} {'ms/step':>9} {'GMACs':>6} "
        f"{'GFLOP/s':>8} {'MFU':>6} {'peak MiB':>9} {'alloc MiB':>9}"
    ]
    for r in rows:
        for m in modes:
            mem, alloc = r.get(f"{m}_peak_mem_mb"), r.get(f"{m}_peak_mib")
            lines.append(
                f"{r['label']:<{width}}  {m:<5} {r[f'{m}_samples_per_sec']:9.2f} "
                f"[{r[f'{m}_samples_per_sec_q25']:7.2f} - {r[f'{m}_samples_per_sec_q75']:7.2f}] "
                f"{r[f'{m}_step_time']:9.1f} {r['infer_gmacs']:6.3f} {r[f'{m}_gflops']:8.1f} "
                f"{r.get(f'{m}_mfu', float('nan')):6.3f} {'' if mem is None else f'{mem:9.0f}':>9} "
                f"{'' if alloc is None else f'{alloc:9.0f}'}"
            )
    first = rows[0]
    peaks = ", ".join(f"{k[len('peak_gflops_') :]} {v:.1f}" for k, v in first.items() if k.startswith("peak_gflops_"))
    lines.append(
        f"(matmul peak GFLOP/s: {peaks}; MFU = 2 x MACs x samples/s (x3 for a training step) / peak, per round, median)"
    )
    return "\n".join(lines)


def format_ratios(rows: list[dict], modes) -> str:
    """Every model after the first against the first (the baseline): the ratios of their medians."""

    def ratio(a, b) -> str:
        return f"{a / b:.3f}x" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else "n/a"

    base = rows[0]
    lines = []
    for r in rows[1:]:
        parts = [f"GMACs {ratio(r['infer_gmacs'], base['infer_gmacs'])}"]
        for m in modes:
            part = f"{m} {ratio(r[f'{m}_samples_per_sec'], base[f'{m}_samples_per_sec'])}"
            if r.get(f"{m}_peak_mem_mb") and base.get(f"{m}_peak_mem_mb"):
                part += f" mem {ratio(r[f'{m}_peak_mem_mb'], base[f'{m}_peak_mem_mb'])}"
            parts.append(part)
        lines.append(f"{r['label']} vs {base['label']}: " + "; ".join(parts))  # (`A / B:` are --pairs' lines)
    lines.append("(ratios of the medians above: samples/s, peak memory)")
    return "\n".join(lines)


def format_pairs(pair_rows: list[dict], modes) -> str:
    lines = []
    for r in pair_rows:
        parts = []
        for m in modes:
            part = f"{m} {r[f'{m}_throughput_ratio']:.3f}x [{r[f'{m}_ratio_q25']:.3f}-{r[f'{m}_ratio_q75']:.3f}]"
            if f"{m}_memory_ratio" in r:
                part += f" mem {r[f'{m}_memory_ratio']:.2f}x"
            if f"{m}_peak_mib_ratio" in r:
                part += f" alloc {r[f'{m}_peak_mib_ratio']:.2f}x"
            parts.append(part)
        lines.append(f"{r['candidate']} / {r['baseline']}: GMACs {r['gmacs_ratio']:.3f}x; " + "; ".join(parts))
        lines.append(f"    paper: {r['claim']}")
    return "\n".join(lines)
