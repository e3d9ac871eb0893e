"""slurm.jobs: the job records under DEPTHBENCH_RUNS/slurm are data: named when unreadable, stripped of control
characters."""

from __future__ import annotations

import json
import os

from fixtures.files import in_time as _in_time


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
