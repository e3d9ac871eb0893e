"""harness/engine/launch.py: the thread count a run takes."""

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
