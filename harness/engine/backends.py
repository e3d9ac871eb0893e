"""The two training backends, with one interface, so the loop (harness/engine/loop.py) is written once.

- :class:`AccelerateBackend` (default): DDP through ``accelerate.Accelerator``; bf16/fp16 autocast where the
  device supports it (fp16 and its gradient scaler only on CUDA), gradient accumulation (``no_sync`` between
  boundaries), gradient clipping.
- :class:`DeepSpeedBackend`: ``deepspeed.initialize`` with our timm optimizer, ZeRO stage 0-3 from
  ``deepspeed.zero_stage``, DeepSpeed's accumulation and clipping, bf16 through its ``torch_autocast`` mode
  (its bf16-weights mode and fp16 through ``deepspeed.config``); gloo on CPU (``DS_ACCELERATOR=cpu``), NCCL on
  GPUs.

Neither backend waits on the host during a step: the gradient norm stays a tensor, and :class:`NonFiniteGuard`
skips an update with non-finite gradients on the device (the loop reads what happened at its next sync point).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sys

import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.state import AcceleratorState, GradientState
from accelerate.utils import DistributedDataParallelKwargs, InitProcessGroupKwargs

from harness.core.errors import ConfigError, DepthbenchError
from harness.engine.checkpoint import to_cpu
from harness.engine.watchdog import hang_options


# ----------------------------------------------------------------------------------------- backends
def rank_device() -> torch.device:
    """This rank's device, made current: ``cuda:<local index>`` (``LOCAL_RANK``, which
    :func:`harness.engine.launch.export_distributed_env` maps from an srun task's ``SLURM_LOCALID``), or the CPU.

    Called first by both backends, before any CUDA tensor, stream or collective exists: NCCL binds its communicator
    to the current device, and every tensor made with ``device="cuda"`` lands on it. The index is the raw local rank,
    never taken modulo the visible devices: DeepSpeed (its process group's ``device_id``, its engine's
    ``set_device``) and Accelerate's DDP (``device_ids``) use the raw ``LOCAL_RANK`` too, so a rank shown fewer GPUs
    than its local index is refused here in one line rather than crashing inside them. Every rank sees all of its
    node's GPUs (slurm/depthbench.sbatch, ``--gpu-bind=none``: NCCL needs the peers visible for NVLink/P2P) and is
    bound to its own GPU's cores by :func:`bind_to_gpu_cores`."""
    if not torch.cuda.is_available():
        return torch.device("cpu")
    local, count = int(os.environ.get("LOCAL_RANK", "0")), torch.cuda.device_count()
    if local >= count:
        raise DepthbenchError(
            f"LOCAL_RANK={local} but this rank sees {count} GPU(s): give each rank all of its "
            "node's GPUs (srun --gpu-bind=none, no per-task CUDA_VISIBLE_DEVICES)"
        )
    device = torch.device("cuda", local)
    torch.cuda.set_device(device)
    bind_to_gpu_cores(local)
    return device


def bind_to_gpu_cores(index: int, sysfs: str = "/sys/bus/pci/devices") -> set[int]:
    """Bind this process to the cores NUMA-local to GPU ``index`` (among those it may already use), so that the
    loader workers forked later inherit them; a no-op when sysfs does not say or the two sets do not meet.

    Slurm's ``--gpu-bind=none`` shows each rank every GPU, so binding to the closest cores is done here. torch's own
    ``torch.numa.binding`` is private; this uses the public device properties and Linux's ``local_cpulist``."""
    if not hasattr(os, "sched_setaffinity"):
        return set()
    props = torch.cuda.get_device_properties(index)
    pci = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    try:
        with open(os.path.join(sysfs, pci, "local_cpulist")) as file:
            cpulist = file.read().strip()
    except OSError:
        return set()
    local = set()
    for part in filter(None, cpulist.split(",")):
        first, _, last = part.partition("-")
        local.update(range(int(first), int(last or first) + 1))
    cores = os.sched_getaffinity(0) & local
    if cores:
        os.sched_setaffinity(0, cores)
    return cores


class Backend:
    """What the loop needs from an engine; subclasses fill in the engine-specific parts."""

    name = ""
    input_dtype: torch.dtype | None = None  # DeepSpeed bf16/fp16 casts the model, so inputs are cast too
    channels_last_weights = True  # channels_last: NHWC weights too (not only inputs)

    def __init__(self, precision: str, grad_accum: int):
        self.grad_accum = grad_accum
        self.precision = resolve_precision(precision)
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        self.world_size = dist.get_world_size() if dist.is_initialized() else 1
        self.compiled = False
        self.non_finite_guard: NonFiniteGuard | None = None
        self.cuda_graphs = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    # -- collectives (no-ops for one process)
    def all_reduce_sum(self, values: list[float]) -> list[float]:
        if self.world_size == 1:
            return [float(v) for v in values]
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor)
        return tensor.tolist()

    def reduce_and_read(self, tensor: torch.Tensor) -> list[float]:
        """``tensor`` summed over ranks (in place) and read on the host: the one collective and the one host read
        of the loop's sync points."""
        if self.world_size > 1:
            dist.all_reduce(tensor)
        return tensor.tolist()

    def any_rank(self, flag: bool) -> bool:
        return self.all_reduce_sum([float(flag)])[0] > 0

    _object_group = None

    def object_group(self):
        """The group of the object collectives: gloo, made once (collectively, at the first object collective). Over
        NCCL each object is pickled into a CUDA tensor, and a gather stages world size × the largest object on the
        GPU."""
        if self._object_group is None:
            self._object_group = dist.group.WORLD if dist.get_backend() == "gloo" else dist.new_group(backend="gloo")
        return self._object_group

    def broadcast_object(self, obj):
        if self.world_size == 1:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self.object_group())
        return box[0]

    def gather_object(self, obj) -> list | None:
        """Every rank's ``obj`` on rank 0 (None elsewhere); tensors in it should be on the CPU (see
        :func:`harness.engine.checkpoint.to_cpu`): a CUDA tensor unpickles onto the sender's GPU index on rank 0."""
        if self.world_size == 1:
            return [obj]
        out = [None] * self.world_size if self.is_main else None
        dist.gather_object(obj, out, dst=0, group=self.object_group())
        return out

    def sync_buffers(self, module) -> None:
        """Give every rank rank 0's buffers (BatchNorm statistics drift apart per rank under DeepSpeed, and
        after the last DDP forward), so all ranks evaluate the model that rank 0 saves."""
        if self.world_size > 1:
            for buffer in module.buffers():
                dist.broadcast(buffer.data, src=0)

    def barrier(self) -> None:
        if self.world_size > 1:
            dist.barrier()

    def close(self) -> None:
        """Tear the process group down before the interpreter exits: gloo's threads otherwise race the
        teardown and now and then abort a finished rank ("terminate called without an active exception")."""
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()

    # -- engine-specific
    def prepare(self, model, optimizer):
        raise NotImplementedError

    def autocast(self):
        return contextlib.nullcontext()

    def accumulate(self, model, boundary: bool):
        return contextlib.nullcontext()

    def unwrap(self, model):
        return model

    # -- torch.compile
    def compile(self, model, backend: str = "inductor", mode: str | None = None, dynamic: bool | None = False):
        """Compile the bare model's forward *in place* (``nn.Module.compile``): the module object, its parameters
        and its state-dict keys stay what they were (no ``_orig_mod.`` prefixes), so DDP/DeepSpeed, EMA,
        checkpoints and hooks see the same model; under DDP the compiled forward runs inside DDP's, so Dynamo's
        DDP optimizer splits the graph at the gradient buckets."""
        self.unwrap(model).compile(backend=backend, mode=self.compile_mode(mode), dynamic=dynamic)
        self.compiled = True

    def compile_mode(self, mode: str | None) -> str | None:
        """``reduce-overhead`` (CUDA graphs) on a CUDA device; elsewhere the default mode, said in one line. Under
        DDP the graphs hold the bare module's forward and backward (compiled inside DDP, whose hooks and
        all-reduce stay eager), with BatchNorm's buffers as static inputs of the module; the loop marks each
        step's start (:meth:`step_begin`) so a replay may reuse the previous step's output memory."""
        self.cuda_graphs = mode == "reduce-overhead" and self.device.type == "cuda"
        if mode == "reduce-overhead" and not self.cuda_graphs:
            if self.is_main:
                print(
                    f"depthbench train: compile.mode=reduce-overhead needs CUDA graphs (a CUDA device); compiling "
                    f"in the default mode on the {self.device.type}",
                    file=sys.stderr,
                )
            return None
        return mode

    def step_begin(self) -> None:
        """A new training step starts: CUDA-graph trees may overwrite the previous step's outputs from here."""
        if self.cuda_graphs:
            torch.compiler.cudagraph_mark_step_begin()

    def eager(self):
        """Run compiled models eagerly in this context (evaluation: its eval-mode graph and its other batch sizes
        would each be one more compilation, for a forward pass that is a few per cent of an epoch)."""
        if not self.compiled:
            return contextlib.nullcontext()
        return torch.compiler.set_stance("force_eager")


class NonFiniteGuard:
    """Skips every optimizer update from the first one with a NaN/inf gradient on, on the device (no host read).

    Installed on the torch optimizer the run builds, under Accelerate's wrapper or DeepSpeed's ZeRO optimizer
    alike (both call its ``step``; ZeRO once per parameter group, with its flat partitions). Before each step,
    GradScaler's kernel (``torch._amp_foreach_non_finite_check_and_unscale_``, scale 1: gradients unchanged; one
    multi-tensor kernel over all gradients of a device and dtype on CUDA) raises ``found`` on a non-finite
    gradient; the update is then skipped -- by the fused optimizers' own ``found_inf`` (AdamW/Adam/SGD/Adagrad with
    ``optim.fused=True``: no extra work), else by putting the parameters back from a flat copy taken before the
    step (a handful of kernels per dtype -- ``cat``, ``where``, ``_foreach_copy_`` -- not three per parameter).
    Each rank's guard sees the gradients its optimizer steps: all of them after DDP's all-reduce or under ZeRO-0
    (every rank skips alike), only its own shard under ZeRO 1-3 (only the ranks whose shard holds the non-finite
    value skip; the others update their shards). The loop turns a non-finite loss into NaN gradients
    (``loop.poisoned_if_non_finite``). ``found`` stays raised -- the run stops at the loop's next sync point, before
    any checkpoint -- so a state the skipped step may have touched (a momentum buffer, or under ZeRO the other
    ranks' shards) is never saved.

    Under fp16 (a ``GradScaler``: ``scaler``) the guard stands aside: an overflow is routine there, and the scaler
    itself skips that one update on the device and lowers its scale (it also hands fused optimizers its own
    ``found_inf``); a non-finite *loss* still stops the run (``loop.StepTotals``).
    """

    def __init__(self, optimizer, device, scaler=None):
        self.optimizer, self.device = optimizer, torch.device(device)
        self.found = torch.zeros((), dtype=torch.float32, device=self.device)
        if scaler is not None:
            return
        self.one = torch.ones((), dtype=torch.float32, device=self.device)
        self.fused = bool(optimizer.defaults.get("fused")) and getattr(optimizer, "_step_supports_amp_scaling", False)
        if self.fused:
            optimizer.found_inf = self.found  # read by the fused kernels at every step
        self.inner_step = optimizer.step
        optimizer.step = self.step

    def step(self, closure=None):
        with torch.no_grad():
            params = [p for group in self.optimizer.param_groups for p in group["params"]]
            grads = {}
            for p in params:
                if p.grad is not None:
                    grads.setdefault((p.grad.device, p.grad.dtype), []).append(p.grad)
            for (device, _), same in grads.items():
                found = self.found if device == self.device else self.found.to(device)
                torch._amp_foreach_non_finite_check_and_unscale_(same, found, self.one.to(device))
                if found is not self.found:
                    torch.maximum(self.found, found.to(self.device), out=self.found)
            if self.fused:
                return self.inner_step(closure)
            by_kind = {}
            for p in params:
                by_kind.setdefault((p.device, p.dtype), []).append(p)
            before = {kind: torch.cat([p.detach().reshape(-1) for p in same]) for kind, same in by_kind.items()}
            result = self.inner_step(closure)
            keep_old = self.found.bool()
            for kind, same in by_kind.items():
                after = torch.cat([p.detach().reshape(-1) for p in same])
                kept = torch.where(keep_old.to(kind[0]), before[kind], after)
                torch._foreach_copy_(
                    same, [part.view_as(p) for part, p in zip(kept.split([p.numel() for p in same]), same)]
                )
        return result

    def take_skipped(self) -> torch.Tensor:
        """1 when the update just made was skipped, else 0 (a device tensor)."""
        return self.found.double()


def resolve_precision(precision: str) -> str:
    """``fp32``/``bf16``/``fp16`` as the device allows: fp16 needs CUDA (CPU falls back to bf16)."""
    if precision not in ("fp32", "bf16", "fp16"):
        raise ConfigError(f"precision={precision!r} is not one of fp32, bf16, fp16")
    if precision == "fp16" and not torch.cuda.is_available():
        print("depthbench train: fp16 needs a CUDA device; using bf16 on the CPU", file=sys.stderr)
        return "bf16"
    if precision == "bf16" and torch.cuda.is_available() and not torch.cuda.is_bf16_supported():
        print("depthbench train: this GPU has no bf16; using fp16", file=sys.stderr)
        return "fp16"
    return precision


class AccelerateBackend(Backend):
    name = "accelerate"

    def __init__(
        self,
        precision: str,
        grad_accum: int,
        find_unused_parameters: bool = False,
        timeout: datetime.timedelta | None = None,
    ):
        self.device = rank_device()  # Accelerate's state picks the same device (its local process index)
        precision = resolve_precision(precision)
        handlers = [DistributedDataParallelKwargs(find_unused_parameters=find_unused_parameters)]
        if timeout is not None:
            handlers.append(InitProcessGroupKwargs(timeout=timeout))
        # Accelerate keeps one state per process and refuses a second Accelerator with another precision; a second
        # run in this process (the Python API, the GPU check's tests) starts from none (Accelerate's own tests reset
        # it the same way). Its PartialState holds the process group: kept while one is up, reset with the rest when
        # the last run's close() destroyed it
        AcceleratorState._reset_state(reset_partial_state=not dist.is_initialized())
        GradientState._reset_state()
        self.accelerator = Accelerator(
            cpu=not torch.cuda.is_available(),
            mixed_precision={"fp32": "no"}.get(precision, precision),
            kwargs_handlers=handlers,
        )
        super().__init__(precision, grad_accum)

    def prepare(self, model, optimizer):
        # fp16's GradScaler reads found_inf on the host (.item()) before every step of a non-fused optimizer; a
        # fused one takes it on the device. fp16 here means CUDA (also bf16 on a GPU without bf16).
        if self.accelerator.scaler is not None and not optimizer.defaults.get("fused"):
            raise ConfigError(
                f"precision=fp16 on CUDA needs optim.fused=True (a {type(optimizer).__name__} without "
                "it waits on the host every step: GradScaler reads found_inf); or use bf16 or DeepSpeed"
            )
        self.non_finite_guard = NonFiniteGuard(optimizer, self.device, self.accelerator.scaler)
        return self.accelerator.prepare(model, optimizer)

    def autocast(self):
        return self.accelerator.autocast()

    def accumulate(self, model, boundary: bool):
        return contextlib.nullcontext() if boundary or self.world_size == 1 else self.accelerator.no_sync(model)

    def backward(self, loss: torch.Tensor) -> None:
        self.accelerator.backward(loss / self.grad_accum)

    def step(self, model, optimizer, boundary: bool, clip_grad: float | None):
        if not boundary:
            return None
        norm = self.accelerator.clip_grad_norm_(model.parameters(), clip_grad) if clip_grad else None
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return norm  # a tensor: read on the host only at a log step

    def unwrap(self, model):
        # not accelerator.unwrap_model: it imports DeepSpeed (~0.5 s of every run's start-up) only to look for an
        # engine this backend never builds. Accelerate wraps in DDP at most here; compile is in place (no _orig_mod).
        while isinstance(model, (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)):
            model = model.module
        return model

    def model_state(self, model) -> dict:
        return self.unwrap(model).state_dict()

    def load_model_state(self, model, state: dict) -> None:
        self.unwrap(model).load_state_dict(state)

    def optimizer_state(self, optimizer):
        return optimizer.state_dict()

    def load_optimizer_state(self, optimizer, state) -> None:
        optimizer.load_state_dict(state)

    def scaler_state(self):
        scaler = self.accelerator.scaler
        return scaler.state_dict() if scaler is not None else None

    def load_scaler_state(self, state) -> None:
        if state is not None and self.accelerator.scaler is not None:
            self.accelerator.scaler.load_state_dict(state)


class DeepSpeedBackend(Backend):
    name = "deepspeed"
    # DeepSpeed views every parameter as bytes (its initial broadcast) and ZeRO flattens them into contiguous
    # buffers: weights stay NCHW. Channels-last inputs still make the convolutions run NHWC (torch picks the
    # layout from the input or the weight).
    channels_last_weights = False

    def __init__(
        self,
        precision: str,
        grad_accum: int,
        micro_batch: int,
        clip_grad: float | None,
        zero_stage: int = 2,
        extra_config: dict | None = None,
        timeout: datetime.timedelta | None = None,
    ):
        import deepspeed
        from deepspeed.utils import logger as ds_logger

        ds_logger.setLevel("WARNING")
        self.device = rank_device()
        deepspeed.init_distributed(
            dist_backend="nccl" if self.device.type == "cuda" else "gloo",
            auto_mpi_discovery=False,
            verbose=False,
            **({"timeout": timeout} if timeout is not None else {}),
        )
        super().__init__(precision, grad_accum)
        self.zero_stage = zero_stage
        # bf16: DeepSpeed's torch.autocast mode (fp32 weights, bf16 compute) -- the same numerics as Accelerate's,
        # and BatchNorm models work; DeepSpeed's bf16-weights mode is deepspeed.config=dict(bf16=dict(enabled=True)).
        self.config = _deep_update(
            {
                "train_micro_batch_size_per_gpu": micro_batch,
                "gradient_accumulation_steps": grad_accum,
                "train_batch_size": micro_batch * grad_accum * self.world_size,
                "gradient_clipping": float(clip_grad or 0.0),
                "zero_optimization": {"stage": zero_stage},
                "torch_autocast": {"enabled": self.precision == "bf16", "dtype": "bfloat16"},
                "fp16": {"enabled": self.precision == "fp16"},
                "zero_allow_untested_optimizer": True,  # our optimizer is timm's (a torch optimizer)
                "steps_per_print": 2**31 - 1,
                # DeepSpeed's throughput timer defaults to on and synchronized: torch.cuda.synchronize at every forward
                # and step (which set_sync_debug_mode does not flag); the loop times steps itself
                "timers": {"throughput": {"enabled": False}},
            },
            extra_config or {},
        )
        # ZeRO-1/2 read the global gradient norm on the host (a sync per step): only when clipping needs it (and
        # where DeepSpeed allows leaving it out: not ZeRO-1 with its bf16 weights, not with an offloaded optimizer).
        # Stages 0 and 3 have no such switch (DeepSpeed refuses compute_grad_norm=false there).
        zero = self.config["zero_optimization"]
        if zero["stage"] in (1, 2) and not zero.get("offload_optimizer"):
            zero.setdefault(
                "compute_grad_norm",
                bool(clip_grad) or (zero["stage"] == 1 and bool((self.config.get("bf16") or {}).get("enabled"))),
            )

    def close(self) -> None:
        """DeepSpeed's own teardown (``deepspeed.comm.destroy_process_group``): it also drops the groups DeepSpeed
        cloned from the process group, which a second run in the same process (the Python API, a test) would
        otherwise find stale ("Group ... is not registered") in its first broadcast."""
        import deepspeed.comm

        if dist.is_available() and dist.is_initialized():
            deepspeed.comm.destroy_process_group()

    def prepare(self, model, optimizer):
        import deepspeed

        self.non_finite_guard = NonFiniteGuard(optimizer, self.device)
        self.engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=self.config)
        dtype = next(self.engine.module.parameters()).dtype  # DeepSpeed's fp16/bf16 modes cast the weights
        self.input_dtype = dtype if dtype in (torch.float16, torch.bfloat16) else None
        return self.engine, optimizer

    def autocast(self):  # for evaluation, which bypasses the engine's forward
        if self.precision == "bf16" and self.input_dtype is None:
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def compile(self, model, backend: str = "inductor", mode: str | None = None, dynamic: bool | None = False):
        """DeepSpeed's own ``engine.compile`` (the same in-place ``module.compile``, plus its ZeRO-3 hook
        handling)."""
        self.engine.compile(backend=backend, compile_kwargs={"mode": self.compile_mode(mode), "dynamic": dynamic})
        self.compiled = True

    def backward(self, loss: torch.Tensor) -> None:
        self.engine.backward(loss)  # DeepSpeed divides by gradient_accumulation_steps itself

    def step(self, model, optimizer, boundary: bool, clip_grad: float | None):
        self.engine.step()  # a no-op between accumulation boundaries
        return self.engine.get_global_grad_norm() if boundary and clip_grad else None

    def unwrap(self, model):
        return model.module

    def model_state(self, model) -> dict:
        if self.zero_stage == 3:
            return self.engine._zero3_consolidated_16bit_state_dict()
        return model.module.state_dict()

    def load_model_state(self, model, state: dict) -> None:
        if self.zero_stage == 3:  # parameters come back with the optimizer's fp32 partitions; buffers here
            buffers = {name for name, _ in model.module.named_buffers()}
            model.module.load_state_dict({k: v for k, v in state.items() if k in buffers}, strict=False)
        else:
            model.module.load_state_dict(state)

    def optimizer_state(self, optimizer):
        """Every rank's ZeRO partition, gathered on rank 0: tensors, plain values and the DeepSpeed objects that
        a weights-only load reads back (:data:`harness.engine.checkpoint.DEEPSPEED_STATE_CLASSES`)."""
        return {"zero_stage": self.zero_stage, "partitions": self.gather_object(to_cpu(optimizer.state_dict()))}

    def load_optimizer_state(self, optimizer, state) -> None:
        if len(state["partitions"]) != self.world_size or state["zero_stage"] != self.zero_stage:
            raise DepthbenchError(
                f"the checkpoint's DeepSpeed optimizer state is from ZeRO-{state['zero_stage']} on "
                f"{len(state['partitions'])} ranks; resume with the same stage and number of "
                "processes"
            )
        if self.zero_stage == 0:
            optimizer.load_state_dict(state["partitions"][self.rank])
            return
        optimizer.load_state_dict(state["partitions"], load_optimizer_states=True, load_from_fp32_weights=True)

    def scaler_state(self):
        return None  # DeepSpeed's loss scaler is part of its optimizer state

    def load_scaler_state(self, state) -> None:
        pass


def _deep_update(base: dict, extra: dict) -> dict:
    for key, value in extra.items():
        base[key] = _deep_update(dict(base.get(key) or {}), value) if isinstance(value, dict) else value
    return base


def build_backend(cfg, micro_batch: int) -> Backend:
    # the collectives' timeout from the config (hang.collective_timeout_s), not the backend's default
    timeout = datetime.timedelta(seconds=hang_options(cfg)["collective_timeout_s"])
    if cfg.engine == "accelerate":
        return AccelerateBackend(cfg.precision, cfg.grad_accum, cfg.find_unused_parameters, timeout)
    if cfg.engine == "deepspeed":
        ds = cfg.deepspeed
        return DeepSpeedBackend(
            cfg.precision, cfg.grad_accum, micro_batch, cfg.clip_grad, ds.zero_stage, ds.get("config"), timeout
        )
    raise ConfigError(f"engine={cfg.engine!r} is not one of accelerate, deepspeed")
