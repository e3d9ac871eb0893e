"""Test-only switches of a training run: the config's ``testing`` section (harness/core/schema.py), off unless a
config or a ``key=value`` sets it, and nothing else -- no environment variable reaches them, so a variable left in
a shell (or exported by sbatch to every attempt) cannot make a run kill itself (docs/trust.md).

- ``testing.kill_at_step=N`` (``testing.kill_rank=R``, default the last rank): that rank SIGKILLs itself once it
  has finished optimizer step N, on every attempt -- a deterministic crash, to try the requeue rules on a cluster;
- ``testing.step_delay_s=S``: every rank sleeps S seconds after each optimizer step, so a job that only has to be
  still training when something happens to it (Slurm's time-limit signal) idles instead of computing.

They act on their own, whatever else is on or off (``hang.watchdog=False`` keeps them); the loop calls
:func:`after_step` once per optimizer step.
"""

from __future__ import annotations

import os
import signal
import time

from harness.core.errors import ConfigError
from harness.core.schema import with_defaults

_kill_at_step: int | None = None
_step_delay_s: float = 0.0


def check(cfg) -> None:
    """A step delay the hang watchdog would take for a hang is refused, in one line before any work: the delay
    counts as step time, and the first steps are held to ``hang.floor_s`` alone."""
    delay, hang = with_defaults(cfg, "testing")["step_delay_s"], with_defaults(cfg, "hang")
    if hang["watchdog"] and delay >= hang["floor_s"] / 2:
        raise ConfigError(
            f"testing.step_delay_s={delay:g} is not under half of hang.floor_s={hang['floor_s']:g}: "
            "the watchdog would take the paced steps for a hang; lower it or raise hang.floor_s"
        )


def start(cfg, rank: int, world_size: int) -> None:
    """This process's switches from ``cfg.testing`` (types and ranges: the schema's)."""
    global _kill_at_step, _step_delay_s
    options = with_defaults(cfg, "testing")
    target = options["kill_rank"] if options["kill_rank"] is not None else world_size - 1
    _kill_at_step = options["kill_at_step"] if rank == target else None
    _step_delay_s = float(options["step_delay_s"])


def after_step(step: int) -> None:
    """The loop's call after optimizer step ``step``."""
    if step == _kill_at_step:  # this rank dies here, on every attempt, like a bad sample or a bug at that step
        os.kill(os.getpid(), signal.SIGKILL)
    if _step_delay_s:
        time.sleep(_step_delay_s)


def stop() -> None:
    global _kill_at_step, _step_delay_s
    _kill_at_step, _step_delay_s = None, 0.0
