"""Where Slurm's scripts, records and logs go, and which paper a config belongs to: light (no torch), so
``depthbench jobs`` and ``cancel`` start fast; slurm/submit.py, which builds and checks what it submits, re-exports
them."""

from __future__ import annotations

import os
from pathlib import Path

from harness.core.choices import FAMILIES
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


def paper_of(config: str) -> str | None:
    """The paper a config belongs to, from its folder (configs/<paper>/...)."""
    parts = Path(config).parts
    return next((p for p in parts if p in FAMILIES), None)
