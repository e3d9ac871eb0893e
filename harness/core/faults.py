"""A run's fault records (``faults/attempt-K/``, written by harness/engine/watchdog.py and the sbatch script) as
data: where they are and how they are read, here below the engine so ``depthbench jobs`` (slurm/jobs.py) and the
requeue step (slurm/restart.py) read them without importing torch.

The records are files anyone with access to the run may have written. Every one is opened through
harness.core.files' opener inside the run directory (no link, no FIFO or device, size- and depth-capped), only names
of the form ``KIND-rank-R.EXT`` with a bounded R are looked at, and every field has a type and a range: a planted
record is ignored (or named), never followed, waited on or crashed over.
"""

from __future__ import annotations

import math
import os
import re
import struct
from pathlib import Path

from harness.core.errors import DepthbenchError
from harness.core.files import BadFile, open_file, printable, read_json, read_text

STEP_RECORD = struct.Struct("<q")  # step-rank-R.bin: one little-endian int64, the rank's last finished step
MAX_RANK = 1 << 20  # far above any job's ranks
MAX_ATTEMPT = 1 << 20  # attempts of one job (Slurm's restart count)
MAX_STEP = 1 << 62
MAX_TEXT = 500  # a node name, an error message: longer is cut
MAX_EXITS_BYTES = 1 << 20  # the exits file: one short line per rank and attempt
ALIVE_EVERY_S = 10.0  # a live rank rewrites its heartbeat at least this often (harness/engine/watchdog.py)
SILENT_AFTER_S = 3 * ALIVE_EVERY_S  # no heartbeat for this long: the rank was frozen or dead, not waiting
_NODE = re.compile(r"[A-Za-z0-9_.\-]{1,100}")  # a Slurm node name: it reaches `scontrol update ExcNodeList=`
_RANK_FILE = re.compile(r"(heartbeat|error|stacks|step)-rank-(\d{1,7})\.(json|txt|bin)")
_EXIT_LINE = re.compile(r"(\d{1,12}(?:\.\d{1,12})?) (\d{1,7}) (\S{1,200}) (-?\d{1,5})")


def restart_count(environ=None) -> int:
    """``SLURM_RESTART_COUNT`` (0 when unset): the attempt this process belongs to. Slurm writes it; anything but a
    count up to :data:`MAX_ATTEMPT` is one line."""
    value = (os.environ if environ is None else environ).get("SLURM_RESTART_COUNT") or "0"
    if not (value.isascii() and value.isdigit() and int(value[:8]) <= MAX_ATTEMPT and len(value) <= 8):
        raise DepthbenchError(
            f"SLURM_RESTART_COUNT={printable(value)[:40]!r} is not a restart count (0 to "
            f"{MAX_ATTEMPT}); it is Slurm's to set: unset it outside a job"
        )
    return int(value)


def attempt_dir(run_path, attempt: int) -> Path:
    """``RUN/faults/attempt-K``; ``attempt`` must be a non-negative int (a record's ``"0/../.."`` is not one)."""
    if not (isinstance(attempt, int) and not isinstance(attempt, bool) and 0 <= attempt <= MAX_ATTEMPT):
        raise BadFile(f"attempt {printable(attempt)[:40]!r} is not an attempt number (0 to {MAX_ATTEMPT})")
    return Path(run_path) / "faults" / f"attempt-{attempt}"


def rank_files(folder: Path, kind: str) -> dict[int, Path]:
    """``{rank: path}`` of the attempt folder's ``KIND-rank-R.*`` files; other names are not records."""
    try:
        names = os.listdir(folder)
    except OSError:  # missing, or not a folder
        return {}
    found = {}
    for name in names:
        m = _RANK_FILE.fullmatch(name)
        if m and m.group(1) == kind and int(m.group(2)) <= MAX_RANK:
            found[int(m.group(2))] = folder / name
    return dict(sorted(found.items()))


def read_record(path, inside) -> dict:
    """A JSON fault record inside the run ``inside``; {} when it is missing or unusable -- a rank killed while
    writing leaves none, and the others still tell the story."""
    try:
        return read_json(path, inside=inside, what="fault record")
    except (OSError, BadFile):
        return {}


def read_step(path, inside) -> int | None:
    """The step a rank's ``step-rank-R.bin`` holds (None: no usable file)."""
    try:
        with open_file(path, inside=inside, max_bytes=4096, what="step record") as fh:
            data = fh.read(STEP_RECORD.size)
    except (OSError, BadFile):
        return None
    step = STEP_RECORD.unpack(data)[0] if len(data) == STEP_RECORD.size else None
    return step if step is not None and 0 <= step <= MAX_STEP else None


def read_exits(folder: Path, inside) -> list[tuple[float, int, str | None, int]]:
    """``(time, rank, node, exit code)`` per line of the attempt's ``exits`` file (the sbatch script's task
    wrapper writes them); a line of another shape, a rank or code out of range, is skipped."""
    try:
        text = read_text(folder / "exits", inside=inside, max_bytes=MAX_EXITS_BYTES, what="exits record")
    except (OSError, BadFile):
        return []
    exits = []
    for line in text.splitlines():
        m = _EXIT_LINE.fullmatch(line.strip())
        if m and int(m.group(2)) <= MAX_RANK and -255 <= int(m.group(4)) <= 1023:
            exits.append((float(m.group(1)), int(m.group(2)), node_name(m.group(3)), int(m.group(4))))
    return exits


def node_name(value) -> str | None:
    """``value`` if it is a plausible Slurm node name (it is passed to ``scontrol update ExcNodeList=``), else
    None."""
    return value if isinstance(value, str) and _NODE.fullmatch(value) else None


def text_field(record: dict, key: str) -> str | None:
    """A string field of a record, printable and at most :data:`MAX_TEXT` long; anything else None."""
    value = record.get(key)
    return printable(value)[:MAX_TEXT] if isinstance(value, str) else None


def int_field(record: dict, key: str, high: int = MAX_STEP) -> int | None:
    """An integer field in ``[0, high]``; anything else (a bool, a float, a string, out of range) None."""
    value = record.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= high else None


def time_field(record: dict, key: str) -> float | None:
    """A POSIX time field (finite, positive); anything else None."""
    return _time(record.get(key))


def spans_field(record: dict, key: str, most: int = 8) -> list[tuple[float, float]]:
    """A list of ``[from, to]`` POSIX times (at most ``most``); anything else is left out."""
    value = record.get(key)
    if not isinstance(value, list):
        return []
    spans = [span for span in value[:most] if isinstance(span, list) and len(span) == 2]
    return [(_time(a), _time(b)) for a, b in spans if _time(a) is not None and _time(b) is not None]


def _time(value) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    return float(value) if ok else None
