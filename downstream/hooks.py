"""``RunDirHook``: MMEngine runs write depthbench's run-directory contract (harness/rundir.py) beside MMEngine's logs.

Any Runner with ``custom_hooks=[dict(type='RunDirHook')]`` (the embedded presets and ``depthbench finetune``
add it) writes into its ``work_dir``:

- ``meta.json``: status ``running`` -> ``done`` (``failed``/``preempted`` are set by ``depthbench finetune``, or by
  the hook itself when it stops a run on a signal), engine ``mmengine``, world size, hosts, git commit, package
  versions, and ``resumes``;
- ``metrics.jsonl``: ``{"kind": "train", "epoch", "global_step", "loss", "loss_rpn_cls", ..., "lr"}`` every
  ``interval`` iterations and ``{"kind": "eval", "epoch", "global_step", "coco/bbox_mAP", ..., "mIoU", ...}``
  after every validation (``"kind": "test"`` for ``Runner.test()``), with MMEngine's metric names;
- ``config.py`` (the resolved config) and ``last.pth`` (a link to MMEngine's newest checkpoint).

On SIGUSR1/SIGTERM (Slurm's time-limit warning, preemption) the run finishes its iteration, saves a checkpoint,
marks itself ``preempted`` and stops with :class:`Preempted`; ``--resume auto`` continues it. Written as a
hook (not in ``depthbench finetune``) so stock ``tools/train.py`` runs honour the same contract.
"""
from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

from mmengine.dist import all_reduce, all_gather_object, get_world_size, is_main_process
from mmengine.hooks import Hook
from mmengine.registry import HOOKS

from harness.rundir import RunDir, now, read_metrics


class Preempted(RuntimeError):
    """Raised by :class:`RunDirHook` after it checkpointed a run that was asked to stop."""


_stop_signal = None


def _request_stop(signum, frame):
    global _stop_signal
    _stop_signal = signum


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
        if (path / "meta.json").is_file():
            self.run = RunDir.open(path, writer=writer)
            self.run.update_meta(status="running", **fields)
        else:
            experiment = runner.cfg.get("experiment") or Path(runner.cfg.filename or "run").stem
            self.run = RunDir.create(experiment, path=path, writer=writer, **fields)
        self.run.write_config(runner.cfg.pretty_text)
        global _stop_signal
        _stop_signal = None
        self._previous_handlers = {}
        if _is_main_thread():
            for s in (signal.SIGUSR1, signal.SIGTERM):
                self._previous_handlers[s] = signal.signal(s, _request_stop)

    def before_train(self, runner) -> None:
        """After MMEngine's resume: drop records a killed run logged after its checkpoint, note the resume."""
        if runner.iter == 0 or not self.run.writer:
            return
        metrics = self.run.file("metrics.jsonl")
        if metrics.exists():
            from harness.rundir import atomic_write
            import json

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
            runner.save_checkpoint(runner.work_dir, filename, save_optimizer=True, save_param_scheduler=True)
            if is_main_process():
                Path(runner.work_dir, "last_checkpoint").write_text(str(Path(runner.work_dir, filename)))
                self._link_last(runner)
            self.run.finish("preempted", global_step=step)
            self.restore_signal_handlers()
            raise Preempted(f"stopped by a signal after iteration {step}; checkpoint {filename}; continue with "
                            f"--resume auto --work-dir {runner.work_dir}")

    def after_val_epoch(self, runner, metrics=None) -> None:
        if metrics:
            self.run.log_metrics(kind="eval", epoch=runner.epoch, global_step=runner.iter,
                                 **numeric_metrics(metrics))

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
        for s, handler in getattr(self, "_previous_handlers", {}).items():
            signal.signal(s, handler)
        self._previous_handlers = {}

    # ------------------------------------------------------------------------------------------ helpers
    @staticmethod
    def _link_last(runner) -> None:
        """``last.pth`` -> the checkpoint named in MMEngine's ``last_checkpoint`` file."""
        work_dir = Path(runner.work_dir)
        marker = work_dir / "last_checkpoint"
        if not marker.exists():
            return
        target = Path(marker.read_text().strip())
        link = work_dir / "last.pth"
        if not target.is_file() or (link.is_symlink() and os.readlink(link) == target.name):
            return
        tmp = work_dir / f".last.pth.tmp-{os.getpid()}"
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        tmp.symlink_to(target.name)
        os.replace(tmp, link)

    @staticmethod
    def _stop_agreed() -> bool:
        """Whether any process got a stop signal; all processes agree, so they checkpoint at the same step."""
        if get_world_size() == 1:
            return _stop_signal is not None
        import torch
        from mmengine.device import get_device

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
    import threading

    return threading.current_thread() is threading.main_thread()
