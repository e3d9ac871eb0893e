"""Where Slurm's scripts, records and logs go, and which paper a config belongs to: light (no torch), so
``depthbench jobs`` and ``cancel`` start fast; slurm/submit.py, which builds and checks what it submits, re-exports
them."""

from __future__ import annotations

import os
from pathlib import Path

from harness.core.choices import FAMILIES, claims_out
from harness.core.files import printable
from harness.core.rundir import runs_root

REPO = Path(__file__).resolve().parent.parent


def runs_root_note() -> str | None:
    """A word when runs would land inside this checkout because ``DEPTHBENCH_RUNS`` is not set: on a cluster they
    belong on a shared file system, set once."""
    if os.environ.get("DEPTHBENCH_RUNS"):
        return None
    root = runs_root()
    if root != REPO and REPO not in root.parents:
        return None
    return (
        f"runs and Slurm logs go to {root}, inside this checkout; set DEPTHBENCH_RUNS once (e.g. in ~/.bashrc) "
        "to a folder on a shared file system every node mounts"
    )


def slurm_dir() -> Path:
    """Where submitted scripts, records and Slurm logs go."""
    return runs_root() / "slurm"


def run_roots() -> list[Path]:
    """The folders a submission record may name run directories in: the runs root, and the claims folders
    ``submit --claims`` trains into by default (``depthbench claims`` reads its runs there)."""
    return [runs_root(), *(claims_out(quick, scale=scale) for quick in (False, True) for scale in ("reduced", "paper"))]


def roots_holding(real: str) -> list[str]:
    """The :func:`run_roots` (resolved, links followed) that the resolved path ``real`` is or lies inside."""
    roots = [os.path.realpath(root) for root in run_roots()]
    return [root for root in roots if os.path.commonpath([root, real]) == root]


def inside_run_roots(folder: str | Path) -> bool:
    """Whether ``folder`` (relative to the working directory, links followed) is one of :func:`run_roots` or inside
    one: where ``submit --claims --claims-out`` may train, so that ``jobs`` and ``cancel`` find its runs."""
    return bool(roots_holding(os.path.realpath(folder)))


def outside_run_roots(work_dir: str) -> str | None:
    """Why ``work_dir`` (read from a submission record or found under the runs root) is not a run directory
    depthbench acts on, or None: it must be absolute and resolve, links followed, inside one of :func:`run_roots`
    -- a record is a file anyone who can write the runs folder may have written, and it decides which folder
    ``jobs`` reads and which job ``cancel RUN`` cancels."""
    if not os.path.isabs(work_dir):
        return f"work_dir {printable(work_dir)} is not an absolute path"
    real = os.path.realpath(work_dir)
    if any(root != real for root in roots_holding(real)):  # strictly inside: a root itself is no run directory
        return None
    resolved = "" if real == os.path.normpath(work_dir) else f" (it resolves to {printable(real)})"
    return f"work_dir {printable(work_dir)}{resolved} is outside the runs root {runs_root()} and the claims folders"


def paper_of(config: str) -> str | None:
    """The paper a config belongs to, from its folder (configs/<paper>/...)."""
    parts = Path(config).parts
    return next((p for p in parts if p in FAMILIES), None)
