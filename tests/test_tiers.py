"""tests/tiers.py: each test's tier follows from what it uses (tests/conftest.py marks every collected test)."""
import csv
import sys
import subprocess  # noqa: F401  (named by a synthetic test below)

import pytest
import slurmcluster
import test_layers
import tiers


def plain():
    assert sum([1, 2]) == 3


def helper_starting_a_process():
    return subprocess.run(["true"])


def uses_the_helper():
    helper_starting_a_process()


def trains_here(api):
    api.train("configs/demo/x.py")


NAMESPACES = [globals()]


@pytest.mark.parametrize("nodeid, function, fixtures, cost, expected", [
    ("tests/test_x.py::test_a", plain, (), None, "unit"),
    ("tests/test_x.py::test_a", plain, (), tiers.FAST_CPU_S, "integration"),       # measured costly
    ("tests/test_x.py::test_a", plain, ("tmp_path", "cli"), None, "integration"),   # the forked CLI fixture
    ("tests/test_x.py::test_a", uses_the_helper, (), None, "integration"),          # through a module helper
    ("tests/test_x.py::test_a", trains_here, (), None, "integration"),              # a run in this process
    ("tests/test_x.py::test_a", plain, ("cluster",), None, "system"),               # a Slurm cluster
    ("tests/results/test_claims_run.py::test_a", plain, (), None, "system"),
    ("tests/downstream/test_finetune.py::test_preset_reaches_the_floor[upernet]", plain, (), None, "system"),
    ("tests/downstream/test_finetune.py::test_preset_reaches_the_floorish", plain, (), None, "unit"),
])
def test_a_tests_tier_follows_from_what_it_uses(nodeid, function, fixtures, cost, expected):
    assert tiers.tier(nodeid, function, fixtures, NAMESPACES, cost) == expected


def test_a_gpu_check_variant_on_an_accelerator_is_a_system_test_wherever_it_lives():
    """tests/devices.py's ``device(kind=...)``: the CUDA variant of an engine test is the GPU check; its CPU variant
    keeps the tier of what it uses."""
    assert tiers.tier("tests/test_x.py::test_a[cuda]", plain, (), NAMESPACES, None, "cuda") == "system"
    assert tiers.tier("tests/test_x.py::test_a[cpu]", plain, (), NAMESPACES, None, "cpu") == "unit"
    assert tiers.tier("tests/test_x.py::test_a[cpu]", uses_the_helper, (), NAMESPACES, None, "cpu") == "integration"
    assert tiers.tier("tests/tools/test_gpu_check.py::test_a[cpu]", plain, (), NAMESPACES, None, "cpu") == "system"


def test_the_shared_slurm_cluster_fixture_makes_its_users_system_tests():
    """tests/slurmcluster.py's fixture, as each Slurm test module binds it, goes by the name the tier follows."""
    fixture = slurmcluster.cluster_fixture("6999")
    assert fixture.name == "cluster" and tiers.system_reason("tests/test_x.py::test_a", (fixture.name,))


def test_real_tests_get_their_tier():
    namespaces = [vars(test_layers)]
    assert tiers.tier("tests/test_layers.py::test_lint_imports_keeps_every_contract",
                      test_layers.test_lint_imports_keeps_every_contract, (), namespaces, None) == "integration"
    assert tiers.tier("tests/test_layers.py::test_the_contract_names_every_package_and_has_no_exceptions",
                      test_layers.test_the_contract_names_every_package_and_has_no_exceptions, (), namespaces,
                      None) == "unit"


def test_conftest_marks_every_test_with_one_tier(request):
    marks = {m.name for m in request.node.iter_markers()}
    assert marks & set(tiers.TIERS) == {"unit"}


def test_the_measured_costs_are_data_that_reads(tmp_path):
    suite = tmp_path / "tests.csv"
    suite.write_text("test,file,worker,cpu_s,wall_s\ntests/a.py::t1,tests/a.py,gw0,0.05,0.1\n"
                     "tests/a.py::t2,tests/a.py,gw0,3.5,4\ntests/b.py::t3,tests/b.py,gw1,0.2,0.3\n")
    out = tmp_path / "costs.csv"
    tiers.write_costs(suite, out)
    assert tiers.read_costs(out) == {"tests/a.py::t2": 3.5, "tests/b.py::t3": 0.2}
    with open(tiers.COSTS, newline="") as fh:  # the committed list: suite_cpu.py's measurement of the whole suite
        rows = list(csv.DictReader(fh))
    assert len(rows) > 100 and all(r["test"].startswith("tests/") and float(r["cpu_s"]) >= 0.1 for r in rows)


@pytest.fixture(scope="module")
def shared_run():
    """A stand-in for a module's expensive shared run (used by the fake items below, no real test)."""


@pytest.fixture
def per_test():
    """A function-scoped fixture: sharing it is not sharing a run."""


def test_tests_sharing_a_module_fixture_with_a_slow_test_are_slow():
    """The first user of a shared run carries its measured cost; the others would start it when it is deselected."""
    from types import SimpleNamespace

    module = sys.modules[__name__]

    def item(nodeid, *fixtures):
        return SimpleNamespace(nodeid=nodeid, fixturenames=fixtures, module=module)

    items = [item("first", "shared_run"), item("second", "shared_run", "tmp_path"), item("third", "per_test"),
             item("fourth", "per_test"), item("alone")]
    costs = {"first": 30.0, "third": 5.0, "second": 0.1}
    assert [i.nodeid for i in tiers.slow_items(items, costs)] == ["first", "second", "third"]
