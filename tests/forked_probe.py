"""``python -m forked_probe ARGS``: prints, as one JSON line, what a process sees of itself -- run by
tests/harness/engine/test_forked.py both as a fresh interpreter and as a fork of the preloaded server, to
compare them.
``PROBE_SLEEP``: wait that long first; ``PROBE_BURN``: spend that many seconds of CPU first; ``PROBE_EXIT``: the exit
code. At its end an exit handler says so on stderr."""

import atexit
import json
import os
import sys
import time

PRELOADED = "timm" in sys.modules  # imported before this module ran: only in a fork of the preloaded server

LAUNCH_ENV = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "DEPTHBENCH_LAUNCHER_PID",
    "OMP_NUM_THREADS",
)  # what harness.engine.launch.spawn gives each rank

import numpy  # noqa: E402
import torch  # noqa: E402

time.sleep(float(os.environ.get("PROBE_SLEEP", "0")))
burn_until = time.process_time() + float(os.environ.get("PROBE_BURN", "0"))
while time.process_time() < burn_until:
    pass
print(
    json.dumps(
        {
            "argv": sys.argv[1:],
            "argv0": os.path.basename(sys.argv[0]),
            "name": __name__,
            "cwd": os.getcwd(),
            "marker": os.environ.get("PROBE_MARKER"),
            "threads": torch.get_num_threads(),
            "torch_seed": torch.initial_seed(),
            "path0": sys.path[0],
            "numpy": int(numpy.random.randint(2**31)),
            "line_buffered": sys.stdout.line_buffering,
            "preloaded": PRELOADED,
            "own_group": os.getpgid(0) == os.getpid(),
            "launch_env": {k: os.environ.get(k) for k in LAUNCH_ENV},
        }
    )
)
print("to stderr", file=sys.stderr)
atexit.register(print, "exit handlers ran", file=sys.stderr)
sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
