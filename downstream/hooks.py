"""``RunDirHook``: MMEngine runs write depthbench's run-directory contract (harness/core/rundir.py) beside MMEngine's logs.

Any Runner with ``custom_hooks=[dict(type='RunDirHook')]`` (the embedded presets and ``depthbench finetune``
add it) writes into its ``work_dir``:

- ``meta.json``: status ``running`` -> ``done`` (``failed``/``preempted`` are set by ``depthbench finetune``, or by
  the hook itself when it stops a run on a signal), engine ``mmengine``, world size, hosts, git commit, package
  versions, and ``resumes``;
- ``metrics.jsonl``: ``{"kind": "train", "epoch", "global_step", "loss", "loss_rpn_cls", ..., "lr"}`` every
  ``interval`` iterations and ``{"kind": "eval", "epoch", "global_step", "coco/bbox_mAP", ..., "mIoU", ...}``
  after every validation (``"kind": "test"`` for ``Runner.test()``), with MMEngine's metric names;
- ``config.py`` (the resolved config, for people), ``config.json`` (the same as data, for programs: nothing
  executes a run's config.py) and ``last.pth`` (a link to MMEngine's newest checkpoint).

The run directory is created or opened through :class:`harness.core.rundir.RunDir`, so the main process holds its
lock (one writer) until the run ends. On SIGUSR1/SIGTERM (Slurm's time-limit warning, preemption) or a first Ctrl-C
while training, the run finishes its iteration, saves a checkpoint, marks itself ``preempted`` and stops with
:class:`Preempted`; ``--resume auto`` continues it (a second Ctrl-C stops at once). Written as a hook (not in
``depthbench finetune``) so stock ``tools/train.py`` runs honour the same contract.

:class:`ConsoleHook` is what ``depthbench finetune``/``test`` show instead of MMEngine's console log: a progress bar
with ETA, loss and learning rate (one line per logger interval when stderr is not a terminal), and each
evaluation's metrics in one line. :class:`LogWriter` takes what libraries print (pycocotools) into the log file.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import stat
import sys
import threading
import time
from pathlib import Path

import torch
from mmengine.device import get_device
from mmengine.dist import all_reduce, all_gather_object, get_world_size, is_main_process
from mmengine.hooks import Hook
from mmengine.registry import HOOKS
from tqdm import tqdm

from harness.core.files import BadFile, atomic_symlink, atomic_write, is_regular, printable, read_text
from harness.core.rundir import RunDir, now, read_metrics


def guard_work_dir(work_dir, remove: bool = False) -> None:
    """MMEngine's hooks write into the work dir with plain ``open``/``torch.save``, which follow links: a planted
    ``iter_N.pth``, ``epoch_N.pth``, ``last_checkpoint``, log folder or ``vis_data`` link would have a checkpoint or
    log written over its target. Before they run, every entry of the work dir (and of its log folders) must be a
    regular file or a folder, not a link or a FIFO -- the one link allowed is depthbench's own ``last.pth``, naming
    a file beside it. ``remove=False`` (before the run): a planted entry is one line, nothing is written;
    ``remove=True`` (before each checkpoint save, mid-run): the planted link itself is removed (never its target)
    so the save writes a new file, with a warning."""
    root = Path(work_dir)
    if not root.is_dir():
        return
    for folder, dirs, files in os.walk(root):  # never descends into a linked folder
        for name in dirs + files:
            path = Path(folder, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
                continue
            if name.startswith(".") and ".tmp-" in name:  # a killed writer's temporary (atomic_symlink's)
                os.unlink(path)
                continue
            if path == root / "last.pth" and stat.S_ISLNK(mode) and "/" not in os.readlink(path):
                continue  # ours: last.pth -> iter_N.pth beside it
            what = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
            if not remove:
                raise BadFile(
                    f"{path} in the work dir is {what}; MMEngine would write through it. Remove it, or "
                    f"give another --work-dir"
                )
            print(
                f"depthbench: warning: removed {printable(path)} ({what}) from the work dir before a checkpoint write",
                file=sys.stderr,
            )
            os.unlink(path)  # the link itself, never its target


class Preempted(RuntimeError):
    """Raised by :class:`RunDirHook` after it checkpointed a run that was asked to stop."""


_stop_signal = None
_previous_handlers: dict = {}  # signal -> the handler before RunDirHook's (restored when the run ends)


def _request_stop(signum, frame):
    """SIGUSR1/SIGTERM or a first Ctrl-C: checkpoint after this iteration and stop; a second Ctrl-C: stop now."""
    global _stop_signal
    if signum == signal.SIGINT and _stop_signal is not None:
        raise KeyboardInterrupt
    _stop_signal = signum
    if signum == signal.SIGINT and is_main_process():
        print(
            "\ndepthbench: stopping after this iteration to write a checkpoint (Ctrl-C again to stop at once)",
            file=sys.stderr,
            flush=True,
        )


def _install(signals) -> None:
    if not _is_main_thread():
        return
    for s in signals:
        previous = signal.signal(s, _request_stop)
        _previous_handlers.setdefault(s, previous)


def restore_stop_handlers() -> None:
    """The signal handlers from before the run (``depthbench finetune`` calls it however the run ended)."""
    if _is_main_thread():
        for s, handler in _previous_handlers.items():
            signal.signal(s, handler)
    _previous_handlers.clear()


@HOOKS.register_module()
class RunDirHook(Hook):
    """See the module docstring. ``interval``: iterations between train records (default: the LoggerHook's);
    ``meta``: extra meta.json fields (``depthbench finetune`` passes the command and config file)."""

    priority = "VERY_LOW"  # after the CheckpointHook and the evaluators have run

    def __init__(self, interval: int | None = None, meta: dict | None = None):
        self.interval = interval
        self.extra_meta = dict(meta or {})
        self.run = None

    # ------------------------------------------------------------------------------------------ lifecycle
    def before_run(self, runner) -> None:
        if self.interval is None:
            self.interval = int((runner.cfg.get("default_hooks") or {}).get("logger", {}).get("interval", 50))
        hosts = all_gather_object(socket.gethostname()) if get_world_size() > 1 else [socket.gethostname()]
        path = Path(runner.work_dir)
        writer = is_main_process()
        fields = dict(engine="mmengine", world_size=get_world_size(), hosts=sorted(set(hosts)), **self.extra_meta)
        scale = runner.cfg.get("scale")
        if scale:
            fields["scale"] = scale
        if writer:
            guard_work_dir(path)
        if os.path.lexists(path / "meta.json"):  # RunDir.open names one that is a link or a FIFO
            self.run = RunDir.open(path, writer=writer)
            self.run.update_meta(status="running", **fields)
        else:
            experiment = runner.cfg.get("experiment") or Path(runner.cfg.filename or "run").stem
            self.run = RunDir.create(experiment, path=path, writer=writer, **fields)
        self.run.write_config(runner.cfg.pretty_text, runner.cfg.to_dict())
        global _stop_signal
        _stop_signal = None
        _install((signal.SIGUSR1, signal.SIGTERM))

    def before_save_checkpoint(self, runner, checkpoint) -> None:
        """Every save (the CheckpointHook's and the preemption save) finds no planted link to write through."""
        if is_main_process():
            guard_work_dir(runner.work_dir, remove=True)

    def before_train(self, runner) -> None:
        """After MMEngine's resume: drop records a killed run logged after its checkpoint, note the resume. From
        here a Ctrl-C stops the preemption way (while testing it stays an immediate stop)."""
        _install((signal.SIGINT,))
        if runner.iter == 0 or not self.run.writer:
            return
        metrics = self.run.file("metrics.jsonl")
        if metrics.exists():
            kept = [r for r in read_metrics(metrics) if r.get("global_step", 0) <= runner.iter]
            atomic_write(metrics, "".join(json.dumps(r) + "\n" for r in kept))
        resumes = self.run.meta().get("resumes", [])
        self.run.update_meta(resumes=resumes + [dict(time=now(), epoch=runner.epoch, global_step=runner.iter)])

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        step = runner.iter + 1  # MMEngine counts the iteration after this hook
        if outputs and (step % self.interval == 0 or step == runner.max_iters):
            values = {k: float(v.detach() if hasattr(v, "detach") else v) for k, v in outputs.items()}
            lrs = runner.optim_wrapper.get_lr()
            values["lr"] = float(lrs["lr"][0]) if "lr" in lrs else float(next(iter(lrs.values()))[0])
            self.run.log_metrics(kind="train", epoch=runner.epoch, global_step=step, **values)
        if is_main_process():  # the CheckpointHook (same priority, registered earlier) has saved by now
            self._link_last(runner)
        if self._stop_agreed():
            filename = f"iter_{step}.pth"
            # by_epoch=False: the checkpoint records iteration `step` (MMEngine's default, by epoch, would record the
            # iteration before it and the next epoch, so a resume would repeat an iteration)
            runner.save_checkpoint(
                runner.work_dir, filename, save_optimizer=True, save_param_scheduler=True, by_epoch=False
            )
            if is_main_process():
                atomic_write(Path(runner.work_dir, "last_checkpoint"), str(Path(runner.work_dir, filename)))
                self._link_last(runner)
            self.run.finish("preempted", global_step=step)
            self.restore_signal_handlers()
            config = runner.cfg.filename or "CONFIG"
            raise Preempted(
                f"stopped by a signal after iteration {step}; checkpoint {filename}; continue with: "
                f"depthbench finetune {config} --work-dir {runner.work_dir} --resume auto "
                f"(and the same key=value overrides)"
            )

    def after_val_epoch(self, runner, metrics=None) -> None:
        if metrics:
            self.run.log_metrics(kind="eval", epoch=runner.epoch, global_step=runner.iter, **numeric_metrics(metrics))

    def after_test_epoch(self, runner, metrics=None) -> None:
        if metrics:
            self.run.log_metrics(kind="test", **numeric_metrics(metrics))

    def after_train_epoch(self, runner) -> None:
        if is_main_process():  # the CheckpointHook (same priority, registered earlier) has saved by now
            self._link_last(runner)

    def after_run(self, runner) -> None:
        if is_main_process():
            self._link_last(runner)
        self.run.finish("done", global_step=runner.iter)
        self.restore_signal_handlers()

    def restore_signal_handlers(self) -> None:
        restore_stop_handlers()

    # ------------------------------------------------------------------------------------------ helpers
    @staticmethod
    def _link_last(runner) -> None:
        """``last.pth`` -> the checkpoint named in MMEngine's ``last_checkpoint`` file."""
        work_dir = Path(runner.work_dir)
        try:
            named = read_text(work_dir / "last_checkpoint", inside=work_dir, max_bytes=4096).strip()
        except (OSError, BadFile):
            return
        target, link = work_dir / Path(named).name, work_dir / "last.pth"
        if not is_regular(target, inside=work_dir) or (link.is_symlink() and os.readlink(link) == target.name):
            return
        atomic_symlink(link, target.name)

    @staticmethod
    def _stop_agreed() -> bool:
        """Whether any process got a stop signal; all processes agree, so they checkpoint at the same step."""
        if get_world_size() == 1:
            return _stop_signal is not None

        flag = torch.tensor([1.0 if _stop_signal is not None else 0.0], device=get_device())
        all_reduce(flag)
        return bool(flag.item() > 0)


def numeric_metrics(metrics: dict) -> dict:
    """The metrics that are numbers, as floats (mmseg's are numpy scalars; mmdet adds strings such as
    ``coco/bbox_mAP_copypaste``)."""
    numbers = {}
    for key, value in metrics.items():
        try:
            numbers[key] = float(value)
        except (TypeError, ValueError):
            pass
    return numbers


def _is_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@HOOKS.register_module()
class ConsoleHook(Hook):
    """The console of ``depthbench finetune``/``test`` (see the module docstring); the main process only.
    ``stream``: where the evaluation lines go (``depthbench test`` keeps stdout for its metrics)."""

    priority = "LOWEST"

    def __init__(self, interval: int | None = None, stream=None):
        self.interval = interval
        self.stream = stream if stream is not None else sys.stdout
        self.bar = self.eval_bar = None
        self.show = is_main_process()
        self.tty = sys.stderr.isatty()

    def _say(self, text: str) -> None:
        if self.show:
            tqdm.write(text, file=self.stream)
            self.stream.flush()

    # ------------------------------------------------------------------------------------------ training
    def before_train(self, runner) -> None:
        if self.interval is None:
            self.interval = int((runner.cfg.get("default_hooks") or {}).get("logger", {}).get("interval", 50))
        self.start, self.first = time.monotonic(), runner.iter
        if self.show and self.tty:
            self.bar = tqdm(
                total=runner.max_iters,
                initial=runner.iter,
                desc="train",
                unit="it",
                dynamic_ncols=True,
                file=sys.stderr,
                leave=False,
            )

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        step = runner.iter + 1  # MMEngine counts the iteration after this hook
        values = {
            k: float(v.detach() if hasattr(v, "detach") else v)
            for k, v in (outputs or {}).items()
            if k == "loss" or k.startswith("loss")
        }
        lrs = runner.optim_wrapper.get_lr()
        lr = float((lrs.get("lr") or next(iter(lrs.values())))[0])
        summary = f"loss {values['loss']:.4f} lr {lr:.3g}" if "loss" in values else f"lr {lr:.3g}"
        if self.bar is not None:
            self.bar.set_postfix_str(summary, refresh=False)
            self.bar.update(1)
        elif self.show and (step % self.interval == 0 or step == runner.max_iters):
            done, left = step - self.first, runner.max_iters - step
            eta = time.strftime("%H:%M:%S", time.gmtime((time.monotonic() - self.start) / max(done, 1) * left))
            self._say(f"iter {step}/{runner.max_iters}: {summary}, eta {eta}")

    def after_train(self, runner) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    # ------------------------------------------------------------------------------------------ evaluation
    def before_val_epoch(self, runner) -> None:
        self._start_eval(runner, "val", runner.val_dataloader)

    def before_test_epoch(self, runner) -> None:
        self._start_eval(runner, "test", runner.test_dataloader)

    def after_val_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        if self.eval_bar is not None:
            self.eval_bar.update(1)

    after_test_iter = after_val_iter

    def after_val_epoch(self, runner, metrics=None) -> None:
        self._end_eval()
        if metrics:  # validation during training
            self._say(f"iter {runner.iter}: " + "  ".join(f"{k} {v:.4f}" for k, v in numeric_metrics(metrics).items()))

    def after_test_epoch(self, runner, metrics=None) -> None:
        self._end_eval()

    def _start_eval(self, runner, desc: str, loader) -> None:
        if self.show and self.tty:
            self.eval_bar = tqdm(
                total=len(loader), desc=desc, unit="batch", dynamic_ncols=True, file=sys.stderr, leave=False
            )

    def _end_eval(self) -> None:
        if self.eval_bar is not None:
            self.eval_bar.close()
            self.eval_bar = None

    def after_run(self, runner) -> None:
        self.close()

    def close(self) -> None:
        """Bars closed, also when the run ended with an exception (no after_run then)."""
        self._end_eval()
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class LogWriter(io.TextIOBase):
    """A text stream whose lines go to the MMEngine logger (its file; the console handler lets errors only)."""

    def __init__(self, logger):
        self.logger, self.pending = logger, ""

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            if line.strip():
                self.logger.info(line)
        return len(text)
