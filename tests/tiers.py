"""Test tiers, declared (tests/conftest.py marks every collected test with one):

- ``unit``: starts no process and trains nothing, and cheap -- the default of a test that declares nothing and uses
  no fixture of :data:`FIXTURE_TIERS`;
- ``integration``: a forked or fresh CLI, a subprocess, a browser, a tiny run in this process;
- ``system``: a real Slurm cluster (the ``cluster`` fixture), claims end to end, the fine-tuning floors,
  ``make setup``, the GPU check, or a GPU check variant on an accelerator (the ``device`` marker's ``kind`` other
  than ``cpu``: tests/devices.py), wherever its test lives.

A test's tier is the highest of (:func:`tier`):

- the ``tier`` marks that apply to it: ``@pytest.mark.tier("integration")`` on the test, or ``pytestmark =
  pytest.mark.tier("integration")`` at its module's top (a module that starts processes in every test); a module
  mark that names tests, ``pytestmark = pytest.mark.tier("integration", tests=("test_a", "test_b"))``, applies to
  those tests only (by function name, every parametrisation). The declaration has a marker of its own, so that each
  test carries exactly one of the tier markers, the one it gets: ``pytest -m integration`` picks by it;
- the tier each fixture it uses carries, by fixture name (:data:`FIXTURE_TIERS`, documented where each fixture is
  defined);
- ``system`` for a ``device`` variant on an accelerator;
- ``integration`` for a test that cost :data:`FAST_CPU_S` CPU seconds or more when last measured (:data:`COSTS`).

No tier is guessed from a test's source: tests/test_tiers.py checks statically that a module whose source starts
processes (:data:`STARTS_PROCESSES`) declares ``integration`` or ``system`` somewhere, and each test naming them in
its own body has one declared for it (:func:`undeclared`, :func:`undeclared_tests`).

Orthogonally, ``slow``: the test cost :data:`FAST_CPU_S` CPU seconds or more in the measured list
:data:`COSTS` (data, committed: ``benchmarks/suite_cpu.py``'s per-test CPU seconds on the idle 2-core machine).
``make test-fast`` runs ``-m "not system and not slow"``; tests/test_tiers.py keeps the measured cost of what it
selects within :data:`FAST_BUDGET_CPU_S`. After a new measurement:
``python tests/tiers.py benchmarks/results/<dir>/tests.csv`` rewrites :data:`COSTS`.

A module of its own (not ``conftest``) so tests/test_tiers.py can import it by name.
"""

from __future__ import annotations

import ast
import csv
import functools
import inspect
import re
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
COSTS = TESTS / "cpu_seconds.csv"
FAST_CPU_S = 1.0
TIERS = ("unit", "integration", "system")
# the tier a fixture carries to every test that uses it (each fixture's docstring says so where it is defined)
FIXTURE_TIERS = {
    "cluster": "system",  # tests/slurmcluster.py: a local Slurm cluster (slurm/local-cluster.sh)
    "cli": "integration",  # tests/conftest.py: the CLI in a process of its own
    "browser": "integration",  # tests/conftest.py: headless chromium
}
# `make test-fast`'s budget: 2 minutes on the 2-core machine, as CPU seconds of the measured costs of the tests it
# selects; a selected test absent from COSTS (new since the measurement) counts UNMEASURED_CPU_S: about twice the mean
# measured cost of a test make test-fast ran (0.117 CPU-s in the 28 Nov 2026 cold run), a test of 1.0 or more being slow
FAST_BUDGET_CPU_S = 240.0
UNMEASURED_CPU_S = 0.25
# a module whose source names one of these starts processes or runs the CLI (run_cli_here: in this process): it
# declares integration or system (tests/test_tiers.py)
STARTS_PROCESSES = re.compile(r"\b(subprocess|Popen|start_cli|run_cli|run_cli_here|start_forked\w*|os\.fork|fork)\b")
DECLARES = re.compile(r"""\bpytest\.mark\.tier\(\s*["'](integration|system)["']""")
SHARED_SCOPE = re.compile(r"""scope\s*=\s*["'](module|package|session)["']""")


def highest(names) -> str:
    return max(names, key=TIERS.index, default="unit")


def applies(mark, name: str) -> bool:
    """Whether a ``tier`` ``mark`` applies to the test function ``name``: one without ``tests`` applies to every test
    it is on; one with ``tests`` to the tests it names."""
    if len(mark.args) != 1 or mark.args[0] not in TIERS or set(mark.kwargs) - {"tests"}:
        raise ValueError(f"pytest.mark.tier takes one of {TIERS} and optionally tests=(names): {mark}")
    return "tests" not in mark.kwargs or name in mark.kwargs["tests"]


def tier(declared, fixturenames, cost: float | None, device_kind: str | None = None) -> str:
    """The highest of the ``declared`` tiers (the ``tier`` marks that apply), the fixtures' tiers, ``system`` for a
    device variant on an accelerator and ``integration`` for a measured cost of :data:`FAST_CPU_S` or more."""
    found = list(declared) + [FIXTURE_TIERS[f] for f in fixturenames if f in FIXTURE_TIERS]
    if device_kind not in (None, "cpu"):
        found.append("system")
    if (cost or 0.0) >= FAST_CPU_S:
        found.append("integration")
    return highest(found)


def undeclared(path: Path) -> bool:
    """A test module that starts processes (its source names :data:`STARTS_PROCESSES`) and declares neither
    ``integration`` nor ``system`` for any of its tests."""
    text = path.read_text()
    return bool(STARTS_PROCESSES.search(text)) and not DECLARES.search(text)


def _tier_marks(node) -> list[tuple[str, tuple | None]]:
    """The ``pytest.mark.tier(...)`` calls written in ``node``: (tier, the tests it names or None)."""
    found = []
    for call in ast.walk(node):
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "tier"
            and call.args
            and isinstance(call.args[0], ast.Constant)
        ):
            tests = next((ast.literal_eval(k.value) for k in call.keywords if k.arg == "tests"), None)
            found.append((call.args[0].value, tests))
    return found


def undeclared_tests(path: Path) -> list[str]:
    """The test functions of a module whose own source names :data:`STARTS_PROCESSES` with no ``integration`` or
    ``system`` declared for them -- by a ``tier`` mark on the test or in the module's ``pytestmark``, or by a fixture
    of :data:`FIXTURE_TIERS` among their arguments. Read statically (the source's declarations, not its calls, make
    the tier); module-level functions only."""
    text = path.read_text()
    tree = ast.parse(text)
    module = [
        m
        for node in tree.body
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
        for m in _tier_marks(node.value)
    ]
    missing = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test"):
            continue
        if not STARTS_PROCESSES.search(ast.get_source_segment(text, node) or ""):
            continue
        declared = [t for d in node.decorator_list for t, _ in _tier_marks(d)]
        declared += [t for t, tests in module if tests is None or node.name in tests]
        declared += [FIXTURE_TIERS[a.arg] for a in node.args.args if a.arg in FIXTURE_TIERS]
        if highest(t for t in declared if t in TIERS) == "unit":
            missing.append(node.name)
    return missing


def read_costs(path: Path = COSTS) -> dict[str, float]:
    """Node id -> CPU seconds, as last measured."""
    if not path.is_file():
        return {}
    with open(path, newline="") as fh:
        return {row["test"]: float(row["cpu_s"]) for row in csv.DictReader(fh)}


_sources: dict[int, tuple[object, str]] = {}


def _source(obj) -> str:
    """``obj``'s source, read once per object (a module's fixture is looked at from every test that uses it)."""
    if id(obj) not in _sources:
        try:
            text = inspect.getsource(inspect.unwrap(obj))
        except (OSError, TypeError):
            text = ""
        _sources[id(obj)] = (obj, text)  # obj kept: its id is not reused
    return _sources[id(obj)][1]


@functools.cache
def _module_fixtures(module) -> dict:
    """A test module's attributes by the name pytest gives each: a fixture imported from tests/fixtures/ can be named
    apart from its function (``@pytest.fixture(name="env") def training_env``), so that a test's argument does not
    shadow the import."""
    return {
        getattr(value, "name", attr) if hasattr(value, "__wrapped__") else attr: value
        for attr, value in vars(module).items()
    }


def slow_items(items, costs: dict[str, float]) -> list:
    """The tests that cost :data:`FAST_CPU_S` or more, and every test sharing a module- or session-scoped fixture of
    its test module with one of them: the first test to use such a fixture (a trained run) is the one measured with
    its cost, the others would start it when that one is deselected."""
    slow = {item.nodeid for item in items if costs.get(item.nodeid, 0.0) >= FAST_CPU_S}
    shared: dict[tuple, list] = {}
    for item in items:
        module = getattr(item, "module", None)
        for name in getattr(item, "fixturenames", ()) if module else ():
            value = _module_fixtures(module).get(name)
            if value is not None and hasattr(value, "__wrapped__") and SHARED_SCOPE.search(_source(value)):
                shared.setdefault((module.__name__, name), []).append(item)
    for users in shared.values():
        if any(item.nodeid in slow for item in users):
            slow.update(item.nodeid for item in users)
    return [item for item in items if item.nodeid in slow]


def write_costs(suite_csv: Path, out: Path = COSTS) -> None:
    """Keep ``test,cpu_s`` of a suite_cpu.py ``tests.csv``, costliest first: every test measured, the cheap ones
    included, so that a test absent from the list is one not measured yet (:data:`UNMEASURED_CPU_S`)."""
    with open(suite_csv, newline="") as fh:
        # a reading below zero (two in the 28 Nov cold run: tests whose processes end as they are measured) is 0
        rows = [(r["test"], max(0.0, float(r["cpu_s"]))) for r in csv.DictReader(fh)]
    rows.sort(key=lambda r: (-r[1], r[0]))
    with open(out, "w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(["test", "cpu_s"])
        writer.writerows((test, f"{cpu:.2f}") for test, cpu in rows)


def fast_budget(nodeids, costs: dict[str, float]) -> tuple[float, list[tuple[str, float]], int]:
    """``make test-fast``'s cost: the measured CPU seconds of the tests ``nodeids`` it selects, each one not measured
    counted :data:`UNMEASURED_CPU_S`. Returns the sum, the tests costliest first with their costs, and how many
    were not measured."""
    priced = sorted(((n, costs.get(n, UNMEASURED_CPU_S)) for n in nodeids), key=lambda r: (-r[1], r[0]))
    return sum(c for _, c in priced), priced, sum(n not in costs for n in nodeids)


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_file():
        sys.exit("usage: python tests/tiers.py benchmarks/results/<dir>/tests.csv  (benchmarks/suite_cpu.py's)")
    write_costs(Path(sys.argv[1]))
