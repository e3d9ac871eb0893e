"""``depthbench jobs`` end to end: the Slurm job records it lists are data, printed without control characters."""

from __future__ import annotations

import json
import os

import pytest
from clitools import run_cli
from fixtures.files import SECRET
from clitools import run_cli_here as cli

pytestmark = pytest.mark.tier("integration")


def test_jobs_prints_no_terminal_escape_from_a_record(tmp_path, cli):
    (tmp_path / "slurm").mkdir()
    run = tmp_path / "exp" / "run\x1b[2J"
    run.mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({"status": "running\x1b]0;x\x07", "experiment": "exp"}))
    (tmp_path / "slurm" / "7.json").write_text(
        json.dumps(
            {"paper": "deit", "elements": [{"job": "7", "work_dir": str(run), "name": "name\x1b]0;owned\x07\x1b[31m"}]}
        )
    )
    os.mkfifo(tmp_path / "slurm" / "8.json")
    out = cli("jobs", env={"DEPTHBENCH_RUNS": str(tmp_path), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout + out.stderr and "\x07" not in out.stdout
    assert "name?]0;owned??[31m" in out.stdout and "run?[2J" in out.stdout
    assert "8.json is a FIFO" in out.stderr


@pytest.mark.tier("integration")
def test_jobs_why_reads_only_the_runs_own_regular_files_and_prints_no_escapes(tmp_path, secret):
    run = tmp_path / "runs" / "exp" / "r1"
    folder = run / "faults" / "attempt-0"
    folder.mkdir(parents=True)
    (folder / "stacks-rank-0.txt").symlink_to(secret)  # a dump that is a link: its bytes are not printed
    os.mkfifo(folder / "step-rank-0.bin")  # a FIFO: never waited on
    (folder / "heartbeat-rank-0.json").write_text(json.dumps({"node": "n1\x1b[31m", "step": 2}))
    (folder / "error-rank-1.json").write_text(json.dumps({"type": "E\x1b]0;owned\x07", "message": "m\x1b[2J"}))
    outside = tmp_path / "outside" / "faults" / "attempt-0"  # where "0/../../.." would lead
    outside.mkdir(parents=True)
    (outside / "stacks-rank-5.txt").symlink_to(secret)
    (run / "meta.json").write_text(
        json.dumps(
            {
                "status": "done",
                "slurm_job_id": "9",
                "error": "RuntimeError: gloo",
                "restarts": [
                    {"attempt": "0/../../..", "exit": "x", "action": "requeued"},
                    {
                        "attempt": 0,
                        "exit": "SIGKILL\x1b[31m",
                        "rank": 1,
                        "node": "n2",
                        "error": "E\x1b[2J",
                        "action": "requeued on 1 node(s)\x1b]0;x\x07",
                    },
                ],
            }
        )
    )
    env = {"DEPTHBENCH_RUNS": str(tmp_path / "runs")}
    why = run_cli("jobs", "--why", run, env=env, timeout=120)
    assert why.returncode == 0, why.stderr
    assert SECRET not in why.stdout and "\x1b" not in why.stdout and "\x07" not in why.stdout
    assert "rank 5" not in why.stdout and "no attempt number: no per-rank records" in why.stdout
    # issue 58 item 10: a done run's old error is history, not its current state
    assert why.stdout.splitlines()[0].endswith("status done, 2 failed attempt(s)")
    assert "error: RuntimeError: gloo" not in why.stdout and "history (earlier attempts" in why.stdout
    listing = run_cli("jobs", env=env, timeout=120)
    assert listing.returncode == 0, listing.stderr
    assert "last failure: attempt 0: rank 1 on n2 SIGKILL[31m" in listing.stdout.replace("?", "")
    assert "\x1b" not in listing.stdout and "\x07" not in listing.stdout


PRESET = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"


@pytest.mark.tier("integration")
def test_jobs_with_broken_records(runs, monkeypatch, tmp_path):
    """Records and run directories anyone may have written: missing or wrong-typed fields, nested JSON, huge
    numbers. Each is a listed problem (or a field left empty), never a traceback; the good runs are listed."""
    folder = runs / "slurm"
    folder.mkdir(parents=True)
    good = {"job": "7", "name": "good-run", "config": PRESET, "work_dir": str(runs / "exp" / "run7"), "log": None}
    records = {
        "1": {"job_id": "1", "job_name": "x"},  # no elements
        "2": [1, 2, 3],  # not an object
        "3": {"elements": "none"},
        "4": {"elements": [1, {"job": ["x"]}, {"job": "9", "work_dir": 5}, {"job": "10;rm", "work_dir": "/x"}]},
        "5": "[" * 100_000 + "]" * 100_000,  # RecursionError in json
        "6": "{\"elements\": [" + "9" * 5000 + "]}",  # a 5,000-digit number
        "7": {
            "paper": ["horesnet"],
            "table": {"a": 1},
            "elements": [good, {**good, "job": "8", "name": {"n": 1}, "config": 5, "log": []}],
        },
    }
    for name, record in records.items():
        (folder / f"{name}.json").write_text(record if isinstance(record, str) else json.dumps(record))
    metas = {
        "hand": {"slurm_job_id": [1], "status": "done"},
        "typed": {
            "slurm_job_id": "12",
            "config_file": 3,
            "experiment": ["x"],
            "status": {"a": 1},
            "best_metric": "high",
            "slurm_restart_count": "many",
            "restarts": [
                3,
                {"attempt": "x", "excluded": 5, "action": ["a"]},
                {"exit": {"a": 1}, "excluded": ["n1", 2], "action": "stopped: y", "bogus": 1},
            ],
        },
        "nested": "[" * 100_000 + "]" * 100_000,
        "list": [1, 2],
    }
    for name, meta in metas.items():
        (runs / "other" / name).mkdir(parents=True)
        (runs / "other" / name / "meta.json").write_text(meta if isinstance(meta, str) else json.dumps(meta))
    monkeypatch.setenv("PATH", str(tmp_path / "no-slurm"))  # no squeue: run states from the run directories
    code, out, err = cli("jobs", "--json")
    assert code == 0, err
    rows = {r["job"]: r for r in map(json.loads, out.splitlines())}
    assert set(rows) == {"7", "8", "12"}, rows
    assert rows["8"]["name"] is None and rows["8"]["config"] == "" and rows["7"]["paper"] is None
    assert (rows["12"]["status"], rows["12"]["best_metric"], rows["12"]["config"]) == ("-", None, "")
    assert (rows["12"]["failures"], rows["12"]["excluded"]) == (2, ["n1"])  # meta.json's restarts, type-checked
    assert rows["12"]["last_failure"].endswith("; stopped: y")
    why = cli("jobs", "--why", runs / "other" / "typed")
    assert why[0] == 0 and "2 failed attempt(s)" in why[1] and "Traceback" not in why[2], why
    problems = err.splitlines()
    assert all(line.startswith("depthbench jobs: ") for line in problems) and "Traceback" not in err
    for name in ("1", "2", "3", "5", "6"):
        assert any(f"{name}.json" in line for line in problems), (name, problems)
    assert sum("4.json: run" in line for line in problems) == 4
    assert any("slurm_job_id" in line and "hand" in line for line in problems)
    code, out, err = cli("jobs")  # the table
    assert code == 0 and "good-run" in out and "Traceback" not in err
    code, out, err = cli("cancel", runs / "exp" / "nowhere")  # cancel reads the records too
    assert code == 2 and err.splitlines()[-1].startswith("depthbench cancel: error: ") and "neither" in err, err
