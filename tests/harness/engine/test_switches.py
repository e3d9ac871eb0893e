"""harness/engine/switches.py: the testing switches, as a run on CPU paces its steps for the watchdog."""

import threading
import time

import pytest

from harness.core.errors import ConfigError
from harness.engine import switches
from harness.engine import watchdog as wd


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
