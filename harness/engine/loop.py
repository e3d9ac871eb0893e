"""The training loop, DeiT's ``engine.py`` shape: :func:`train_one_epoch` (and harness/engine/evaluation.py's
:func:`~harness.engine.evaluation.evaluate`), on a backend
(harness/engine/backends.py: Accelerate or DeepSpeed, one interface), plus the run's log (:class:`RunLog`) and
the stop requests that turn a signal into a checkpoint (preemption).

No step waits on the host between sync points (log steps, periodic checkpoints, an epoch's end): the loss and
hits are summed on the device and read there with one small all-reduce, which also agrees on stopping for a signal
and on checkpointing by time; a non-finite loss or gradient skips its update on the device and stops the run at
the next sync point (docs/training.md, "A step that never waits").
"""

from __future__ import annotations

import math
import resource
import signal
import sys
import time
from dataclasses import dataclass

import torch
from tqdm import tqdm

from harness.engine import switches, watchdog
from harness.engine.backends import Backend
from harness.engine.data import batches_per_epoch, set_train_epoch
from harness.engine.evaluation import primary_logits

# ----------------------------------------------------------------------------------------- stop requests
_stop_signal: int | None = None


def install_stop_handlers(announce: bool = True) -> None:
    """SIGUSR1 (Slurm's warning before the time limit), SIGTERM (preemption) and a first Ctrl-C (SIGINT): finish
    the step, checkpoint, exit with ``EXIT_PREEMPTED`` (the run resumes with ``--resume auto``). A second Ctrl-C
    stops at once (KeyboardInterrupt: no checkpoint beyond the last one)."""

    def request_stop(signum, frame):
        global _stop_signal
        if signum == signal.SIGINT and _stop_signal is not None:
            raise KeyboardInterrupt
        _stop_signal = signum
        if signum == signal.SIGINT and announce:
            print(
                "\ndepthbench: stopping after this step to write a checkpoint (Ctrl-C again to stop at once)",
                file=sys.stderr,
                flush=True,
            )

    for s in (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT):
        signal.signal(s, request_stop)


def stop_requested() -> bool:
    return _stop_signal is not None


class NonFiniteLoss(RuntimeError):
    pass


@dataclass
class TrainState:
    """Where training is; saved in every checkpoint."""

    epoch: int = 0
    batch_in_epoch: int = 0  # micro-batches of ``epoch`` already trained on (the sampler position)
    global_step: int = 0  # optimizer updates so far
    records: int = 0  # lines in metrics.jsonl (a resumed run drops the lines written after the checkpoint)
    best_metric: float | None = None
    best_epoch: int | None = None
    epoch_loss_sum: float = 0.0  # running sums of the current epoch, over all ranks
    epoch_correct: float = 0.0  # (top-1 hits on the augmented training images; hard labels only)
    epoch_images: int = 0
    epoch_time_s: float = 0.0
    train_time_s: float = 0.0  # training wall time of the whole run, resumes included (HO-ResNet Table 4)


# ----------------------------------------------------------------------------------------- training
class StepTotals:
    """What the loop sums between two sync points, on the device: no host read and no collective per step.

    Per rank: the loss sum, the top-1 hits, the updates the non-finite guard skipped, and where the first
    non-finite loss was (its step and value). :meth:`read` adds the host flags (stop request, checkpoint due by
    time), all-reduces the vector once and reads it once (``Backend.reduce_and_read``); the sums restart at zero.
    """

    SLOTS = ("loss_sum", "correct", "skipped", "bad_ranks", "bad_step_sum", "bad_loss_sum", "stop", "save_by_time")

    def __init__(self, device):
        self.sums = torch.zeros(len(self.SLOTS), dtype=torch.float64, device=device)
        self.bad_seen = torch.zeros((), dtype=torch.bool, device=device)

    def add(self, loss: torch.Tensor, correct: torch.Tensor, step: int) -> None:
        loss = loss.detach().double().reshape(())
        first_bad = ~torch.isfinite(loss) & ~self.bad_seen
        self.bad_seen |= first_bad
        self.sums[:6] += torch.stack(
            [
                loss,
                correct.double().reshape(()),
                loss.new_zeros(()),
                first_bad.double(),
                first_bad.double() * step,
                torch.where(first_bad, loss, 0.0),
            ]
        )

    def add_skipped(self, skipped: torch.Tensor) -> None:
        self.sums[2] += skipped

    def read(self, backend: Backend, *flags: bool) -> dict:
        for slot, flag in enumerate(flags, start=6):  # a kernel with a scalar argument each: a tensor made from the
            self.sums[slot].fill_(float(flag))  # flags would be a blocking host-to-device copy on CUDA
        values = dict(zip(self.SLOTS, backend.reduce_and_read(self.sums)))
        self.sums.zero_()
        return values


def poisoned_if_non_finite(loss: torch.Tensor) -> torch.Tensor:
    """``loss`` itself, or, when it is NaN/inf, a loss whose backward makes *every* gradient NaN (times NaN, not
    times 1): the gradient all-reduce then carries the non-finite loss of any rank to every rank's gradients, where
    the optimizer's guard (``harness.engine.backends.NonFiniteGuard``) finds it and skips the update on every
    rank alike -- with no host read and no extra collective. ``x * 1.0`` is exact: finite steps are unchanged."""
    return loss * torch.where(torch.isfinite(loss.detach()), 1.0, float("nan")).to(loss.dtype)


def train_one_epoch(objects, loader, backend: Backend, state: TrainState, cfg, log, checkpoint=None) -> str:
    """Train ``state.epoch`` from micro-batch ``state.batch_in_epoch`` to its end.

    ``objects``: the run's :class:`harness.builders.TrainingObjects` (model, optimizer, scheduler, EMA, criterion,
    mixup). The criterion composes the loss (``criterion(images, outputs, targets)``, DeiT-style): the loop does
    not know about teachers or multi-branch outputs. Returns ``"done"``, or ``"preempted"`` at the first sync
    point after a stop was requested. ``checkpoint()`` is called on every rank when a periodic checkpoint is due.

    Between sync points -- every ``log_interval`` updates, a periodic checkpoint and the epoch's end -- a step
    queues its work and never waits for the device: the loss, hits and skipped updates are summed on the device
    (:class:`StepTotals`) and read with one all-reduce at the sync point, where the stop request and the
    checkpoint-by-time flag are agreed too (at most ``log_interval`` updates late). A non-finite loss or gradient
    is never applied (the optimizer's guard skips the update on the device); the run stops at the next sync
    point, before any checkpoint, so ``last.pth`` stays the last good state.
    """
    model, optimizer, scheduler, ema = objects.model, objects.optimizer, objects.scheduler, objects.ema
    criterion, mixup_fn = objects.criterion, objects.mixup_fn
    guard = backend.non_finite_guard
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
    totals = StepTotals(backend.device)
    window_loss, window_batches, window_start = 0.0, 0, time.perf_counter()
    step_start = window_start
    grad_norm = None
    for images, targets in loader:
        if state.batch_in_epoch >= total:
            break
        backend.step_begin()
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
            correct = (
                (logits.argmax(dim=-1) == hard_targets).float().reshape(len(hard_targets), -1).mean(1).sum()
                if mixup_fn is None
                else loss.new_zeros(())
            )
            totals.add(loss, correct, state.global_step + 1)
            backend.backward(poisoned_if_non_finite(loss))
        norm = backend.step(model, optimizer, boundary, cfg.clip_grad)
        grad_norm = norm if norm is not None else grad_norm
        state.batch_in_epoch += 1
        now = time.perf_counter()
        state.epoch_images += images_per_batch
        state.epoch_time_s += now - step_start
        state.train_time_s += now - step_start
        step_start = now
        window_batches += 1
        progress.update(1)
        if not boundary:
            continue
        state.global_step += 1
        totals.add_skipped(guard.take_skipped())
        watchdog.beat(state.global_step)  # a clock read: the hang watchdog's heartbeat (no device sync)
        switches.after_step(state.global_step)  # test switches (config section testing): off unless set
        scheduler.step_update(num_updates=state.global_step)
        if ema is not None:
            ema.update(backend.unwrap(model), step=state.global_step)
        # ---- one optimizer update ends here; below: only what happens at a sync point
        every = cfg.ckpt.interval_steps
        log_due = state.global_step % cfg.log_interval == 0 or state.batch_in_epoch == total
        checkpoint_due = checkpoint is not None and bool(every) and state.global_step % every == 0
        if not (log_due or checkpoint_due):
            continue
        read = totals.read(backend, stop_requested(), log.checkpoint_due_by_time())
        read["skipped"] = updates_skipped(read["skipped"], backend.world_size)
        check_finite(read, state)
        state.epoch_loss_sum += read["loss_sum"] / backend.world_size
        state.epoch_correct += read["correct"]
        window_loss += read["loss_sum"] / backend.world_size
        stop = read["stop"] > 0
        if log_due or stop:
            elapsed = time.perf_counter() - window_start
            per_batch = elapsed / window_batches
            log.train_step(
                state,
                loss=window_loss / window_batches,
                lr=max(g["lr"] for g in optimizer.param_groups),
                grad_norm=None if grad_norm is None else float(grad_norm),
                images_per_s=window_batches * images_per_batch / elapsed,
                step_time=per_batch * cfg.grad_accum,
                peak_mem_mb=peak_memory_mb(),
                eta_s=per_batch * (total - state.batch_in_epoch),
            )
            window_loss, window_batches, window_start = 0.0, 0, time.perf_counter()
        if stop:
            progress.close()
            return "preempted"
        if checkpoint_due or (checkpoint is not None and read["save_by_time"] > 0):
            checkpoint()
    progress.close()
    log.metrics(
        "epoch",
        train_loss=state.epoch_loss_sum / max(state.batch_in_epoch, 1),
        train_top1=100.0 * state.epoch_correct / max(state.epoch_images, 1) if mixup_fn is None else None,
        images_per_s=state.epoch_images / max(state.epoch_time_s, 1e-9),
        epoch_time_s=state.epoch_time_s,
        train_time_s=state.train_time_s,
    )
    return "done"


def updates_skipped(summed: float, world_size: int) -> int:
    """The updates the guard skipped, from its count summed over ranks: under DDP and ZeRO-0 every rank skips
    alike, but under ZeRO 1-3 only the ranks whose gradient shard holds the non-finite value do (one at least):
    rounded up, so a skip never reads as 0."""
    return math.ceil(summed / world_size)


def check_finite(read: dict, state: TrainState) -> None:
    """Stop (NonFiniteLoss) at the sync point after a non-finite loss or a skipped update: every rank reads the
    same reduced values, so every rank stops; no checkpoint is written after it."""
    if not (read["skipped"] or read["bad_ranks"]):
        return
    if read["bad_ranks"]:
        where = (
            f"loss is {read['bad_loss_sum']} at epoch {state.epoch}, "
            f"step {round(read['bad_step_sum'] / read['bad_ranks'])}"
        )
    else:
        where = f"a gradient is non-finite at epoch {state.epoch}, by step {state.global_step}"
    raise NonFiniteLoss(
        f"{where}; {read['skipped']:.0f} update(s) skipped by step "
        f"{state.global_step} and the run stopped: the last checkpoint is the last good state "
        f"(lower optim.lr, set clip_grad, or use precision=fp32)"
    )


def peak_memory_mb() -> float:
    """Peak device memory (CUDA) or peak resident memory of this process (CPU), in MiB."""
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ----------------------------------------------------------------------------------------- logging
def duration(seconds: float) -> str:
    """``HH:MM:SS``, with days in front past 24 hours (``3d 04:05:06``)."""
    seconds = max(int(seconds), 0)
    days, rest = divmod(seconds, 86400)
    clock = time.strftime("%H:%M:%S", time.gmtime(rest))
    return f"{days}d {clock}" if days else clock


class _RunBar(tqdm):
    """tqdm's bar of one epoch plus ``run ETA`` in its postfix: the epoch's remaining batches and ``later``
    batches of the epochs after it, at the bar's smoothed rate."""

    def __init__(self, *args, later: int | None = None, **kwargs):
        self.later = later
        super().__init__(*args, **kwargs)

    def update(self, n=1):
        shown = super().update(n)
        rate = self.format_dict.get("rate") if not self.disable and self.later is not None else None
        if rate:
            self.set_postfix_str(f"run ETA {duration((self.total - self.n + self.later) / rate)}", refresh=False)
        return shown


class RunLog:
    """Rank 0's outputs: metrics.jsonl (+ TensorBoard scalars), log.txt and stdout lines, the progress bar.

    On other ranks every method is a no-op. ``checkpoint_due_by_time`` is rank 0's clock for
    ``ckpt.interval_minutes``; the loop shares its answer with the other ranks.
    """

    def __init__(
        self,
        run,
        state: TrainState,
        is_main: bool,
        tensorboard: bool = True,
        checkpoint_minutes: float | None = None,
        unit: str = "img",
        epochs: int | None = None,
        steps_per_epoch: int = 0,
    ):
        self.run, self.state, self.is_main = run, state, is_main
        self.unit = unit  # what a sample is (harness.engine.tasks.Task.unit): "img", "seq"
        self.epochs, self.steps_per_epoch = epochs, steps_per_epoch  # for the ETA of the whole run
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
            later = self.steps_per_epoch * max(self.epochs - state.epoch - 1, 0) if self.epochs else None
            run_eta = (
                f", run eta {duration(values['eta_s'] + later * values['step_time'])}" if later is not None else ""
            )
            self.info(
                f"epoch {state.epoch} step {state.global_step}: loss {values['loss']:.4f} "
                f"lr {values['lr']:.3g} {values['images_per_s']:.1f} {self.unit}/s "
                f"{values['peak_mem_mb']:.0f} MiB, epoch eta {duration(values['eta_s'])}{run_eta}"
            )

    def info(self, text: str) -> None:
        if self.is_main:
            print(text, flush=True)
            self.run.log(text)

    def progress(self, total: int, initial: int, desc: str):
        """The epoch's bar (tqdm: its own ETA is the epoch's), with the whole run's ETA after it."""
        later = total * max(self.epochs - self.state.epoch - 1, 0) if self.epochs else None
        return _RunBar(
            total=total,
            initial=initial,
            desc=desc,
            unit="batch",
            leave=False,
            dynamic_ncols=True,
            disable=not self._bar_visible(),
            later=later,
        )

    def _bar_visible(self) -> bool:
        return self.is_main and sys.stderr.isatty()

    def checkpoint_due_by_time(self) -> bool:
        return bool(
            self.is_main
            and self.checkpoint_minutes
            and time.monotonic() - self.last_checkpoint > 60 * self.checkpoint_minutes
        )

    def checkpoint_written(self) -> None:
        self.last_checkpoint = time.monotonic()

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
