"""Writing files so that a reader, or a process killed mid-write, never sees half a file.

:func:`atomic_write` is the one atomic file writer of depthbench; :func:`atomic_dir` does the same for a folder
that is filled in several steps (a dataset export). :func:`data_cache` is where generated data lives;
:func:`check_writable_folder` and :func:`check_writable_file` check an output folder or file before any work.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

import numpy as np
import yaml
from numpy.lib import format as npy

from harness.core.errors import DepthbenchError


def atomic_write(
    path: str | Path,
    data: str | bytes | Callable[[BinaryIO], None],
    before_replace: Callable[[], None] | None = None,
    inside: str | Path | None = None,
) -> None:
    """The one atomic file writer: write to a temporary name in the same folder, fsync, rename over ``path``,
    fsync the folder (so the rename itself is durable). A reader, or a process killed mid-write, sees the old
    file or the new one, never half a file. ``data``: text, bytes, or a function that writes to a binary file
    (e.g. ``lambda fh: torch.save(obj, fh)``). A temporary left by a killed writer is named ``.<name>.tmp-<pid>``.
    The temporary is created exclusively and never through a symbolic link, and the rename replaces a link at
    ``path`` rather than writing where it points: a planted link cannot redirect the write. ``before_replace``
    runs after the new content is on disk and before it replaces the old (e.g. to record its checksum first).
    ``inside``: the run directory ``path`` lies in; a folder between them that is a link is refused
    (:func:`no_link_below`), so a planted ``tb`` or ``checkpoints`` link cannot move the write elsewhere.
    """
    path = Path(path)
    if inside is not None:
        no_link_below(path, inside)
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
    someone replaced by a link to another file is refused (OSError ELOOP), not appended to; nor to a FIFO or
    device (opened without blocking, then refused as not a regular file)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise BadFile(
                f"{path} is a symbolic link; depthbench appends to no link: replace it by the file itself"
            ) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise _refuse(path, st, "file")
    os.set_blocking(fd, True)
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


def _nearest_existing(path: Path) -> Path:
    return next(p for p in (path.absolute(), *path.absolute().parents) if p.exists())


def _cannot_create_in(folder: Path) -> OSError | None:
    """Why no file can be created in ``folder``, or None: a file really created (and removed) there, since
    ``os.access`` says yes to root on a read-only or virtual file system."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".depthbench-probe-"):
            pass
    except OSError as e:
        return e
    return None


def unwritable_folder(path: str | Path) -> str | None:
    """Why no file can be written in the folder ``path`` (created when missing), or None: it is a file, the nearest
    folder of it that exists is a file, or a file really created (and removed) there fails -- ``os.access`` says
    yes to root on a read-only or virtual file system, so it is not asked."""
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        return f"{path} is a file, not a directory"
    existing = _nearest_existing(path)
    if not existing.is_dir():
        return f"{existing} is a file, not a directory"
    error = _cannot_create_in(existing)
    if error is not None:
        return f"cannot write in {existing} ({error.strerror}: {existing} is not writable)"
    return None


def check_writable_folder(path: str | Path, option: str, contents: str) -> Path:
    """``option PATH`` names a folder to write ``contents`` into (created when missing): checked before any work with
    :func:`unwritable_folder`; else one line. Returns the path, ``~`` expanded."""
    path = Path(path).expanduser()
    problem = unwritable_folder(path)
    if problem is not None:
        raise DepthbenchError(f"{option} {path}: {problem}; give a directory you can write for {contents}")
    return path


def unwritable_file(path: str | Path) -> str | None:
    """Why the file ``path`` cannot be written -- created (its missing folders too), replaced or appended to -- or
    None: its folder as :func:`unwritable_folder` checks it, and an existing regular file opened for appending,
    which truncates nothing (a file without write permission fails it, and an immutable one, which stops root too).
    A link or a special file at ``path`` is left to the writer (``atomic_write`` replaces it, ``append_line``
    refuses it)."""
    path = Path(path).expanduser()
    if path.is_dir():
        return f"{path} is a directory"
    problem = unwritable_folder(path.parent)
    if problem is not None:
        return problem
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC))
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot write {path} ({e.strerror}: {path} is not writable)"
    return None


def check_writable_file(path: str | Path, option: str, contents: str) -> Path:
    """``option PATH`` names a file that ``contents`` will be written to (replacing or appending to it): checked
    before any work with :func:`unwritable_file`; else one line. Returns the path, ``~`` expanded."""
    path = Path(path).expanduser()
    problem = unwritable_file(path)
    if problem is not None:
        raise DepthbenchError(f"{option} {path}: {problem}; give a file you can write for {contents}")
    return path


# ----------------------------------------------------------------------------------------------- reading data
# A run directory, a record, a cache or a report that a user receives is data: it may hold links, FIFOs, devices,
# huge or deeply nested files. The functions below are the one way depthbench opens such a file: never through a
# symbolic link (O_NOFOLLOW on every component below ``inside``), never a non-regular file (checked with lstat
# before the open and fstat after it; the open itself is O_NONBLOCK, so a FIFO cannot block it), never more than
# ``max_bytes``, and JSON/YAML never deeper than ``max_depth`` (checked before the parser recurses) and of the type
# the caller expects. Every refusal is a :class:`BadFile` (one line naming the file); a missing file stays
# FileNotFoundError, so callers can tell "absent" from "wrong".
MAX_BYTES = 64 << 20  # records and caches: far above any real one
MAX_LOG_BYTES = 1 << 30  # metrics.jsonl of a long run (one line per log step)
MAX_DEPTH = 64  # JSON/YAML nesting: real records nest < 10 deep; Python's parsers recurse ~1000 deep
MAX_YAML_ALIASES = 100  # aliases multiply what a walk over the loaded document visits ("billion laughs")


class BadFile(DepthbenchError):
    """A file of a run, a record, a cache or a report that depthbench refuses to read or write (a link, not a
    regular file, too large, too deep, not the expected type). One line that names the file."""


def _components(path: Path, inside: Path | None) -> tuple[Path, tuple[str, ...]]:
    """``(base, parts)``: the folder that is opened following links (``inside``, named by the user, or the file's
    own folder) and the components below it, each opened without following a link."""
    if inside is None:
        return path.parent, (path.name,)
    base, target = os.path.abspath(inside), os.path.abspath(path)  # lexical: "run/../x" leaves run and is refused
    rel = os.path.relpath(target, base)
    if rel == "." or rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel):
        raise BadFile(f"{path} is not inside {inside}; depthbench reads and writes a run's files only inside it")
    return Path(base), tuple(Path(rel).parts)


def _kind(st) -> str:
    """What a file that is not a regular one is, for a refusal."""
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    if stat.S_ISFIFO(st.st_mode):
        return "a FIFO"
    if stat.S_ISDIR(st.st_mode):
        return "a directory"
    if stat.S_ISSOCK(st.st_mode):
        return "a socket"
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        return "a device"
    return "a special file"


def _refuse(path, st, what: str):
    return BadFile(
        f"{what} {path} is {_kind(st)}, not a regular file; depthbench follows no links and opens no special "
        f"files in runs, records, caches and datasets: replace it by the file itself"
    )


def _open_dir_chain(path: Path, inside: Path | None, what: str) -> tuple[int, str]:
    """A descriptor of the folder holding ``path`` (reached without following a link below ``inside``) and the
    file's name in it."""
    base, parts = _components(path, inside)
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, part in enumerate(parts[:-1]):
            try:
                st = os.stat(part, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                raise
            if not stat.S_ISDIR(st.st_mode):
                raise _refuse(Path(base, *parts[: i + 1]), st, f"the folder of the {what}")
            sub = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def open_file(
    path: str | Path, *, inside: str | Path | None = None, max_bytes: int | None = MAX_BYTES, what: str = "file"
) -> BinaryIO:
    """``path`` opened for reading (binary), if it is a regular file reached without a link (see above) and not
    larger than ``max_bytes`` (None: any size, e.g. a checkpoint). ``inside``: the run directory (or other root)
    it must lie in; every component below it is opened with O_NOFOLLOW. FileNotFoundError when missing."""
    path = Path(path)
    dir_fd, name = _open_dir_chain(path, Path(inside) if inside is not None else None, what)
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, st, what)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError as e:
            if e.errno == errno.ELOOP:  # became a link between the lstat and the open
                raise BadFile(
                    f"{what} {path} is a symbolic link; depthbench follows no links in runs, records and caches"
                ) from None
            raise
    finally:
        os.close(dir_fd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise _refuse(path, st, what)
    if max_bytes is not None and st.st_size > max_bytes:
        os.close(fd)
        raise BadFile(
            f"{what} {path} is {st.st_size:,} bytes, more than the {max_bytes:,} depthbench reads; "
            f"it is not a file depthbench wrote"
        )
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_bytes(
    path: str | Path, *, inside: str | Path | None = None, max_bytes: int | None = MAX_BYTES, what: str = "file"
) -> bytes:
    with open_file(path, inside=inside, max_bytes=max_bytes, what=what) as fh:
        data = fh.read(max_bytes + 1) if max_bytes is not None else fh.read()
    if max_bytes is not None and len(data) > max_bytes:  # grew after the fstat
        raise BadFile(f"{what} {path} is more than the {max_bytes:,} bytes depthbench reads")
    return data


def read_text(
    path: str | Path,
    *,
    inside: str | Path | None = None,
    max_bytes: int | None = MAX_BYTES,
    what: str = "file",
    errors: str = "replace",
) -> str:
    return read_bytes(path, inside=inside, max_bytes=max_bytes, what=what).decode("utf-8", errors=errors)


def is_regular(path: str | Path, inside: str | Path | None = None) -> bool:
    """Whether ``path`` is a regular file reached without a link below ``inside`` (its own name included): the
    check instead of ``Path.is_file``/``exists``, which follow links."""
    try:
        fd, name = _open_dir_chain(Path(path), Path(inside) if inside is not None else None, "file")
    except (OSError, BadFile):
        return False
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        return False
    finally:
        os.close(fd)


def json_depth(text: str | bytes) -> int:
    """The deepest nesting of ``[``/``{`` in a JSON text, strings skipped: checked before ``json.loads``, whose C
    scanner recurses once per level. By hand because no JSON library here exposes a depth limit; numpy keeps it
    linear and fast on a 64 MiB file."""
    raw = text.encode() if isinstance(text, str) else text
    if raw.count(b"[") + raw.count(b"{") <= 16:  # a metrics line or a small record: no scan needed
        return raw.count(b"[") + raw.count(b"{")
    raw = re.sub(rb'"(?:[^"\\]|\\.)*"', b"", raw)  # strings may hold any bracket
    codes = np.frombuffer(raw, dtype=np.uint8)
    steps = np.isin(codes, (0x5B, 0x7B)).astype(np.int32) - np.isin(codes, (0x5D, 0x7D)).astype(np.int32)
    return int(np.cumsum(steps).max(initial=0))


def _type_name(types) -> str:
    types = types if isinstance(types, tuple) else (types,)
    names = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number"}
    return " or ".join(names.get(t, t.__name__) for t in types)


def loads_json(
    text: str | bytes, *, source: str = "JSON", max_depth: int = MAX_DEPTH, expect=dict, finite: bool = False
):
    """``json.loads`` that fails only with :class:`BadFile` (one line naming ``source``): not JSON, nested deeper
    than ``max_depth``, a number too long for an int, NaN/Infinity when ``finite``, a top level not of type(s)
    ``expect`` (None: any)."""
    if json_depth(text) > max_depth:
        raise BadFile(f"{source} is nested more than {max_depth} levels deep; no record or dataset file nests so deep")

    def constant(name):
        raise ValueError(f"{name} is not a finite number")

    try:
        value = json.loads(text, parse_constant=constant if finite else None)
    except (ValueError, RecursionError, OverflowError) as e:  # ValueError: JSONDecodeError, UnicodeError, int digits
        raise BadFile(f"{source} is not valid JSON ({one_line(str(e))[:120]})") from None
    if expect is not None and not isinstance(value, expect):
        raise BadFile(f"{source} holds {_type_name(type(value))} where {_type_name(expect)} belongs")
    return value


def read_json(
    path: str | Path,
    *,
    inside: str | Path | None = None,
    max_bytes: int | None = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    expect=dict,
    finite: bool = False,
    what: str = "file",
):
    """A JSON file through :func:`open_file` and :func:`loads_json`."""
    return loads_json(
        read_bytes(path, inside=inside, max_bytes=max_bytes, what=what),
        source=f"{what} {path}",
        max_depth=max_depth,
        expect=expect,
        finite=finite,
    )


def loads_yaml(text: str, *, source: str = "YAML", max_depth: int = MAX_DEPTH, expect=dict, loader=None):
    """``yaml.load`` (safe by default; ``loader``: a SafeLoader subclass) that fails only with :class:`BadFile`:
    the nesting and the aliases are counted on PyYAML's event stream (its parser keeps an explicit stack and never
    recurses) before the composer, which recurses once per level, builds anything."""
    loader = loader or yaml.SafeLoader
    try:
        depth = aliases = 0
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > max_depth:
                    raise BadFile(f"{source} is nested more than {max_depth} levels deep")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_YAML_ALIASES:
                    raise BadFile(f"{source} uses more than {MAX_YAML_ALIASES} YAML aliases")
        value = yaml.load(text, Loader=loader)
    except (yaml.YAMLError, ValueError, RecursionError, OverflowError, TypeError) as e:
        raise BadFile(f"{source} is not valid YAML ({one_line(str(e))[:160]})") from None
    if expect is not None and not isinstance(value, expect):
        raise BadFile(f"{source} holds {_type_name(type(value))} where {_type_name(expect)} belongs")
    return value


def read_yaml(
    path: str | Path,
    *,
    inside: str | Path | None = None,
    max_bytes: int | None = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    expect=dict,
    loader=None,
    what: str = "file",
):
    return loads_yaml(
        _utf8(path, inside, max_bytes, what), source=f"{what} {path}", max_depth=max_depth, expect=expect, loader=loader
    )


def _utf8(path, inside, max_bytes, what) -> str:
    data = read_bytes(path, inside=inside, max_bytes=max_bytes, what=what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadFile(f"{what} {path} is not UTF-8 text ({e.reason} at byte {e.start})") from None


_NPY_KINDS = {"i": "integers", "u": "integers", "f": "numbers", "U": "strings", "b": "booleans"}


def read_npy_from(fh, available: int, *, source: str, kinds: str = "iu", ndim: int | None = 1) -> np.ndarray:
    """The ``.npy`` array in the file object ``fh`` (``available`` bytes from its start), typed and bounded before
    any allocation: numpy's loader allocates what the header claims (2**40 elements is a MemoryError, or the
    machine's memory) and unpickles object arrays when allowed. Here the header must be format 1.0 or 2.0, the
    dtype of one of ``kinds`` (numpy's kind letters; never an object), ``ndim`` dimensions (None: any), and the
    data it claims exactly what the file holds. By hand because numpy offers no bounded loader; its public header
    readers do the parsing. One :class:`BadFile` line otherwise."""
    readers = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}
    try:
        version = npy.read_magic(fh)
        if version not in readers:
            raise BadFile(f"{source} is a .npy file of format {version}, not 1.0 or 2.0")
        shape, fortran, dtype = readers[version](fh)
    except (ValueError, EOFError, OSError, SyntaxError) as e:
        raise BadFile(f"{source} is not a .npy array ({one_line(str(e))[:120]})") from None
    wanted = " or ".join(sorted({_NPY_KINDS.get(k, k) for k in kinds}))
    if dtype.hasobject or dtype.kind not in kinds or (ndim is not None and len(shape) != ndim):
        raise BadFile(
            f"{source} holds {printable(dtype)} of shape {shape}, not "
            f"{'a list' if ndim == 1 else 'an array'} of {wanted}"
        )
    claimed, holds = int(np.prod(shape, dtype=object)) * dtype.itemsize, available - fh.tell()
    if claimed != holds:
        raise BadFile(f"{source} claims {claimed:,} bytes of data but holds {holds:,}; it is truncated or crafted")
    data = bytearray(claimed)
    if fh.readinto(data) != claimed:
        raise BadFile(f"{source} ends before its data does")
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")


def read_npy(
    path: str | Path,
    *,
    inside: str | Path | None = None,
    max_bytes: int | None = MAX_BYTES,
    kinds: str = "iu",
    ndim: int | None = 1,
    what: str = "array file",
) -> np.ndarray:
    """A ``.npy`` file through :func:`open_file` and :func:`read_npy_from` (no pickle, typed, bounded)."""
    with open_file(path, inside=inside, max_bytes=max_bytes, what=what) as fh:
        return read_npy_from(fh, os.fstat(fh.fileno()).st_size, source=f"{what} {path}", kinds=kinds, ndim=ndim)


def no_link_below(path: str | Path, inside: str | Path, what: str = "file") -> Path:
    """Refuse (:class:`BadFile`) when a component of ``path`` below ``inside`` -- the last included -- is a
    symbolic link or a special file; missing components are fine (they will be created). For writers: a planted
    link (a ``tb/`` folder, an ``iter_N.pth``) cannot redirect a write. Returns ``path``."""
    path = Path(path)
    base, parts = _components(path, Path(inside))
    current = base
    for i, part in enumerate(parts):
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            break
        if stat.S_ISLNK(st.st_mode) or not (
            stat.S_ISDIR(st.st_mode) if i < len(parts) - 1 else stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)
        ):
            raise _refuse(current, st, what)
    return path


def walk_files(root: str | Path, suffixes: tuple[str, ...] | None = None) -> Iterator[Path]:
    """The regular files under the data root ``root`` (sorted per folder), never through a link that leads out
    of the root and never in a loop: a link to a file or folder inside the root is followed once (each folder
    visited once, by device and inode), one that leads outside is a :class:`BadFile`, and so is anything that is
    neither a folder nor a regular file (a FIFO, a socket, a device, a link to nothing) -- it was skipped without a
    word, or would block the reader that opens it. ``root`` itself may be a link (the user named it)."""
    root = Path(root)
    real_root = os.path.realpath(root)
    seen: set[tuple[int, int]] = set()
    stack = [root]
    while stack:
        folder = stack.pop()
        st = os.stat(folder)
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
        subfolders = []
        for entry in entries:
            if entry.is_symlink():
                target = os.path.realpath(entry.path)
                if os.path.commonpath([real_root, target]) != real_root:
                    raise BadFile(
                        f"{entry.path} is a symbolic link out of the data root {root} (to {target}); "
                        f"depthbench follows no link out of a data root: copy the file into it"
                    )
            if entry.is_dir():  # follows a link that stays inside the root
                subfolders.append(Path(entry.path))
            elif entry.is_file():
                if suffixes is None or entry.name.endswith(suffixes):
                    yield Path(entry.path)
            else:
                try:
                    kind = _kind(os.stat(entry.path))
                except FileNotFoundError:
                    kind = f"a symbolic link to nothing ({os.readlink(entry.path)})"
                raise BadFile(
                    f"{entry.path} in the data root {root} is {kind}, not a regular file or folder; depthbench "
                    f"reads only regular files in a dataset: remove it"
                )
        stack.extend(reversed(subfolders))


def copy_regular(source: str | Path, target: str | Path, *, inside: str | Path, what: str = "file") -> Path:
    """Copy ``source`` -- a regular file inside ``inside``, reached without a link, its name without ``..`` or a
    folder -- to ``target`` atomically (a link at ``target`` is replaced, never written through). For copies into
    a report: a figure that links to a private file is refused, not published."""
    source = Path(source)
    data = read_bytes(source, inside=inside, max_bytes=None, what=what)
    atomic_write(target, data)
    return Path(target)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def printable(value, newlines: bool = False) -> str:
    """``str(value)`` without control characters (terminal escapes, carriage returns, bidirectional overrides):
    every string read from a record (a device name, a job's or run's name) goes through it before it is printed.
    ``newlines``: keep line feeds (and tabs) of a multi-line text."""
    text = str(value)
    if newlines:
        return _CONTROL.sub("?", text)
    return _CONTROL.sub("?", text.replace("\n", "?").replace("\t", " "))


def one_line(text: str) -> str:
    return " ".join(printable(text, newlines=True).split())
