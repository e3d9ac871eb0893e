"""After a failed attempt of a submitted run: requeue it without the bad node, or stop and say why.

The sbatch script (slurm/depthbench.sbatch) runs ``python -m slurm.restart WORK_DIR --status S ...`` when srun
ended with a code that is neither 0 nor 75 (a preemption, requeued by the script itself). This module reads what
the attempt left in ``WORK_DIR/faults/attempt-K/`` (harness/engine/watchdog.py: each rank's exit line, Python
error, heartbeat and stack dump), decides (:func:`decide`), appends the attempt to meta.json's ``restarts`` and,
to requeue, runs ``scontrol requeuehold`` / ``update ExcNodeList=...`` / ``release`` on its own job (a running
job's excluded nodes cannot be changed; the script ignores SIGTERM meanwhile, so the requeue's kill does not cut
the three calls short). Exit code 0: requeued, or the run was done already; 1: stopped (the script then exits with
srun's code: FAILED).

Rules (docs/slurm.md "When things fail"):
- exit 2 from any rank: bad input (a config or data error), the same on every attempt: never requeued;
- the same step failing the same way (error type, signal or exit code) on two attempts: deterministic, stopped;
- otherwise requeued from the last checkpoint, at most ``--max-restarts`` times (preemptions do not count);
- the node of the rank that failed first is excluded from then on (accumulated); for a hang (exit 76, every live
  rank's watchdog dumped its stacks) the suspect is a rank that left no dump (frozen or dead), else the rank
  whose last finished step is behind the others'; with ``--min-nodes`` below ``--nodes`` the job continues on
  as many nodes as the partition still has (elastic resume), never fewer than ``--min-nodes``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.core import faults
from harness.core.errors import DepthbenchError
from harness.core.files import BadFile, atomic_write, is_regular, one_line, read_json
from harness.core.rundir import RunDir

EXIT_BAD_INPUT, EXIT_PREEMPTED, EXIT_HUNG = 2, 75, 76  # harness/core/errors.py (not imported: keep this light)


@dataclass
class Failure:
    """What ended one attempt: the rank that failed first and how."""

    attempt: int
    exit: str  # "exit 1", "SIGKILL", "hang", "exit 2", "node lost"
    rank: int | None = None
    node: str | None = None
    step: int | None = None  # the failing rank's last finished optimizer step (heartbeat / error record)
    error: str | None = None  # a Python exception's type and message
    stacks: str | None = None  # the attempt's folder of stack dumps, when there is one
    time: str = ""
    action: str = ""
    excluded: list[str] = field(default_factory=list)

    @property
    def signature(self) -> tuple:
        """ "The same way": the exit and the error's type; with the step it defines a deterministic failure."""
        return self.exit, (self.error or "").split(":")[0]

    def describe(self) -> str:
        where = f"rank {self.rank} on {self.node}" if self.rank is not None else (self.node or "a rank")
        step = f" at step {self.step}" if self.step is not None else ""
        what = f"{self.exit}" + (f" ({self.error})" if self.error else "")
        return f"attempt {self.attempt}: {where} {what}{step}"


def exit_word(code: int) -> str:
    if code == EXIT_HUNG:
        return "hang"
    if code > 128:
        try:
            return signal.Signals(code - 128).name
        except ValueError:
            pass
    return f"exit {code}"


def read_attempt(work_dir: Path, attempt: int, srun_status: int) -> Failure:
    """The first failure of ``attempt`` from its folder of records (see harness/engine/watchdog.py), each read as
    data (harness/core/faults.py: no link, no FIFO, typed and bounded fields; a bad record is ignored)."""
    work_dir = Path(work_dir)
    folder = faults.attempt_dir(work_dir, attempt)
    exits = faults.read_exits(folder, work_dir)
    heartbeats = {
        r: _heartbeat(faults.read_record(p, work_dir)) for r, p in faults.rank_files(folder, "heartbeat").items()
    }
    errors = {r: faults.read_record(p, work_dir) for r, p in faults.rank_files(folder, "error").items()}
    dumps = faults.rank_files(folder, "stacks")
    for rank, path in faults.rank_files(folder, "step").items():  # the exact last step (harness/engine/watchdog.py)
        step = faults.read_step(path, work_dir)
        if step is not None:
            heartbeats.setdefault(rank, {})["step"] = step
    now = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    stacks = str(folder) if dumps else None
    failed = sorted(e for e in exits if e[3] not in (0, EXIT_PREEMPTED))
    if any(code == EXIT_BAD_INPUT for _, _, _, code in failed):  # bad input anywhere outranks its peers' errors
        _, rank, node, _ = next(e for e in failed if e[3] == EXIT_BAD_INPUT)
        return Failure(attempt, "exit 2", rank, node, time=now, stacks=stacks, error=_error_text(errors.get(rank)))
    if failed and failed[0][3] == EXIT_HUNG or (dumps and not failed):
        return _hang(attempt, heartbeats, dumps, exits, now, stacks)
    if failed:
        first, rank, node, code = failed[0]
        silent = _silent_before(heartbeats, first)
        if silent is not None and silent != rank:  # the failed rank only waited for a frozen one (issue 58 item 11)
            quiet_s = first - _last_beat_before(heartbeats[silent], first)
            return Failure(
                attempt,
                "hang",
                silent,
                _node_of(silent, heartbeats, exits),
                heartbeats[silent].get("step"),
                f"no heartbeat for {quiet_s:.0f} s before rank {rank} failed ({exit_word(code)}): frozen "
                f"or stuck; rank {rank} only waited for it",
                stacks,
                now,
            )
        step = faults.int_field(errors[rank], "step") if errors.get(rank) else heartbeats.get(rank, {}).get("step")
        return Failure(attempt, exit_word(code), rank, node, step, _error_text(errors.get(rank)), stacks, now)
    missing = sorted(set(heartbeats) - {e[1] for e in exits})
    if missing:  # ranks that never reported an exit: their node went away with them
        rank = missing[0]
        return Failure(
            attempt,
            "node lost",
            rank,
            heartbeats[rank].get("node"),
            heartbeats[rank].get("step"),
            stacks=stacks,
            time=now,
        )
    return Failure(attempt, exit_word(srun_status), time=now, stacks=stacks)


def _heartbeat(record: dict) -> dict:
    """A heartbeat record's fields, typed: node, step, and when it was written (the rank's liveness)."""
    return {
        "node": faults.node_name(record.get("node")),
        "step": faults.int_field(record, "step"),
        "written": faults.time_field(record, "written"),
        "stalls": faults.spans_field(record, "stalls"),
    }


def _silent_before(heartbeats: dict, first_failure: float) -> int | None:
    """The rank whose heartbeat stopped longest before the first failure, if it stopped more than
    :data:`faults.SILENT_AFTER_S` before it: that rank stopped making progress (frozen, or stuck holding its
    interpreter), while a rank waiting in a collective keeps beating until its timeout raises. None: every rank
    was alive (or none wrote heartbeats)."""
    stopped = {}
    for rank, beat in heartbeats.items():
        last = _last_beat_before(beat, first_failure)
        if last is not None and last < first_failure - faults.SILENT_AFTER_S:
            stopped[rank] = last
    return min(stopped, key=stopped.get) if stopped else None


def _last_beat_before(beat: dict, moment: float) -> float | None:
    """When the rank last beat before ``moment``: its last heartbeat, or, when it beat again only after it (a frozen
    rank that Slurm resumed to kill it), the start of the stall that spans ``moment``."""
    written = beat.get("written")
    if written is None or written <= moment:
        return written
    return next((start for start, end in beat.get("stalls", []) if start <= moment <= end), None)


def _node_of(rank: int, heartbeats: dict, exits: list) -> str | None:
    return heartbeats.get(rank, {}).get("node") or next((n for _, r, n, _ in exits if r == rank), None)


def _error_text(error: dict | None) -> str | None:
    kind = faults.text_field(error or {}, "type")
    if not kind:
        return None
    return f"{kind}: {faults.text_field(error, 'message') or ''}"[:200]


def _hang(attempt, heartbeats, dumps, exits, now, stacks) -> Failure:
    """A hang's suspect: a rank with a heartbeat but no stack dump (its watchdog could not run: frozen, or
    stuck holding the interpreter), else the rank whose last step is behind the others', else nobody."""
    silent = sorted(r for r in heartbeats if r not in dumps)
    steps = {r: h.get("step") for r, h in heartbeats.items() if isinstance(h.get("step"), int)}
    rank = None
    if silent:
        rank = silent[0]
    elif steps and len(set(steps.values())) > 1:
        rank = min(steps, key=steps.get)
    if rank is None:
        return Failure(
            attempt,
            "hang",
            step=max(steps.values(), default=None),
            stacks=stacks,
            time=now,
            error="every rank waited in the same place; no node to blame",
        )
    return Failure(
        attempt,
        "hang",
        rank,
        _node_of(rank, heartbeats, exits),
        steps.get(rank),
        stacks=stacks,
        time=now,
        error="no stack dump from this rank (frozen or dead)" if rank in silent else None,
    )


def decide(failure: Failure, history: list[dict], max_restarts: int) -> tuple[bool, str]:
    """``(requeue, reason)`` for ``failure`` given the earlier attempts' records (meta.json ``restarts``)."""
    if failure.exit == "exit 2":
        return False, (
            f"{failure.describe()}: bad input (exit 2), the same on every attempt -- not requeued; fix "
            "it (the job log has the one-line error) and resubmit"
        )
    for earlier in history:
        same = (
            earlier.get("step") is not None
            and earlier.get("step") == failure.step
            and (earlier.get("exit"), (earlier.get("error") or "").split(":")[0]) == failure.signature
        )
        if same:
            return False, (
                f"{failure.describe()}, as on attempt {earlier.get('attempt')}: the same step failed "
                "the same way twice, a deterministic error -- not requeued"
            )
    used = sum(1 for h in history if str(h.get("action", "")).startswith("requeued"))
    if used >= max_restarts:
        return False, f"{failure.describe()}: all {max_restarts} restarts used (--max-restarts) -- not requeued"
    return True, f"{failure.describe()}: requeued ({used + 1} of {max_restarts} restarts)"


# ----------------------------------------------------------------------------------------- Slurm
def scontrol(*args: str) -> None:
    out = subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"scontrol {' '.join(args)}: {out.stderr.strip() or out.returncode}")


def usable_nodes(partition: str | None, excluded: list[str]) -> int | None:
    """Nodes of the partition that are up (not down, drained or failing) and not excluded; None: sinfo failed."""
    cmd = ["sinfo", "-h", "-N", "-o", "%N %t"] + (["-p", partition] if partition else [])
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    up = {
        n
        for n, state in (line.split()[:2] for line in out.stdout.splitlines() if len(line.split()) >= 2)
        if not re.match(r"(down|drain|fail|maint|unk|boot|futr|inval)", state.rstrip("*~#!%$@^-"))
    }
    return len(up - set(excluded))


def node_count(nodes: int, min_nodes: int, partition: str | None, excluded: list[str]) -> int:
    """How many nodes the requeued job asks for: ``nodes``, or with ``min_nodes`` below it as many as the
    partition still has up and not excluded (at least ``min_nodes``)."""
    if min_nodes >= nodes:
        return nodes
    usable = usable_nodes(partition, excluded)
    return max(min_nodes, min(nodes, usable if usable is not None else nodes))


def requeue(job: str, excluded: list[str], count: int, resize: bool, tasks_per_node: int) -> None:
    """Requeue ``job`` held, exclude ``excluded`` and set its node count, release."""
    update = [f"JobId={job}"]
    if excluded:
        update.append(f"ExcNodeList={','.join(excluded)}")
    if resize:  # NumTasks too: the job's task count would otherwise ask for the old number of nodes
        update += [f"NumNodes={count}", f"NumTasks={count * tasks_per_node}"]
    scontrol("requeuehold", job)
    try:
        if len(update) > 1:
            scontrol("update", *update)
    finally:
        scontrol("release", job)


# ----------------------------------------------------------------------------------------- meta.json
def write_history(work_dir: Path, history: list[dict], stopped: str | None, waiting: str | None = None) -> None:
    """The attempts into meta.json's ``restarts``, with the run's status: ``failed`` (and the reason) when
    ``stopped``, else ``restarting`` while Slurm holds the job for its next attempt (``restart``: "K of N"; the
    failed attempt's error moves to the history, so nothing polling the run sees a failure about to be retried).
    Without a meta.json (the run failed before writing one) the history goes to ``faults/restarts.json``. Raises
    BadFile/OSError when the run's files are links or unwritable (the caller still requeues)."""
    work_dir = Path(work_dir)
    if is_regular(work_dir / "meta.json", inside=work_dir):
        run = RunDir.open(work_dir)
        if stopped:
            run.finish("failed", restarts=history, error=stopped, restart=None)
        else:
            run.update_meta(restarts=history, status="restarting", restart=waiting, error=None, end=None)
    else:  # the run failed before it wrote meta.json (e.g. a config error): keep the history beside it
        (work_dir / "faults").mkdir(parents=True, exist_ok=True)
        atomic_write(work_dir / "faults" / "restarts.json", json.dumps(history, indent=1), inside=work_dir)


def read_history(work_dir: Path) -> list[dict]:
    """meta.json's ``restarts`` (or ``faults/restarts.json``), each entry typed (:func:`history_entry`); entries
    that are not attempt records are dropped."""
    work_dir = Path(work_dir)
    history = faults.read_record(work_dir / "meta.json", work_dir).get("restarts")
    if history is None:
        try:
            history = read_json(
                work_dir / "faults" / "restarts.json", inside=work_dir, expect=list, what="restart history"
            )
        except (OSError, BadFile):
            history = []
    entries = [history_entry(h) for h in history] if isinstance(history, list) else []
    return [h for h in entries if h is not None]


def history_entry(record) -> dict | None:
    """One attempt of meta.json's ``restarts`` with every field of :class:`Failure` typed and bounded (strings
    printable, nodes node names, numbers in range; an attempt that is not a number is -1); None when it is not a
    record at all. The history is data anyone with access to the run may have written: its ``attempt`` names a
    folder, its nodes reach scontrol."""
    if not isinstance(record, dict):
        return None
    attempt = faults.int_field(record, "attempt", faults.MAX_ATTEMPT)
    excluded = record.get("excluded")
    return {
        "attempt": -1 if attempt is None else attempt,
        "exit": faults.text_field(record, "exit") or "?",
        "rank": faults.int_field(record, "rank", faults.MAX_RANK),
        "node": faults.node_name(record.get("node")),
        "step": faults.int_field(record, "step"),
        "error": faults.text_field(record, "error"),
        "stacks": faults.text_field(record, "stacks"),
        "time": faults.text_field(record, "time") or "",
        "action": faults.text_field(record, "action") or "",
        "excluded": [n for n in excluded if faults.node_name(n)] if isinstance(excluded, list) else [],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m slurm.restart", description=__doc__.splitlines()[0])
    p.add_argument("work_dir", type=Path)
    p.add_argument("--status", type=int, required=True, help="srun's exit code")
    p.add_argument("--max-restarts", type=int, default=3)
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--min-nodes", type=int)
    p.add_argument("--tasks-per-node", type=int, default=1)
    args = p.parse_args(argv)
    job = os.environ.get("SLURM_JOB_ID", "")
    try:
        attempt = faults.restart_count()
    except DepthbenchError as e:  # never lose the job over it: attempt 0's records are read instead
        print(f"[depthbench] {e}; reading attempt 0", flush=True)
        attempt = 0
    min_nodes = args.min_nodes or args.nodes
    if faults.read_record(args.work_dir / "meta.json", args.work_dir).get("status") == "done":
        print(f"[depthbench] srun exited {args.status} after the run was done; counting the job as done", flush=True)
        return 0
    try:
        history = read_history(args.work_dir)
        failure = read_attempt(args.work_dir, attempt, args.status)
        again, reason = decide(failure, history, args.max_restarts)
    except Exception as e:  # noqa: BLE001 -- never lose the job over a record: requeue as a plain crash
        print(
            f"[depthbench] the fault records of {one_line(str(args.work_dir))} could not be read "
            f"({type(e).__name__}: {one_line(str(e))[:200]}); requeueing without excluding a node",
            flush=True,
        )
        if attempt >= args.max_restarts:  # the history is unknown: the restart count bounds the requeues
            print(f"[depthbench] attempt {attempt}: {args.max_restarts} restarts reached -- not requeued", flush=True)
            return 1
        return _requeue_or_stop(job, [], args.nodes, False, args.tasks_per_node)
    excluded = list(dict.fromkeys([n for h in history for n in h.get("excluded", [])]))
    partition = os.environ.get("SLURM_JOB_PARTITION")
    kept = ""
    if again and failure.node and failure.node not in excluded:
        usable = usable_nodes(partition, excluded + [failure.node])
        if usable is None or usable >= min_nodes:
            excluded.append(failure.node)
        else:  # a job that excludes every node would wait forever
            kept = f" ({failure.node} not excluded: the partition would keep {usable} of the {min_nodes} needed)"
    failure.excluded = excluded
    if again:
        count = node_count(args.nodes, min_nodes, partition, excluded)
        failure.action = f"requeued on {count} node(s)" + (f" without {','.join(excluded)}" if excluded else "") + kept
        history.append(asdict(failure))
        used = sum(1 for h in history if h["action"].startswith("requeued"))
        _record(args.work_dir, history, None, f"{used} of {args.max_restarts}")  # first: the requeue ends us
        print(f"[depthbench] {reason}; {failure.action}", flush=True)
        if _requeue_or_stop(job, excluded, count, min_nodes < args.nodes, args.tasks_per_node) == 0:
            return 0
        history.pop()
        reason = f"{failure.describe()}: could not requeue; resubmit to continue"
    failure.action = f"stopped: {reason}"
    history.append(asdict(failure))
    _record(args.work_dir, history, reason)
    print(f"[depthbench] {reason}", flush=True)
    return 1


def _record(work_dir: Path, history: list[dict], stopped: str | None, waiting: str | None = None) -> None:
    """:func:`write_history`, or one line saying why it could not be written: the job goes on either way."""
    try:
        write_history(work_dir, history, stopped, waiting)
    except (OSError, BadFile, DepthbenchError) as e:
        print(f"[depthbench] the restart history was not written ({one_line(str(e))[:300]})", flush=True)


def _requeue_or_stop(job: str, excluded: list[str], count: int, resize: bool, tasks_per_node: int) -> int:
    """:func:`requeue`; 0 when it did, 1 (and one line why) when Slurm refused."""
    try:
        requeue(job, excluded, count, resize, tasks_per_node)
        return 0
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        print(f"[depthbench] could not requeue job {job} ({one_line(str(e))[:300]})", flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
