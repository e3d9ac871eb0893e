"""Shared test setup: CPU-only DeepSpeed, runs written under pytest's tmp dirs, a helper to run the CLI."""
import os
from pathlib import Path

# Under pytest-xdist (`make test`: one worker per core) each worker and the processes it starts get their share of
# the cores: set before torch is imported, which sizes its thread pool from it. Oversubscribed threads on a small
# shared machine cost more than they give.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT") and "OMP_NUM_THREADS" not in os.environ:
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))

import pytest  # noqa: E402
import torch  # noqa: E402
from clitools import run_cli

os.environ.setdefault("DS_ACCELERATOR", "cpu")  # DeepSpeed probes for an accelerator when mmengine imports it
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="module")
def embedded_cache(tmp_path_factory):
    """One generated cache of the embedded sets (COCO/ADE-format) for a whole test module, as DEPTHBENCH_CACHE; one
    intra-op thread in this process (the fine-tuning tests' models are tiny)."""
    path = tmp_path_factory.mktemp("cache")
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
