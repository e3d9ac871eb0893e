"""slurm/jobs.py: the job records under DEPTHBENCH_RUNS/slurm are data (named when unreadable, stripped of control
characters), and `depthbench jobs --why`'s summary of an attempt's records and stack dumps."""

from __future__ import annotations

import json
import os

from fixtures.faults import record, write_attempt
from fixtures.files import in_time as _in_time
from slurm import jobs as slurm_jobs
import pytest
from clitools import fresh_imports


def test_job_records_that_are_fifos_or_escapes_are_named_and_stripped(tmp_path, monkeypatch):
    from slurm.jobs import read_records

    monkeypatch.setenv("DEPTHBENCH_RUNS", str(tmp_path))
    (tmp_path / "slurm").mkdir()
    os.mkfifo(tmp_path / "slurm" / "1.json")
    (tmp_path / "slurm" / "2.json").write_text(
        json.dumps(
            {
                "paper": "p\x1b[31m",
                "elements": [{"job": "2", "work_dir": str(tmp_path / "run"), "name": "job\x1b]0;owned\x07\r"}],
            }
        )
    )
    (tmp_path / "slurm" / "3.json").write_text('{"elements": ' + "[" * 20000 + "]" * 20000 + "}")
    problems = []
    records = _in_time(lambda: read_records(problems))
    assert [e["name"] for r in records for e in r["elements"]] == ["job?]0;owned??"]
    assert records[0]["paper"] == "p?[31m"
    assert any("1.json is a FIFO" in p for p in problems) and any("3.json is nested" in p for p in problems)


def test_why_summarises_each_attempt_and_rank(tmp_path):
    run = tmp_path / "run"
    folder = write_attempt(run, 0, exits=[(20.0, 0, "n1", 76)], heartbeats=[(0, "n1", 9), (1, "n2", 8)])
    (folder / "stacks-rank-0.txt").write_text(
        json.dumps({"rank": 0, "main_thread": "0x00000000000000aa"}) + "\n"
        'Current thread 0x00000000000000bb (most recent call first):\n  File "/x/watchdog.py", line 5 in _watch\n\n'
        'Thread 0x00000000000000aa (most recent call first):\n'
        '  File "/x/torch/distributed/c10d.py", line 9 in all_reduce\n'
        '  File "/repo/harness/engine/backends.py", line 59 in agree\n'
    )
    (run / "meta.json").write_text(
        json.dumps({"status": "running", "restarts": [{**record(0, exit="hang", step=8), "rank": 1, "node": "n2"}]})
    )
    text = slurm_jobs.why(str(run))
    assert "1 failed attempt(s)" in text and "attempt 0: rank 1 on n2 hang at step 8" in text
    assert "rank 0 on n1, last step 9: stack dump: all_reduce (c10d.py:9) in agree (backends.py:59)" in text
    assert "rank 1 on n2, last step 8: no stack dump (the process was frozen or dead" in text


@pytest.mark.tier("integration")
def test_jobs_and_cancel_start_without_torch():
    """``depthbench jobs``/``cancel`` are status commands a user runs often: what they import (slurm.jobs, its fault
    record reader harness.core.faults, slurm.paths) imports no torch, timm or mmengine (~4 s of CPU each call)."""
    _, imported = fresh_imports("import slurm.jobs", ("torch", "timm", "mmengine", "slurm.submit"))
    assert imported == []
