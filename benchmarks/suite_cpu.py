"""Where `make test`'s time goes: CPU seconds per test and per test file, beside the machine's whole CPU use.

    .venv/bin/python benchmarks/suite_cpu.py [OUTDIR] [-- MAKE_VARIABLES...]
    # default OUTDIR benchmarks/results/<host>-<date>-suite;
    # e.g. -- TEST_WORKERS=3 PYTEST_ARGS="tests/harness/commands/test_cli.py"

runs ``make test`` with this file loaded as a pytest plugin and writes into OUTDIR: ``tests.csv`` (every test: its
file, CPU seconds, wall seconds, xdist worker), ``summary.txt`` (wall time, the machine's busy CPU seconds over the
run, the share the plugin could attribute to tests, the files and the tests that cost most) and ``files.png`` (CPU
and wall per file). Run it on an idle machine: the machine's counters (/proc/stat) include everything else running.

Why a tool of its own: ``time make test`` counts only the processes that ``make`` reaps, so it misses a large part
of the suite -- the runs forked by fork servers that end orphaned, Slurm's jobs (children of slurmd), a browser --
and on this 2-core machine it reported 1,195 s where the machine was busy ~1,700 s. The suite is CPU-bound (two
workers on two cores), so wall time is bounded below by the machine's CPU seconds over the number of cores.

A test's CPU is the CPU of the pytest worker's process tree while it ran (the worker itself, its reaped children,
and every live descendant with the children it reaped); what ends outside that tree is the unattributed remainder.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECORDS = "SUITE_CPU_RECORDS"  # the plugin appends one JSON line per test to this file
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# ----------------------------------------------------------------------------------------- the pytest plugin
def tree_cpu_seconds() -> float:
    """CPU seconds of this process's tree: its own and its reaped children's (getrusage), plus every live
    descendant's user/system time and its reaped children's (/proc)."""
    children: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:  # fields after the command name: state, ppid, ..., utime stime cutime cstime at 11..14
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended while we looked
        children.setdefault(int(fields[1]), []).append(int(entry.name))
        times[int(entry.name)] = sum(int(x) for x in fields[11:15]) / CLOCK_TICKS
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    total, todo = sum(u.ru_utime + u.ru_stime for u in usage), list(children.get(os.getpid(), []))
    while todo:
        child = todo.pop()
        total += times[child]
        todo += children.get(child, [])
    return total


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # noqa: ARG001 -- pytest's hook signature
    """Around the whole protocol of one test (setup, call, teardown: module fixtures count where they start)."""
    start_cpu, start = tree_cpu_seconds(), time.monotonic()
    yield
    record = {
        "test": item.nodeid,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "cpu_s": round(tree_cpu_seconds() - start_cpu, 2),
        "wall_s": round(time.monotonic() - start, 2),
    }
    path = os.environ.get(RECORDS)
    if path:
        with open(path, "a") as fh:  # one short line per write: appends from the workers do not interleave
            fh.write(json.dumps(record) + "\n")


# ----------------------------------------------------------------------------------------- the run and its report
def busy_cpu_seconds() -> float:
    """The machine's busy CPU seconds since boot (user, nice, system, irq, softirq; /proc/stat)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    return sum(int(fields[i]) for i in (0, 1, 2, 5, 6)) / CLOCK_TICKS


def report(
    records_path: Path, out: Path, wall_s: float, machine_cpu_s: float, load: str, make_args: list[str], exit_code: int
) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    tests = pd.read_json(records_path, lines=True)
    tests.insert(1, "file", tests.test.str.split("::").str[0])
    tests.to_csv(out / "tests.csv", index=False)
    files = tests.groupby("file")[["cpu_s", "wall_s"]].sum().sort_values("cpu_s", ascending=False)
    cores = os.cpu_count() or 1
    lines = [
        f"# {datetime.now(timezone.utc):%Y-%m-%dT%H:%MZ} {socket.gethostname()}: {cores} cores, load average "
        f"{load} at the start",
        f"make test {' '.join(make_args)}".rstrip() + f"  -> exit {exit_code}, {len(tests)} tests",
        f"wall {wall_s:.0f} s ({wall_s / 60:.1f} min); machine busy {machine_cpu_s:.0f} CPU-s "
        f"(floor on {cores} cores: {machine_cpu_s / cores / 60:.1f} min); attributed to tests "
        f"{tests.cpu_s.sum():.0f} CPU-s ({tests.cpu_s.sum() / machine_cpu_s:.0%}; the rest ran outside the "
        f"workers' process trees, or between tests)",
        "",
        "CPU-s   wall-s  file",
        *[f"{r.cpu_s:6.0f}  {r.wall_s:6.0f}  {name}" for name, r in files.head(25).iterrows()],
        "",
        "CPU-s   wall-s  test",
        *[
            f"{r.cpu_s:6.1f}  {r.wall_s:6.1f}  {r.test}"
            for r in tests.sort_values("cpu_s", ascending=False).head(25).itertuples()
        ],
    ]
    top = files.head(20).iloc[::-1]
    fig, ax = plt.subplots(figsize=(9, 6))
    ax.barh(range(len(top)), top.wall_s, color="#c8d6e5", label="wall s")
    ax.barh(range(len(top)), top.cpu_s, height=0.45, color="#222f3e", label="CPU s (worker's process tree)")
    ax.set_yticks(range(len(top)), [name.removeprefix("tests/") for name in top.index], fontsize=8)
    ax.set_xlabel("seconds")
    ax.set_title(f"make test: {wall_s / 60:.1f} min wall, {machine_cpu_s:.0f} CPU-s on {cores} cores")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(out / "files.png", dpi=110)
    text = "\n".join(lines) + "\n"
    (out / "summary.txt").write_text(text)
    return text


def main(argv: list[str]) -> int:
    make_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    positional = argv[: argv.index("--")] if "--" in argv else argv
    if len(positional) > 1 or any(a.startswith("-") for a in positional):
        print("usage: .venv/bin/python benchmarks/suite_cpu.py [OUTDIR] [-- MAKE_VARIABLES...]", file=sys.stderr)
        return 2
    out = (
        Path(positional[0])
        if positional
        else (ROOT / "benchmarks/results" / f"{socket.gethostname()}-{datetime.now(timezone.utc):%Y-%m-%d}-suite")
    )
    out.mkdir(parents=True, exist_ok=True)
    records = out / "records.jsonl"
    records.unlink(missing_ok=True)
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH")]))
    )
    env[RECORDS] = str(records)
    # the plugin joins the caller's PYTEST_ARGS (a make variable given after --, else the environment's)
    extra = [a.split("=", 1)[1] for a in make_args if a.startswith("PYTEST_ARGS=")] or [env.pop("PYTEST_ARGS", "")]
    make_args = [a for a in make_args if not a.startswith("PYTEST_ARGS=")]
    pytest_args = " ".join(filter(None, ["-p suite_cpu", *extra]))
    load = Path("/proc/loadavg").read_text().split()[0]
    print(f"suite_cpu: make test (load {load}); the log is {out / 'make-test.log'}", flush=True)
    cpu0, start = busy_cpu_seconds(), time.monotonic()
    with open(out / "make-test.log", "w") as log:
        make = subprocess.Popen(
            ["make", "test", f"PYTEST_ARGS={pytest_args}", *make_args],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            code = make.wait()
        except KeyboardInterrupt:  # Ctrl-C reached make and pytest too (one process group): let them stop
            make.wait()
            so_far = f" (the tests run so far: {records})" if records.exists() else ""
            print(f"suite_cpu: interrupted; no report{so_far}", file=sys.stderr)
            return 130
    wall, cpu = time.monotonic() - start, busy_cpu_seconds() - cpu0
    if not records.exists():
        print(f"suite_cpu: no test ran (make exited {code}); see {out / 'make-test.log'}", file=sys.stderr)
        return 2
    print(report(records, out, wall, cpu, load, make_args, code), end="")
    records.unlink()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
