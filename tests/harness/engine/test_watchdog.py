"""harness/engine/watchdog.py (issue 41), without a cluster: the hang threshold, the stack dump of every thread, a
paused watchdog, and the stall a frozen rank's heartbeat records. The restart decision is tests/slurm/test_restart.py's,
the end-to-end scenarios on the local Slurm cluster tests/slurm/test_slurm.py's."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.engine import watchdog as wd
from slurm import jobs as slurm_jobs
from fixtures.files import SECRET

ROOT = Path(__file__).resolve().parents[3]


def test_threshold_is_k_times_the_median_step_or_the_floor():
    assert wd.threshold([], 20, 300) == 300  # nothing timed yet: the floor
    assert wd.threshold([0.1, 0.1], 20, 1) == 1  # fewer than 3 steps: the floor
    assert wd.threshold([0.1, 0.2, 0.1, 5.0], 20, 1) == pytest.approx(20 * 0.15)  # the median ignores one outlier
    assert wd.threshold([0.1] * 5, 20, 1, sync_every=10) == pytest.approx(20.0)  # the host runs ahead 10 steps
    assert wd.threshold([0.1] * 5, 20, 60) == 60  # the floor bounds it from below


def stuck_here(event, timeout):  # the frame the dump must show for the main thread
    return event.wait(timeout)


def test_watchdog_dumps_every_thread_and_fires_once_after_the_steps_stop(tmp_path):
    fired = threading.Event()
    dog = wd.Watchdog(tmp_path, rank=3, factor=5, floor_s=0.3, grace_s=0, poll_s=0.02, on_hang=fired.set).start()
    try:
        dog.resume()
        for step in range(1, 6):  # steps of ~10 ms: the threshold is the floor, 0.3 s
            time.sleep(0.01)
            dog.beat(step)
        start = time.monotonic()
        assert stuck_here(fired, 10), "the watchdog did not fire"
        assert 0.25 < time.monotonic() - start < 5
    finally:
        dog.close()
    dump = (tmp_path / "faults" / "attempt-0" / "stacks-rank-3.txt").read_text()
    header = json.loads(dump.splitlines()[0])
    assert header["rank"] == 3 and header["step"] == 5 and "no training step ended for" in header["reason"]
    assert "stuck_here" in dump and "_watch" in dump  # the main thread and the watchdog's own
    assert slurm_jobs.innermost(dump).startswith("wait (threading.py:")  # main thread's innermost frame
    body = dump.split("\n", 1)[1]
    assert "stuck_here" in body.split(header["main_thread"])[1].split("\n\n")[0]


def test_a_paused_or_steadily_beating_watchdog_never_fires(tmp_path):
    fired = threading.Event()
    dog = wd.Watchdog(tmp_path, rank=0, factor=5, floor_s=0.2, grace_s=0, poll_s=0.02, on_hang=fired.set).start()
    try:
        dog.resume()
        for step in range(40):  # 0.6 s of 15 ms steps: never 0.2 s without a step
            time.sleep(0.015)
            dog.beat(step)
        dog.pause()  # an evaluation: as long as it takes
        time.sleep(0.5)
        assert not fired.is_set()
        dog.resume()
        time.sleep(0.5)
        assert fired.is_set()  # re-armed, and no step came
    finally:
        dog.close()
    assert not (tmp_path / "faults" / "attempt-0" / "heartbeat-rank-0.json").exists()  # heartbeats: under Slurm


@pytest.mark.tier("integration")
@pytest.mark.slow
def test_a_frozen_rank_resumed_to_be_killed_still_shows_its_stall(tmp_path):
    """Slurm may SIGCONT a stopped rank before it kills it, and its heartbeat thread then beats once more: the span
    it could not run is in the record (``stalls``), so the requeue step still sees it was silent (item 11)."""
    code = (
        "import os, sys, time\nos.environ['SLURM_JOB_ID'] = '1'\nfrom harness.engine import watchdog as wd\n"
        "dog = wd.Watchdog(sys.argv[1], rank=0, factor=5, floor_s=1000, poll_s=0.1, detect_hangs=False).start()\n"
        "dog.beat(1)\nprint('ready', flush=True)\ntime.sleep(120)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        time.sleep(1)
        child.send_signal(signal.SIGSTOP)
        stopped = time.time()
        time.sleep(wd.ALIVE_EVERY_S + 2)
        child.send_signal(signal.SIGCONT)
        resumed = time.time()
        path = tmp_path / "faults" / "attempt-0" / "heartbeat-rank-0.json"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not json.loads(path.read_text()).get("stalls"):
            time.sleep(0.1)
    finally:
        child.kill()
        child.wait()
    ((start, end),) = json.loads(path.read_text())["stalls"]
    assert start <= stopped + 0.5 and end >= resumed - 0.5


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
