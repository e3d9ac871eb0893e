"""results.figures: every figure draws from hand-written runs and bench rows, and one with nothing to draw returns
nothing and writes nothing; the overview chart names its papers with plain log ticks, identical training curves
stay visible."""

import json
import re
from pathlib import Path

from fixtures.paper_views import RUNS
from fixtures.paper_views import png_ok as _png_ok
from results import compare, figures, paper_tables, runs


def _lrc_run(tmp_path):
    run = tmp_path / "runs" / "sret-t" / "r1"
    run.mkdir(parents=True)
    (run / "meta.json").write_text('{"status": "done", "experiment": "sret-t", "run_id": "r1"}')
    lines = [
        json.dumps(
            {
                "kind": "lrc",
                "epoch": e,
                "global_step": 10 * e,
                "coefficients": {"transformers.0.blocks.0": {"attn_id": 1 + 0.1 * e, "attn_res": 1 - 0.05 * e}},
            }
        )
        for e in range(5)
    ]
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return run


def _sweep_runs(tmp_path):
    paths = []
    for lr, top1 in ((0.01, 80.0), (0.1, 90.0), (1.0, 70.0)):
        run = tmp_path / "sweep" / "horesnet86_lr-sweep" / f"lr-{lr}"
        run.mkdir(parents=True)
        (run / "meta.json").write_text('{"status": "done"}')
        (run / "config.py").write_text(f"model = dict(name='horesnet86_euler')\noptim = dict(lr={lr})\n")
        (run / "metrics.jsonl").write_text(json.dumps({"kind": "eval", "epoch": 0, "top1": top1}) + "\n")
        paths.append(run)
    return runs.collect([tmp_path / "sweep"])[0]


def test_every_figure_draws_from_fixtures(tmp_path):
    import pandas as pd

    real = [t for p in paper_tables.available_papers() for t in paper_tables.load_paper(p)]
    frame, _ = runs.collect([RUNS])
    index = compare.RunIndex(frame)
    views = [compare.view_table(t, index) for t in real]
    diagnose_csv = tmp_path / "shortcut_ratio.csv"
    diagnose_csv.write_text(
        "model,block,depth,gamma,sigma,width,step,step_width\n"
        + "".join(f"m{m},{b},{b / 4},{0.5 + 0.1 * b * m},1,64,,\n" for m in (1, 2) for b in range(5))
    )
    bench = pd.DataFrame(
        {
            "model": ["resnet18", "steps_resnet18", "deit_tiny_patch16_224"],
            "infer_samples_per_sec": [900.0, 700.0, 1200.0],
            "param_count": [11.7, 11.7, 5.7],
            "infer_gmacs": [1.8, 1.8, 1.3],
        }
    )
    out = tmp_path / "fig"
    made = {
        "stepsnet_depth": figures.stepsnet_depth(views, out / "a"),
        "horesnet_depth": figures.horesnet_depth(views, out / "b"),
        "horesnet_lr": figures.horesnet_lr(_sweep_runs(tmp_path), out / "c"),
        "scalenet_epochs": figures.scalenet_epochs(views, out / "d"),
        "sret_lrc": figures.sret_lrc([_lrc_run(tmp_path)], out / "e"),
        "throughput_accuracy": figures.throughput_accuracy(bench, views, out / "f"),
        "top1_vs_gflops": figures.top1_vs_gflops(views, out / "g"),
        "training_curves": figures.training_curves(list(frame["path"]), out / "h"),
        "shortcut_ratio": figures.shortcut_ratio([diagnose_csv], out / "i"),
    }
    assert set(made) == set(figures.FIGURES)
    for name, paths in made.items():
        assert paths, f"{name} drew nothing"
        assert _png_ok(paths), name


def test_figures_with_nothing_to_draw_return_nothing(tmp_path):
    import pandas as pd

    empty = runs.collect([])[0]
    assert figures.horesnet_lr(empty, tmp_path / "x") == []
    assert figures.sret_lrc([RUNS / "resnet18_8xb128-300e_in1k" / "seed0"], tmp_path / "y") == []
    assert figures.throughput_accuracy(pd.DataFrame(), [], tmp_path / "z") == []
    assert not list(tmp_path.iterdir())


def _captured_figures(monkeypatch):
    """Figures as the figure functions leave them, instead of saved and closed."""
    from results import figures

    captured = []
    monkeypatch.setattr(figures, "_save", lambda fig, out: captured.append(fig) or [Path(out).with_suffix(".png")])
    return captured


def test_overview_chart_names_its_papers_with_plain_log_ticks(monkeypatch):
    """The top-1 vs GFLOPs chart of two papers says which two (it said "All five papers"), its legend is readable
    and its log axis reads 1, 2, 5, 10 (it read "2×10⁰, 3×10⁰")."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from results import compare, figures, paper_tables

    captured = _captured_figures(monkeypatch)
    index = compare.RunIndex(pd.DataFrame(), compare.MODEL_RENAMES)
    views = [compare.view_table(t, index, None) for p in ("stepsnet", "sret") for t in paper_tables.load_paper(p)]
    assert figures.top1_vs_gflops(views, Path("overview"))
    fig = captured[0]
    ax = fig.axes[0]
    fig.canvas.draw()
    assert ax.get_title() == "Top-1 vs GFLOPs: StepsNet, SReT"
    assert figures.gflops_title(figures.gflops_papers(views)) == ax.get_title()
    assert figures.gflops_title(list(figures.PAPER_NAMES)) == "All five papers: top-1 vs GFLOPs"
    legend = ax.get_legend()
    assert min(t.get_fontsize() for t in legend.get_texts()) >= 9
    assert [t.get_text() for t in legend.get_texts()][-2:] == ["StepsNet", "SReT"]
    # no runs, so no point of ours: no "ours" legend entry either (issue 58 item 9: the demo report's had one)
    assert [t.get_text() for t in legend.get_texts()] == ["paper", "StepsNet", "SReT"]
    labels = [t.get_text() for t in ax.get_xticklabels(minor=False) + ax.get_xticklabels(minor=True) if t.get_text()]
    assert labels and all(re.fullmatch(r"[\d.,]+", label) for label in labels), labels
    assert {"1", "2", "10"} <= set(labels), labels
    plt.close(fig)


def test_identical_training_curves_stay_visible(tmp_path, monkeypatch):
    """Two runs with the same curve: the second is drawn with its own dash pattern and markers, and its legend entry
    says whose curve it repeats (one hid the other)."""
    import matplotlib.pyplot as plt

    from results import figures

    records = [{"kind": "train", "epoch": 0, "global_step": s, "loss": 2.0 - s / 10} for s in range(1, 6)]
    records += [{"kind": "eval", "epoch": e, "top1": 50.0 + e} for e in range(3)]
    paths = []
    for name in ("seed0", "seed1", "seed2"):
        run = tmp_path / "exp" / name
        run.mkdir(parents=True)
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        paths.append(run)
    captured = _captured_figures(monkeypatch)
    assert figures.training_curves(paths, tmp_path / "curves")
    for ax in captured[0].axes:
        lines = ax.get_lines()
        labels = [line.get_label() for line in lines]
        assert labels == ["exp/seed0", "exp/seed1 (identical to exp/seed0)", "exp/seed2 (identical to exp/seed0)"]
        assert len({(line.get_linestyle(), line.get_marker()) for line in lines}) == 3
    plt.close(captured[0])
