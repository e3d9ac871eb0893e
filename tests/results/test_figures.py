"""results.figures: every figure draws from hand-written runs and bench rows, and one with nothing to draw returns
nothing and writes nothing."""

import json

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
