"""``depthbench jobs`` end to end: the Slurm job records it lists are data, printed without control characters."""

from __future__ import annotations

import json
import os

import pytest

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
