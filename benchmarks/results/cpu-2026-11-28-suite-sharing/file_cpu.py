"""CPU seconds (user+sys) of a command and of every process it leaves behind: this process is a child subreaper
(prctl PR_SET_CHILD_SUBREAPER), so orphaned descendants (killed launchers' ranks, forks of a fork server) are
reparented to it and reaped here, and their CPU counts in RUSAGE_CHILDREN.

    python file_cpu.py LABEL -- COMMAND...   -> prints "LABEL cpu_s=... wall_s=... rc=..." (and appends to $FILE_CPU_LOG)
"""
import ctypes
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
label, command = sys.argv[1], sys.argv[sys.argv.index("--") + 1:]
ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1)
start = time.monotonic()
rc = subprocess.call(command)
deadline = time.monotonic() + 120
while time.monotonic() < deadline:  # the descendants still running when the command ended
    try:
        pid, _ = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        break
    if pid == 0:
        time.sleep(0.2)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
line = f"{label} cpu_s={usage.ru_utime + usage.ru_stime:.1f} wall_s={time.monotonic() - start:.0f} rc={rc}"
print(line, flush=True)
if os.environ.get("FILE_CPU_LOG"):
    with open(os.environ["FILE_CPU_LOG"], "a") as fh:
        fh.write(line + "\n")
