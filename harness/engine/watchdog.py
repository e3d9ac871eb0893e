"""A per-rank hang watchdog, and the run directory's record of each attempt's failures (``faults/attempt-K/``).

A training step that waits on a dead or frozen peer blocks in its collective until the backend's timeout (10 to 30
minutes, then an error without a trace of where each rank stood). Each rank runs this watchdog: a daemon thread
that the loop stamps once per step (:func:`beat`: a clock read and two assignments, no device sync). When no step
has ended for longer than ``max(factor x median step x log_interval, floor_s)`` -- the loop syncs with the host
only every ``log_interval`` steps, so the host may run that many steps ahead of the device and stamp them in a
burst -- the thread writes every thread's Python stack (faulthandler) and, on CUDA, NCCL's flight-recorder dump
into ``faults/attempt-K/``, waits ``grace_s`` so the peers blocked in the same collective notice and dump too,
then ends the process with :data:`EXIT_HUNG`. The Slurm job then requeues (slurm/restart.py). Outside a training
epoch (evaluation, checkpoints between epochs) the watchdog is paused; a collective hung there ends at the
configured collective timeout (``hang.collective_timeout_s``) with an error, a crash that is requeued the same way.

Why not faulthandler.dump_traceback_later alone: it needs a fixed timeout re-armed every step and cannot wait for
the peers or exit with a code of our choosing; torch's NCCL watchdog covers NCCL only (not gloo, not a frozen
rank). Both are used for what they do: faulthandler writes the stacks, NCCL's recorder its trace.

Under Slurm the thread also keeps the rank's progress record, whether or not hangs are watched (``hang.watchdog``):
the requeue step blames the rank that stopped making progress from it, never the one that raised a timeout.

Files of attempt K (``SLURM_RESTART_COUNT``; 0 outside Slurm), one per rank R: ``heartbeat-rank-R.json`` (node,
pid, last step, its time, when it was written: rewritten every 2 s while steps end and at least every
``ALIVE_EVERY_S``, so a rank waiting in a collective still beats and a frozen one does not; ``stalls``: the
spans when the thread could not run, so a frozen rank that Slurm resumes to kill still shows it was silent),
``step-rank-R.bin`` (the last finished step, exact: a shared memory mapping each step writes; these two under Slurm
only), ``stacks-rank-R.txt`` (the dump, after a JSON header line), ``nccl-rank-R.pkl`` (CUDA), ``error-rank-R.json``
(a Python exception that ended the rank: type, message, step), and ``exits`` (one line per rank, written by the
sbatch script's task wrapper: ``time rank node exit-code``).
"""

from __future__ import annotations

import faulthandler
import json
import mmap
import os
import stat
import statistics
import threading
import time
from collections import deque
from pathlib import Path

import torch

from harness.core.errors import EXIT_HUNG
from harness.core.faults import ALIVE_EVERY_S, STEP_RECORD, restart_count
from harness.core.files import BadFile, atomic_write, no_link_below
from harness.core.schema import with_defaults

try:  # NCCL's flight recorder: a private function of torch, absent from CPU builds and older torches
    from torch._C._distributed_c10d import _dump_nccl_trace
except ImportError:
    _dump_nccl_trace = None

HEARTBEAT_EVERY_S = 2.0
MAX_STALLS = 4


def attempt() -> int:
    return restart_count()


def attempt_dir(run_path, number: int | None = None) -> Path:
    return Path(run_path) / "faults" / f"attempt-{attempt() if number is None else number}"


def node_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or os.uname().nodename


def threshold(intervals, factor: float, floor_s: float, sync_every: int = 1) -> float:
    """Seconds without a finished step that count as a hang: ``max(factor x median step x sync_every, floor_s)``;
    the floor alone until 3 steps were timed."""
    if len(intervals) < 3:
        return floor_s
    return max(factor * statistics.median(intervals) * max(1, sync_every), floor_s)


class Watchdog:
    """``detect_hangs``: dump and exit on a hang (``hang.watchdog``); ``heartbeats`` (default: under Slurm): keep
    the progress record. Every file goes through harness.core.files inside the run: a link planted in the run
    directory is refused, never written through."""

    def __init__(
        self,
        run_path,
        rank: int,
        factor: float,
        floor_s: float,
        sync_every: int = 1,
        grace_s: float | None = None,
        poll_s: float = 0.5,
        on_hang=None,
        detect_hangs: bool = True,
        heartbeats: bool | None = None,
    ):
        self.run = Path(run_path)
        self.dir = attempt_dir(run_path)  # created on the first write
        self.detect_hangs = detect_hangs
        self.heartbeats = bool(os.environ.get("SLURM_JOB_ID")) if heartbeats is None else heartbeats
        self._step_map = self._map_step_file(rank) if self.heartbeats else None
        self.rank, self.factor, self.floor_s, self.sync_every = rank, factor, floor_s, sync_every
        self.grace_s = min(30.0, floor_s / 2) if grace_s is None else grace_s
        self.poll_s, self.on_hang = poll_s, on_hang or (lambda: os._exit(EXIT_HUNG))
        self.intervals: deque = deque(maxlen=50)
        self.step, self.last = None, time.monotonic()
        self.armed, self.fresh, self.fired = False, True, False
        self._written = (None, 0.0)
        self.stalls: list[list[float]] = []  # [from, to]: when this thread could not run (the rank was frozen)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="depthbench-watchdog", daemon=True)

    # ---------------------------------------------------------------- the loop's side: no locks, no device sync
    def _map_step_file(self, rank: int):
        """``step-rank-R.bin``: the last finished step as 8 bytes in a shared file mapping -- a memory write per
        step, no system call, and exact even when the rank is killed right after (the page cache keeps it)."""
        path = self.dir / f"step-rank-{rank}.bin"
        try:
            made_folder(self.run)
            no_link_below(path, self.run, "step record")
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):  # a planted FIFO or device: no record, not a hang
                    return None
                os.ftruncate(fd, STEP_RECORD.size)
                return mmap.mmap(fd, STEP_RECORD.size)
            finally:
                os.close(fd)
        except (OSError, BadFile):
            return None

    def beat(self, step: int) -> None:
        if self._step_map is not None:
            STEP_RECORD.pack_into(self._step_map, 0, step)
        now = time.monotonic()
        if self.armed and not self.fresh:
            self.intervals.append(now - self.last)
        self.step, self.last, self.armed, self.fresh = step, now, True, False

    def resume(self, step: int | None = None) -> None:
        """Arm before an epoch's steps (``step``: the optimizer steps done so far); the first step is timed
        against the floor (it starts the loader)."""
        self.last, self.armed, self.fresh = time.monotonic(), True, True
        if step is not None:
            self.step = step

    def pause(self) -> None:
        self.armed = False

    # ---------------------------------------------------------------- the thread
    def start(self) -> "Watchdog":
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        polled = time.time()
        while not self._stop.wait(self.poll_s):
            now, wall = time.monotonic(), time.time()
            if wall - polled > ALIVE_EVERY_S:  # this thread did not run: the process was stopped (SIGSTOP) or starved
                self.stalls = [*self.stalls[-(MAX_STALLS - 1) :], [polled, wall]]
                self._written = (self._written[0], -ALIVE_EVERY_S)  # say so now, before a SIGKILL that may follow
            polled = wall
            self._heartbeat(now)
            if self.detect_hangs and self.armed and not self.fired:
                limit = threshold(list(self.intervals), self.factor, self.floor_s, self.sync_every)
                if now - self.last > limit:
                    self.fired = True
                    self.dump(f"no training step ended for {now - self.last:.0f} s (threshold {limit:.0f} s)")
                    time.sleep(self.grace_s)  # the peers blocked in the same collective see it too and dump
                    self.on_hang()

    def _heartbeat(self, now: float) -> None:
        if not self.heartbeats:
            return
        if self._written[0] == self.step and now - self._written[1] < ALIVE_EVERY_S:
            return
        if now - self._written[1] < HEARTBEAT_EVERY_S:
            return
        record = {
            "rank": self.rank,
            "node": node_name(),
            "pid": os.getpid(),
            "step": self.step,
            "time": time.time() - (now - self.last),
            "written": time.time(),
            "stalls": self.stalls,
        }
        write_record(self.run, f"heartbeat-rank-{self.rank}.json", record)
        self._written = (self.step, now)

    def dump(self, reason: str) -> Path:
        """This rank's stacks (every thread) and, on CUDA, NCCL's flight recorder, into the attempt's folder."""
        path = self.dir / f"stacks-rank-{self.rank}.txt"
        header = {
            "rank": self.rank,
            "node": node_name(),
            "pid": os.getpid(),
            "step": self.step,
            "reason": reason,
            "time": time.time(),
            "main_thread": f"0x{threading.main_thread().ident:016x}",
        }

        def write(fh):
            fh.write((json.dumps(header) + "\n").encode())
            fh.flush()
            faulthandler.dump_traceback(file=fh, all_threads=True)

        try:
            made_folder(self.run)
            atomic_write(path, write, inside=self.run)
        except (OSError, BadFile):
            pass  # a planted link or a full disk: the exit code still says "hang"
        dump_nccl_trace(self.dir / f"nccl-rank-{self.rank}.pkl", self.run)
        return path


def made_folder(run_path) -> Path:
    """This attempt's folder of records, created with no link on the way (BadFile otherwise)."""
    folder = attempt_dir(run_path)
    no_link_below(folder, run_path, "fault records folder")
    folder.mkdir(parents=True, exist_ok=True)
    return no_link_below(folder, run_path, "fault records folder")


def write_record(run_path, name: str, record: dict) -> None:
    """A JSON record into this attempt's folder, atomically and never through a link planted in the run."""
    try:
        atomic_write(made_folder(run_path) / name, json.dumps(record), inside=run_path)
    except (OSError, BadFile):
        pass  # a full disk or a planted link: the record is a diagnostic


def dump_nccl_trace(path: Path, run_path) -> bool:
    """NCCL's flight-recorder buffer (``TORCH_NCCL_TRACE_BUFFER_SIZE`` > 0, exported by the sbatch script on GPU
    partitions) as torch pickles it; False where there is none (CPU, gloo, an older torch)."""
    if _dump_nccl_trace is None:
        return False
    try:
        if not torch.cuda.is_available():
            return False
        atomic_write(path, _dump_nccl_trace(), inside=run_path)
        return True
    except Exception:  # a diagnostic on the way out must never mask the hang it reports
        return False


# ----------------------------------------------------------------------------------------- the process's watchdog
_current: Watchdog | None = None


def start(cfg, run_path, rank: int) -> Watchdog | None:
    """This process's watchdog from ``cfg.hang``: hang detection when ``hang.watchdog`` is on, the progress record
    under Slurm either way; None when neither applies."""
    global _current
    options = hang_options(cfg)
    if not options["watchdog"] and not os.environ.get("SLURM_JOB_ID"):
        return None
    _current = Watchdog(
        run_path,
        rank,
        options["factor"],
        options["floor_s"],
        sync_every=cfg.log_interval,
        detect_hangs=options["watchdog"],
    )
    return _current.start()


def beat(step: int) -> None:
    """The loop's one call per step."""
    if _current is not None:
        _current.beat(step)


def resume(step: int | None = None) -> None:
    if _current is not None:
        _current.resume(step)


def pause() -> None:
    if _current is not None:
        _current.pause()


def stop() -> None:
    global _current
    if _current is not None:
        _current.close()
        _current = None


def last_step() -> int | None:
    return _current.step if _current is not None else None


def record_error(run_path, rank: int, error: BaseException, step: int | None) -> None:
    """What ended this rank, for the restart decision (slurm/restart.py): the same step failing the same way twice
    is deterministic and not retried."""
    record = {
        "rank": rank,
        "node": node_name(),
        "type": type(error).__name__,
        "message": str(error)[:500],
        "step": step,
        "time": time.time(),
    }
    write_record(run_path, f"error-rank-{rank}.json", record)


def hang_options(cfg) -> dict:
    """``cfg.hang`` with the schema's defaults (configs written before the section existed have none)."""
    return with_defaults(cfg, "hang")
