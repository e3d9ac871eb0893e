"""The papers' figures, redrawn from the tables and our runs (matplotlib; each saved as PNG and SVG).

Every figure draws the paper's points with hollow markers on dashed lines and ours with filled markers on solid
lines; the legend says which is which. A function returns the files it wrote, or ``[]`` when it has nothing to
draw (e.g. no run logged what it plots).

Records read from metrics.jsonl besides the engine's ``train``/``epoch``/``eval``:
``{"kind": "lrc", "epoch": E, "global_step": S, "coefficients": {module: {role: value}}}`` — SReT's learnable
residual coefficients (``models.sret.lrc_coefficients(model)``), logged by a run that tracks their evolution.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
# labels come from run and experiment names, which may hold "$" (a run named exp$\frac{$ would make mathtext
# raise): text is drawn as written
matplotlib.rcParams["text.parse_math"] = False
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator  # noqa: E402

from results.compare import COLUMN_METRICS, TableView  # noqa: E402
from results.runs import load_curves  # noqa: E402

PAPER_STYLE = dict(marker="o", markerfacecolor="none", linestyle="--", linewidth=1.2)
OURS_STYLE = dict(marker="o", linestyle="-", linewidth=1.6)
ACCURACY_COLUMNS = ("top1", "acc", "in1k")
PAPER_COLORS = {"stepsnet": "C0", "sret": "C1", "transnext": "C2", "horesnet": "C3", "scalenet": "C4"}
PAPER_NAMES = {
    "stepsnet": "StepsNet",
    "sret": "SReT",
    "transnext": "TransNeXt",
    "horesnet": "HO-ResNet",
    "scalenet": "ScaleNet",
}
LEGEND_SIZE = 9  # points; readable where the report shows a figure at its 42rem width
# a run drawn again with another's exact curve: another dash pattern and markers, so neither hides the other
DUPLICATE_STYLES = [
    dict(linestyle=(0, (4, 3)), marker="x", markevery=0.1),
    dict(linestyle=(0, (1, 2)), marker="+", markevery=0.13),
    dict(linestyle=(0, (6, 2, 1, 2)), marker="^", markevery=0.17, markerfacecolor="none"),
]


def _save(fig, out: Path) -> list[Path]:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    paths = [out.with_suffix(".png"), out.with_suffix(".svg")]
    fig.savefig(paths[0], dpi=90)
    fig.savefig(paths[1])
    plt.close(fig)
    return paths


def plain_log_axis(axis) -> None:
    """A log-scale axis labelled with plain numbers (0.5, 1, 2, 3, 5, 10, 20...) -- matplotlib's own labels read
    "2×10⁰, 3×10⁰" between powers of ten."""
    axis.set_major_locator(LogLocator(base=10))
    axis.set_minor_locator(LogLocator(base=10, subs=(2, 3, 5)))

    def text(value, _pos) -> str:
        return f"{value:,.0f}" if value >= 1 else f"{value:g}"

    axis.set_major_formatter(FuncFormatter(text))
    axis.set_minor_formatter(FuncFormatter(text))


def _num(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _series_plot(ax, series: dict, xlabel: str, ylabel: str, title: str) -> None:
    """``series``: label -> {"paper": [(x, y)], "ours": [(x, y)]}; same colour per label."""
    for i, (label, points) in enumerate(series.items()):
        color = f"C{i}"
        paper = sorted(points.get("paper", []))
        ours = sorted(points.get("ours", []))
        if paper:
            ax.plot(*zip(*paper), color=color, label=f"{label} — paper", **PAPER_STYLE)
        if ours:
            ax.plot(*zip(*ours), color=color, label=f"{label} — ours", **OURS_STYLE)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def _main_lines(view: TableView):
    return [line for line in view.lines if line.setting is None and not line.row.reason]


def _accuracy_column(view: TableView) -> str | None:
    return next((c for c in ACCURACY_COLUMNS if c in view.table.columns), None)


def _view(views, paper: str, table: str) -> TableView | None:
    return next((v for v in views if v.paper == paper and v.table.id == table), None)


def depth_series(view: TableView, x_column: str, group) -> dict:
    """Paper and ours points of a table: x from ``x_column``'s paper value, y the accuracy column."""
    acc = _accuracy_column(view)
    series = defaultdict(lambda: {"paper": [], "ours": []})
    for line in _main_lines(view):
        x = _num(line.row.paper.get(x_column))
        if x is None or acc is None:
            continue
        label = group(line.row.name)
        y = _num(line.row.paper.get(acc))
        if y is not None:
            series[label]["paper"].append((x, y))
        ours = line.cells[acc].ours
        if ours is not None:
            series[label]["ours"].append((x, ours))
    return dict(series)


def stepsnet_depth(views: list[TableView], out: Path) -> list[Path]:
    """StepsNet Fig. 1 / Table 5: accuracy vs depth, baseline vs StepsNet, fixed width (5a) and fixed FLOPs (5b)."""
    panels = [
        (v, t)
        for v, t in (
            (_view(views, "stepsnet", "5a"), "Fig. 1 / Table 5a: fixed width (DeiT)"),
            (_view(views, "stepsnet", "5b"), "Table 5b: fixed FLOPs (Swin-T)"),
        )
        if v
    ]
    if not panels:
        return []
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.8), squeeze=False)
    for ax, (view, title) in zip(axes[0], panels):
        series = depth_series(view, "blocks", lambda name: "StepsNet" if name.startswith("Steps") else "baseline")
        _series_plot(ax, series, "#blocks", "ImageNet top-1 (%)", title)
    return _save(fig, out)


def horesnet_depth(views: list[TableView], out: Path) -> list[Path]:
    """HO-ResNet Table 3 as a plot: CIFAR-10 accuracy vs #layers, one curve per ODE scheme."""
    view = _view(views, "horesnet", "3")
    if view is None:
        return []
    series = depth_series(view, "layers", lambda name: re.sub(r"\s*X\d+", "", name).strip())
    fig, ax = plt.subplots(figsize=(6, 4))
    _series_plot(ax, series, "#layers", "CIFAR-10 accuracy (%)", "HO-ResNet: accuracy vs depth per scheme (Table 3)")
    return _save(fig, out)


def horesnet_lr(runs: pd.DataFrame, out: Path) -> list[Path]:
    """HO-ResNet's learning-rate robustness: our accuracy vs lr, one curve per model (the paper gives it as a plot
    only, without numbers, so there are no paper points)."""
    if runs.empty or "lr" not in runs or "metric.top1" not in runs:
        return []
    sel = runs[runs["model"].astype(str).str.startswith("horesnet") & runs["lr"].notna() & runs["metric.top1"].notna()]
    if sel.empty or sel["lr"].nunique() < 2:
        return []
    series = {}
    for model, group in sel.groupby("model"):
        means = group.groupby("lr")["metric.top1"].mean()
        series[model] = {"ours": list(zip(means.index.astype(float), means.values))}
    fig, ax = plt.subplots(figsize=(6, 4))
    _series_plot(ax, series, "learning rate", "top-1 (%)", "HO-ResNet: accuracy vs learning rate (ours)")
    ax.set_xscale("log")
    plain_log_axis(ax.xaxis)
    return _save(fig, out)


def scalenet_epochs(views: list[TableView], out: Path) -> list[Path]:
    """ScaleNet Table VII as a plot: top-1 vs training epochs, 24-layer models from scratch vs expanded by ScaleNet;
    ours as the eval curves of the runs matched to those rows."""
    view = _view(views, "scalenet", "VII")
    if view is None:
        return []
    series = defaultdict(lambda: {"paper": [], "ours": []})
    for line in _main_lines(view):
        model = line.row.name.split(" (")[0]
        label = f"{model} {line.row.paper.get('method', '')}".strip()
        x, y = _num(line.row.paper.get("epochs")), _num(line.row.paper.get("top1"))
        if x is not None and y is not None:
            series[label]["paper"].append((x, y))
        for path in line.runs:
            curve = load_curves(path)
            if "kind" in curve and "top1" in curve:
                evals = curve[(curve["kind"] == "eval") & curve["top1"].notna()]
                series[label]["ours"] += list(zip(evals["epoch"] + 1, evals["top1"]))
    fig, ax = plt.subplots(figsize=(6, 4))
    _series_plot(
        ax,
        dict(series),
        "training epochs",
        "ImageNet top-1 (%)",
        "ScaleNet: expanded vs trained from scratch (Table VII)",
    )
    return _save(fig, out)


def sret_lrc(run_paths, out: Path) -> list[Path]:
    """SReT's learnable residual coefficients over training, from ``{"kind": "lrc"}`` records."""
    fig, ax = plt.subplots(figsize=(6.4, 4))
    drawn = 0
    for path in run_paths:
        curve = load_curves(path)
        if "kind" not in curve:
            continue
        records = curve[curve["kind"] == "lrc"]
        values = defaultdict(list)
        for _, record in records.iterrows():
            for module, roles in (record.get("coefficients") or {}).items():
                for role, value in roles.items():
                    values[f"{module}.{role}"].append((record["epoch"], value))
        for i, (name, points) in enumerate(sorted(values.items())):
            ax.plot(*zip(*points), label=f"{Path(path).name}: {name}", linewidth=1, color=f"C{i % 10}")
            drawn += 1
    if not drawn:
        plt.close(fig)
        return []
    ax.set_xlabel("epoch")
    ax.set_ylabel("coefficient value")
    ax.set_title("SReT: learnable residual coefficients (ours)", fontsize=10)
    ax.grid(alpha=0.3)
    if drawn <= 12:
        ax.legend(fontsize=6)
    return _save(fig, out)


def training_curves(run_paths, out: Path) -> list[Path]:
    """Training loss (per logged step) and eval top-1 (per epoch) of any set of runs."""
    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(10, 3.8))
    drawn = draw_training_curves(loss_ax, acc_ax, run_paths)
    if not drawn:
        plt.close(fig)
        return []
    for ax, ylabel in ((loss_ax, "training loss"), (acc_ax, "eval top-1 (%)")):
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    loss_ax.set_xlabel("optimizer step")
    acc_ax.set_xlabel("epoch")
    return _save(fig, out)


def draw_training_curves(loss_ax, acc_ax, run_paths) -> list[str]:
    """Each run's loss and top-1 curves on the two axes; returns the legend labels drawn. Runs whose curve is
    exactly another's (seeds that did not change anything, a copied run) are drawn with another dash pattern and
    markers, and their label says whose curve they repeat."""
    labels = []
    firsts = {loss_ax: {}, acc_ax: {}}  # curve points -> label of the first run drawn with them
    repeats = {loss_ax: defaultdict(int), acc_ax: defaultdict(int)}

    def plot(ax, x, y, label, color, **style):
        key = tuple(zip(x.tolist(), y.tolist()))
        if len(key) <= 3:  # a line of one point draws nothing: show its points
            style = {"marker": ".", **style}
        first = firsts[ax].setdefault(key, label)
        if first != label:  # identical to an earlier curve: keep both visible
            style = {**style, **DUPLICATE_STYLES[repeats[ax][key] % len(DUPLICATE_STYLES)]}
            repeats[ax][key] += 1
            label = f"{label} (identical to {first})"
        ax.plot(x, y, color=color, label=label, linewidth=1, **style)
        labels.append(label)

    for i, path in enumerate(run_paths):
        curve = load_curves(path)
        if "kind" not in curve:
            continue
        label, color = f"{Path(path).parent.name}/{Path(path).name}", f"C{i % 10}"
        train = curve[curve["kind"] == "train"]
        if "loss" in train and train["loss"].notna().any():
            plot(loss_ax, train["global_step"], train["loss"], label, color)
        evals = curve[curve["kind"] == "eval"]
        if "top1" in evals and evals["top1"].notna().any():
            plot(acc_ax, evals["epoch"] + 1, evals["top1"], label, color, marker=".")
    return labels


def shortcut_ratio(csv_paths, out: Path) -> list[Path]:
    """``depthbench diagnose``'s shortcut ratio γ_l against relative depth l/L, one curve per model."""
    frames = []
    for path in csv_paths:
        try:
            frames.append(pd.read_csv(path))
        except (OSError, ValueError, pd.errors.ParserError):
            continue
    frames = [f for f in frames if {"model", "depth", "gamma"} <= set(f.columns)]
    if not frames:
        return []
    fig, ax = plt.subplots(figsize=(6, 4))
    for model, group in pd.concat(frames).groupby("model"):
        ax.plot(group["depth"], group["gamma"], label=model, marker=".", linewidth=1)
    ax.set_xlabel("relative depth l/L")
    ax.set_ylabel("shortcut ratio γ")
    ax.set_title("Shortcut ratio per block (depthbench diagnose)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, out)


def throughput_accuracy(bench: pd.DataFrame, views: list[TableView], out: Path) -> list[Path]:
    """Top-1 vs inference throughput (TransNeXt Fig. 6 style) for the models in ``depthbench bench`` CSVs
    (timm's benchmark schema: ``model``, ``infer_samples_per_sec``, ...)."""
    if bench is None or bench.empty or not {"model", "infer_samples_per_sec"} <= set(bench.columns):
        return []
    speed = bench.groupby("model")["infer_samples_per_sec"].max()
    points = _accuracy_by_model(views)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    drawn, drawn_ours = 0, False
    for i, (model, throughput) in enumerate(speed.items()):
        if model not in points:
            continue
        paper, ours, paper_name = points[model]
        color = f"C{i % 10}"
        if paper is not None:
            ax.plot([throughput], [paper], color=color, **{**PAPER_STYLE, "linestyle": "none"})
        if ours is not None:
            ax.plot([throughput], [ours], color=color, **{**OURS_STYLE, "linestyle": "none"})
            drawn_ours = True
        ax.annotate(
            model,
            (throughput, ours if ours is not None else paper),
            fontsize=6,
            xytext=(3, 3),
            textcoords="offset points",
        )
        drawn += 1
    if not drawn:
        plt.close(fig)
        return []
    _marker_legend(ax, ours=drawn_ours)
    ax.set_xscale("log")
    plain_log_axis(ax.xaxis)
    ax.set_xlabel("inference throughput (samples/s, from depthbench bench)")
    ax.set_ylabel("ImageNet top-1 (%)")
    ax.set_title("Throughput vs accuracy", fontsize=10)
    ax.grid(alpha=0.3)
    return _save(fig, out)


def _accuracy_by_model(views) -> dict:
    """model -> (paper top-1, our top-1 at the paper's setting, paper) from the first table that has both."""
    found = {}
    for view in views:
        acc = _accuracy_column(view)
        if acc is None:
            continue
        for line in _main_lines(view):
            model = line.row.model
            paper = _num(line.row.paper.get(acc))
            if model and paper is not None and (model not in found or found[model][1] is None):
                found[model] = (paper, line.cells[acc].ours, view.paper)
    return found


def _marker_legend(ax, extra=(), ours: bool = True) -> None:
    """paper (hollow) and ours (filled) -- ours only where the chart has a point of ours (no runs yet: none)."""
    handles = [Line2D([], [], color="k", linestyle="none", marker="o", markerfacecolor="none", label="paper")]
    handles += [Line2D([], [], color="k", linestyle="none", marker="o", label="ours")] if ours else []
    ax.legend(handles=handles + list(extra), fontsize=LEGEND_SIZE)


def gflops_papers(views: list[TableView]) -> list[str]:
    """The papers with an ImageNet table that prints both top-1 and GFLOPs: those :func:`top1_vs_gflops` draws."""
    return list(
        dict.fromkeys(v.paper for v in views if _accuracy_column(v) is not None and "flops_g" in v.table.columns)
    )


def gflops_title(papers: list[str]) -> str:
    """What the top-1 vs GFLOPs chart shows, naming its papers ("All five papers" only when it has all five)."""
    if len(papers) == len(PAPER_NAMES) and set(papers) == set(PAPER_NAMES):
        return "All five papers: top-1 vs GFLOPs"
    return "Top-1 vs GFLOPs: " + ", ".join(PAPER_NAMES.get(p, p) for p in papers)


def top1_vs_gflops(views: list[TableView], out: Path) -> list[Path]:
    """Every ImageNet model of the papers on one chart: top-1 vs GFLOPs, the paper's point (its FLOPs and top-1)
    hollow, ours (the audited FLOPs, our top-1 at the paper's setting) filled, one colour per paper."""
    fig, ax = plt.subplots(figsize=(7.5, 5))
    seen, papers, drawn_ours = set(), [], False
    for view in views:
        acc = _accuracy_column(view)
        if acc is None or "flops_g" not in view.table.columns:
            continue
        color = PAPER_COLORS.get(view.paper, "C7")
        for line in _main_lines(view):
            key = (view.paper, line.row.model or line.row.name, line.row.paper.get(acc))
            flops, top1 = _num(line.row.paper.get("flops_g")), _num(line.row.paper.get(acc))
            if key in seen or flops is None or top1 is None:
                continue
            seen.add(key)
            ax.plot([flops], [top1], color=color, **{**PAPER_STYLE, "linestyle": "none"})
            ours_flops, ours_top1 = line.cells["flops_g"].ours, line.cells[acc].ours
            if ours_top1 is not None:
                ax.plot(
                    [ours_flops if ours_flops is not None else flops],
                    [ours_top1],
                    color=color,
                    **{**OURS_STYLE, "linestyle": "none"},
                )
                drawn_ours = True
            if view.paper not in papers:
                papers.append(view.paper)
    if not seen:
        plt.close(fig)
        return []
    _marker_legend(
        ax,
        [
            Line2D([], [], color=PAPER_COLORS.get(p, "C7"), linestyle="none", marker="s", label=PAPER_NAMES.get(p, p))
            for p in papers
        ],
        ours=drawn_ours,
    )
    ax.set_xscale("log")
    plain_log_axis(ax.xaxis)
    ax.set_xlabel("GFLOPs (multiply-adds, 224² unless the table says otherwise)")
    ax.set_ylabel("ImageNet-1K top-1 (%)")
    ax.set_title(gflops_title(papers), fontsize=10)
    ax.grid(alpha=0.3, which="both")
    return _save(fig, out)


# name -> (title, papers it belongs to); used by the report to place figures
FIGURES = {
    "stepsnet_depth": ("StepsNet: accuracy vs depth (Fig. 1, Table 5)", "stepsnet"),
    "horesnet_depth": ("HO-ResNet: accuracy vs depth per scheme", "horesnet"),
    "horesnet_lr": ("HO-ResNet: accuracy vs learning rate", "horesnet"),
    "scalenet_epochs": ("ScaleNet: accuracy vs training epochs, expanded vs scratch", "scalenet"),
    "sret_lrc": ("SReT: LRC coefficient evolution", "sret"),
    "throughput_accuracy": ("Throughput vs accuracy (Fig. 6 style)", "transnext"),
    "top1_vs_gflops": ("Top-1 vs GFLOPs", "index"),  # the report's caption names the papers (gflops_title)
    "training_curves": ("Training curves", "runs"),
    "shortcut_ratio": ("Shortcut ratio (depthbench diagnose)", "runs"),
}


def metric_of(column: str) -> str:
    return COLUMN_METRICS.get(column, column)
