"""harness/engine/backends.py: a backend's life in one process."""

import os
from unittest import mock

import pytest
import torch
from torch import nn

from harness.engine.backends import DeepSpeedBackend
from harness.engine.launch import export_distributed_env

pytestmark = pytest.mark.tier("integration")


def test_two_deepspeed_runs_in_one_process_each_get_a_working_engine():
    """The Python API may train twice in one process: the second DeepSpeed engine must not meet groups DeepSpeed
    cloned from the first run's (destroyed) process group."""
    # export_distributed_env writes os.environ itself: the whole environment is restored afterwards, so no later
    # test in this process inherits a rank or a rendezvous port
    with mock.patch.dict(os.environ):
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "LOCAL_WORLD_SIZE"):
            os.environ.pop(name, None)
        os.environ["DS_ACCELERATOR"] = "cpu"
        for _ in range(2):
            export_distributed_env(single_process_group=True)
            backend = DeepSpeedBackend("fp32", 1, micro_batch=2, clip_grad=None, zero_stage=1)
            model = nn.Linear(4, 2)
            model, optimizer = backend.prepare(model, torch.optim.AdamW(model.parameters(), lr=1e-3))
            assert model is not None and optimizer is not None
            backend.close()
            for name in ("RANK", "WORLD_SIZE", "MASTER_PORT"):  # the next run gets a fresh group and port
                os.environ.pop(name, None)
