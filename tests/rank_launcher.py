"""``python -m rank_launcher RESULT``: a launcher as ``harness.engine.launch.spawn`` is one -- forks
``python -m forked_probe a "b c"`` as rank 1 of 2 (:func:`harness.engine.forked.fork_run`), waits for it and appends
what it saw (its pid, the rank's exit code, its children's CPU) to RESULT as one JSON line. Run by
tests/harness/engine/test_forked.py as a fork of the preloaded server."""

import io
import json
import os
import resource
import sys

from harness.engine.forked import Request, fork_run

RANK_ENV = {
    "RANK": "1",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "2",
    "LOCAL_WORLD_SIZE": "2",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29555",
    "DEPTHBENCH_LAUNCHER_PID": "",
    "OMP_NUM_THREADS": "1",
}

if __name__ == "__main__":
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False))  # block-buffered, as into a pipe
    print("unflushed, ", end="")  # still in this process's buffer: fork_run flushes it, or both would write it
    env = {**os.environ, **RANK_ENV, "DEPTHBENCH_LAUNCHER_PID": str(os.getpid()), "PROBE_BURN": "1", "PROBE_EXIT": "3"}
    rank = fork_run(Request(module="forked_probe", argv=["a", "b c"], env=env, cwd=os.getcwd(), process_group=True))
    code = rank.wait(300)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(sys.argv[1], "a") as result:
        result.write(
            json.dumps({"launcher": os.getpid(), "code": code, "children_cpu": used.ru_utime + used.ru_stime}) + "\n"
        )
