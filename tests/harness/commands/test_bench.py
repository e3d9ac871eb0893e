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
