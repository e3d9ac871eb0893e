"""harness/engine/launch.py: the thread count a run takes; an in-process run's distributed variables undone."""

import os

import pytest


@pytest.mark.parametrize("threads,expected", [("3", 3), ("", None)])
def test_thread_default_respects_omp_num_threads(monkeypatch, threads, expected):
    from harness.engine.launch import configure_threads

    monkeypatch.setenv("OMP_NUM_THREADS", threads)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr("os.getloadavg", lambda: (1.2, 1.0, 1.0))  # another job keeps one of the 2 cores busy
    got = configure_threads(1, 0, apply=False)
    assert got == (expected if expected is not None else 1)
    monkeypatch.setattr("os.getloadavg", lambda: (0.0, 0.0, 0.0))
    assert configure_threads(1, 0, apply=False) == (expected or 2)  # idle: both cores
    assert configure_threads(2, 0, apply=False) == (expected or 1)  # two processes share them
    assert configure_threads(1, 4, apply=False) == (expected or 1)  # loader workers count, at least 1


@pytest.mark.slow
@pytest.mark.tier("integration")
def test_a_run_in_process_leaves_no_distributed_variables_behind(monkeypatch):
    """An in-process DeepSpeed run (the API, a test) exported RANK/WORLD_SIZE/MASTER_PORT into os.environ for good:
    every later run of that process, and every process it started, then met on that one port (EADDRINUSE)."""
    from harness.engine.launch import DIST_VARS, distributed_env_exported

    for key in DIST_VARS:
        monkeypatch.delenv(key, raising=False)
    with distributed_env_exported(single_process_group=True) as env:
        assert os.environ["MASTER_PORT"] == env["MASTER_PORT"] and os.environ["RANK"] == "0"
    assert not any(key in os.environ for key in DIST_VARS)
    monkeypatch.setenv("MASTER_PORT", "12345")  # a launcher's own value stays
    with distributed_env_exported(single_process_group=True):
        pass
    assert os.environ["MASTER_PORT"] == "12345"
