"""harness/engine/backends.py: a backend's life in one process; its CUDA paths where a CPU can show them (issue 52):
each rank's device from its local index, set before any CUDA work, in both backends; ZeRO's optimizer state gathered
on the CPU; the non-finite guard's cost per step and its place under fp16.

CUDA is simulated by patching ``torch.cuda`` to report devices; the calls the engine makes on it are recorded in
order, so a test sees *that* ``set_device`` came first, not only the device it ended with.
"""

import os
import types
from unittest import mock

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from harness.engine import backends
from harness.engine.backends import DeepSpeedBackend
from harness.engine.launch import export_distributed_env

pytestmark = pytest.mark.tier(
    "integration",
    tests=(
        "test_two_deepspeed_runs_in_one_process_each_get_a_working_engine",
        "test_deepspeed_optimizer_state_round_trips_through_a_weights_only_checkpoint",
    ),
)


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
    # a PCI domain no host has: the real sysfs never answers, so no test binds this process's cores
    monkeypatch.setattr(
        torch.cuda,
        "get_device_properties",
        lambda index: types.SimpleNamespace(pci_domain_id=0xFFFE, pci_bus_id=0x10 + index, pci_device_id=0),
    )
    monkeypatch.setenv("LOCAL_RANK", "1")
    return calls


def test_deepspeed_backend_takes_the_local_rank_s_gpu_before_the_process_group(two_gpus, monkeypatch):
    import deepspeed

    monkeypatch.setattr(
        deepspeed, "init_distributed", lambda **kw: two_gpus.append(("init_distributed", kw["dist_backend"]))
    )
    backend = backends.DeepSpeedBackend("fp32", 1, micro_batch=2, clip_grad=None, zero_stage=2)
    assert backend.device == torch.device("cuda", 1)
    assert two_gpus[:2] == [("set_device", 1), ("init_distributed", "nccl")]


def test_deepspeed_s_throughput_timer_does_not_synchronize_the_device(two_gpus, monkeypatch):
    """DeepSpeed's throughput timer is on and synchronized by default: torch.cuda.synchronize at every forward and
    step, which set_sync_debug_mode("error") does not catch. The config turns it off, read as DeepSpeed reads it."""
    import deepspeed
    from deepspeed.utils.config import get_timers_config

    monkeypatch.setattr(deepspeed, "init_distributed", lambda **kw: None)
    backend = backends.DeepSpeedBackend("bf16", 1, micro_batch=2, clip_grad=None, zero_stage=2)
    assert get_timers_config(backend.config).enabled is False
    assert get_timers_config({}).enabled is True  # DeepSpeed's default, which the config must override


def test_accelerate_backend_takes_the_local_rank_s_gpu_before_the_accelerator(two_gpus, monkeypatch):
    class FakeAccelerator:  # Accelerate's own state would set the device too; it must find it set already
        def __init__(self, **kwargs):
            two_gpus.append(("Accelerator", kwargs["cpu"]))
            self.device = torch.device("cuda", torch.cuda.current_device())

    monkeypatch.setattr(backends, "Accelerator", FakeAccelerator)
    backend = backends.AccelerateBackend("fp32", 1)
    assert backend.device == torch.device("cuda", 1)
    assert two_gpus == [("set_device", 1), ("Accelerator", False)]


def test_a_task_shown_fewer_gpus_than_its_local_rank_is_refused_in_one_line(two_gpus, monkeypatch):
    """srun --gpu-bind=single:1 / --gpus-per-task=1: every task sees one device. Taking index 0 there crashed later:
    DeepSpeed's process group (device_id) and engine (set_device) and Accelerate's DDP (device_ids) use the raw
    LOCAL_RANK."""
    from harness.core.errors import DepthbenchError

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LOCAL_RANK", "3")
    with pytest.raises(DepthbenchError) as error:
        backends.rank_device()
    message = str(error.value)
    assert "\n" not in message and "LOCAL_RANK=3" in message and "all of its node's GPUs" in message
    assert two_gpus == []


def test_each_rank_is_bound_to_the_cores_closest_to_its_gpu(two_gpus, monkeypatch, tmp_path):
    """With every GPU visible, the rank binds itself to its GPU's NUMA-local cores (sysfs local_cpulist) among the
    cores it may use, before loader workers start; no overlap or no sysfs entry leaves the affinity alone."""
    for bus, cpulist in ((0x10, "0-3,8-11"), (0x11, "4-7,12-15")):
        (tmp_path / f"fffe:{bus:02x}:00.0").mkdir()
        (tmp_path / f"fffe:{bus:02x}:00.0" / "local_cpulist").write_text(cpulist + "\n")
    bound = []
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {2, 3, 4, 5, 6, 12})
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cores: bound.append(set(cores)))
    bind = backends.bind_to_gpu_cores
    monkeypatch.setattr(backends, "bind_to_gpu_cores", lambda index: bind(index, sysfs=str(tmp_path)))
    assert backends.rank_device() == torch.device("cuda", 1) and two_gpus == [("set_device", 1)]
    assert bound == [{4, 5, 6, 12}]
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {20, 21})
    assert bind(0, sysfs=str(tmp_path)) == set()
    assert bind(1, sysfs=str(tmp_path / "missing")) == set()
    assert bound == [{4, 5, 6, 12}]


class OnGpu(torch.Tensor):
    """A tensor standing for a CUDA one on a CPU: ``.cpu()`` gives a plain tensor."""

    def cpu(self, *args, **kwargs):
        return self.as_subclass(torch.Tensor).clone()


def test_deepspeed_s_optimizer_state_is_gathered_on_the_cpu_over_gloo(monkeypatch):
    """Saving under NCCL: each rank's ZeRO partition went through gather_object with CUDA tensors inside -- rank 0
    unpickled rank k's onto cuda:k, and NCCL's object collectives stage world size × the object on the GPU. The
    partitions go as CPU tensors, over a gloo group made once."""
    from torch import distributed as dist

    groups, sent = [], []

    def gather_object(obj, out, dst=0, group=None):
        sent.append((obj, group))
        out[:] = [obj, obj]

    monkeypatch.setattr(dist, "get_backend", lambda *a, **k: "nccl")
    monkeypatch.setattr(dist, "new_group", lambda **kw: groups.append(kw["backend"]) or f"group {len(groups)}")
    monkeypatch.setattr(dist, "gather_object", gather_object)
    backend = object.__new__(backends.DeepSpeedBackend)
    backend.rank, backend.world_size, backend.zero_stage = 0, 2, 2
    state = {
        "state": {0: {"exp_avg": torch.ones(3).as_subclass(OnGpu)}},
        "param_groups": [{"lr": 0.1, "params": [0]}],
        "fp32": [torch.zeros(2).as_subclass(OnGpu)],
    }
    optimizer = type("Optimizer", (), {"state_dict": lambda self: state})()
    for _ in range(2):
        saved = backend.optimizer_state(optimizer)
    assert groups == ["gloo"] and [group for _, group in sent] == ["group 1", "group 1"]
    tensors = [saved["partitions"][0]["state"][0]["exp_avg"], saved["partitions"][0]["fp32"][0]]
    assert all(type(t) is torch.Tensor and t.device.type == "cpu" for t in tensors), [type(t) for t in tensors]


# ----------------------------------------------------------------------------------------- the non-finite guard
class Ops(TorchDispatchMode):
    """The operators dispatched while active that compute (views launch no kernel): each one a kernel launch on
    CUDA, or a few (a multi-tensor kernel runs in chunks)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += not func.is_view
        return func(*args, **(kwargs or {}))


def many_parameters(n=60):
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(n // 2)])


@pytest.mark.parametrize("bad", [False, True])
def test_the_guard_costs_a_few_kernels_whatever_the_number_of_parameters(bad):
    """DeiT-S has ~150 parameter tensors: a guard with kernels per parameter launched ~450 per step. Skipping still
    puts every parameter back exactly."""
    model = many_parameters()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    guard = backends.NonFiniteGuard(optimizer, "cpu")
    model(torch.randn(2, 4)).sum().backward()
    if bad:
        next(model.parameters()).grad[0, 0] = float("nan")
    before = [p.detach().clone() for p in model.parameters()]
    inner, guard.inner_step = guard.inner_step, lambda closure=None: None  # only the guard's own work is counted
    with Ops() as ops:
        optimizer.step()
    assert ops.count <= 12, f"{ops.count} operators for {len(before)} parameters"
    guard.inner_step = inner
    optimizer.step()
    changed = [not torch.equal(p, b) for p, b in zip(model.parameters(), before)]
    assert any(changed) != bad
    assert guard.take_skipped().item() == float(bad)


def test_under_fp16_an_overflow_is_the_grad_scaler_s_and_the_next_update_counts(monkeypatch):
    """fp16: GradScaler's first overflow skips that one update and lowers the scale; the update after it is applied
    and the loop is not told an update was skipped (the guard's flag stayed raised forever: the run stopped)."""
    backend = backends.AccelerateBackend("fp32", 1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    monkeypatch.setattr(backend.accelerator, "scaler", scaler)  # Accelerate's fp16 on CUDA; its CPU has none
    model = many_parameters(4)
    model, optimizer = backend.prepare(model, torch.optim.AdamW(model.parameters(), lr=0.1, fused=True))
    for overflow in (True, False):
        backend.backward(model(torch.randn(2, 4)).sum())
        if overflow:
            next(model.parameters()).grad[0, 0] = float("inf")
        before = [p.detach().clone() for p in model.parameters()]
        backend.step(model, optimizer, boundary=True, clip_grad=None)
        applied = any(not torch.equal(p, b) for p, b in zip(model.parameters(), before))
        assert applied != overflow
        assert backend.non_finite_guard.take_skipped().item() == 0
    assert scaler.get_scale() < 2.0**16


def test_fp16_with_a_non_fused_optimizer_is_refused_in_one_line(monkeypatch):
    """fp16 on Accelerate: GradScaler's step reads found_inf with .item() before every step of a non-fused optimizer
    (torch/amp/grad_scaler.py, _maybe_opt_step), a host sync per step; a fused one takes found_inf on the device."""
    from harness.core.errors import ConfigError

    backend = backends.AccelerateBackend("fp32", 1)
    monkeypatch.setattr(backend.accelerator, "scaler", torch.amp.GradScaler("cpu"))
    model = many_parameters(4)
    with pytest.raises(ConfigError, match="precision=fp16 on CUDA needs optim.fused=True") as error:
        backend.prepare(model, torch.optim.AdamW(model.parameters(), lr=0.1))
    assert "\n" not in str(error.value)
    backend.prepare(model, torch.optim.AdamW(model.parameters(), lr=0.1, fused=True))


def test_a_second_accelerate_run_in_one_process_may_ask_for_another_precision():
    """Accelerate keeps one state per process: a second run in the same process (the Python API; the GPU check ran
    the digits preset in fp32, then DeiT-S's recipe in bf16, and Accelerate refused the second) gets its own."""
    for precision, mixed in (("fp32", "no"), ("bf16", "bf16"), ("fp32", "no")):
        backend = backends.AccelerateBackend(precision, 2)
        assert backend.accelerator.mixed_precision == mixed
        assert backend.accelerator.gradient_accumulation_steps == 1  # the engine accumulates itself
