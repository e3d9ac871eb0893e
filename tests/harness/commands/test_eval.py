"""``depthbench eval``'s last line says where its rows went (issue 58: every command says where its results are)."""

from pathlib import Path

from harness.commands.eval import _say_where
from results.evaluate import EvalResult


def test_the_last_line_names_the_run_and_the_csv_the_rows_went_to(capsys):
    _say_where(EvalResult([{"metric": "top1"}], recorded=Path("/runs/exp/r1"), out=Path("/tmp/rows.csv")))
    assert capsys.readouterr().err == "depthbench eval: rows recorded in /runs/exp/r1/metrics.jsonl and /tmp/rows.csv\n"


def test_nothing_is_claimed_when_nothing_was_recorded(capsys):
    _say_where(EvalResult([{"metric": "top1"}]))
    _say_where(EvalResult([], recorded=Path("/runs/exp/r1"), is_main=False))
    assert capsys.readouterr().err == ""
