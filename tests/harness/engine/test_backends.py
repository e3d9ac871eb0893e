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


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_deepspeed_optimizer_state_round_trips_through_a_weights_only_checkpoint(stage, tmp_path):
    """Every ZeRO stage's optimizer state, written to a checkpoint and read back weights-only (torch's allow-list of
    DeepSpeed's classes), continues training bit for bit: the check that fails when DeepSpeed's state holds a class
    the allow-list lacks (harness/engine/checkpoint.py DEEPSPEED_STATE_CLASSES)."""
    from harness.engine.checkpoint import read_checkpoint, save_atomic

    batches = [
        (torch.randn(4, 6, generator=torch.Generator().manual_seed(i)), torch.tensor([0, 1, 2, 1])) for i in (1, 2)
    ]

    def engine():
        export_distributed_env(single_process_group=True)
        backend = DeepSpeedBackend("fp32", 1, micro_batch=4, clip_grad=None, zero_stage=stage)
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
        model, optimizer = backend.prepare(model, torch.optim.AdamW(model.parameters(), lr=1e-2))
        return backend, model, optimizer

    def train_step(backend, model, optimizer, batch):
        backend.backward(nn.functional.cross_entropy(model(batch[0]), batch[1]))
        backend.step(model, optimizer, True, None)

    with mock.patch.dict(os.environ):
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "LOCAL_WORLD_SIZE"):
            os.environ.pop(name, None)
        os.environ["DS_ACCELERATOR"] = "cpu"
        backend, model, optimizer = engine()
        train_step(backend, model, optimizer, batches[0])
        save_atomic(
            {"model": backend.model_state(model), "optimizer": backend.optimizer_state(optimizer)}, tmp_path / "c.pth"
        )
        train_step(backend, model, optimizer, batches[1])
        uninterrupted = {k: v.clone() for k, v in backend.model_state(model).items()}
        backend.close()
        for name in ("RANK", "WORLD_SIZE", "MASTER_PORT"):
            os.environ.pop(name, None)

        backend, model, optimizer = engine()
        checkpoint = read_checkpoint(tmp_path / "c.pth")
        backend.load_model_state(model, checkpoint["model"])
        backend.load_optimizer_state(optimizer, checkpoint["optimizer"])
        train_step(backend, model, optimizer, batches[1])
        resumed = backend.model_state(model)
        backend.close()
    assert uninterrupted.keys() == resumed.keys()
    assert all(torch.equal(uninterrupted[k], resumed[k]) for k in uninterrupted)
