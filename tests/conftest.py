"""Shared test setup: CPU-only DeepSpeed, runs written under pytest's tmp dirs, a helper to run the CLI."""
import os
from pathlib import Path

import pytest
import torch
from clitools import run_cli

os.environ.setdefault("DS_ACCELERATOR", "cpu")  # DeepSpeed probes for an accelerator when mmengine imports it
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="module")
def one_thread():
    """Tiny tensors on 2 shared cores: one intra-op thread beats two fighting ones (modules opt in)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
