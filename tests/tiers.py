"""Test tiers, derived from what a test uses (tests/conftest.py marks every collected test with one):

- ``unit``: starts no process and trains nothing -- neither the test nor a fixture or a helper of its module it
  uses (followed by name, transitively) -- and cost under :data:`FAST_CPU_S` when last measured;
- ``integration``: a forked or fresh CLI, a subprocess, a browser, a tiny run in this process, or a measured cost
  of :data:`FAST_CPU_S` or more;
- ``system``: a real Slurm cluster (the ``cluster`` fixture), one of :data:`SYSTEM` -- claims end to end,
  the fine-tuning floors, ``make setup``, the GPU check --, or a GPU check variant on an accelerator (the
  ``device`` marker's ``kind`` other than ``cpu``: tests/devices.py), wherever its test lives.

Orthogonally, ``slow``: the test cost :data:`FAST_CPU_S` CPU seconds or more in the measured list
:data:`COSTS` (data, committed: ``benchmarks/suite_cpu.py``'s per-test CPU seconds on the idle 2-core machine).
``make test-fast`` runs ``-m "not system and not slow"``; ``make test`` runs everything. After a new measurement:
``python tests/tiers.py benchmarks/results/<dir>/tests.csv`` rewrites :data:`COSTS`.

A module of its own (not ``conftest``) so tests/test_tiers.py can import it by name.
"""
from __future__ import annotations

import csv
import inspect
import re
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
COSTS = TESTS / "cpu_seconds.csv"
FAST_CPU_S = 1.0
TIERS = ("unit", "integration", "system")

# tests (node id prefixes, relative to the repository) that are system tests for what they run
SYSTEM = {
    "tests/results/test_claims_run.py": "claims end to end (dozens of training runs)",
    "tests/downstream/test_finetune.py::test_preset_reaches_the_floor":
        "fine-tuning presets trained to their accuracy floors",
    "tests/tools/test_setup_env.py": "make setup itself",
    "tests/tools/test_gpu_check.py": "the GPU check",
}
SYSTEM_FIXTURES = {"cluster": "a local Slurm cluster (slurm/local-cluster.sh)"}
# names whose use means a process is started, or a run trained in this process
PROCESS = re.compile(r"\b(subprocess|Popen|run_cli|start_cli|start_forked\w*|multiprocessing|os\.fork|spawn|chromium|"
                     r"run_cli_here|fresh_imports|api\.(train|finetune|evaluate|claims|demo)|runner\.train|train\.run|"
                     r"finetune\.run)\b")
PROCESS_FIXTURES = {"cli", "browser"}
WORD = re.compile(r"\b[A-Za-z_]\w*\b")
SHARED_SCOPE = re.compile(r"""scope\s*=\s*["'](module|package|session)["']""")


def read_costs(path: Path = COSTS) -> dict[str, float]:
    """Node id -> CPU seconds, as last measured."""
    if not path.is_file():
        return {}
    with open(path, newline="") as fh:
        return {row["test"]: float(row["cpu_s"]) for row in csv.DictReader(fh)}


_sources: dict[int, tuple[object, str, frozenset]] = {}


def _source(obj) -> tuple[str, frozenset]:
    """``obj``'s source and the names in it, read once per object (a fixture or helper is followed from every test
    that uses it, ~1,400 times in a collection)."""
    if id(obj) not in _sources:
        try:
            text = inspect.getsource(inspect.unwrap(obj))
        except (OSError, TypeError):
            text = ""
        _sources[id(obj)] = (obj, text, frozenset(WORD.findall(text)))  # obj kept: its id is not reused
    return _sources[id(obj)][1:]


def uses_processes(function, fixturenames, namespaces: list[dict]) -> bool:
    """Whether ``function``, the fixtures it uses, or the functions of ``namespaces`` they name (transitively) start
    a process or train a run. ``namespaces``: the test module's and the conftest's globals."""
    if PROCESS_FIXTURES & set(fixturenames):
        return True
    todo, seen = [function] + [ns[name] for name in fixturenames for ns in namespaces if name in ns], set()
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        text, names = _source(obj)
        if PROCESS.search(text):
            return True
        for name in names:
            for ns in namespaces:
                value = ns.get(name)
                if value is not None and (inspect.isfunction(value) or hasattr(value, "__wrapped__")) \
                        and str(TESTS) in (inspect.getsourcefile(inspect.unwrap(value)) or ""):
                    todo.append(value)
    return False


def system_reason(nodeid: str, fixturenames) -> str | None:
    for prefix, reason in SYSTEM.items():
        if nodeid == prefix or nodeid.startswith(prefix + "::") or nodeid.startswith(prefix + "["):
            return reason
    return next((SYSTEM_FIXTURES[f] for f in fixturenames if f in SYSTEM_FIXTURES), None)


def tier(nodeid: str, function, fixturenames, namespaces: list[dict], cost: float | None,
         device_kind: str | None = None) -> str:
    if system_reason(nodeid, fixturenames) or device_kind not in (None, "cpu"):
        return "system"
    if (cost or 0.0) >= FAST_CPU_S or uses_processes(function, fixturenames, namespaces):
        return "integration"
    return "unit"


def slow_items(items, costs: dict[str, float]) -> list:
    """The tests that cost :data:`FAST_CPU_S` or more, and every test sharing a module- or session-scoped fixture of
    its test module with one of them: the first test to use such a fixture (a trained run) is the one measured with
    its cost, the others would start it when that one is deselected."""
    slow = {item.nodeid for item in items if costs.get(item.nodeid, 0.0) >= FAST_CPU_S}
    shared: dict[tuple, list] = {}
    for item in items:
        module = getattr(item, "module", None)
        for name in getattr(item, "fixturenames", ()) if module else ():
            value = vars(module).get(name)
            if value is not None and hasattr(value, "__wrapped__") and SHARED_SCOPE.search(_source(value)[0]):
                shared.setdefault((module.__name__, name), []).append(item)
    for users in shared.values():
        if any(item.nodeid in slow for item in users):
            slow.update(item.nodeid for item in users)
    return [item for item in items if item.nodeid in slow]


def write_costs(suite_csv: Path, out: Path = COSTS) -> None:
    """Keep ``test,cpu_s`` of a suite_cpu.py ``tests.csv``: the tests that cost 0.1 CPU-s or more, costliest first."""
    with open(suite_csv, newline="") as fh:
        rows = [(r["test"], float(r["cpu_s"])) for r in csv.DictReader(fh)]
    rows = sorted((r for r in rows if r[1] >= 0.1), key=lambda r: (-r[1], r[0]))
    with open(out, "w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(["test", "cpu_s"])
        writer.writerows((test, f"{cpu:.2f}") for test, cpu in rows)


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_file():
        sys.exit("usage: python tests/tiers.py benchmarks/results/<dir>/tests.csv  (benchmarks/suite_cpu.py's)")
    write_costs(Path(sys.argv[1]))
