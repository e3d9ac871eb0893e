"""harness/engine/backends.py: a backend's life in one process."""

import pytest
import torch
from torch import nn

from harness.engine.backends import DeepSpeedBackend
from harness.engine.launch import export_distributed_env

pytestmark = pytest.mark.tier("integration")


def test_two_deepspeed_runs_in_one_process_each_get_a_working_engine(monkeypatch):
    """The Python API may train twice in one process: the second DeepSpeed engine must not meet groups DeepSpeed
    cloned from the first run's (destroyed) process group."""
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DS_ACCELERATOR", "cpu")
    for _ in range(2):
        for name, value in export_distributed_env(single_process_group=True).items():
            monkeypatch.setenv(name, value)
        backend = DeepSpeedBackend("fp32", 1, micro_batch=2, clip_grad=None, zero_stage=1)
        model = nn.Linear(4, 2)
        model, optimizer = backend.prepare(model, torch.optim.AdamW(model.parameters(), lr=1e-3))
        assert model is not None and optimizer is not None
        backend.close()
