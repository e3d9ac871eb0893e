"""``python -m forked_probe ARGS``: prints, as one JSON line, what a process sees of itself -- run by
tests/harness/engine/test_forked_runs.py both as a fresh interpreter and as a fork of the preloaded server, to
compare them.
``PROBE_SLEEP``: wait that long first; ``PROBE_BURN``: spend that many seconds of CPU first; ``PROBE_EXIT``: the exit
code."""
import json
import os
import sys
import time

PRELOADED = "timm" in sys.modules  # imported before this module ran: only in a fork of the preloaded server

import numpy  # noqa: E402
import torch  # noqa: E402

time.sleep(float(os.environ.get("PROBE_SLEEP", "0")))
burn_until = time.process_time() + float(os.environ.get("PROBE_BURN", "0"))
while time.process_time() < burn_until:
    pass
print(json.dumps({"argv": sys.argv[1:], "argv0": os.path.basename(sys.argv[0]), "name": __name__,
                  "cwd": os.getcwd(), "marker": os.environ.get("PROBE_MARKER"), "threads": torch.get_num_threads(),
                  "torch_seed": torch.initial_seed(), "path0": sys.path[0], "numpy": int(numpy.random.randint(2**31)),
                  "line_buffered": sys.stdout.line_buffering, "preloaded": PRELOADED}))
print("to stderr", file=sys.stderr)
sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
