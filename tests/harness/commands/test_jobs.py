"""``depthbench jobs`` end to end: the Slurm job records it lists are data, printed without control characters."""

from __future__ import annotations

import json
import os

import pytest
from clitools import run_cli
from fixtures.files import SECRET

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
