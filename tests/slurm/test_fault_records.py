"""Issue 54 (the trust boundary, third pass), the cluster's surfaces without a cluster: the watchdog's fault records,
the requeue step (``python -m slurm.restart``) and ``depthbench jobs`` / ``jobs --why`` against planted links,
FIFOs, odd names, huge numbers, paths out of the run and terminal escapes; and the test switches, which only a
config turns on (issue 54 item 4, issue 58 item 12)."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from clitools import run_cli
from clitools import run_cli_here as cli

from harness.core.errors import DepthbenchError
from harness.core.rundir import slurm_meta
from harness.engine import watchdog as wd

ROOT = Path(__file__).resolve().parents[2]
PRESET = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"
SECRET = "private bytes of another file"


@pytest.fixture
def secret(tmp_path) -> Path:
    path = tmp_path / "secret.txt"
    path.write_text(SECRET)
    return path


def test_the_watchdog_writes_no_record_through_a_planted_link(tmp_path, secret, monkeypatch):
    """The step file (opened read-write), the heartbeat, the stack dump and the error record: a link planted at
    any of their names, or at the attempt's folder, is never written through -- the file it points at keeps its
    bytes."""
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    run = tmp_path / "run"
    folder = run / "faults" / "attempt-0"
    folder.mkdir(parents=True)
    for name in ("step-rank-0.bin", "heartbeat-rank-0.json", "stacks-rank-0.txt", "error-rank-0.json"):
        (folder / name).symlink_to(secret)
    dog = wd.Watchdog(run, rank=0, factor=5, floor_s=60, poll_s=0.01, on_hang=lambda: None)
    dog.beat(3)
    dog._heartbeat(1e9)
    dog.dump("test")
    wd.record_error(run, 0, ValueError("x"), 3)
    assert secret.read_text() == SECRET
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "faults").rename(tmp_path / "old-faults")
    (run / "faults").symlink_to(elsewhere, target_is_directory=True)  # the whole folder planted
    dog = wd.Watchdog(run, rank=1, factor=5, floor_s=60, on_hang=lambda: None)
    dog.beat(1)
    dog.dump("test")
    wd.record_error(run, 1, ValueError("x"), 1)
    assert list(elsewhere.iterdir()) == []


# ----------------------------------------------------------------------------------------- the requeue step
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


# ----------------------------------------------------------------------------------------- jobs, jobs --why
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


# ----------------------------------------------------------------------------------------- test switches
@pytest.mark.tier("integration")
@pytest.mark.slow
def test_test_switches_come_from_the_config_only(tmp_path):
    """The old fault-injection variables do nothing in the product (``DEPTHBENCH_INJECT_FAULT=1`` made ``train``
    SIGKILL itself); the config's ``testing.step_delay_s`` paces the steps with the hang watchdog off (it lived
    inside the watchdog, and ``hang.watchdog=False`` dropped it); a bad value is one line, exit 2."""
    tiny = [
        "model.width=8",
        "data.input_size=8",
        "data.train_subset=32",
        "data.val_subset=8",
        "batch_size=8",
        "epochs=1",
        "log_interval=1",
        "log.tensorboard=False",
        "ckpt.interval_minutes=None",
    ]
    env = {
        "DEPTHBENCH_INJECT_FAULT": "1",
        "DEPTHBENCH_INJECT_STEP_DELAY": "soon",
        "DEPTHBENCH_RUNS": str(tmp_path / "runs"),
        "DEPTHBENCH_DATA": str(tmp_path / "data"),
    }
    out = run_cli(
        "train",
        PRESET,
        *tiny,
        "hang.watchdog=False",
        "testing.step_delay_s=0.3",
        "--work-dir",
        tmp_path / "run",
        env=env,
    )
    assert out.returncode == 0, out.stderr
    steps = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    times = [r["step_time"] for r in steps if r.get("kind") == "train"]
    assert len(times) == 4 and min(times) >= 0.3, times
    bad = run_cli("train", PRESET, *tiny, "testing.kill_at_step=soon", env=env)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "testing.kill_at_step" in bad.stderr, bad.stderr


@pytest.mark.tier("integration")
def test_the_batch_script_requeues_a_crash_whatever_meta_json_is(tmp_path, monkeypatch):
    """The rendered script after a crashed attempt whose meta.json is a FIFO: nothing waits on it (the "was the run
    done already" check read it with open()), the requeue step runs and requeues."""
    monkeypatch.setenv("DEPTHBENCH_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("DEPTHBENCH_DATA", str(tmp_path / "data"))
    code, script, err = cli("submit", PRESET, "--dry-run")
    assert code == 0, err
    stubs = tmp_path / "bin"
    stubs.mkdir()
    log = tmp_path / "scontrol.log"
    for name, body in {  # srun: the attempt crashes, leaving a FIFO where meta.json belongs
        "srun": 'run=$(dirname "$(dirname "$(dirname "$DEPTHBENCH_EXITS")")")\nmkfifo "$run/meta.json"\n'
        'echo "1.0 0 n1 1" >> "$DEPTHBENCH_EXITS"\nexit 1\n',
        "scontrol": f'case "$1 $2" in\n  "show hostnames") echo n1 ;;\n  "show node") echo NodeAddr=127.0.0.1 ;;'
        f'\n  *) echo "$@" >> {log} ;;\nesac\n',
        "sinfo": "echo 'n1 idle'\n",
    }.items():
        (stubs / name).write_text("#!/bin/bash\n" + body)
        (stubs / name).chmod(0o755)
    (tmp_path / "job.sbatch").write_text(script)
    env = {
        "PATH": f"{stubs}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NODELIST": "n1",
        "SLURM_NTASKS": "1",
    }
    out = subprocess.run(
        ["bash", str(tmp_path / "job.sbatch")], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and "requeued (1 of 3 restarts)" in out.stdout, out.stdout + out.stderr
    assert log.read_text().splitlines()[0] == "requeuehold 4242"


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


CLUSTER_READERS = [
    "slurm/jobs.py",
    "slurm/restart.py",
    "harness/engine/watchdog.py",
    "harness/engine/switches.py",
    "harness/core/faults.py",
]
RAW_FILE_CALLS = {"read_text", "read_bytes", "write_text", "write_bytes", "is_file", "exists", "open"}


@pytest.mark.parametrize("module", CLUSTER_READERS)
def test_the_cluster_modules_open_run_files_only_through_the_opener(module):
    """No route around harness.core.files in the modules that read and write fault records, meta.json and the
    restart history: no open()/Path.read_text()/write_text()/is_file()/exists() (they follow links and block on
    FIFOs), and an os.open only with O_NOFOLLOW. RunDir.open is the run-directory contract's own opener."""
    source = (ROOT / module).read_text()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        owner = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
        if name not in RAW_FILE_CALLS or owner == "RunDir" or isinstance(func, ast.Name) and name != "open":
            continue  # harness.core.files' read_text & co. are called by name: those are the opener
        if owner == "os" and "O_NOFOLLOW" in ast.unparse(node):
            continue
        found.append(f"{module}:{node.lineno}: {ast.unparse(node)[:80]}")
    assert not found, found
