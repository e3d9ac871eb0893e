"""Issue 41, without a cluster: the hang watchdog's threshold and dump (harness/engine/watchdog.py), reading an
attempt's records and the restart decision (slurm/restart.py), and `depthbench jobs --why`'s summary of the stack
dumps (slurm/jobs.py). The end-to-end scenarios on the local Slurm cluster are in tests/slurm/test_slurm.py."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.core.errors import ConfigError
from harness.engine import switches
from harness.engine import watchdog as wd
from slurm import jobs as slurm_jobs
from slurm.restart import Failure, decide, read_attempt

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


def test_a_paced_watchdog_times_the_delay_as_step_time(tmp_path):
    """testing.step_delay_s (harness/engine/switches.py): the loop sleeps after each step, the sleep counts as step
    time (the threshold scales with it), a paced run never fires; a delay the floor could take for a hang is
    refused in one line before any work."""
    cfg = {"testing": {"step_delay_s": 0.05}, "hang": {"floor_s": 0.2}}
    switches.start(cfg, rank=0, world_size=1)
    fired = threading.Event()
    dog = wd.Watchdog(tmp_path, rank=0, factor=5, floor_s=0.2, grace_s=0, poll_s=0.02, on_hang=fired.set).start()
    try:
        dog.resume()
        start = time.monotonic()
        for step in range(1, 9):
            dog.beat(step)
            switches.after_step(step)
        assert time.monotonic() - start >= 8 * 0.05 and min(dog.intervals) >= 0.05
        assert not fired.is_set()
    finally:
        dog.close()
        switches.stop()
    switches.check(cfg)
    with pytest.raises(ConfigError, match=r"testing.step_delay_s=0.1 is not under half of hang.floor_s=0.2"):
        switches.check({"testing": {"step_delay_s": 0.1}, "hang": {"floor_s": 0.2}})
    switches.check({"testing": {"step_delay_s": 0.1}, "hang": {"floor_s": 0.2, "watchdog": False}})  # no watchdog


def write_attempt(run, attempt, exits=(), heartbeats=(), errors=(), dumps=()):
    folder = run / "faults" / f"attempt-{attempt}"
    folder.mkdir(parents=True)
    (folder / "exits").write_text("".join(f"{t} {r} {n} {c}\n" for t, r, n, c in exits))
    for rank, node, step, *written in heartbeats:  # written: when the rank last beat (its liveness)
        (folder / f"heartbeat-rank-{rank}.json").write_text(
            json.dumps({"rank": rank, "node": node, "step": step, "written": (written or [None])[0]})
        )
    for rank, node, kind, step in errors:
        (folder / f"error-rank-{rank}.json").write_text(
            json.dumps({"rank": rank, "node": node, "type": kind, "message": "boom", "step": step})
        )
    for rank, step in dumps:
        (folder / f"stacks-rank-{rank}.txt").write_text(json.dumps({"rank": rank, "step": step}) + "\n")
    return folder


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


def record(attempt, exit="SIGKILL", step=5, error=None, action="requeued on 1 node(s) without n1"):
    return {"attempt": attempt, "exit": exit, "step": step, "error": error, "action": action}


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


# ----------------------------------------------------------------------------------------- preflight (item 5)
IB_LOG = """node1:123:456 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.1.0.5<0>
node1:123:456 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
node1:123:456 [0] NCCL INFO comm 0x1 rank 0 nranks 16 cudaDev 0 busId 1000 - Init COMPLETE"""
SOCKET_LOG = """node2:9:9 [0] NCCL INFO NET/IB : No device found.
node2:9:9 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.7<0>
node2:9:9 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0"""


def test_nccl_transport_from_its_log():
    from harness.measure.preflight import nccl_transport

    assert nccl_transport(IB_LOG) == {
        "transport": "InfiniBand",
        "gdr": True,
        "interface": "[0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.1.0.5<0>",
    }
    roce = nccl_transport("x NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.1<0>")
    assert roce["transport"] == "RoCE" and roce["gdr"] is False
    sockets = nccl_transport(SOCKET_LOG)
    assert sockets["transport"] == "TCP sockets" and sockets["interface"].startswith("[0]eth0") and not sockets["gdr"]
    assert nccl_transport("nothing")["transport"].startswith("unknown")


def test_transport_check_warns_when_nccl_falls_back_to_sockets():
    from harness.measure.preflight import nccl_transport, transport_check

    ok = transport_check([{"node": "a", **nccl_transport(IB_LOG)}, {"node": "b", **nccl_transport(IB_LOG)}], "nccl", 2)
    assert ok.verdict == "ok" and "InfiniBand; GPUDirect RDMA on" in ok.text
    bad = transport_check(
        [{"node": "a", **nccl_transport(IB_LOG)}, {"node": "b", **nccl_transport(SOCKET_LOG)}], "nccl", 2
    )
    assert bad.verdict == "warn" and "fell back to sockets" in bad.text and "do not agree" in bad.text
    gloo = transport_check([{"node": "n1", "transport": "gloo over TCP sockets", "gdr": None}], "gloo", 2)
    assert gloo.verdict == "ok" and gloo.text == "gloo between 2 node(s): gloo over TCP sockets"


def test_a_node_under_half_its_peers_bandwidth_fails():
    from harness.measure.preflight import pair_checks, slow_nodes

    def ring(bandwidth):  # a pair runs at the slower node's speed
        nodes = list(bandwidth)
        return [
            {"nodes": [a, b], "busbw_gbs": min(bandwidth[a], bandwidth[b])}
            for a, b in zip(nodes, nodes[1:] + nodes[:1])
        ]

    best, slow = slow_nodes(ring({"n1": 20.0, "n2": 21.0, "n3": 6.0, "n4": 19.0}))
    assert slow == ["n3"] and best == {"n1": 20.0, "n2": 20.0, "n3": 6.0, "n4": 19.0}  # a pair: its slower node
    assert slow_nodes(ring({"n1": 20.0, "n2": 12.0, "n3": 19.0}))[1] == []  # 12 >= half of 19.5
    (check,) = pair_checks(ring({"n1": 20.0, "n2": 21.0, "n3": 6.0, "n4": 19.0}), 4)
    assert check.verdict == "fail" and check.text.startswith("n3: all-reduce bus bandwidth under 50%")
    assert "--sbatch=--exclude=n3" in check.text
    (two,) = pair_checks([], 2)
    assert two.verdict == "ok" and "needs 3 or more" in two.text


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
