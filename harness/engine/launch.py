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

:func:`start_forked` runs many short ``python -m MODULE ARGS`` processes (``depthbench claims``' dozens of runs)
as forks of one server that has imported the stack once, instead of as fresh interpreters that each import it.
"""
from __future__ import annotations

import functools
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness.core.errors import EXIT_INTERRUPTED, EXIT_PREEMPTED

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
        return {"RANK": env["SLURM_PROCID"], "WORLD_SIZE": str(tasks), "LOCAL_RANK": env.get("SLURM_LOCALID", "0"),
                "MASTER_ADDR": env.get("MASTER_ADDR") or _slurm_head_node(env),
                "MASTER_PORT": env.get("MASTER_PORT") or str(20000 + int(env.get("SLURM_JOB_ID", "0")) % 20000)}
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
        env.update(MASTER_ADDR=os.environ.get("MASTER_ADDR", "127.0.0.1"),
                   MASTER_PORT=os.environ.get("MASTER_PORT", str(free_port())))
    env.setdefault("LOCAL_WORLD_SIZE", os.environ.get("LOCAL_WORLD_SIZE", env["WORLD_SIZE"]))
    os.environ.update(env)
    return env


def launched() -> bool:
    """Whether a launcher (torchrun, accelerate, deepspeed, srun, :func:`spawn`) started this process."""
    return "RANK" in os.environ or distributed_env()["WORLD_SIZE"] != "1"


def configure_threads(local_processes: int = 1, loader_workers: int = 0, apply: bool = True, *,
                      threads: int | None = None, pin: bool = False) -> int:
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
        import torch

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
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != int(launcher):  # the launcher died before the signal was armed
        os.kill(os.getpid(), signal.SIGKILL)


def spawn(nproc: int, argv: list[str], grace_s: float = 10.0, threads: int | None = None) -> int:
    """Run ``python -m harness.cli <argv>`` as ``nproc`` ranks on this machine; returns the run's exit code.

    Each rank gets ``OMP_NUM_THREADS=threads`` (default :func:`configure_threads`) unless it is set already.
    Codes: 0 if every rank finished, the preemption code if they were preempted, else the first failure's code.
    """
    port = free_port()
    threads = str(threads or configure_threads(nproc, apply=False))
    procs = []
    for rank in range(nproc):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nproc),
                   LOCAL_WORLD_SIZE=str(nproc), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   DEPTHBENCH_LAUNCHER_PID=str(os.getpid()))
        env.setdefault("OMP_NUM_THREADS", threads)
        # a process group of their own: a terminal's Ctrl-C reaches this process alone, which forwards each one
        # exactly once (the first asks the ranks to checkpoint and stop, a second to stop at once)
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


# ----------------------------------------------------------------------------------------- forked runs
# What a training run imports anyway: ~4 s of CPU in every fresh interpreter (torch ~2 s; torch._dynamo over a
# second, which torchvision imports and Accelerate's prepare needs). The fork server imports them once.
PRELOAD = ["torch", "torch._dynamo", "torchvision", "timm", "accelerate", "mmengine", "torch.utils.tensorboard",
           "models", "harness.engine.runner"]


@functools.cache
def forked_context():
    """multiprocessing's fork server context, its server started once per process (it imports :data:`PRELOAD`)."""
    import multiprocessing
    from multiprocessing import forkserver

    context = multiprocessing.get_context("forkserver")
    # the fork server is one per process: one started earlier without the preload (results.runs' reading pool) would
    # be reused as it is, and every run would import torch itself. Its stop is multiprocessing's own (used by its
    # tests); forks it made live on, and later pools use the preloaded server
    forkserver._forkserver._stop()
    context.set_forkserver_preload(PRELOAD)
    # the server's torch takes the machine's default thread count (OMP_NUM_THREADS is each run's: see _run_module),
    # and a Ctrl-C while it imports is not its traceback (each run sets its own Ctrl-C handling)
    threads = os.environ.pop("OMP_NUM_THREADS", None)
    main_thread = threading.current_thread() is threading.main_thread()
    interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
    try:
        forkserver.ensure_running()
    finally:
        if threads is not None:
            os.environ["OMP_NUM_THREADS"] = threads
        if main_thread:
            signal.signal(signal.SIGINT, interrupt)
    return context


def start_forked(module: str, argv: list[str], env: dict, log_path, cwd=None, *, stderr_path=None,
                 new_session: bool = False, usage_path=None):
    """Start ``python -m module *argv`` with environment ``env`` and its output appended to ``log_path``
    (stderr to ``stderr_path`` if given), as a fork of multiprocessing's fork server, which has imported
    :data:`PRELOAD` once (started by the first call).

    The run is the same program as the fresh interpreter: ``runpy`` runs the module as ``__main__`` with the same
    ``sys.argv``; only what a fresh interpreter decides at start-up is redone in the fork (below). Returns the
    ``multiprocessing.Process``: ``exitcode`` is ``None`` while it runs, then the exit code (``-N``: killed by
    signal N), as ``Popen.returncode``; ``join()`` waits. It is in this process's process group, so a terminal's
    Ctrl-C reaches it as it reaches a subprocess; ``new_session``: in a session and process group of its own, whose
    id is its pid, as ``Popen(start_new_session=True)`` (``os.killpg(pid, sig)`` reaches it and its children).
    ``usage_path``: where the run writes its CPU seconds (its own and its children's) when it ends: a fork of the
    server is not this process's child, so ``RUSAGE_CHILDREN`` here does not count it as it counts a subprocess.
    """
    # Ctrl-C as a fresh interpreter would have it: ignored if ignored here, else Python's KeyboardInterrupt
    interruptible = signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    options = dict(cwd=str(cwd or os.getcwd()), interruptible=interruptible, new_session=new_session,
                   stdout_path=str(log_path), stderr_path=str(stderr_path or log_path),
                   usage_path=usage_path and str(usage_path))
    process = forked_context().Process(target=_run_module, args=(module, list(argv), dict(env)), kwargs=options,
                                       name=module, daemon=False)
    process.start()
    return process


def _run_module(module: str, argv: list[str], env: dict, *, cwd: str, interruptible: bool, new_session: bool,
                stdout_path: str, stderr_path: str, usage_path: str | None) -> None:
    """In the fork: what a fresh interpreter would have set up, then ``python -m module argv``."""
    import atexit
    import io
    import runpy

    import numpy
    import torch

    if new_session:
        os.setsid()
    signal.signal(signal.SIGINT, signal.default_int_handler if interruptible else signal.SIG_IGN)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    shared = stderr_path == stdout_path  # then one open file for both, as Popen(stderr=STDOUT) gives
    for fd, path in ((1, stdout_path),) + (() if shared else ((2, stderr_path),)):
        log = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(log, fd)
        os.close(log)
    if shared:
        os.dup2(1, 2)
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    encoding = getattr(sys.__stdout__, "encoding", None) or "utf-8"
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding,
                                                   line_buffering=True, write_through=unbuffered)
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding, "backslashreplace",
                                                   line_buffering=True, write_through=unbuffered)
    # torch sized its thread pool when the server imported it, without OMP_NUM_THREADS (forked_context): the
    # machine's default, which is also the most torch takes from OMP_NUM_THREADS (MKL caps it at the cores)
    threads = env.get("OMP_NUM_THREADS", "").strip()
    if threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(min(int(threads), torch.get_num_threads()))
    # a fresh interpreter seeds torch's and numpy's global generators from the OS; forks would share the server's
    torch.seed()
    numpy.random.seed()
    sys.argv = ["-m", *argv]
    if sys.path[0] != cwd:  # `python -m` puts the working directory first
        sys.path.insert(0, cwd)
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:  # multiprocessing ends a fork with os._exit: run what an interpreter runs on its way out
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        if usage_path:  # the fork's counters started at zero (fork resets them): this run's CPU alone
            import resource

            cpu = sum(u.ru_utime + u.ru_stime for u in map(resource.getrusage,
                                                               (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))
            Path(usage_path).write_text(f"{cpu:.3f}\n")
