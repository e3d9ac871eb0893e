"""slurm/restart.py, without a cluster: reading an attempt's records (the first failed rank and its node; the rank a
hang or a collective timeout blames) and the restart decision. The end-to-end scenarios on the local Slurm cluster
are in tests/slurm/test_slurm.py."""

import json

from fixtures.faults import record, write_attempt
from slurm.restart import Failure, decide, read_attempt


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
