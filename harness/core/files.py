"""Writing files so that a reader, or a process killed mid-write, never sees half a file.

:func:`atomic_write` is the one atomic file writer of depthbench; :func:`atomic_dir` does the same for a folder
that is filled in several steps (a dataset export). :func:`data_cache` is where generated data lives;
:func:`check_writable_folder` checks an output folder before any work.
"""
from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from harness.core.errors import DepthbenchError


def atomic_write(path: str | Path, data: str | bytes | Callable[[BinaryIO], None],
                 before_replace: Callable[[], None] | None = None) -> None:
    """The one atomic file writer: write to a temporary name in the same folder, fsync, rename over ``path``,
    fsync the folder (so the rename itself is durable). A reader, or a process killed mid-write, sees the old
    file or the new one, never half a file. ``data``: text, bytes, or a function that writes to a binary file
    (e.g. ``lambda fh: torch.save(obj, fh)``). A temporary left by a killed writer is named ``.<name>.tmp-<pid>``.
    The temporary is created exclusively and never through a symbolic link, and the rename replaces a link at
    ``path`` rather than writing where it points: a planted link cannot redirect the write. ``before_replace``
    runs after the new content is on disk and before it replaces the old (e.g. to record its checksum first).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.unlink(missing_ok=True)  # a killed writer's leftover with our pid (never followed: unlink removes the link)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as fh:
            if callable(data):
                data(fh)
            else:
                fh.write(data.encode() if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        if before_replace is not None:
            before_replace()
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def append_line(path: str | Path, line: str, sync: bool = True) -> None:
    """Append one line to ``path`` (created if missing), never through a symbolic link: a ``metrics.jsonl`` that
    someone replaced by a link to another file is refused (OSError ELOOP), not appended to."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "a") as fh:
        fh.write(line.rstrip("\n") + "\n")
        fh.flush()
        if sync:
            os.fsync(fh.fileno())


@contextlib.contextmanager
def atomic_dir(target: str | Path) -> Iterator[Path | None]:
    """Fill a folder atomically: yields a temporary sibling folder (``.<name>.tmp-<pid>``) to write into, then
    renames it to ``target``. Yields None when ``target`` exists already (another process finished first, or an
    earlier run): nothing to do. A killed writer leaves only its temporary folder, never a half ``target``."""
    target = Path(target)
    if target.exists():
        yield None
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    for abandoned in target.parent.glob(f".{target.name}.tmp-*"):  # of killed writers (their process is gone)
        pid = abandoned.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(abandoned, ignore_errors=True)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        yield tmp
        os.rename(tmp, target)
    except OSError:
        if not target.exists():  # a real failure, not "another process finished first"
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def data_cache() -> Path:
    """Where generated datasets and tokenizers are cached: ``$DEPTHBENCH_DATA``, else ``data/`` in depthbench's
    cache (``$DEPTHBENCH_CACHE``, default ~/.cache/depthbench)."""
    if os.environ.get("DEPTHBENCH_DATA"):
        return Path(os.environ["DEPTHBENCH_DATA"]).expanduser()
    return Path(os.environ.get("DEPTHBENCH_CACHE") or "~/.cache/depthbench").expanduser() / "data"


def atomic_symlink(link: str | Path, target: str) -> None:
    """Point ``link`` at ``target`` (a name relative to the link's folder) atomically: a new link under a
    temporary name renamed over the old one, so a reader never finds no link."""
    link = Path(link)
    tmp = link.with_name(f".{link.name}.tmp-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    os.replace(tmp, link)


def check_writable_folder(path: str | Path, option: str, contents: str) -> Path:
    """``option PATH`` names a folder to write ``contents`` into (created when missing): checked before any work that
    it is not a file and that the nearest folder of it that exists can be written; else one line. Returns the
    path, ``~`` expanded."""
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise DepthbenchError(f"{option} {path} is a file, not a directory; give a directory for {contents}")
    existing = next(p for p in (path.absolute(), *path.absolute().parents) if p.exists())
    if not existing.is_dir():
        raise DepthbenchError(f"{option} {path}: {existing} is a file, not a directory; give a directory for "
                              f"{contents}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise DepthbenchError(f"{option} {path}: {existing} is not writable; choose a directory you can write")
    return path
