"""The training engine, DeiT's ``engine.py`` shape: :func:`train_one_epoch` and :func:`evaluate`.

They run on one of two backends with the same interface, so the loop is written once:

- :class:`AccelerateBackend` (default): DDP through ``accelerate.Accelerator``; bf16/fp16 autocast where the
  device supports it (fp16 and its gradient scaler only on CUDA), gradient accumulation (``no_sync`` between
  boundaries), gradient clipping.
- :class:`DeepSpeedBackend`: ``deepspeed.initialize`` with our timm optimizer, ZeRO stage 0-3 from
  ``deepspeed.zero_stage``, DeepSpeed's accumulation and clipping, bf16 through its ``torch_autocast`` mode
  (its bf16-weights mode and fp16 through ``deepspeed.config``); gloo on CPU (``DS_ACCELERATOR=cpu``), NCCL on
  GPUs.

Each training step all-reduces one small vector (loss, stop request, checkpoint-due flag) so every rank agrees
on the logged loss, on stopping for a signal and on non-finite losses, which stop the run before the update.
"""
from __future__ import annotations

import contextlib
import math
import resource
import signal
import sys
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F

from harness.data import batches_per_epoch, set_train_epoch

# ----------------------------------------------------------------------------------------- stop requests
_stop_signal: int | None = None


def install_stop_handlers() -> None:
    """SIGUSR1 (Slurm's warning before the time limit) and SIGTERM (preemption): finish the step, checkpoint,
    exit with ``EXIT_PREEMPTED``."""
    def request_stop(signum, frame):
        global _stop_signal
        _stop_signal = signum

    for s in (signal.SIGUSR1, signal.SIGTERM):
        signal.signal(s, request_stop)


def stop_requested() -> bool:
    return _stop_signal is not None


class NonFiniteLoss(RuntimeError):
    pass


@dataclass
class TrainState:
    """Where training is; saved in every checkpoint."""
    epoch: int = 0
    batch_in_epoch: int = 0      # micro-batches of ``epoch`` already trained on (the sampler position)
    global_step: int = 0         # optimizer updates so far
    records: int = 0             # lines in metrics.jsonl (a resumed run drops the lines written after the checkpoint)
    best_metric: float | None = None
    best_epoch: int | None = None
    epoch_loss_sum: float = 0.0  # running sums of the current epoch, over all ranks
    epoch_correct: float = 0.0   # (top-1 hits on the augmented training images; hard labels only)
    epoch_images: int = 0
    epoch_time_s: float = 0.0
    train_time_s: float = 0.0    # training wall time of the whole run, resumes included (HO-ResNet Table 4)


# ----------------------------------------------------------------------------------------- backends
class Backend:
    """What the loop needs from an engine; subclasses fill in the engine-specific parts."""
    name = ""
    input_dtype: torch.dtype | None = None  # DeepSpeed bf16/fp16 casts the model, so inputs are cast too

    def __init__(self, precision: str, grad_accum: int):
        self.grad_accum = grad_accum
        self.precision = resolve_precision(precision)
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        self.world_size = dist.get_world_size() if dist.is_initialized() else 1

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

    def agree(self, loss: torch.Tensor, correct: torch.Tensor, *flags: bool) -> tuple:
        """(loss averaged over ranks, ``correct`` summed, flags or-ed); one all-reduce, which also syncs the device."""
        head = torch.stack([loss.detach().double().reshape(()), correct.double().reshape(())])
        if self.world_size == 1:
            loss_value, correct_value = head.tolist()
            return (loss_value, correct_value, *flags)
        tensor = torch.cat([head, torch.tensor([float(f) for f in flags], dtype=torch.float64, device=head.device)])
        dist.all_reduce(tensor)
        values = tensor.tolist()
        return (values[0] / self.world_size, values[1], *(v > 0 for v in values[2:]))

    def broadcast_object(self, obj):
        if self.world_size == 1:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather_object(self, obj) -> list | None:
        """Every rank's ``obj`` on rank 0 (None elsewhere)."""
        if self.world_size == 1:
            return [obj]
        out = [None] * self.world_size if self.is_main else None
        dist.gather_object(obj, out, dst=0)
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


def resolve_precision(precision: str) -> str:
    """``fp32``/``bf16``/``fp16`` as the device allows: fp16 needs CUDA (CPU falls back to bf16)."""
    if precision not in ("fp32", "bf16", "fp16"):
        from harness.config import ConfigError
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

    def __init__(self, precision: str, grad_accum: int, find_unused_parameters: bool = False):
        from accelerate import Accelerator
        from accelerate.utils import DistributedDataParallelKwargs

        precision = resolve_precision(precision)
        self.accelerator = Accelerator(
            cpu=not torch.cuda.is_available(), mixed_precision={"fp32": "no"}.get(precision, precision),
            kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=find_unused_parameters)])
        super().__init__(precision, grad_accum)
        self.device = self.accelerator.device

    def prepare(self, model, optimizer):
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
        return None if norm is None else float(norm)

    def unwrap(self, model):
        return self.accelerator.unwrap_model(model)

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

    def __init__(self, precision: str, grad_accum: int, micro_batch: int, clip_grad: float | None,
                 zero_stage: int = 2, extra_config: dict | None = None):
        import deepspeed
        from deepspeed.utils import logger as ds_logger

        ds_logger.setLevel("WARNING")
        cuda = torch.cuda.is_available()
        deepspeed.init_distributed(dist_backend="nccl" if cuda else "gloo", auto_mpi_discovery=False,
                                   verbose=False)
        super().__init__(precision, grad_accum)
        self.device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
        self.zero_stage = zero_stage
        # bf16: DeepSpeed's torch.autocast mode (fp32 weights, bf16 compute) -- the same numerics as Accelerate's,
        # and BatchNorm models work; DeepSpeed's bf16-weights mode is deepspeed.config=dict(bf16=dict(enabled=True)).
        self.config = _deep_update({
            "train_micro_batch_size_per_gpu": micro_batch,
            "gradient_accumulation_steps": grad_accum,
            "train_batch_size": micro_batch * grad_accum * self.world_size,
            "gradient_clipping": float(clip_grad or 0.0),
            "zero_optimization": {"stage": zero_stage},
            "torch_autocast": {"enabled": self.precision == "bf16", "dtype": "bfloat16"},
            "fp16": {"enabled": self.precision == "fp16"},
            "zero_allow_untested_optimizer": True,  # our optimizer is timm's (a torch optimizer)
            "steps_per_print": 2**31 - 1,
        }, extra_config or {})

    def prepare(self, model, optimizer):
        import deepspeed

        self.engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=self.config)
        dtype = next(self.engine.module.parameters()).dtype  # DeepSpeed's fp16/bf16 modes cast the weights
        self.input_dtype = dtype if dtype in (torch.float16, torch.bfloat16) else None
        return self.engine, optimizer

    def autocast(self):  # for evaluation, which bypasses the engine's forward
        if self.precision == "bf16" and self.input_dtype is None:
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        self.engine.backward(loss)  # DeepSpeed divides by gradient_accumulation_steps itself

    def step(self, model, optimizer, boundary: bool, clip_grad: float | None):
        self.engine.step()  # a no-op between accumulation boundaries
        norm = self.engine.get_global_grad_norm() if boundary and clip_grad else None
        return None if norm is None else float(norm)

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
        """Every rank's ZeRO partition as tensors and plain values (its DeepSpeed objects -- loss scaler, stage
        enum, fragment addresses -- through :func:`harness.checkpoint.to_plain`), gathered on rank 0."""
        from harness.checkpoint import to_plain

        return {"zero_stage": self.zero_stage,
                "partitions": self.gather_object(to_plain(optimizer.state_dict()))}

    def load_optimizer_state(self, optimizer, state) -> None:
        from harness.checkpoint import from_plain
        from harness.errors import DepthbenchError

        if len(state["partitions"]) != self.world_size or state["zero_stage"] != self.zero_stage:
            raise DepthbenchError(f"the checkpoint's DeepSpeed optimizer state is from ZeRO-{state['zero_stage']} on "
                                  f"{len(state['partitions'])} ranks; resume with the same stage and number of "
                                  "processes")
        if self.zero_stage == 0:
            optimizer.load_state_dict(from_plain(state["partitions"][self.rank]))
            return
        partitions = [from_plain(p) for p in state["partitions"]]
        optimizer.load_state_dict(partitions, load_optimizer_states=True, load_from_fp32_weights=True)

    def scaler_state(self):
        return None  # DeepSpeed's loss scaler is part of its optimizer state

    def load_scaler_state(self, state) -> None:
        pass


def _deep_update(base: dict, extra: dict) -> dict:
    for key, value in extra.items():
        base[key] = _deep_update(dict(base.get(key) or {}), value) if isinstance(value, dict) else value
    return base


def build_backend(cfg, micro_batch: int) -> Backend:
    if cfg.engine == "accelerate":
        return AccelerateBackend(cfg.precision, cfg.grad_accum, cfg.find_unused_parameters)
    if cfg.engine == "deepspeed":
        ds = cfg.deepspeed
        return DeepSpeedBackend(cfg.precision, cfg.grad_accum, micro_batch, cfg.clip_grad, ds.zero_stage,
                                ds.get("config"))
    from harness.config import ConfigError
    raise ConfigError(f"engine={cfg.engine!r} is not one of accelerate, deepspeed")


# ----------------------------------------------------------------------------------------- training
def train_one_epoch(objects, loader, backend: Backend, state: TrainState, cfg, log, checkpoint=None) -> str:
    """Train ``state.epoch`` from micro-batch ``state.batch_in_epoch`` to its end.

    ``objects``: the run's :class:`harness.builders.TrainingObjects` (model, optimizer, scheduler, EMA, criterion,
    mixup). The criterion composes the loss (``criterion(images, outputs, targets)``, DeiT-style): the loop does
    not know about teachers or multi-branch outputs. Returns ``"done"``, or ``"preempted"`` right after the
    optimizer step during which a stop was requested. ``checkpoint()`` is called on every rank when a periodic
    checkpoint is due.
    """
    from harness.losses import primary_logits

    model, optimizer, scheduler, ema = objects.model, objects.optimizer, objects.scheduler, objects.ema
    criterion, mixup_fn = objects.criterion, objects.mixup_fn
    model.train()
    total = batches_per_epoch(loader) // cfg.grad_accum * cfg.grad_accum
    if state.batch_in_epoch == 0:
        state.epoch_loss_sum = state.epoch_correct = state.epoch_time_s = 0.0
        state.epoch_images = 0
    set_train_epoch(loader, state.epoch, state.batch_in_epoch)
    scheduler.step(state.epoch)
    scheduler.step_update(num_updates=state.global_step)
    progress = log.progress(total, state.batch_in_epoch, f"epoch {state.epoch}")
    images_per_batch = loader.batch_size * backend.world_size
    window_loss, window_images, window_start = [], 0, time.perf_counter()
    step_start = window_start
    for images, targets in loader:
        if state.batch_in_epoch >= total:
            break
        images = images.to(backend.device, non_blocking=True)
        targets = targets.to(backend.device, non_blocking=True)
        hard_targets = targets
        if mixup_fn is not None:
            images, targets = mixup_fn(images, targets)
        if backend.input_dtype is not None:
            images = images.to(backend.input_dtype)
        boundary = (state.batch_in_epoch + 1) % cfg.grad_accum == 0
        with backend.accumulate(model, boundary):
            with backend.autocast():
                outputs = model(images)
                loss = criterion(images, outputs, targets)
            logits = primary_logits(outputs)
            # per sample: the fraction of its targets hit (1 label for an image, one per position for a sequence)
            correct = ((logits.argmax(dim=-1) == hard_targets).float().reshape(len(hard_targets), -1).mean(1).sum()
                       if mixup_fn is None else loss.new_zeros(()))
            loss_value, correct, stop, save_by_time = backend.agree(loss, correct, stop_requested(),
                                                                    log.checkpoint_due_by_time())
            if not math.isfinite(loss_value):
                raise NonFiniteLoss(f"loss is {loss_value} at epoch {state.epoch}, step {state.global_step + 1}; "
                                    f"stopped before the update, the last checkpoint is the last good state "
                                    f"(lower optim.lr, set clip_grad, or use precision=fp32)")
            backend.backward(loss)
        grad_norm = backend.step(model, optimizer, boundary, cfg.clip_grad)
        state.batch_in_epoch += 1
        now = time.perf_counter()
        state.epoch_loss_sum += loss_value
        state.epoch_correct += correct
        state.epoch_images += images_per_batch
        state.epoch_time_s += now - step_start
        state.train_time_s += now - step_start
        step_start = now
        window_loss.append(loss_value)
        window_images += images_per_batch
        progress.update(1)
        if not boundary:
            continue
        state.global_step += 1
        scheduler.step_update(num_updates=state.global_step)
        if ema is not None:
            ema.update(backend.unwrap(model), step=state.global_step)
        if state.global_step % cfg.log_interval == 0 or state.batch_in_epoch == total or stop:
            elapsed = time.perf_counter() - window_start
            per_batch = elapsed / len(window_loss)
            log.train_step(state, loss=sum(window_loss) / len(window_loss),
                           lr=max(g["lr"] for g in optimizer.param_groups), grad_norm=grad_norm,
                           images_per_s=window_images / elapsed, step_time=per_batch * cfg.grad_accum,
                           peak_mem_mb=peak_memory_mb(), eta_s=per_batch * (total - state.batch_in_epoch))
            window_loss, window_images, window_start = [], 0, time.perf_counter()
        if stop:
            progress.close()
            return "preempted"
        every = cfg.ckpt.interval_steps
        if checkpoint is not None and ((every and state.global_step % every == 0) or save_by_time):
            checkpoint()
    progress.close()
    log.metrics("epoch", train_loss=state.epoch_loss_sum / max(state.batch_in_epoch, 1),
                train_top1=100.0 * state.epoch_correct / max(state.epoch_images, 1) if mixup_fn is None else None,
                images_per_s=state.epoch_images / max(state.epoch_time_s, 1e-9), epoch_time_s=state.epoch_time_s,
                train_time_s=state.train_time_s)
    return "done"


@torch.no_grad()
def evaluate(model, loader, backend: Backend) -> dict:
    """Top-1, top-5 (%) and mean cross-entropy over the whole evaluation set (every target: an image's label,
    or each position of a sequence), summed over ranks."""
    backend.sync_buffers(model)
    model.eval()
    loss_sum = correct1 = correct5 = count = 0.0
    for images, targets in loader:
        images = images.to(backend.device, non_blocking=True)
        targets = targets.to(backend.device, non_blocking=True)
        if backend.input_dtype is not None:
            images = images.to(backend.input_dtype)
        with backend.autocast():
            outputs = model(images)
        # a sequence model's (B, T, V) logits count every position as a sample (language models: tokens)
        outputs, targets = outputs.reshape(-1, outputs.shape[-1]), targets.reshape(-1)
        valid = targets >= 0
        outputs, targets = outputs.float()[valid], targets[valid]
        top = outputs.topk(min(5, outputs.shape[1]), dim=1).indices
        loss_sum += F.cross_entropy(outputs, targets, reduction="sum").item()
        correct1 += (top[:, 0] == targets).sum().item()
        correct5 += (top == targets[:, None]).any(dim=1).sum().item()
        count += len(targets)
    loss_sum, correct1, correct5, count = backend.all_reduce_sum([loss_sum, correct1, correct5, count])
    count = max(count, 1.0)
    return {"top1": 100.0 * correct1 / count, "top5": 100.0 * correct5 / count, "loss": loss_sum / count,
            "images": int(count)}


def peak_memory_mb() -> float:
    """Peak device memory (CUDA) or peak resident memory of this process (CPU), in MiB."""
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ----------------------------------------------------------------------------------------- logging
class RunLog:
    """Rank 0's outputs: metrics.jsonl (+ TensorBoard scalars), log.txt and stdout lines, the progress bar.

    On other ranks every method is a no-op. ``checkpoint_due_by_time`` is rank 0's clock for
    ``ckpt.interval_minutes``; the loop shares its answer with the other ranks.
    """

    def __init__(self, run, state: TrainState, is_main: bool, tensorboard: bool = True,
                 checkpoint_minutes: float | None = None):
        self.run, self.state, self.is_main = run, state, is_main
        self.checkpoint_minutes, self.last_checkpoint = checkpoint_minutes, time.monotonic()
        self.tb = None
        if is_main and tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            # TensorBoard drops older events from this step on: what a killed run logged after its checkpoint
            self.tb = SummaryWriter(str(run.file("tb")), purge_step=state.global_step + 1)

    def metrics(self, kind: str, **values) -> None:
        if not self.is_main:
            return
        self.run.log_metrics(kind=kind, epoch=self.state.epoch, global_step=self.state.global_step, **values)
        self.state.records += 1
        if self.tb is not None:
            for key, value in values.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    self.tb.add_scalar(f"{kind}/{key}", value, self.state.global_step)
            self.tb.flush()

    def train_step(self, state: TrainState, **values) -> None:
        self.metrics("train", **values)
        if self.is_main and not self._bar_visible():
            eta = time.strftime("%H:%M:%S", time.gmtime(values["eta_s"]))
            self.info(f"epoch {state.epoch} step {state.global_step}: loss {values['loss']:.4f} "
                      f"lr {values['lr']:.3g} {values['images_per_s']:.1f} img/s "
                      f"{values['peak_mem_mb']:.0f} MiB, epoch eta {eta}")

    def info(self, text: str) -> None:
        if self.is_main:
            print(text, flush=True)
            self.run.log(text)

    def progress(self, total: int, initial: int, desc: str):
        from tqdm import tqdm

        return tqdm(total=total, initial=initial, desc=desc, unit="batch", leave=False, dynamic_ncols=True,
                    disable=not self._bar_visible())

    def _bar_visible(self) -> bool:
        return self.is_main and sys.stderr.isatty()

    def checkpoint_due_by_time(self) -> bool:
        return bool(self.is_main and self.checkpoint_minutes
                    and time.monotonic() - self.last_checkpoint > 60 * self.checkpoint_minutes)

    def checkpoint_written(self) -> None:
        self.last_checkpoint = time.monotonic()

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
