"""The one binary file of a run's fault record (``faults/attempt-K/step-rank-R.bin``: the last finished step of
rank R, written through a shared memory mapping by the hang watchdog, harness/engine/watchdog.py) and its reader:
here, below the engine, so ``depthbench jobs`` (slurm/jobs.py) reads it without importing torch."""
from __future__ import annotations

import struct
from pathlib import Path

STEP_RECORD = struct.Struct("<q")  # one little-endian int64: the step


def read_step(path) -> int | None:
    """The step a rank's ``step-rank-R.bin`` holds (None: no file)."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    return STEP_RECORD.unpack(data[:8])[0] if len(data) >= 8 else None
