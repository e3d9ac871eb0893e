"""Shared test setup: CPU-only DeepSpeed, runs written under pytest's tmp dirs, a helper to run the CLI."""

import os
import shutil
from pathlib import Path

# Under pytest-xdist (`make test`: one worker per core) each worker and the processes it starts get their share of
# the cores: set before torch is imported, which sizes its thread pool from it. Oversubscribed threads on a small
# shared machine cost more than they give.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT") and "OMP_NUM_THREADS" not in os.environ:
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))

import devices  # noqa: E402
import pytest  # noqa: E402
import tiers  # noqa: E402
import torch  # noqa: E402
from clitools import run_cli
from fixtures.configs import PRESET
from fixtures.files import SECRET

os.environ.setdefault("DS_ACCELERATOR", "cpu")  # DeepSpeed probes for an accelerator when mmengine imports it
ROOT = Path(__file__).resolve().parent.parent


# The longest test files first (their time in `make test` on the idle 2-core machine, 26 Nov 2026: 186, 152, 151,
# 138, 117, 68, 48 s): `make test` hands whole files to its workers (--dist loadfile) in collection order, so a
# long file collected last keeps one worker busy while the other has nothing left to do.
LONGEST_FIRST = (
    "test_train.py",
    "test_runner.py",  # the stopped-and-resumed runs, measured as tests/harness/engine/test_train.py's (114 CPU-s)
    "test_finetune.py",
    "test_slurm.py",
    "test_demo.py",
    "test_gpu_check.py",
    "timm_contract",
    "test_claims_run.py",
)


def pytest_addoption(parser):
    parser.addoption(
        "--gpu-check-out",
        metavar="DIR",
        help="the GPU check's report folder: report.json and report.md "
        "of the tests with the device marker (tests/devices.py; tools/gpu_check.sh sets it)",
    )
    parser.addoption(
        "--gpu-check-budget",
        metavar="SECONDS",
        type=float,
        help="the GPU check call's time for its "
        "tests: each test's limit is cut to what is left, none starts near the end (tests/devices.py)",
    )


def pytest_configure(config):
    if config.getoption("gpu_check_out") and not hasattr(config, "workerinput"):  # once, not in xdist's workers
        report = devices.Report(config.getoption("gpu_check_out"), config.getoption("gpu_check_budget"))
        config.pluginmanager.register(report, "gpu-check-report")
    elif not hasattr(config, "workerinput") and not (config.option.collectonly or config.option.help):
        # TransNeXt's CPU kernels are compiled on first use (~30 s each, once per machine): here, before the workers start,
        # not inside whichever test first runs TransNeXt under its time limit; the workers load the cached build
        from models.transnext import cpu_convglu_kernels, cpu_window_kernels

        cpu_window_kernels()
        cpu_convglu_kernels()


def pytest_collection_modifyitems(config, items):
    def rank(item):
        parts = Path(str(item.fspath)).parts
        return next((i for i, name in enumerate(LONGEST_FIRST) if name in parts), len(LONGEST_FIRST))

    items.sort(key=rank)  # stable: the order inside a file stays
    mark_tiers(items)
    devices.prepare(items, gpu_check=bool(config.getoption("gpu_check_out")))


def mark_tiers(items) -> None:
    """Each test gets its tier (unit, integration or system) from what it declares -- its ``tier`` marks, its
    module's ``pytestmark``, the fixtures of ``tiers.FIXTURE_TIERS`` it uses -- and ``slow`` from its measured cost
    (tests/tiers.py): ``make test-fast`` runs ``-m "not system and not slow"``."""
    costs = tiers.read_costs()
    for item in items:
        name = getattr(item, "originalname", None) or item.name
        declared = [m.args[0] for m in item.iter_markers("tier") if tiers.applies(m, name)]
        item.add_marker(
            tiers.tier(
                declared, getattr(item, "fixturenames", ()), costs.get(item.nodeid), devices.marks_of(item).get("kind")
            )
        )
    for item in tiers.slow_items(items, costs):
        item.add_marker("slow")


record = devices.record  # the GPU check's measurements for its report (tests/devices.py)


@pytest.fixture
def cli():
    """``run_cli``: the CLI in a process of its own. Carries ``integration`` (tests/tiers.py's FIXTURE_TIERS)."""
    return run_cli


@pytest.fixture
def secret(tmp_path) -> Path:
    """A file outside the run holding SECRET (tests/fixtures/files.py): a link planted in a run points here, and its
    bytes must never be written over nor printed."""
    path = tmp_path / "secret.txt"
    path.write_text(SECRET)
    return path


@pytest.fixture(scope="module")
def data_cache(tmp_path_factory):
    """One DEPTHBENCH_DATA folder per test module (``runs``): a dataset one test exports, the next one reuses."""
    return tmp_path_factory.mktemp("data")


@pytest.fixture
def runs(tmp_path, monkeypatch, data_cache):
    """This test's own runs folder (scripts, records, Slurm logs) and a data cache shared by the module."""
    root = tmp_path / "runs"
    monkeypatch.setenv("DEPTHBENCH_RUNS", str(root))
    monkeypatch.setenv("DEPTHBENCH_DATA", str(data_cache))
    return root


@pytest.fixture(scope="session")
def embedded_data(tmp_path_factory):
    """One data folder for the embedded sets of the whole session, all xdist workers included: generating the COCO and
    the ADE set takes ~5 CPU-s each, and several test files fine-tune on them. The sets are generated on first use,
    atomically (downstream/embedded.py: of two workers, the first to finish wins), and deterministically."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's folder, above each worker's own
    path = root / "embedded-data"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="module")
def embedded_cache(tmp_path_factory, embedded_data):
    """A cache (DEPTHBENCH_CACHE) of a test module's own whose data folder holds the session's embedded sets
    (COCO/ADE-format); one intra-op thread in this process (the fine-tuning tests' models are tiny)."""
    path = tmp_path_factory.mktemp("cache")
    (path / "data").symlink_to(embedded_data, target_is_directory=True)
    mp = pytest.MonkeyPatch()
    mp.setenv("DEPTHBENCH_CACHE", str(path))
    mp.setenv("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    yield path
    mp.undo()


@pytest.fixture(scope="module")
def one_thread():
    """Tiny tensors on 2 shared cores: one intra-op thread beats two fighting ones (modules opt in)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium, headless, driven by playwright (the HTML report's tests). Carries ``integration``
    (tests/tiers.py's FIXTURE_TIERS)."""
    if not Path(CHROMIUM).is_file():
        pytest.fail(
            "chromium is not installed: the HTML report test drives it headless. Install it with "
            "`apt-get install -y --no-install-recommends chromium` (make setup does this as root)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the playwright package is missing: run make setup (pip install playwright)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture
def hostile_config(tmp_path):
    """A config outside configs/ that leaves a marker when executed, and the marker's path."""
    marker = tmp_path / "executed"
    config = tmp_path / "evil.py"
    config.write_text(
        f"_base_ = [{str(ROOT / PRESET)!r}]\nmarker = __import__('pathlib').Path({str(marker)!r}).write_text('ran')\n"
    )
    return config, marker
