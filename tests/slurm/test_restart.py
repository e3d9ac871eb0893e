"""slurm/restart.py, without a cluster: reading an attempt's records (the first failed rank and its node; the rank a
hang or a collective timeout blames) and the restart decision. The end-to-end scenarios on the local Slurm cluster
are in tests/slurm/test_slurm.py. The requeue step itself (``python -m slurm.restart``, Slurm's tools stubbed) runs
against planted records: links, FIFOs, odd names, huge numbers, a malformed restart count."""

import json

from fixtures.faults import record, write_attempt
from slurm.restart import Failure, decide, read_attempt
import os
import subprocess
import sys
from pathlib import Path
import pytest
from harness.core.errors import DepthbenchError
from harness.core.rundir import slurm_meta
from harness.engine import watchdog as wd
from fixtures.files import SECRET


def test_the_first_failed_rank_and_its_node(tmp_path):
    # rank 1 was SIGKILLed (bash reports 137) on n2; rank 0 then lost its peer (exit 1) and exited later
    write_attempt(
        tmp_path,
        0,
        exits=[(10.5, 0, "n1", 1), (10.0, 1, "n2", 137)],
        heartbeats=[(0, "n1", 7), (1, "n2", 7)],
        errors=[(0, "n1", "DistBackendError", 7)],
    )
    failure = read_attempt(tmp_path, 0, 137)
    assert (failure.exit, failure.rank, failure.node, failure.step) == ("SIGKILL", 1, "n2", 7)
    # a config error on the requeued attempt: exit 2 outranks what its peers did
    write_attempt(tmp_path, 1, exits=[(5.0, 1, "n2", 1), (5.1, 0, "n1", 2)])
    assert read_attempt(tmp_path, 1, 2).exit == "exit 2"


def test_a_hang_blames_the_rank_that_left_no_dump_or_fell_behind(tmp_path):
    # rank 1 frozen (SIGSTOP): no dump, killed by srun later; rank 0's watchdog dumped and exited 76 first
    write_attempt(
        tmp_path,
        0,
        exits=[(20.0, 0, "n1", 76), (80.0, 1, "n2", 137)],
        heartbeats=[(0, "n1", 9), (1, "n2", 9)],
        dumps=[(0, 9)],
    )
    failure = read_attempt(tmp_path, 0, 76)
    assert (failure.exit, failure.rank, failure.node) == ("hang", 1, "n2") and "no stack dump" in failure.error
    write_attempt(
        tmp_path,
        1,
        exits=[(20.0, 0, "n1", 76), (20.1, 1, "n2", 76)],
        heartbeats=[(0, "n1", 12), (1, "n2", 11)],
        dumps=[(0, 12), (1, 11)],
    )
    assert read_attempt(tmp_path, 1, 76).rank == 1  # behind the others
    write_attempt(
        tmp_path,
        2,
        exits=[(20.0, 0, "n1", 76), (20.1, 1, "n2", 76)],
        heartbeats=[(0, "n1", 12), (1, "n2", 12)],
        dumps=[(0, 12), (1, 12)],
    )
    assert read_attempt(tmp_path, 2, 76).node is None  # everyone waited in the same place: nobody to exclude


def test_a_collective_timeout_blames_the_rank_that_stopped_beating_not_the_one_that_waited(tmp_path):
    """Issue 58 item 11: rank 1 froze at t=40 (its heartbeat stopped); rank 0 waited in the all-reduce, beating,
    until the collective timeout raised at t=100 and it exited first. The frozen rank is blamed, its node excluded."""
    write_attempt(
        tmp_path,
        0,
        exits=[(100.5, 0, "n1", 1), (160.0, 1, "n2", 137)],
        heartbeats=[(0, "n1", 9, 99.0), (1, "n2", 9, 40.0)],
        errors=[(0, "n1", "DistBackendError", 9)],
    )
    failure = read_attempt(tmp_path, 0, 1)
    assert (failure.exit, failure.rank, failure.node, failure.step) == ("hang", 1, "n2", 9)
    assert "no heartbeat for 60 s before rank 0 failed (exit 1)" in failure.error
    # Slurm resumed the frozen rank to kill it and its heartbeat thread beat once more: the stall it recorded
    # (40 s to 161 s) still shows it was silent when rank 0 failed
    folder = tmp_path / "faults" / "attempt-0"
    (folder / "heartbeat-rank-1.json").write_text(
        json.dumps({"node": "n2", "step": 9, "written": 161.0, "stalls": [[40.0, 161.0]]})
    )
    assert (read_attempt(tmp_path, 0, 1).rank, read_attempt(tmp_path, 0, 1).node) == (1, "n2")
    # both ranks beat until the first failure: the first failed rank is the one (a plain crash)
    write_attempt(
        tmp_path,
        1,
        exits=[(100.5, 0, "n1", 1), (101.0, 1, "n2", 1)],
        heartbeats=[(0, "n1", 9, 99.0), (1, "n2", 9, 95.0)],
        errors=[(0, "n1", "ValueError", 9)],
    )
    assert (read_attempt(tmp_path, 1, 1).rank, read_attempt(tmp_path, 1, 1).exit) == (0, "exit 1")


def test_restart_decision():
    crash = Failure(2, "SIGKILL", 1, "n2", step=9)
    assert decide(crash, [], 3)[0] is True
    assert decide(crash, [record(0), record(1, step=7)], 3) == (
        True,
        "attempt 2: rank 1 on n2 SIGKILL at step 9: requeued (3 of 3 restarts)",
    )
    again, reason = decide(crash, [record(0, step=1), record(1, step=2), record(2, step=3)], 3)
    assert not again and "all 3 restarts used (--max-restarts)" in reason
    assert decide(crash, [record(0, step=9, action="stopped: x")], 0)[0] is False  # --max-restarts 0
    # the same step failing the same way twice: deterministic
    again, reason = decide(crash, [record(0, step=9)], 3)
    assert not again and "as on attempt 0: the same step failed the same way twice" in reason
    assert decide(crash, [record(0, step=9, exit="exit 1")], 3)[0] is True  # another way
    assert (
        decide(Failure(1, "exit 1", 0, "n1", 4, "OSError: x"), [record(0, "exit 1", 4, "ValueError: y")], 3)[0] is True
    )  # another error type
    assert (
        decide(Failure(1, "exit 1", 0, "n2", 4, "OSError: x"), [record(0, "exit 1", 4, "OSError: y")], 3)[0] is False
    )  # same type, any node
    again, reason = decide(Failure(0, "exit 2", 0, "n1"), [], 3)
    assert not again and "bad input (exit 2)" in reason and "not requeued" in reason


ROOT = Path(__file__).resolve().parents[2]


def stub_slurm(tmp_path) -> dict:
    """``scontrol`` and ``sinfo`` that log their arguments (the requeue step's calls); the environment of a job."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "scontrol.log"
    (bin_dir / "scontrol").write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    (bin_dir / "sinfo").write_text("#!/bin/sh\necho 'n1 idle'\necho 'n2 idle'\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_JOB_ID": "42",
        "SLURM_RESTART_COUNT": "0",
        "PYTHONPATH": str(ROOT),
    }


def crashed_run(tmp_path) -> Path:
    """A run whose attempt 0 ended with rank 1 SIGKILLed on n2."""
    run = tmp_path / "run"
    folder = run / "faults" / "attempt-0"
    folder.mkdir(parents=True)
    (folder / "exits").write_text("100.0 1 n2 137\n101.0 0 n1 1\n")
    (folder / "heartbeat-rank-1.json").write_text(json.dumps({"node": "n2", "step": 4, "written": 99.0}))
    (run / "meta.json").write_text(json.dumps({"status": "failed", "error": "RuntimeError: gloo"}))
    return run


def plant_odd_step_name(run, secret):
    (run / "faults" / "attempt-0" / "step-rank-x.bin").write_bytes(b"\0" * 8)


def plant_huge_exit_code(run, secret):
    with open(run / "faults" / "attempt-0" / "exits", "a") as fh:
        fh.write(f"102.0 0 n1 {'9' * 5000}\n")


def plant_linked_meta(run, secret):
    (run / "meta.json").unlink()
    (run / "meta.json").symlink_to(secret)


def plant_fifo_step_file(run, secret):
    os.mkfifo(run / "faults" / "attempt-0" / "step-rank-1.bin")


def plant_faults_link(run, secret):  # restarts.json (written when there is no meta.json) must not go through it
    (run / "meta.json").unlink()
    elsewhere = run.parent / "elsewhere"
    (run / "faults").rename(elsewhere)
    (run / "faults").symlink_to(elsewhere, target_is_directory=True)


def plant_bad_history(run, secret):  # a history whose attempt names a path and whose node is an option
    (run / "meta.json").write_text(
        json.dumps(
            {
                "status": "running",
                "restarts": [
                    {"attempt": "0/../..", "exit": "x", "action": "requeued"},
                    {
                        "attempt": 0,
                        "exit": "SIGKILL",
                        "step": 1,
                        "node": "n1 Partition=x",
                        "excluded": ["n1 Nodes=y", 5],
                        "action": "requeued on 1 node(s)",
                    },
                ],
            }
        )
    )


@pytest.mark.tier("integration")
@pytest.mark.parametrize(
    "plant",
    [
        plant_odd_step_name,
        plant_huge_exit_code,
        plant_linked_meta,
        plant_fifo_step_file,
        plant_faults_link,
        plant_bad_history,
    ],
)
def test_the_requeue_step_requeues_whatever_the_records_hold(tmp_path, secret, plant):
    """Any bad record is ignored or named in one line; the job is still requeued (a crash here loses the job), no
    file outside the run is written, nothing waits on a FIFO, no planted node name reaches scontrol."""
    env = stub_slurm(tmp_path)
    run = crashed_run(tmp_path)
    plant(run, secret)
    out = subprocess.run(
        [sys.executable, "-m", "slurm.restart", str(run), "--status", "137", "--nodes", "2", "--min-nodes", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stdout + out.stderr
    calls = (tmp_path / "scontrol.log").read_text().splitlines()
    assert calls[0] == "requeuehold 42" and calls[-1] == "release 42", calls
    assert not any("Partition=x" in c or "Nodes=y" in c for c in calls), calls
    assert secret.read_text() == SECRET
    assert not (tmp_path / "elsewhere" / "restarts.json").exists()


@pytest.mark.tier("integration")
def test_a_requeued_run_says_it_is_waiting_to_restart_not_failed(tmp_path):
    """Issue 58 item 10: while Slurm holds the job for its next attempt, meta.json says ``restarting`` (restart K
    of N) and the failed attempt's error is history, not the run's error."""
    env = stub_slurm(tmp_path)
    run = crashed_run(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "slurm.restart", str(run), "--status", "137", "--max-restarts", "3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    meta = json.loads((run / "meta.json").read_text())
    assert (meta["status"], meta["restart"], meta.get("error")) == ("restarting", "1 of 3", None)
    assert meta["restarts"][0]["action"].startswith("requeued")


@pytest.mark.tier("integration")
@pytest.mark.parametrize("value", ["x", "-1", "9" * 5000, "1e3", "٣"])
def test_a_malformed_restart_count_is_one_line(value, tmp_path, monkeypatch):
    """SLURM_RESTART_COUNT names the attempt's folder and goes to meta.json: anything but a count is one line (it
    was int() of it: a traceback), and the requeue step reads attempt 0 rather than stop."""
    monkeypatch.setenv("SLURM_RESTART_COUNT", value)
    with pytest.raises(DepthbenchError, match="SLURM_RESTART_COUNT=.* is not a restart count"):
        slurm_meta({"SLURM_JOB_ID": "1", "SLURM_RESTART_COUNT": value})
    with pytest.raises(DepthbenchError, match="is not a restart count"):
        wd.attempt_dir(tmp_path)
    env = {**stub_slurm(tmp_path), "SLURM_RESTART_COUNT": value}
    run = crashed_run(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "slurm.restart", str(run), "--status", "137"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stdout + out.stderr
