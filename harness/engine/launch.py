"""Process launch for ``depthbench train``: who am I (rank, world, master), and local multi-process runs.

A training process reads its place from the environment, the same variables every launcher sets:
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT`` — torchrun, ``accelerate launch``,
DeepSpeed's launcher, and :func:`spawn` below. Under Slurm, ``srun`` (one task per GPU) sets only ``SLURM_*``;
:func:`distributed_env` maps those, so the same command runs as every task of a multi-node job.

``depthbench train --nproc N`` starts N processes on this machine with :func:`spawn`: the same environment
torchrun's static single-node mode gives (a free rendezvous port per run, ``OMP_NUM_THREADS`` split between
the processes), but it forwards SIGUSR1/SIGTERM to every process and waits for them to checkpoint — torchrun's
agent dies on SIGUSR1 and kills its workers 30 s after SIGTERM, which breaks preemption. If a process fails, the
others are stopped.

The ranks are forks of the launcher (:func:`harness.engine.forked.fork_run`, which does what ``exec`` of a fresh
``python -m harness.cli`` would set up), not fresh interpreters: each of those spent ~5 s of CPU importing torch,
timm, Accelerate and MMEngine, which the launcher imports once. Forking is safe only from a known state, so the
``depthbench`` command calls :func:`prepare_launcher` before its checks (torch on one thread: OpenMP's pool does
not survive a fork, and a fork of a process that started it hangs at its first parallel region), and
:func:`spawn` forks only when this process is that command (a fork unwinds to the command's own end; inside another
program it would unwind into that program), no other thread runs, and the CUDA driver is not loaded (it cannot be
used in a fork of a process that initialised it). Otherwise -- the Python API inside another program, a launcher
that touched the GPU -- the ranks are fresh interpreters, as before. (Many short runs as forks of a server that
imported the stack once: harness/engine/forked.py.)
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import torch

from harness.core.errors import EXIT_INTERRUPTED, EXIT_PREEMPTED
from harness.engine.forked import PRELOAD, Request, fork_run

DIST_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def distributed_env(environ=None) -> dict:
    """``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_ADDR``/``MASTER_PORT`` of this process (strings).

    From the launcher's variables if set; else from an ``srun`` step with several tasks; else a single process.
    """
    env = os.environ if environ is None else environ
    if "RANK" in env and "WORLD_SIZE" in env:
        return {k: env[k] for k in DIST_VARS if k in env} | {"LOCAL_RANK": env.get("LOCAL_RANK", "0")}
    tasks = int(env.get("SLURM_STEP_NUM_TASKS", env.get("SLURM_NTASKS", "1")) or 1)
    if "SLURM_PROCID" in env and "SLURM_STEP_ID" in env and tasks > 1:
        return {
            "RANK": env["SLURM_PROCID"],
            "WORLD_SIZE": str(tasks),
            "LOCAL_RANK": env.get("SLURM_LOCALID", "0"),
            "MASTER_ADDR": env.get("MASTER_ADDR") or _slurm_head_node(env),
            "MASTER_PORT": env.get("MASTER_PORT") or str(20000 + int(env.get("SLURM_JOB_ID", "0")) % 20000),
        }
    return {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}


def _slurm_head_node(env) -> str:
    nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or "127.0.0.1"
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=20)
        if out.returncode == 0 and out.stdout.split():
            return out.stdout.split()[0]
    except (OSError, subprocess.TimeoutExpired):
        pass
    match = re.match(r"([^,\[]+)(?:\[([^\],\-]+))?", nodelist)  # "node[01-04,07]" -> node01
    return match.group(1) + (match.group(2) or "")


def export_distributed_env(single_process_group: bool = False) -> dict:
    """Put this process's distributed variables into ``os.environ`` (mapping an srun step's ``SLURM_*``) and
    return them. A single process gets none unless ``single_process_group`` (DeepSpeed's ``init_distributed``
    wants a process group even for one rank; it then gets a free local port)."""
    env = distributed_env()
    if env["WORLD_SIZE"] == "1" and "RANK" not in os.environ:
        if not single_process_group:
            return env
        env.update(
            MASTER_ADDR=os.environ.get("MASTER_ADDR", "127.0.0.1"),
            MASTER_PORT=os.environ.get("MASTER_PORT", str(free_port())),
        )
    env.setdefault("LOCAL_WORLD_SIZE", os.environ.get("LOCAL_WORLD_SIZE", env["WORLD_SIZE"]))
    os.environ.update(env)
    return env


@contextlib.contextmanager
def distributed_env_exported(single_process_group: bool = False):
    """:func:`export_distributed_env` for the length of a run in this process, then ``os.environ`` as it was: a
    run called in-process (the Python API, a notebook, a test) must not leave ``RANK``/``MASTER_PORT`` behind, or
    every later run of that process -- and every process it starts -- would rendezvous on the first run's port."""
    before = {k: os.environ.get(k) for k in DIST_VARS}
    try:
        yield export_distributed_env(single_process_group)
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def launched() -> bool:
    """Whether a launcher (torchrun, accelerate, deepspeed, srun, :func:`spawn`) started this process."""
    return "RANK" in os.environ or distributed_env()["WORLD_SIZE"] != "1"


def configure_threads(
    local_processes: int = 1,
    loader_workers: int = 0,
    apply: bool = True,
    *,
    threads: int | None = None,
    pin: bool = False,
) -> int:
    """The intra-op threads of each of ``local_processes`` processes on this machine (and set them unless
    ``apply=False``).

    ``OMP_NUM_THREADS``, when set, wins (torch reads it itself). Otherwise the cores this process may run on,
    less what other processes already keep busy (the 1-minute load average), are shared by the local processes,
    each also feeding ``loader_workers`` data-loader processes; at least 1. Why not torch's default (one thread
    per core): on a shared or oversubscribed node OpenMP threads spin-wait for cores other jobs hold, and a run
    gets several times slower than with one thread (docs/training.md, "Threads").

    ``threads``: exactly this many, whatever the above says (an explicit request, e.g. ``depthbench bench
    --threads``). ``pin`` (with ``threads``): also bind this process to the first ``threads`` of the cores it may
    run on, so that timings are not skewed by threads migrating between cores.
    """
    if threads is None:
        configured = os.environ.get("OMP_NUM_THREADS", "").strip()
        if configured.isdigit() and int(configured) > 0:
            return int(configured)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        busy = round(os.getloadavg()[0]) if hasattr(os, "getloadavg") else 0
        threads = max(1, max(cores - busy, 1) // max(local_processes, 1) - loader_workers)
    if apply:
        if pin and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:threads])
        torch.set_num_threads(threads)
    return threads


def die_with_launcher() -> None:
    """In a rank :func:`spawn` started: be killed when the launcher dies (Linux's parent-death signal).

    The ranks have process groups of their own (see :func:`spawn`), so a ``kill -9`` of the launcher's group does
    not reach them; without this they trained on as orphans, writing the run directory and holding its lock, and
    a ``--resume auto`` right after was refused ("in use by pid ...")."""
    launcher = os.environ.get("DEPTHBENCH_LAUNCHER_PID", "")
    if not launcher.isdigit() or not sys.platform.startswith("linux"):
        return

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != int(launcher):  # the launcher died before the signal was armed
        os.kill(os.getpid(), signal.SIGKILL)


_threads_before_launch: int | None = None  # torch's thread count before prepare_launcher (restored by spawn)


def prepare_launcher() -> None:
    """In a command that will :func:`spawn` ranks, before any other work: torch on one thread until they start, so
    that they can be forks of this process (the module docstring says why). Only in the ``depthbench`` command:
    inside another program nothing changes, and the ranks are fresh interpreters."""
    global _threads_before_launch
    if _threads_before_launch is None and _is_command():
        _threads_before_launch = torch.get_num_threads()
        torch.set_num_threads(1)


def _is_command() -> bool:
    """Whether this process is the ``depthbench`` command (its console script, ``python -m harness.cli``, or a forked
    run of it: harness/engine/forked.py)."""
    main = sys.modules.get("__main__")
    return (
        getattr(getattr(main, "__spec__", None), "name", None) == "harness.cli"
        or getattr(getattr(main, "main", None), "__module__", None) == "harness.cli"
    )


def _end_launcher_preparation() -> bool:
    """Give torch back the threads :func:`prepare_launcher` took (the forks' thread count is taken from them);
    whether it had run, i.e. whether this process kept itself fit to fork its ranks."""
    global _threads_before_launch
    if _threads_before_launch is None:
        return False
    torch.set_num_threads(_threads_before_launch)
    _threads_before_launch = None
    return True


def _forks_are_safe(preload) -> bool:
    """Whether the ranks can be forks of this process: on Linux, with what a rank imports anyway imported here,
    no other thread runs and the CUDA driver is not loaded."""
    if not sys.platform.startswith("linux"):
        return False
    for name in [*PRELOAD, *preload]:
        importlib.import_module(name)
    with open("/proc/self/maps") as maps:
        cuda_driver = any(os.path.basename(line.split()[-1]).startswith("libcuda.so") for line in maps)
    return threading.active_count() == 1 and not torch.cuda.is_initialized() and not cuda_driver


def spawn(nproc: int, argv: list[str], grace_s: float = 10.0, threads: int | None = None, preload=()) -> int:
    """Run ``python -m harness.cli <argv>`` as ``nproc`` ranks on this machine; returns the run's exit code.

    Each rank gets ``OMP_NUM_THREADS=threads`` (default :func:`configure_threads`) unless it is set already. The
    ranks are forks of this process where that is safe (the module docstring), after it imports ``preload`` (what
    a rank imports beyond :data:`~harness.engine.forked.PRELOAD`), else fresh interpreters.
    Codes: 0 if every rank finished, the preemption code if they were preempted, else the first failure's code.
    """
    port = free_port()
    threads = str(threads or configure_threads(nproc, apply=False))
    forks = _end_launcher_preparation() and _forks_are_safe(preload)
    procs = []
    for rank in range(nproc):
        env = dict(
            os.environ,
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(nproc),
            LOCAL_WORLD_SIZE=str(nproc),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            DEPTHBENCH_LAUNCHER_PID=str(os.getpid()),
        )
        env.setdefault("OMP_NUM_THREADS", threads)
        # a process group of their own: a terminal's Ctrl-C reaches this process alone, which forwards each one
        # exactly once (the first asks the ranks to checkpoint and stop, a second to stop at once)
        if forks:
            procs.append(
                fork_run(
                    Request(
                        module="harness.cli",
                        argv=list(argv),
                        env=env,
                        cwd=os.getcwd(),
                        process_group=True,
                        interruptible=signal.getsignal(signal.SIGINT) is not signal.SIG_IGN,
                    )
                )
            )
        else:
            procs.append(subprocess.Popen([sys.executable, "-m", "harness.cli", *argv], env=env, process_group=0))

    interrupts = []

    def forward(signum, frame):
        if signum == signal.SIGINT:
            interrupts.append(signum)
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT)}
    try:
        codes = _wait_all(procs, grace_s)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if len(interrupts) > 1 and any(c != 0 for c in codes):
        return EXIT_INTERRUPTED  # stopped at once by a second Ctrl-C (a rank may have died of its peer's exit)
    failures = [c for c in codes if c not in (0, EXIT_PREEMPTED)]
    if failures:
        return failures[0]
    return EXIT_PREEMPTED if EXIT_PREEMPTED in codes else 0


def _wait_all(procs, grace_s: float) -> list[int]:
    """Wait for every process; once one fails, SIGTERM the rest, then SIGKILL them after ``grace_s``."""
    failed_at = None
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            return codes
        if failed_at is None and any(c not in (None, 0, EXIT_PREEMPTED) for c in codes):
            failed_at = time.monotonic()
            for p in procs:
                if p.poll() is None:
                    p.terminate()
        if failed_at is not None and time.monotonic() - failed_at > grace_s:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        time.sleep(0.05)
