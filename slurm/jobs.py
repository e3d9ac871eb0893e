"""What was submitted and where it stands: the records ``depthbench submit`` keeps (slurm/submit.py), the Slurm
states of their jobs, the status of their run directories, and cancelling one (``depthbench jobs``, ``cancel``).

Slurm states come from ``squeue``, then ``scontrol`` (jobs that ended within ``MinJobAge``), then ``sacct`` where
accounting runs (many clusters, and the local test cluster, have none); a run's own status from its meta.json.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from harness.core import faults
from harness.core.choices import FAMILIES
from harness.core.errors import DepthbenchError
from harness.core.files import BadFile, loads_json, printable, read_json, read_text
from slurm.restart import Failure, read_history
from slurm.paths import outside_run_roots, paper_of, runs_root, slurm_dir

MAX_DUMP_BYTES = 16 << 20  # a stack dump: every thread's frames, far under this
FINISHED = {
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
}


@dataclass
class JobsResult:
    """Every submitted run (``rows``: job, name, paper, table, config, work_dir, log, slurm_state, restarts, status,
    best_metric), the runs root they were looked for under, and which Slurm sources were not available."""

    rows: list[dict] = field(default_factory=list)
    root: Path | None = None
    note: str = ""
    problems: list[str] = field(default_factory=list)  # records or run directories that could not be used


@dataclass
class CancelResult:
    """The job that was cancelled and, when it was named by its run directory, that directory."""

    job: str
    run_dir: Path | None = None


# ----------------------------------------------------------------------------------------- jobs
JOB_ID = re.compile(r"\d+(_\d+)?")


def read_records(problems: list[str] | None = None) -> list[dict]:
    """The submission records under ``<runs>/slurm/``, oldest job first, each checked field by field (they are
    files anyone with access to the folder may have written): an unreadable record, or a run in it without a job
    id and run directory, is named in ``problems`` and skipped -- the other runs are still listed (and
    cancellable)."""
    records = []
    problems = problems if problems is not None else []
    for path in sorted(slurm_dir().glob("*.json"), key=lambda p: int(p.stem) if p.stem.isdigit() else -1):
        try:
            record = read_json(path, inside=slurm_dir(), what="submission record")
        except (OSError, BadFile) as e:  # a link, a FIFO, deeply nested or not JSON: named, never waited on
            problems.append(f"{printable(e) if isinstance(e, BadFile) else f'{path}: {e.strerror}'}; ignored")
            continue
        elements = record.get("elements")
        if not isinstance(elements, list):
            problems.append(f"{path} is not a submission record (no list of runs under 'elements'); ignored")
            continue
        good = []
        for i, e in enumerate(elements):
            if not (
                isinstance(e, dict)
                and isinstance(e.get("job"), str)
                and JOB_ID.fullmatch(e["job"])
                and isinstance(e.get("work_dir"), str)
                and e["work_dir"]
            ):
                problems.append(f"{path}: run {i} has no job id and run directory; ignored")
                continue
            outside = outside_run_roots(e["work_dir"])
            if outside:
                problems.append(
                    f"{path}: run {i}: {outside}; a submission record names only run directories there "
                    "(remove the record if you did not submit it); ignored"
                )
                continue
            good.append(
                {
                    "job": e["job"],
                    "work_dir": e["work_dir"],
                    "name": _text(e.get("name")),
                    "config": _text(e.get("config")) or "",
                    "log": _text(e.get("log")),
                }
            )
        records.append({"paper": _text(record.get("paper")), "table": _text(record.get("table")), "elements": good})
    return records


def _text(value) -> str | None:
    """A string field without control characters (it is printed: a job name must not be a terminal escape),
    anything else (a list, a number, null) as None."""
    return printable(value) if isinstance(value, str) else None


def read_meta(work_dir: str | Path) -> dict:
    try:
        return read_json(Path(work_dir) / "meta.json", inside=work_dir, what="meta.json")
    except (OSError, BadFile):
        return {}


def slurm_states(job_ids: set[str]) -> tuple[dict, str]:
    """``{"123" or "123_4": (state, restarts)}`` from squeue, then scontrol (recently finished jobs), then sacct
    where accounting runs; and a note saying which sources were not available."""
    states, notes = {}, []
    if not job_ids:
        return states, ""
    if shutil.which("squeue") is None:
        return states, "no squeue on PATH: Slurm states unknown, run states from the run directories"
    ids = ",".join(sorted(job_ids))
    try:
        queue = subprocess.run(
            ["squeue", "-h", "-r", "-o", "%i|%T", "-j", ids], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        return states, "squeue did not answer within 30 s: Slurm states unknown"
    if queue.returncode != 0 and "Invalid job id" not in queue.stderr:  # all jobs gone from the queue: that error
        problem = (queue.stderr.strip().splitlines() or [f"exit code {queue.returncode}"])[-1]
        return states, f"squeue failed ({problem}): Slurm states unknown, run states from the run directories"
    out = queue.stdout
    for line in (out or "").splitlines():
        key, _, state = line.partition("|")
        states[key.strip()] = (state.strip(), None)
    for base in sorted(job_ids):
        out = _run(["scontrol", "-o", "show", "job", base])
        for line in (out or "").splitlines():
            fields = dict(re.findall(r"(\w+)=(\S*)", line))
            key = (
                f"{fields['ArrayJobId']}_{fields['ArrayTaskId']}"
                if fields.get("ArrayTaskId", "").isdigit()
                else fields.get("JobId", "")
            )
            if key and fields.get("JobState"):
                previous = states.get(key, (None, None))[0]
                states[key] = (previous or fields["JobState"], int(fields.get("Restarts", 0) or 0))
    missing = {j for j in job_ids if not any(k == j or k.startswith(j + "_") for k in states)}
    if missing and shutil.which("sacct"):
        out = _run(["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", ",".join(sorted(missing))])
        if out is None:
            notes.append("sacct unavailable (no accounting storage)")
        for line in (out or "").splitlines():
            key, _, state = line.partition("|")
            states.setdefault(key.strip(), (state.split()[0] if state else "", None))
    return states, "; ".join(notes)


def _run(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def job_rows(paper: str | None = None, problems: list[str] | None = None) -> tuple[list[dict], str]:
    """One row per submitted run: its job, Slurm state, run status, name, run directory. What cannot be used (a
    broken record, a run directory whose Slurm job id is not one) goes to ``problems``."""
    rows = []
    problems = problems if problems is not None else []
    for record in read_records(problems):
        for e in record["elements"]:
            rows.append(
                {
                    "job": e["job"],
                    "name": e["name"],
                    "paper": record["paper"],
                    "table": record["table"],
                    "config": e["config"],
                    "work_dir": e["work_dir"],
                    "log": e["log"],
                }
            )
    known = {r["work_dir"] for r in rows}
    root = runs_root()
    for meta_path in sorted(root.glob("*/*/meta.json")):  # runs started by hand-written sbatch scripts
        if str(meta_path.parent) in known:
            continue
        meta = read_meta(meta_path.parent)
        if meta.get("slurm_job_id"):
            outside = outside_run_roots(str(meta_path.parent))  # a link under the root that leads out of it
            if outside:
                problems.append(f"{meta_path.parent}: {outside}; replace the link by the run directory; ignored")
                continue
            job = (
                f"{meta['slurm_array_job_id']}_{meta['slurm_array_task_id']}"
                if meta.get("slurm_array_task_id") and meta.get("slurm_array_job_id")
                else str(meta["slurm_job_id"])
            )
            if not JOB_ID.fullmatch(job):
                problems.append(f"{meta_path}: slurm_job_id {job[:40]!r} is not a Slurm job id; ignored")
                continue
            config = _text(meta.get("config_file")) or ""
            rows.append(
                {
                    "job": job,
                    "name": _text(meta.get("experiment")),
                    "paper": paper_of(config),
                    "table": None,
                    "config": config,
                    "work_dir": str(meta_path.parent),
                    "log": None,
                }
            )
    if paper:
        rows = [r for r in rows if (r["paper"] or "").lower() == paper.lower()]
    states, note = slurm_states({r["job"].split("_")[0] for r in rows})
    for r in rows:
        meta = read_meta(r["work_dir"])
        state, restarts = states.get(r["job"], (None, None))
        if state is None:  # a pending array range shows as 123_[2-4] in squeue
            base, _, index = r["job"].partition("_")
            state = next(
                (
                    s
                    for k, (s, _) in states.items()
                    if k.startswith(f"{base}_[") and index and _in_range(int(index), k[len(base) + 2 : -1])
                ),
                None,
            )
        history = read_history(r["work_dir"])  # typed and printable (slurm/restart.py history_entry)
        last = history[-1] if history else {}
        r.update(
            failures=len(history),
            excluded=last.get("excluded", []),
            last_failure=last.get("action") and f"{Failure(**last).describe()}; {last['action']}",
        )
        count, best = meta.get("slurm_restart_count", restarts), meta.get("best_metric")
        r.update(
            slurm_state=state or "-",
            restarts=count if isinstance(count, int) and count >= 0 else restarts,
            status=_text(meta.get("status")) or "-",
            best_metric=best if isinstance(best, (int, float)) and not isinstance(best, bool) else None,
        )
    return rows, note


def why(target: str) -> str:
    """``depthbench jobs --why RUN``: the run's status now, then its history -- each failed attempt (named by its
    directory or job id), what was done about it, and where every rank was: the first frames of each rank's stack
    dump (its innermost call in the training process's main thread), or why there is none. Everything printed
    comes from records anyone with access to the run may have written: read through the opener, typed, and
    stripped of control characters."""
    run_dir = _run_dir_of(target)
    history = read_history(run_dir)
    meta = read_meta(run_dir)
    status = _text(meta.get("status")) or "-"
    waiting = f" (waiting for restart {_text(meta.get('restart'))})" if status == "restarting" else ""
    lines = [f"{run_dir}: status {status}{waiting}, {len(history)} failed attempt(s)"]
    if status == "failed" and _text(meta.get("error")):  # an earlier attempt's error is history, shown below
        lines.append(f"  error: {_text(meta['error'])}")
    if history:
        lines.append(
            "history (earlier attempts; the run went on after each 'requeued'):" if status != "failed" else "history:"
        )
    for record in history:
        failure = Failure(**record)
        lines.append(f"- {failure.describe()} at {failure.time or '?'}: {failure.action or '-'}")
        lines += [
            "    " + line
            for line in (
                rank_summary(run_dir, failure.attempt)
                if failure.attempt >= 0
                else ["no attempt number: no per-rank records"]
            )
        ]
    if not history:
        lines.append("  no failed attempts recorded (faults/ in the run directory)")
    return "\n".join(printable(line) for line in lines)


def rank_summary(run_dir: Path, attempt: int) -> list[str]:
    """One line per rank of an attempt: node, last step, and where its main thread was (innermost frame)."""
    folder = faults.attempt_dir(run_dir, attempt)
    files = {kind: faults.rank_files(folder, kind) for kind in ("heartbeat", "error", "stacks", "step")}
    ranks = sorted({rank for found in files.values() for rank in found})
    if not ranks:
        return ["no per-rank records (the attempt ended before the ranks started training)"]
    lines = []
    for rank in ranks:
        heartbeat = faults.read_record(folder / f"heartbeat-rank-{rank}.json", run_dir)
        error = faults.read_record(folder / f"error-rank-{rank}.json", run_dir)
        node = faults.node_name(heartbeat.get("node")) or faults.node_name(error.get("node")) or "?"
        step = faults.read_step(folder / f"step-rank-{rank}.bin", run_dir)
        for record in (heartbeat, error):
            step = step if step is not None else faults.int_field(record, "step")
        dump = _read_dump(folder / f"stacks-rank-{rank}.txt", run_dir)
        if dump is not None:
            where = f"stack dump: {innermost(dump)} (stacks-rank-{rank}.txt)"
        elif error:
            where = f"raised {faults.text_field(error, 'type')}: {(faults.text_field(error, 'message') or '')[:120]}"
        else:
            where = "no stack dump (the process was frozen or dead when its peers dumped theirs)"
        lines.append(f"rank {rank} on {node}, last step {step if step is not None else '-'}: {where}")
    return lines


def _read_dump(path: Path, run_dir: Path) -> str | None:
    try:
        return read_text(path, inside=run_dir, max_bytes=MAX_DUMP_BYTES, what="stack dump")
    except (OSError, BadFile):
        return None


def innermost(dump: str) -> str:
    """The training thread's innermost frame of a faulthandler dump ("Current thread" or the first one listed),
    as ``function (file:line)``, plus the first depthbench frame under it when that is another."""
    header, _, body = dump.partition("\n")
    main_thread = _loads(header).get("main_thread") or "?"
    blocks = re.split(r"\n(?=(?:Current thread|Thread) 0x)", body)
    main = next((b for b in blocks if main_thread in b.split("\n", 1)[0]), None)
    main = main or next((b for b in blocks if "Current thread" not in b and "File" in b), "")
    frames = re.findall(r'File "([^"]+)", line (\d+) in (\S+)', main)
    if not frames:
        return "no Python frames"
    path, line, func = frames[0]
    text = f"{func} ({Path(path).name}:{line})"
    ours = next(((p, ln, f) for p, ln, f in frames if "/harness/" in p), None)
    if ours and ours != frames[0]:
        text += f" in {ours[2]} ({Path(ours[0]).name}:{ours[1]})"
    return text


def _loads(text: str) -> dict:
    try:
        return loads_json(text, source="stack dump header")
    except BadFile:
        return {}


def _run_dir_of(target: str) -> Path:
    target = target.strip()
    if JOB_ID.fullmatch(target):
        rows, _ = job_rows()
        run = next((r["work_dir"] for r in rows if r["job"] == target), None)
        if run is None:
            raise DepthbenchError(f"no submitted run has job id {target}; `depthbench jobs` lists them")
        return Path(run)
    path = Path(target).absolute()
    if not path.is_dir():
        raise DepthbenchError(
            f"{printable(target)} is neither a run directory nor a job id of a submitted run; "
            "`depthbench jobs` lists both"
        )
    return path


def _in_range(index: int, spec: str) -> bool:
    for part in spec.split("%")[0].split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit() and int(lo) <= index <= int(hi or lo):
            return True
    return False


def jobs(paper: str | None = None) -> JobsResult:
    """The submitted runs (only ``paper``'s if given: one of the five papers) with their Slurm states."""
    if paper:
        if paper.lower() not in FAMILIES:
            raise DepthbenchError(f"--paper {paper!r} is not one of {', '.join(FAMILIES)}")
    problems: list[str] = []
    rows, note = job_rows(paper, problems)
    return JobsResult(rows, runs_root(), note, problems)


# ----------------------------------------------------------------------------------------- cancel
def cancel(target: str) -> CancelResult:
    """``scancel`` a submitted run, named by its job id (``123``, or ``123_4`` for an array element) or its run
    directory (found through its meta.json or, before it started, the submission record); a job Slurm does not
    know or that has already ended is an error, not a silent no-op."""
    target = target.strip()
    run_dir = None
    if re.fullmatch(r"\d+(_\d+)?", target):
        job = target
    else:
        run_dir = Path(target).absolute()
        meta = read_meta(run_dir)
        if JOB_ID.fullmatch(str(meta.get("slurm_job_id") or "")):
            job = str(meta["slurm_job_id"])
        else:  # submitted, not started yet: the record knows which job will write it
            job = next(
                (e["job"] for r in read_records() for e in r["elements"] if Path(e["work_dir"]) == run_dir), None
            )
        if job is None:
            raise DepthbenchError(
                f"{target} is neither a Slurm job id (123, or 123_4 for an array element) nor the "
                "run directory of a submitted run; `depthbench jobs` lists both"
            )
    if shutil.which("scancel") is None:
        raise DepthbenchError("scancel is not on PATH: run this on the cluster's login node")
    # scancel itself exits 0 on unknown jobs: look the job up first
    lookup = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, timeout=60)
    if lookup.returncode != 0:
        problem = (lookup.stderr.strip().splitlines() or [f"exit code {lookup.returncode}"])[-1]
        if "Invalid job id" in problem:
            raise DepthbenchError(
                f"Slurm does not know job {job} (a typo, or it ended long ago); `depthbench jobs` "
                "lists the submitted runs"
            )
        raise DepthbenchError(f"cannot ask Slurm about job {job}: {problem}")
    states = set(re.findall(r"JobState=(\S+)", lookup.stdout))
    if states and states <= FINISHED:
        raise DepthbenchError(f"job {job} has already ended ({', '.join(sorted(states))}); nothing to cancel")
    out = subprocess.run(["scancel", job], capture_output=True, text=True, timeout=60)
    lines = [ln.strip() for ln in out.stderr.splitlines() if ln.strip()]
    if out.returncode != 0 or lines:
        reason = lines[-1].removeprefix("scancel: error: ") if lines else f"exit code {out.returncode}"
        raise DepthbenchError(f"scancel {job}: {reason}")
    return CancelResult(job, run_dir)
