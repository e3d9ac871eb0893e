"""``depthbench results`` end to end: runs whose files are hostile are listed as problems of their run, printed
without control characters."""

from __future__ import annotations

import json

import pytest

from clitools import run_cli_here
from fixtures.files import HOSTILE
from fixtures.paper_views import DEMO, RUNS

pytestmark = pytest.mark.tier("integration")


def test_results_print_no_terminal_escape_from_a_run(tmp_path, cli):
    run = tmp_path / "exp\x1b[2J" / "r1"
    run.mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({"status": "done\x1b[31m", "experiment": "exp\x1b]0;t\x07"}))
    (run / "metrics.jsonl").write_text("[" * 100000 + "\n")
    out = cli("results", "--runs", tmp_path, "--no-audit", "--format", "md")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "\x1b" not in out.stdout + out.stderr and "\x07" not in out.stdout + out.stderr


@pytest.mark.parametrize("document", HOSTILE)
def test_a_bad_meta_json_is_one_problem_of_its_run(tmp_path, document):
    """A run's meta.json is no command's one input: export only checks that a run has one, and the commands that
    read it across runs (results, jobs, demo) list a bad one as that run's problem and go on."""
    run = tmp_path / "runs" / "exp" / "r1"
    run.mkdir(parents=True)
    (run / "meta.json").write_text(document, errors="surrogateescape")
    code, _, err = run_cli_here(
        "results", "--runs", tmp_path / "runs", "--paper", "horesnet", "--table", "1", "--no-audit"
    )
    assert code == 0 and f"{run}: meta.json unreadable (" in err and "Traceback" not in err, err


def depthbench(capsys, *args) -> tuple[int, str, str]:
    from harness.cli import main

    code = main(["results", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.tier("integration")
def test_cli_tables_status_csv_and_bad_input(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("DEPTHBENCH_CACHE", str(tmp_path / "cache"))
    code, out, err = depthbench(capsys, "--file", DEMO, "--runs", RUNS, "--table", "2", "--no-audit")
    assert code == 0 and "| Swin-T | 1x | 43.7 / 44.1 / +0.4 | 39.8 / 40.2 / +0.4 |" in out
    assert "8 run(s) collected" in err
    code, out, _ = depthbench(capsys, "--file", DEMO, "--runs", RUNS, "--status", "--no-audit")
    assert code == 0 and "Lost row — the OCR lost this row" in out
    assert "demo: 6 rows, 5 expressed" in out
    code, out, _ = depthbench(
        capsys, "--file", DEMO, "--runs", RUNS, "--format", "csv", "--out", tmp_path / "o", "--no-audit"
    )
    assert code == 0 and (tmp_path / "o" / "results.csv").read_text().count("\n") > 10
    assert (tmp_path / "o" / "figures" / "training_curves.png").is_file()
    for args, message in [
        (("--paper", "stepnet"), "unknown paper 'stepnet'; did you mean stepsnet?"),
        (("--paper", "stepsnet", "--table", "99"), "no table '99' in stepsnet"),
        (("--runs", tmp_path / "missing"), "--runs"),
        (("--format", "html"), "give --out DIR"),
        (("--file", tmp_path / "nope.yaml"), "no such tables file"),
        (("--out", tmp_path / "o" / "results.csv"), "is a file"),
        (("--bench", tmp_path / "o" / "results.csv"), "has no 'model' and 'infer_samples_per_sec' columns"),
        (("--bench", tmp_path / "missing.csv"), "--bench"),
    ]:
        code, out, err = depthbench(capsys, *args)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and message in lines[0], err
        assert lines[0].startswith("depthbench results: error: ") and not out
