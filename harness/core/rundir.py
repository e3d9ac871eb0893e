"""The run-directory contract: every run, of any kind, writes ``results/runs/<experiment>/<run-id>/``.

Files (the ``results`` package reads only these):

- ``config.py``     the fully resolved config (MMEngine config syntax), when the run has one
- ``meta.json``     git commit, package versions, host(s), world size, engine, start/end, status
                    (``running`` / ``done`` / ``failed`` / ``preempted`` / ``restarting``: a Slurm job held for its
                    next attempt after a failed one, slurm/restart.py), plus run-specific fields
- ``metrics.jsonl`` one JSON object per logged step / epoch / evaluation
- ``last.pth`` (+ ``best.pth``) checkpoints, ``log.txt`` the human-readable log; other artefacts
  (CSV, PNG, TensorBoard events) beside them

Only rank 0 writes; other ranks get a RunDir whose writes are no-ops. A run directory has one writer at a time:
the process that creates or opens it for writing holds an exclusive lock (``fcntl.flock`` on ``.lock``, released
by the kernel when the process ends, so a killed run never leaves a stale lock) until the run finishes; a second
writer is refused in one line. Runs also keep their resolved config as data (``config.json``): readers use that,
never execute ``config.py``. Experiment and run names cannot leave the runs root, and appends never follow a
symbolic link.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import importlib.metadata as metadata
import json
import os
import re
import socket
import stat
import subprocess
from pathlib import Path

from harness.core.config_paths import REPO
from harness.core.errors import DepthbenchError
from harness.core.faults import restart_count
from harness.core.files import (
    MAX_LOG_BYTES,
    BadFile,
    append_line,
    atomic_write,
    is_regular,
    loads_json,
    no_link_below,
    read_json,
    read_text,
)

# the checkout's results/runs, not the working directory's: `results`, `jobs` and `--resume auto` find the runs
# from any directory, as config paths resolve from any directory (README's Training section)
DEFAULT_ROOT = REPO / "results" / "runs"
STATUSES = ("running", "done", "failed", "preempted", "restarting")
VERSIONED = ("torch", "torchvision", "timm", "mmcv", "mmengine", "mmdet", "mmsegmentation", "accelerate", "deepspeed")


def runs_root() -> Path:
    """Where runs land: ``$DEPTHBENCH_RUNS`` as it is now (read at each call: a test, a notebook or a Slurm job may
    set it after import), else :data:`DEFAULT_ROOT`; absolute (a relative ``$DEPTHBENCH_RUNS`` from the working
    directory), as a Slurm job started elsewhere needs it. The one place the runs folder is resolved."""
    return Path(os.environ.get("DEPTHBENCH_RUNS") or DEFAULT_ROOT).absolute()


def now() -> str:
    return _dt.datetime.now().astimezone().isoformat(timespec="seconds")


NAME = re.compile(r"[\w][\w.+=,@-]*")  # an experiment or run name: one path component, no "..", no leading dot


def check_name(name, what: str = "experiment") -> str:
    """``name`` as one safe path component under the runs root (``experiment=../../x`` would write elsewhere)."""
    if not isinstance(name, str) or not NAME.fullmatch(name) or ".." in name:
        raise DepthbenchError(
            f"{what} {name!r} is not a plain name (letters, digits, _ . + = , @ -, not starting "
            f"with . and without ..); runs live in <runs root>/<experiment>/<run id>"
        )
    return name


def new_run_path(experiment: str, root: str | Path | None = None) -> Path:
    """``<root>/<experiment>/<YYYYmmdd-HHMMSS>``, with ``-2``, ``-3``… when runs start within the same second."""
    check_name(experiment)
    base = Path(root or runs_root()) / experiment / _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def git_commit() -> str | None:
    try:
        root = Path(__file__).resolve().parents[2]
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def package_versions() -> dict:
    versions = {}
    for dist in VERSIONED:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return versions


def slurm_meta(environ=None) -> dict:
    """The Slurm job this process runs in, for meta.json (``{}`` outside Slurm): job id, array job and element,
    restart count (how often the job was requeued) and node list."""
    env = os.environ if environ is None else environ
    if not env.get("SLURM_JOB_ID"):
        return {}
    return {
        "slurm_job_id": env["SLURM_JOB_ID"],
        "slurm_array_job_id": env.get("SLURM_ARRAY_JOB_ID"),
        "slurm_array_task_id": env.get("SLURM_ARRAY_TASK_ID"),
        "slurm_restart_count": restart_count(env),
        "slurm_nodelist": env.get("SLURM_JOB_NODELIST"),
    }


_LOCKS: dict[str, int] = {}  # run directory -> the lock file this process holds (kept open: closing releases)


def _close_inherited_locks() -> None:
    """In a fork: the parent stays the writer. The fork's copies of the lock descriptors are closed, as ``exec``
    closes them (O_CLOEXEC); the lock lives on in the parent's."""
    for fd in _LOCKS.values():
        os.close(fd)
    _LOCKS.clear()


os.register_at_fork(after_in_child=_close_inherited_locks)


def lock_run_dir(path: str | Path) -> None:
    """Make this process the one writer of the run directory ``path`` (see the module docstring); one line when
    another process is writing it. Idempotent within a process."""
    path = Path(path)
    key = str(path.resolve())
    if key in _LOCKS:
        return
    lock = path / ".lock"
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise DepthbenchError(
            f"cannot lock the run directory {path} ({e.strerror}); check that it is a directory "
            f"you can write, and that its .lock is a plain file"
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device planted as .lock: refused, never waited on
        os.close(fd)
        raise DepthbenchError(f"cannot lock the run directory {path}: {lock} is not a regular file; remove it")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise DepthbenchError(
            f"the run directory {path} is in use by {holder}; wait for it to finish, or give another --work-dir"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}".encode(), 0)
    _LOCKS[key] = fd


def unlock_run_dir(path: str | Path) -> None:
    fd = _LOCKS.pop(str(Path(path).resolve()), None)
    if fd is not None:
        os.close(fd)  # closing the descriptor releases the lock


def run_dir_in_use(path: str | Path) -> str | None:
    """Who holds the run directory's lock (a process of ours counts as free), or None: a cheap check before work."""
    path = Path(path)
    if str(path.resolve()) in _LOCKS or not is_regular(path / ".lock"):
        return None
    try:
        fd = os.open(path / ".lock", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None
    except BlockingIOError:
        return os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
    finally:
        os.close(fd)


APPENDED = ("log.txt", "metrics.jsonl")  # appended to while the run trains (append_line)


def _check_appended_files(path: Path) -> None:
    """Before a writer starts: the files it appends to are no link and no special file (one line now, not an
    ELOOP traceback at the first log step)."""
    for name in APPENDED:
        no_link_below(path / name, path, what=name)


class RunDir:
    """A run directory; create with :meth:`create` (new run) or :meth:`open` (resume an existing one, or append
    records to it). A writer holds the directory's lock until :meth:`finish`."""

    def __init__(self, path: Path, writer: bool = True):
        self.path = Path(path)
        self.writer = writer

    @classmethod
    def create(
        cls,
        experiment: str,
        run_id: str | None = None,
        root: str | Path | None = None,
        writer: bool = True,
        path: str | Path | None = None,
        **meta,
    ) -> "RunDir":
        """A new run at ``<root>/<experiment>/<run_id>``, or at ``path`` when given (e.g. ``--work-dir``)."""
        check_name(experiment)
        if path is None:
            path = (
                Path(root or runs_root()) / experiment / check_name(run_id, "run id")
                if run_id
                else new_run_path(experiment, root)
            )
        path = Path(path)
        run = cls(path, writer)
        if writer:
            path.mkdir(parents=True, exist_ok=True)
            _check_appended_files(path)
            lock_run_dir(path)
            run.update_meta(
                experiment=experiment,
                run_id=path.name,
                status="running",
                start=now(),
                git_commit=git_commit(),
                packages=package_versions(),
                host=socket.gethostname(),
                **{**slurm_meta(), **meta},
            )
        return run

    @classmethod
    def open(cls, path: str | Path, writer: bool = True) -> "RunDir":
        path = Path(path)
        if not is_regular(path / "meta.json", inside=path):
            if os.path.lexists(path / "meta.json"):  # a link or a FIFO: read_json names what it is
                read_json(path / "meta.json", inside=path, what="meta.json")
            raise DepthbenchError(f"{path} is not a run directory (no meta.json)")
        if writer:
            _check_appended_files(path)
            lock_run_dir(path)
        return cls(path, writer)

    # ---------------------------------------------------------------- meta.json
    def meta(self) -> dict:
        try:
            return read_json(self.path / "meta.json", inside=self.path, what="meta.json")
        except FileNotFoundError:
            return {}

    def update_meta(self, **fields) -> None:
        if not self.writer:
            return
        if "status" in fields and fields["status"] not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {fields['status']!r}")
        atomic_write(
            self.path / "meta.json", json.dumps({**self.meta(), **fields}, indent=1, default=str), inside=self.path
        )

    def finish(self, status: str = "done", **fields) -> None:
        self.update_meta(status=status, end=now(), **fields)
        if self.writer:
            unlock_run_dir(self.path)

    # ---------------------------------------------------------------- other files
    def log_metrics(self, **record) -> None:
        """Append one JSON object to metrics.jsonl (flushed and fsynced: a killed run keeps what it logged)."""
        if not self.writer:
            return
        append_line(self.path / "metrics.jsonl", json.dumps(record, default=float))

    def write_config(self, text: str, resolved: dict | None = None) -> None:
        """``config.py`` (the resolved config as MMEngine text, for people) and ``config.json`` (the same as data,
        for programs: nothing reads a run's config by executing it)."""
        if self.writer:
            atomic_write(self.path / "config.py", text)
            if resolved is not None:
                atomic_write(self.path / "config.json", json.dumps(resolved, indent=1, default=str))

    def config(self) -> dict | None:
        """The run's resolved config as data (``config.json``), or None when the run has none."""
        return read_config_json(self.path)

    def log(self, line: str) -> None:
        if self.writer:
            append_line(self.path / "log.txt", line, sync=False)

    def file(self, name: str) -> Path:
        """``<run>/<name>`` for writing or reading, refused in one line when it (or a folder on the way) is a link or
        a special file: a planted ``tb`` link cannot move the TensorBoard events, a ``last.pth`` link cannot
        redirect a checkpoint."""
        return no_link_below(self.path / name, self.path, what=name)


def read_metrics(path: str | Path) -> list[dict]:
    """The records of a metrics.jsonl; a torn last line (a run killed mid-write) is ignored, others raise."""
    path = Path(path)
    lines = read_text(path, inside=path.parent, what="metrics file", max_bytes=MAX_LOG_BYTES).splitlines()
    records = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(loads_json(line, source=f"{path}:{i + 1}"))
        except BadFile:
            if i == len(lines) - 1:
                break
            raise DepthbenchError(f"{path}:{i + 1}: not a JSON line; the metrics file is corrupt") from None
    return records


def checkpoint_run(checkpoint: str | Path) -> Path | None:
    """The run directory a checkpoint belongs to: the path itself when it is a run directory, else the folder
    holding it, when that has a ``meta.json``; None for a weights file outside any run."""
    path = Path(checkpoint).expanduser()
    for folder in (path, path.parent):
        if is_regular(folder / "meta.json", inside=folder):
            return folder
    return None


def read_config_json(run: str | Path) -> dict | None:
    """A run directory's resolved config as data (``config.json``); None when missing or unreadable."""
    try:
        return read_json(Path(run) / "config.json", inside=run, what="config.json")
    except (OSError, BadFile):
        return None
