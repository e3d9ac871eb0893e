"""``depthbench bench A B`` prints how B compares with A (issue 26: a pair benchmarked without a preset printed
two rows and no ratio). Formatting only: the rows are made up; the measurement is tests/harness/measure/test_bench.py's."""

import pytest
from harness.measure.bench_report import format_ratios


def row(label, rate, gmacs, mem=None):
    r = {"label": label, "infer_samples_per_sec": rate, "train_samples_per_sec": rate / 3, "infer_gmacs": gmacs}
    if mem:
        r["infer_peak_mem_mb"] = r["train_peak_mem_mb"] = mem
    return r


def test_two_models_print_their_ratio():
    text = format_ratios(
        [row("deit_small", 100.0, 4.6, mem=200), row("steps_deit_small", 93.0, 4.74, mem=258)], ["infer", "train"]
    )
    first = text.splitlines()[0]
    assert first == (
        "steps_deit_small vs deit_small: GMACs 1.030x; infer 0.930x mem 1.290x; train 0.930x mem 1.290x"
    ), first
    assert "medians" in text.splitlines()[-1]


def test_more_models_each_against_the_first_and_missing_values():
    lines = format_ratios([row("a", 10.0, 1.0), row("b", 20.0, 2.0), row("c", 5.0, 0.0)], ["infer"]).splitlines()
    assert lines[:3] == [
        "b vs a: GMACs 2.000x; infer 2.000x",
        "c vs a: GMACs 0.000x; infer 0.500x",
        "(ratios of the medians above: samples/s, peak memory)",
    ]
    assert (
        format_ratios([row("a", 0.0, 0.0), row("b", 1.0, 1.0)], ["infer"]).splitlines()[0]
        == "b vs a: GMACs n/a; infer n/a"
    )


@pytest.mark.tier("integration")
def test_the_command_prints_the_ratio_under_the_table(monkeypatch, capsys):
    from harness.cli import main
    from harness.commands import bench
    from harness.measure.bench import BenchResult

    def full(label, rate, gmacs):
        return {
            **row(label, rate, gmacs),
            "infer_samples_per_sec_q25": rate,
            "infer_samples_per_sec_q75": rate,
            "infer_step_time": 1000 / rate,
            "infer_gflops": 1.0,
            "infer_mfu": 0.5,
            "peak_gflops_fp32": 100.0,
        }

    def fake_run(models, show=None, **kwargs):  # what run() hands to show() after measuring
        result = BenchResult([full("deit_small", 100.0, 4.6), full("steps_deit_small", 93.0, 4.74)], [])
        show(result)
        return result

    monkeypatch.setattr(bench, "run", fake_run)
    assert main(["bench", "deit_small", "steps_deit_small"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-2] == "steps_deit_small vs deit_small: GMACs 1.030x; infer 0.930x", out


@pytest.mark.slow
@pytest.mark.tier("integration")
def test_bench_compare_pairs_each_model_with_its_variants(one_thread):
    from harness.commands.bench import run

    result = run(
        ["resnet18"],
        input_size=16,
        batch_size=2,
        mode="train",
        compare=["fused", "channels-last"],
        repeats=2,
        iters=1,
        warmup=1,
        memory=False,
    )
    assert [r["label"] for r in result.rows] == ["resnet18", "resnet18 +fused", "resnet18 +channels-last"]
    assert [r["optimizer"] for r in result.rows] == ["adamw", "adamw-fused", "adamw"]  # fused vs plain AdamW
    assert [r["channels_last"] for r in result.rows] == [False, False, True]
    assert [(p["baseline"], p["candidate"]) for p in result.pairs] == [
        ("resnet18", "resnet18 +fused"),
        ("resnet18", "resnet18 +channels-last"),
    ]
    assert all(p["train_throughput_ratio"] > 0 for p in result.pairs)


@pytest.mark.slow
def test_bench_pairs_preset_compiled(one_thread, tmp_path, monkeypatch):
    """--pairs with --compile: every preset model compiled (the CSV says so); the memory processes get the options
    they are measured with (compile included). HO-ResNet's preset at width 4 and 8 px, inference."""
    import harness.measure.bench as bench
    from harness.commands.bench import run

    jobs = []
    monkeypatch.setattr(bench, "memory_in_subprocess", lambda p, mode, *a, **kw: jobs.append((p.label, kw)) or 1.0)
    out = tmp_path / "b.csv"
    result = run(
        pairs="horesnet:schemes",
        model_kwargs={"width": 4},
        input_size=8,
        batch_size=2,
        mode="infer",
        compile=True,
        repeats=1,
        iters=1,
        warmup=1,
        out=out,
    )
    assert len(result.pairs) == 3 and all(r["compile"] is True for r in result.rows)
    assert len(jobs) == 4 and all(kw["compile"] is True for _, kw in jobs)
    assert (tmp_path / "b_pairs.csv").exists()


@pytest.mark.slow
@pytest.mark.tier("integration")
def test_bench_grad_checkpointing_needs_the_model_s_support():
    from harness.commands.bench import run
    from harness.core.errors import DepthbenchError

    with pytest.raises(DepthbenchError, match="SReT_T has no set_grad_checkpointing"):
        run(["SReT_T"], input_size=32, batch_size=1, mode="train", grad_checkpointing=True, repeats=1, memory=False)
