"""The engine's CUDA paths where a CPU can show them (issue 52): each rank's device from its local index, set before
any CUDA work, in both backends.

CUDA is simulated by patching ``torch.cuda`` to report devices; the calls the engine makes on it are recorded in
order, so a test sees *that* ``set_device`` came first, not only the device it ended with.
"""

import pytest
import torch

from harness.engine import backends


@pytest.fixture
def two_gpus(monkeypatch):
    """``torch.cuda`` as on a node with two GPUs and no device set yet (``current_device()`` is 0 until
    ``set_device``); ``calls`` lists what the code under test did, in order."""
    calls = []
    current = {"index": 0}

    def set_device(device):
        current["index"] = torch.device(device).index
        calls.append(("set_device", current["index"]))

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current["index"])
    monkeypatch.setattr(torch.cuda, "set_device", set_device)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setenv("LOCAL_RANK", "1")
    return calls


def test_deepspeed_backend_takes_the_local_rank_s_gpu_before_the_process_group(two_gpus, monkeypatch):
    import deepspeed

    monkeypatch.setattr(deepspeed, "init_distributed", lambda **kw: two_gpus.append(("init_distributed",
                                                                                    kw["dist_backend"])))
    backend = backends.DeepSpeedBackend("fp32", 1, micro_batch=2, clip_grad=None, zero_stage=2)
    assert backend.device == torch.device("cuda", 1)
    assert two_gpus[:2] == [("set_device", 1), ("init_distributed", "nccl")]


def test_accelerate_backend_takes_the_local_rank_s_gpu_before_the_accelerator(two_gpus, monkeypatch):
    class FakeAccelerator:  # Accelerate's own state would set the device too; it must find it set already
        def __init__(self, **kwargs):
            two_gpus.append(("Accelerator", kwargs["cpu"]))
            self.device = torch.device("cuda", torch.cuda.current_device())

    monkeypatch.setattr(backends, "Accelerator", FakeAccelerator)
    backend = backends.AccelerateBackend("fp32", 1)
    assert backend.device == torch.device("cuda", 1)
    assert two_gpus == [("set_device", 1), ("Accelerator", False)]


def test_a_task_shown_only_its_own_gpu_uses_index_0(two_gpus, monkeypatch):
    """srun --gpus-per-task=1: every task sees one device, whatever its local rank."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert backends.rank_device() == torch.device("cuda", 0) and two_gpus == [("set_device", 0)]
