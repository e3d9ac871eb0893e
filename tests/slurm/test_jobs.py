"""slurm/jobs.py: the job records under DEPTHBENCH_RUNS/slurm are data (named when unreadable, stripped of control
characters), and `depthbench jobs --why`'s summary of an attempt's records and stack dumps."""

from __future__ import annotations

import json
import os

from fixtures.faults import record, write_attempt
from fixtures.files import in_time as _in_time
from harness.core.errors import DepthbenchError
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


def test_a_record_naming_a_folder_outside_the_runs_root_is_ignored_and_acts_on_nothing(tmp_path, monkeypatch):
    """A submission record is a file anyone who can write the runs folder may have written: a run directory in it
    that resolves outside the runs root (by a path, a '..' or a link) is named and ignored -- jobs lists it not and
    reads nothing there, cancel RUN and --why JOB do not take their job from it. A link under the root to a run
    elsewhere is refused the same way."""
    runs, elsewhere = tmp_path / "runs", tmp_path / "elsewhere" / "run"
    monkeypatch.setenv("DEPTHBENCH_RUNS", str(runs))
    monkeypatch.setattr(slurm_jobs, "slurm_states", lambda ids: ({}, ""))
    elsewhere.mkdir(parents=True)
    (elsewhere / "meta.json").write_text(json.dumps({"status": "done"}))
    (runs / "slurm").mkdir(parents=True)
    (runs / "exp").mkdir()
    (runs / "exp" / "linked").symlink_to(elsewhere)
    (tmp_path / "hand").mkdir()  # a run a hand-written sbatch script started, as the scan of the root finds them
    (tmp_path / "hand" / "meta.json").write_text(json.dumps({"status": "done", "slurm_job_id": 42}))
    (runs / "exp" / "hand").symlink_to(tmp_path / "hand")
    hostile = {
        "6": str(elsewhere),
        "7": f"{runs}/../elsewhere/run",
        "8": str(runs / "exp" / "linked"),
        "9": "exp/relative",
        "10": str(runs),
    }
    elements = [{"job": "5", "work_dir": str(runs / "exp" / "good")}]
    elements += [{"job": job, "work_dir": work_dir} for job, work_dir in hostile.items()]
    (runs / "slurm" / "5.json").write_text(json.dumps({"elements": elements}))
    problems = []
    records = slurm_jobs.read_records(problems)
    assert [e["job"] for r in records for e in r["elements"]] == ["5"]
    assert len(problems) == len(hostile), problems
    for problem, work_dir in zip(problems, hostile.values()):
        assert f"work_dir {work_dir}" in problem and problem.endswith("ignored") and "\n" not in problem, problem
    assert f"outside the runs root {runs}" in problems[1] and f"(it resolves to {elsewhere})" in problems[2]
    rows, _ = slurm_jobs.job_rows(problems=problems)
    assert [r["job"] for r in rows] == ["5"]  # nor the link's run, found by the scan of the runs root
    assert any(p.startswith(f"{runs / 'exp' / 'hand'}: work_dir") for p in problems[len(hostile) :]), problems
    with pytest.raises(DepthbenchError, match="nor the run directory of a submitted run"):
        slurm_jobs.cancel(f"{runs}/../elsewhere/run")
    with pytest.raises(DepthbenchError, match="no submitted run has job id 6"):
        slurm_jobs.why("6")


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
