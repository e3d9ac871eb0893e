"""``depthbench results`` end to end: runs whose files are hostile are listed as problems of their run, printed
without control characters."""

from __future__ import annotations

import json

import pytest

from clitools import run_cli_here
from fixtures.files import HOSTILE

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
