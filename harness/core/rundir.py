"""The run-directory contract: every run, of any kind, writes ``results/runs/<experiment>/<run-id>/``.

Files (the ``results`` package reads only these):

- ``config.py``     the fully resolved config (MMEngine config syntax), when the run has one
- ``meta.json``     git commit, package versions, host(s), world size, engine, start/end, status
                    (``running`` / ``done`` / ``failed`` / ``preempted``), plus run-specific fields
- ``metrics.jsonl`` one JSON object per logged step / epoch / evaluation
- ``last.pth`` (+ ``best.pth``) checkpoints, ``log.txt`` the human-readable log; other artefacts
  (CSV, PNG, TensorBoard events) beside them

Only rank 0 writes; other ranks get a RunDir whose writes are no-ops.
"""
from __future__ import annotations

import datetime as _dt
import importlib.metadata as metadata
import json
import os
import socket
import subprocess
from pathlib import Path
from typing import BinaryIO, Callable

from harness.errors import DepthbenchError

DEFAULT_ROOT = Path(os.environ.get("DEPTHBENCH_RUNS", "results/runs"))
STATUSES = ("running", "done", "failed", "preempted")
VERSIONED = ("torch", "torchvision", "timm", "mmcv", "mmengine", "mmdet", "mmsegmentation", "accelerate", "deepspeed")


def now() -> str:
    return _dt.datetime.now().astimezone().isoformat(timespec="seconds")


def new_run_path(experiment: str, root: str | Path | None = None) -> Path:
    """``<root>/<experiment>/<YYYYmmdd-HHMMSS>``, with ``-2``, ``-3``… when runs start within the same second."""
    base = Path(root or DEFAULT_ROOT) / experiment / _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def git_commit() -> str | None:
    try:
        root = Path(__file__).resolve().parent.parent
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
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
    return {"slurm_job_id": env["SLURM_JOB_ID"], "slurm_array_job_id": env.get("SLURM_ARRAY_JOB_ID"),
            "slurm_array_task_id": env.get("SLURM_ARRAY_TASK_ID"),
            "slurm_restart_count": int(env.get("SLURM_RESTART_COUNT") or 0),
            "slurm_nodelist": env.get("SLURM_JOB_NODELIST")}


def atomic_write(path: str | Path, data: str | bytes | Callable[[BinaryIO], None]) -> None:
    """The one atomic file writer: write to a temporary name in the same folder, fsync, rename over ``path``,
    fsync the folder (so the rename itself is durable). A reader, or a process killed mid-write, sees the old
    file or the new one, never half a file. ``data``: text, bytes, or a function that writes to a binary file
    (e.g. ``lambda fh: torch.save(obj, fh)``). A temporary left by a killed writer is named ``.<name>.tmp-<pid>``.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            if callable(data):
                data(fh)
            else:
                fh.write(data.encode() if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class RunDir:
    """A run directory; create with :meth:`create` (new run) or :meth:`open` (resume an existing one)."""

    def __init__(self, path: Path, writer: bool = True):
        self.path = Path(path)
        self.writer = writer

    @classmethod
    def create(cls, experiment: str, run_id: str | None = None, root: str | Path | None = None,
               writer: bool = True, path: str | Path | None = None, **meta) -> "RunDir":
        """A new run at ``<root>/<experiment>/<run_id>``, or at ``path`` when given (e.g. ``--work-dir``)."""
        if path is None:
            path = Path(root or DEFAULT_ROOT) / experiment / run_id if run_id else new_run_path(experiment, root)
        path = Path(path)
        run = cls(path, writer)
        if writer:
            path.mkdir(parents=True, exist_ok=True)
            run.update_meta(experiment=experiment, run_id=path.name, status="running", start=now(),
                            git_commit=git_commit(), packages=package_versions(), host=socket.gethostname(),
                            **{**slurm_meta(), **meta})
        return run

    @classmethod
    def open(cls, path: str | Path, writer: bool = True) -> "RunDir":
        path = Path(path)
        if not (path / "meta.json").exists():
            raise DepthbenchError(f"{path} is not a run directory (no meta.json)")
        return cls(path, writer)

    # ---------------------------------------------------------------- meta.json
    def meta(self) -> dict:
        try:
            return json.loads((self.path / "meta.json").read_text())
        except FileNotFoundError:
            return {}

    def update_meta(self, **fields) -> None:
        if not self.writer:
            return
        if "status" in fields and fields["status"] not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {fields['status']!r}")
        atomic_write(self.path / "meta.json", json.dumps({**self.meta(), **fields}, indent=1, default=str))

    def finish(self, status: str = "done", **fields) -> None:
        self.update_meta(status=status, end=now(), **fields)

    # ---------------------------------------------------------------- other files
    def log_metrics(self, **record) -> None:
        """Append one JSON object to metrics.jsonl (flushed and fsynced: a killed run keeps what it logged)."""
        if not self.writer:
            return
        with open(self.path / "metrics.jsonl", "a") as fh:
            fh.write(json.dumps(record, default=float) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def write_config(self, text: str) -> None:
        if self.writer:
            atomic_write(self.path / "config.py", text)

    def log(self, line: str) -> None:
        if self.writer:
            with open(self.path / "log.txt", "a") as fh:
                fh.write(line.rstrip("\n") + "\n")

    def file(self, name: str) -> Path:
        return self.path / name


def read_metrics(path: str | Path) -> list[dict]:
    """The records of a metrics.jsonl; a torn last line (a run killed mid-write) is ignored, others raise."""
    lines = Path(path).read_text().splitlines()
    records = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            raise DepthbenchError(f"{path}:{i + 1}: not a JSON line; the metrics file is corrupt") from None
    return records

