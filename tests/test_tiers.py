"""tests/tiers.py: each test's tier is declared (a ``tier`` mark, its module's ``pytestmark``, a fixture that carries
one) and tests/conftest.py marks every collected test with it; ``make test-fast`` keeps within its measured budget."""

import ast
import csv
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import slurmcluster
import tiers

ROOT = tiers.TESTS.parent


def mark(*args, **kwargs):
    return pytest.mark.tier(*args, **kwargs).mark


@pytest.mark.parametrize(
    "declared, fixtures, cost, kind, expected",
    [
        ((), (), None, None, "unit"),  # declares nothing, uses no tier fixture
        ((), ("tmp_path", "monkeypatch"), 0.5, None, "unit"),
        (("integration",), (), None, None, "integration"),  # declared
        (("system",), (), None, None, "system"),
        ((), ("tmp_path", "cli"), None, None, "integration"),  # the forked CLI fixture
        ((), ("browser",), None, None, "integration"),
        ((), ("cluster",), None, None, "system"),  # a Slurm cluster
        (("integration",), ("cluster",), None, None, "system"),  # the highest of what applies
        (("unit",), ("cli",), None, None, "integration"),
        ((), (), tiers.FAST_CPU_S, None, "integration"),  # measured costly
        ((), (), tiers.FAST_CPU_S - 0.01, None, "unit"),
        ((), (), None, "cuda", "system"),  # a GPU check variant on an accelerator
        ((), (), None, "cpu", "unit"),
        (("integration",), (), None, "cpu", "integration"),
    ],
)
def test_a_tests_tier_is_the_highest_it_declares_or_its_fixtures_carry(declared, fixtures, cost, kind, expected):
    assert tiers.tier(declared, fixtures, cost, kind) == expected


def test_a_tier_mark_applies_to_its_test_or_to_the_tests_it_names():
    assert tiers.applies(mark("integration"), "test_a")
    named = mark("integration", tests=("test_a", "test_b"))
    assert tiers.applies(named, "test_a") and tiers.applies(named, "test_b") and not tiers.applies(named, "test_c")
    for bad in (mark("fast"), mark(), mark("unit", "system"), mark("system", test=("test_a",))):
        with pytest.raises(ValueError, match="pytest.mark.tier takes one of"):
            tiers.applies(bad, "test_a")


def test_the_shared_slurm_cluster_fixture_makes_its_users_system_tests():
    """tests/slurmcluster.py's fixture, as each Slurm test module binds it, goes by the name the tier follows."""
    fixture = slurmcluster.cluster_fixture("6999")
    assert fixture.name == "cluster" and tiers.FIXTURE_TIERS[fixture.name] == "system"
    assert tiers.tier((), (fixture.name,), None) == "system"


def test_every_fixture_that_carries_a_tier_says_so_where_it_is_defined():
    sources = {
        "cluster": ROOT / "tests/slurmcluster.py",
        "cli": ROOT / "tests/conftest.py",
        "browser": ROOT / "tests/conftest.py",
    }
    assert set(sources) == set(tiers.FIXTURE_TIERS)
    for name, path in sources.items():
        functions = {n.name: n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}
        doc = ast.get_docstring(functions["cluster_fixture" if name == "cluster" else name])
        assert f"``{tiers.FIXTURE_TIERS[name]}``" in doc and "FIXTURE_TIERS" in doc, (name, doc)


def test_conftest_marks_every_test_with_one_tier(request):
    marks = {m.name for m in request.node.iter_markers()}
    assert marks & set(tiers.TIERS) == {"unit"}


@pytest.mark.tier("integration")
def test_a_declared_test_carries_its_tier_and_no_other(request):
    """The declaration is the ``tier`` marker, so ``-m integration`` and the like select by the one tier marker."""
    marks = {m.name for m in request.node.iter_markers()}
    assert marks & set(tiers.TIERS) == {"integration"}


def test_undeclared_process_modules_are_found(tmp_path):
    """The static guard's own check: a module whose source starts processes must declare a tier above unit."""
    cases = {
        "import subprocess\n\ndef test_a():\n    subprocess.run(['true'])\n": True,
        "from clitools import run_cli\n\ndef test_a():\n    run_cli('--help')\n": True,
        "import os\n\ndef test_a():\n    os.fork()\n": True,
        "import pytest, subprocess\n\npytestmark = pytest.mark.tier('unit')\n": True,
        "import pytest, subprocess\n\npytestmark = pytest.mark.tier('integration')\n": False,
        "import pytest\nfrom clitools import start_cli\n\n@pytest.mark.tier(\"system\")\ndef test_a():\n"
        "    start_cli()\n": False,
        "def test_a():\n    assert sum([1, 2]) == 3\n": False,
    }
    for i, (source, expected) in enumerate(cases.items()):
        path = tmp_path / f"test_{i}.py"
        path.write_text(source)
        assert tiers.undeclared(path) is expected, source


def test_undeclared_process_tests_are_found(tmp_path):
    path = tmp_path / "test_mixed.py"
    path.write_text(
        "import subprocess\nimport pytest\n\n"
        "pytestmark = pytest.mark.tier('integration', tests=('test_named',))\n\n"
        "def helper():\n    subprocess.run(['true'])\n\n"
        "def test_named():\n    subprocess.run(['true'])\n\n"
        "@pytest.mark.tier('system')\ndef test_own_mark():\n    subprocess.run(['true'])\n\n"
        "def test_on_the_cluster(cluster):\n    subprocess.run(['sinfo'])\n\n"
        "@pytest.mark.tier('unit')\ndef test_declared_unit():\n    subprocess.run(['true'])\n\n"
        "def test_undeclared():\n    subprocess.Popen(['true']).wait()\n\n"
        "def test_through_a_helper():\n    helper()\n"
    )
    # test_through_a_helper is not seen: the module-level check (it names subprocess) is what covers helpers
    assert tiers.undeclared_tests(path) == ["test_declared_unit", "test_undeclared"]
    assert not tiers.undeclared(path)


# tests/test_tiers.py names subprocess, run_cli and fork as data (the cases above), starting no process
GUARD_EXEMPT = {"tests/test_tiers.py"}


def test_every_test_that_starts_processes_declares_its_tier():
    """Not a guess of any test's tier: a check that a module naming subprocess, Popen, start_cli, run_cli(_here) or fork
    declares ``integration`` or ``system`` (a ``pytestmark`` at its top, or its tests' own ``tier`` marks), and that
    each test naming them in its own body has such a declaration (or a fixture that carries one)."""
    modules = {str(p.relative_to(ROOT)): p for p in sorted(tiers.TESTS.rglob("test_*.py"))}
    undeclared = [name for name, path in modules.items() if tiers.undeclared(path)]
    assert not undeclared, (
        "these modules start processes but declare no tier: add `pytestmark = "
        f"pytest.mark.tier(\"integration\")` at their top (tests/tiers.py): {undeclared}"
    )
    tests = {
        name: missing
        for name, path in modules.items()
        if name not in GUARD_EXEMPT
        for missing in [tiers.undeclared_tests(path)]
        if missing
    }
    assert not tests, f"these tests start processes but no integration or system tier applies to them: {tests}"
    assert GUARD_EXEMPT <= set(modules)


def test_the_measured_costs_are_data_that_reads(tmp_path):
    suite = tmp_path / "tests.csv"
    suite.write_text(
        "test,file,worker,cpu_s,wall_s\ntests/a.py::t1,tests/a.py,gw0,0.05,0.1\n"
        "tests/a.py::t2,tests/a.py,gw0,3.5,4\ntests/b.py::t3,tests/b.py,gw1,0.2,0.3\n"
        "tests/b.py::t4,tests/b.py,gw1,-0.8,2\n"
    )
    out = tmp_path / "costs.csv"
    tiers.write_costs(suite, out)
    assert tiers.read_costs(out) == {
        "tests/a.py::t2": 3.5,
        "tests/b.py::t3": 0.2,
        "tests/a.py::t1": 0.05,
        "tests/b.py::t4": 0.0,
    }
    assert out.read_text().splitlines()[1:] == [
        "tests/a.py::t2,3.50",
        "tests/b.py::t3,0.20",
        "tests/a.py::t1,0.05",
        "tests/b.py::t4,0.00",
    ]
    with open(tiers.COSTS, newline="") as fh:  # the committed list: suite_cpu.py's measurement of the whole suite
        rows = list(csv.DictReader(fh))
    assert len(rows) > 1000 and all(r["test"].startswith("tests/") and float(r["cpu_s"]) >= 0 for r in rows)
    assert [float(r["cpu_s"]) for r in rows] == sorted((float(r["cpu_s"]) for r in rows), reverse=True)


def test_the_fast_budget_counts_unmeasured_tests_at_the_default():
    total, priced, unmeasured = tiers.fast_budget(["a", "b", "new"], {"a": 0.25, "b": 2.0, "c": 9.0})
    assert total == 2.25 + tiers.UNMEASURED_CPU_S and unmeasured == 1
    assert priced == sorted([("a", 0.25), ("b", 2.0), ("new", tiers.UNMEASURED_CPU_S)], key=lambda r: -r[1])


@pytest.fixture(scope="module")
def suite():
    """The whole suite collected in this process (~15 CPU-s): node id -> the markers of each test."""

    class Collected:
        marks: dict[str, set] = {}

        def pytest_collection_finish(self, session):
            self.marks = {item.nodeid: {m.name for m in item.iter_markers()} for item in session.items}

    collected = Collected()
    code = pytest.main(
        [
            "--collect-only",
            "-qq",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(ROOT),
            str(tiers.TESTS),
        ],
        plugins=[collected],
    )
    assert code == 0 and len(collected.marks) > 1000, (code, len(collected.marks))
    return collected.marks


@pytest.mark.slow  # the whole suite collected: a check for `make test` and CI
def test_declared_tiers_reach_real_tests(suite):
    """A module mark, a module mark that names tests, a test's own mark and a fixture, as collected; one tier each."""
    examples = {
        "tests/results/test_claims_run.py::": "system",  # pytestmark
        "tests/harness/measure/test_bench.py::test_a_paper_models_default_input_size": "integration",  # tests=(...)
        "tests/harness/measure/test_bench.py::test_interleaving_is_real": "unit",
        "tests/benchmarks/test_suite_cpu.py::test_cpu_of_children": "integration",  # its own mark
        "tests/slurm/test_slurm.py::test_two_node_job": "system",  # the cluster fixture
        "tests/test_tiers.py::test_conftest_marks_every_test_with_one_tier": "unit",
    }
    for prefix, expected in examples.items():
        found = [nodeid for nodeid in suite if nodeid.startswith(prefix)]
        assert found, prefix
        for nodeid in found:
            assert suite[nodeid] & set(tiers.TIERS) == {expected}, nodeid
    assert all(len(marks & set(tiers.TIERS)) == 1 for marks in suite.values())


@pytest.mark.slow  # the whole suite collected: a check for `make test` and CI
def test_make_test_fast_stays_within_its_budget(suite):
    """``make test-fast`` (``-m "not system and not slow"``) within 2 minutes on the 2 cores: the measured CPU
    seconds of the tests it selects (tests/cpu_seconds.csv, suite_cpu.py's), each test not measured yet counted
    tiers.UNMEASURED_CPU_S, sum to at most tiers.FAST_BUDGET_CPU_S. Arithmetic on committed data, not a timing."""
    fast = [nodeid for nodeid, marks in suite.items() if not marks & {"system", "slow"}]
    total, priced, unmeasured = tiers.fast_budget(fast, tiers.read_costs())
    costliest = "\n".join(f"  {cost:6.2f}  {nodeid}" for nodeid, cost in priced[:15])
    print(
        f"make test-fast: {len(priced)} tests, {total:.1f} CPU-s ({unmeasured} not measured, "
        f"{tiers.UNMEASURED_CPU_S} CPU-s each); the costliest:\n{costliest}"
    )
    assert total <= tiers.FAST_BUDGET_CPU_S, (
        f"make test-fast costs {total:.1f} CPU-s by the last measurement, over its budget of "
        f"{tiers.FAST_BUDGET_CPU_S:.0f} (2 minutes on 2 cores); {unmeasured} tests not measured yet count "
        f"{tiers.UNMEASURED_CPU_S} CPU-s each (measure: benchmarks/suite_cpu.py, then python tests/tiers.py "
        f"benchmarks/results/<dir>/tests.csv). The costliest:\n{costliest}"
    )


@pytest.fixture(scope="module")
def shared_run():
    """A stand-in for a module's expensive shared run (used by the fake items below, no real test)."""


@pytest.fixture
def per_test():
    """A function-scoped fixture: sharing it is not sharing a run."""


def test_tests_sharing_a_module_fixture_with_a_slow_test_are_slow():
    """The first user of a shared run carries its measured cost; the others would start it when it is deselected."""
    module = sys.modules[__name__]

    def item(nodeid, *fixtures):
        return SimpleNamespace(nodeid=nodeid, fixturenames=fixtures, module=module)

    items = [
        item("first", "shared_run"),
        item("second", "shared_run", "tmp_path"),
        item("third", "per_test"),
        item("fourth", "per_test"),
        item("alone"),
    ]
    costs = {"first": 30.0, "third": 5.0, "second": 0.1}
    assert [i.nodeid for i in tiers.slow_items(items, costs)] == ["first", "second", "third"]


assert Path(__file__).parent == tiers.TESTS
