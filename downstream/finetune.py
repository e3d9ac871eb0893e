"""The MMEngine side of ``depthbench finetune`` and ``depthbench test`` (harness/commands/finetune.py):
detection/segmentation with the stock MMEngine Runner.

CONFIG is an MMDetection 3 / MMSegmentation 1 config (configs/det, configs/seg). The Runner is MMEngine's own
(``DepthbenchRunner``, downstream/mmengine_compat.py), so its logs, checkpoints (``iter_N.pth``) and
``last_checkpoint`` are MMEngine's; ``RunDirHook`` (downstream/hooks.py) adds depthbench's run-directory contract.
``key=value`` overrides use harness/core/config.py's language; ``data_root=DIR`` moves every path of the config that
was under its data root (datasets and evaluator annotation files) to DIR. ``embedded://<set>/`` roots are
generated on first use (downstream/embedded.py).

Everything that can be wrong with the inputs -- config, work directory, model/backbone names, dataset folders and
annotation files, ``load_from``/resume/backbone checkpoints that fit nothing or pickle more than weights -- is
checked before anything is written (:func:`prepare_finetune`, :func:`evaluate`): the model is built and its
weights initialised once on the CPU for that. Every checkpoint is read weights-only with MMEngine's allow-list
(downstream/mmengine_compat.py), wherever it lies. A run directory has one writer: the main process locks it
(harness/core/rundir.py) before the Runner writes into it. A shorter or longer run (``train_cfg.max_iters=``)
brings its schedule along (:func:`rescale_schedule`). The console shows a header and a progress bar
(``ConsoleHook``); MMEngine's log goes to the run's log file. Under torchrun/srun (or the command's ``--nproc``)
each process finds its rank in the environment (harness/engine/launch.py) and joins MMEngine's ``pytorch``
launcher (:func:`setup_distributed`).
:func:`finetune_process` returns the exit code: 0 done, 75 preempted (SIGUSR1, SIGTERM or a first Ctrl-C; continue
with ``--resume auto``); a failure raises. See docs/downstream.md.
"""

from __future__ import annotations

import copy
import logging
import os
import sys
import warnings
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
from mmengine.dist import is_main_process
from mmengine.logging import MMLogger
from mmengine.registry import MODELS, RUNNERS

import downstream  # noqa: F401  (registers the runner, hook, datasets, backbone)
from downstream.embedded import resolve_embedded_roots
from downstream.hooks import ConsoleHook, LogWriter, Preempted, numeric_metrics, restore_stop_handlers
from downstream.mmengine_compat import checkpoint_in_work_dir, quiet_console, safe_globals, use_default_scope
from harness.core.config import apply_overrides, load_config, parse_override
from harness.core.errors import EXIT_PREEMPTED, DepthbenchError
from harness.core.files import read_json, unwritable_folder
from harness.core.rundir import (
    RunDir,
    checkpoint_run,
    lock_run_dir,
    new_run_path,
    read_metrics,
    runs_root,
    run_dir_in_use,
    unlock_run_dir,
)
from harness.core.schema import check_values
from harness.engine.checkpoint import (
    DEEPSPEED_STATE_CLASSES,
    SAFE_GLOBALS,
    extract_weights,
    latest_run,
    read_checkpoint,
)
from harness.engine.launch import distributed_env, export_distributed_env, launched
from harness.engine.runner import check_work_dir as check_run_work_dir
from harness.engine.schedule import rescale_schedule

TASKS = {"mmdet": "detection", "mmseg": "segmentation"}


# ----------------------------------------------------------------------------------------- config
def load_downstream_config(path, overrides=(), changes: list | None = None):
    """The config with overrides, the depthbench runner/hook/imports, and embedded data roots resolved. An
    override of the run's length (``train_cfg.max_iters``/``max_epochs``) rescales the schedule
    (:func:`rescale_schedule`); what changed is appended to ``changes`` when a list is given."""
    cfg = load_config(path)
    if cfg.get("default_scope") not in TASKS:
        raise DepthbenchError(
            f"{path} is not an MMDetection/MMSegmentation config (default_scope is "
            f"{cfg.get('default_scope')!r}); `depthbench train` runs classification recipes"
        )
    old_root = cfg.get("data_root")
    planned = copy.deepcopy(cfg.get("train_cfg") or {})
    apply_overrides(cfg, overrides)
    check_values(cfg)  # train_cfg.max_iters, the loaders' batch and workers, the seed: in range before any work
    if old_root and cfg.get("data_root") != old_root:
        retarget_data_root(cfg, old_root, cfg.data_root)
    explicit = tuple(parse_override(o)[0] for o in overrides)
    done = rescale_schedule(cfg, planned, explicit)
    if changes is not None:
        changes.extend(done)
    imports = list((cfg.get("custom_imports") or {}).get("imports", []))
    cfg.custom_imports = dict(
        imports=imports + [m for m in ["downstream"] if m not in imports], allow_failed_imports=False
    )
    cfg.runner_type = "DepthbenchRunner"
    hooks = list(cfg.get("custom_hooks") or [])
    if not any(h.get("type") == "RunDirHook" for h in hooks):
        hooks.append(dict(type="RunDirHook"))
    cfg.custom_hooks = hooks

    resolve_embedded_roots(cfg)
    return cfg


def retarget_data_root(cfg, old: str, new: str) -> None:
    """Every string value that starts with ``old`` now starts with ``new`` (MMEngine configs resolve
    ``data_root + '...'`` when the file is read, so overriding ``data_root`` alone would change nothing)."""
    new = new.rstrip("/") + "/" if old.endswith("/") else new

    def visit(node):
        for key, value in list(node.items() if hasattr(node, "items") else enumerate(node)):
            if isinstance(value, str) and value.startswith(old):
                node[key] = new + value[len(old) :]
            elif hasattr(value, "items") or isinstance(value, list):
                visit(value)

    visit(cfg)


def check_data(cfg, splits=("train", "val", "test")) -> None:
    """Every dataset folder and annotation file the config names exists."""
    for split in splits:
        loader = cfg.get(f"{split}_dataloader")
        if not loader:
            continue
        for where, dataset in _datasets(loader.get("dataset"), f"{split}_dataloader.dataset"):
            root = dataset.get("data_root") or ""
            if root and not Path(root).is_dir():
                raise DepthbenchError(
                    f"dataset folder {root} ({where}.data_root) does not exist; set data_root=DIR to "
                    f"a COCO/ADE20K-format folder, or use an embedded-data preset"
                )
            ann = dataset.get("ann_file")
            if ann and not Path(root, ann).is_file():
                raise DepthbenchError(f"annotation file {Path(root, ann)} ({where}.ann_file) does not exist")
            for kind, prefix in (dataset.get("data_prefix") or {}).items():
                if prefix and not Path(root, prefix).is_dir():
                    raise DepthbenchError(f"{kind} folder {Path(root, prefix)} ({where}.data_prefix) does not exist")
        evaluators = cfg.get(f"{split}_evaluator") or []
        for evaluator in evaluators if isinstance(evaluators, list) else [evaluators]:
            ann = evaluator.get("ann_file")
            if ann and not Path(ann).is_file():
                raise DepthbenchError(f"annotation file {ann} ({split}_evaluator.ann_file) does not exist")


def _datasets(dataset, where):
    if not dataset:
        return
    if "dataset" in dataset:  # RepeatDataset, ClassBalancedDataset, ...
        yield from _datasets(dataset["dataset"], where + ".dataset")
    elif "datasets" in dataset:  # ConcatDataset
        for i, d in enumerate(dataset["datasets"]):
            yield from _datasets(d, f"{where}.datasets[{i}]")
    else:
        yield where, dataset


def check_model(cfg, checkpoint: str | None = None) -> None:
    """The model builds and initialises (backbone ``init_cfg`` checkpoints load through the one weights loader,
    which raises on keys that do not fit), and a ``load_from``/test checkpoint shares keys with it. Checkpoint
    files are read first (an unreadable file fails before the model is built), and MMEngine's per-parameter
    initialisation report is kept off the console here: the Runner logs it into the run directory."""
    given = [(what, path) for what, path in (("load_from", cfg.get("load_from")), ("checkpoint", checkpoint)) if path]
    weights = [(what, path, extract_weights(read_any_checkpoint(path), source=str(path))) for what, path in given]
    use_default_scope(cfg.default_scope)
    with _quiet_mmengine_log():
        try:
            model = MODELS.build(cfg.model)
        except DepthbenchError:
            raise
        except Exception as e:  # an unknown type (KeyError from the registry), bad arguments, ...
            raise DepthbenchError(f"model does not build: {type(e).__name__}: {_first_line(e)}") from None
        try:
            model.init_weights()
        except DepthbenchError:
            raise
        except Exception as e:
            raise DepthbenchError(f"model weights do not initialise: {type(e).__name__}: {_first_line(e)}") from None
    for what, path, tensors in weights:
        check_checkpoint_fits(model, path, what, tensors)


@contextmanager
def _quiet_mmengine_log():
    """MMEngine's current logger at WARNING (``init_weights`` prints a line per parameter without a log file)."""
    logger = MMLogger.get_current_instance()
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def check_checkpoint_fits(model, path: str, what: str, weights: dict) -> None:
    """A whole-model checkpoint must share keys with the model; a backbone (classification) checkpoint here is
    the usual mistake, so say where it belongs."""
    own = model.state_dict()
    fitting = [k for k, v in weights.items() if k in own and own[k].shape == v.shape]
    if fitting:
        return
    backbone = {k[len("backbone.") :] for k in own if k.startswith("backbone.")}
    hint = ""
    if backbone and any(k in backbone or k.split(".", 1)[-1] in backbone for k in weights):
        hint = f"; it looks like backbone weights: pass them as model.backbone.init_cfg.checkpoint={path} instead"
    raise DepthbenchError(
        f"{what} {path}: none of its {len(weights)} tensors fits the {type(model).__name__} "
        f"(e.g. {', '.join(list(weights)[:2])}){hint}"
    )


def read_any_checkpoint(path, *, mmap: bool = False) -> dict:
    """A checkpoint as a dict, read weights-only with MMEngine's allow-list (downstream/mmengine_compat.py): ours,
    timm's, an official release or an MMEngine checkpoint, wherever it lies. A file that pickles anything else is
    one line naming what it pickles, found by scanning the file (nothing is unpickled for that)."""
    allowed = {
        entry[1] if isinstance(entry, tuple) else f"{entry.__module__}.{entry.__qualname__}"
        for entry in [*safe_globals, *SAFE_GLOBALS]
    } | set(DEEPSPEED_STATE_CLASSES)  # a DeepSpeed run's last.pth: read_checkpoint allows them itself
    if isinstance(path, (str, Path)) and not os.path.isfile(path):  # a FIFO would block the scan's open
        return read_checkpoint(path)  # one line: no such file, or not a regular file (opens nothing)
    try:
        unsafe = set(torch.serialization.get_unsafe_globals_in_checkpoint(str(path))) - allowed
    except Exception:  # not a zip-format torch file: read_checkpoint says what it is
        unsafe = set()
    if unsafe:
        raise DepthbenchError(
            f"{path} is not a readable checkpoint: it pickles Python objects that a weights-only "
            f"load refuses ({', '.join(sorted(unsafe))}); only tensors, plain values and "
            f"MMEngine's logging state are accepted"
        )
    with torch.serialization.safe_globals(safe_globals):
        return read_checkpoint(path, mmap=mmap)


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# ----------------------------------------------------------------------------------------- finetune
@dataclass
class FinetunePlan:
    """The checked inputs of one fine-tuning run: its resolved config, where it writes, what it resumes, and
    how the schedule follows a changed run length (:func:`rescale_schedule`)."""

    cfg: object
    work_dir: Path
    resume_from: Path | None
    schedule_changes: list = field(default_factory=list)


def prepare_finetune(
    config, overrides=(), *, resume: str | None = None, work_dir: str | Path | None = None
) -> FinetunePlan:
    """Check every input of a fine-tuning run before anything is written: the config (with ``key=value``
    ``overrides``), its datasets, the work directory (a directory we can write, no other process writing it) and
    the checkpoint to resume (``"auto"``: the newest inside the work directory; with no ``work_dir``, the
    experiment's newest unfinished run; read weights-only), and, outside a launcher, the model."""
    changes = []
    cfg = load_downstream_config(config, overrides, changes)
    if work_dir is not None:
        work_dir = check_work_dir(work_dir)
    check_data(cfg, ("train", "val"))
    if work_dir is None and resume == "auto":
        work_dir = latest_mmengine_run(runs_root() / cfg.experiment)
    work_dir = work_dir or new_run_path(cfg.experiment)
    if distributed_env()["RANK"] == "0":  # the other ranks would find rank 0's own lock
        check_not_in_use(work_dir)
    resume_from = resume_checkpoint(resume, work_dir)
    if not resume and latest_checkpoint(work_dir):
        raise DepthbenchError(
            f"--work-dir {work_dir} already holds checkpoints; add --resume auto to continue it or "
            f"choose another directory"
        )
    if resume_from is not None:
        check_resume_checkpoint(resume_from)
    if not launched():  # under a launcher every process would repeat this; rank 0's parent did it
        check_model(cfg)
    return FinetunePlan(cfg, work_dir, resume_from, changes)


def check_work_dir(work_dir) -> Path:
    """``--work-dir``: a directory we can create and write, not a file (the check of ``depthbench train``)."""
    return check_run_work_dir(work_dir)


def check_not_in_use(work_dir: Path) -> None:
    """One writer per run directory: another process writing it (a fine-tune still running) is one line."""
    holder = run_dir_in_use(work_dir) if Path(work_dir).is_dir() else None
    if holder:
        raise DepthbenchError(
            f"the run directory {work_dir} is in use by {holder}; wait for it to finish, or give another --work-dir"
        )


def check_resume_checkpoint(path: Path) -> None:
    """The checkpoint to resume is an MMEngine training checkpoint that loads weights-only (memory-mapped: the
    tensors are not read)."""
    checkpoint = read_any_checkpoint(path, mmap=True)
    missing = [k for k in ("meta", "state_dict", "optimizer") if k not in checkpoint]
    if missing:
        raise DepthbenchError(
            f"--resume {path} is not an MMEngine training checkpoint (no {', '.join(missing)}); to "
            f"start from its weights, use load_from={path}"
        )


def latest_checkpoint(work_dir: Path) -> Path | None:
    """MMEngine's newest checkpoint of a work dir (its ``last_checkpoint`` file), inside that directory only."""
    path = checkpoint_in_work_dir(str(work_dir))
    return Path(path) if path else None


def resume_checkpoint(resume: str | None, work_dir: Path) -> Path | None:
    """``--resume``: None, ``auto`` (the work directory's newest checkpoint, if any) or a checkpoint file."""
    if not resume:
        return None
    if resume == "auto":
        found = latest_checkpoint(work_dir)
        if found is None and (Path(work_dir) / "last_checkpoint").is_file():
            raise DepthbenchError(
                f"--resume auto: {Path(work_dir) / 'last_checkpoint'} names no checkpoint inside "
                f"{work_dir}; give the checkpoint to continue as --resume {work_dir}/iter_N.pth"
            )
        return found
    if not Path(resume).is_file():
        raise DepthbenchError(f"--resume {resume}: no such checkpoint file")
    return Path(resume)


def latest_mmengine_run(experiment_root: Path) -> Path | None:
    """The newest unfinished downstream run of an experiment that has a checkpoint."""
    return latest_run(
        experiment_root, checkpoint_of=lambda run: run / "last_checkpoint" if latest_checkpoint(run) else None
    )


def finetune_process(plan: FinetunePlan, *, config_file: str, command: str | None = None, verbose: bool = False) -> int:
    """Train one process of the planned run with MMEngine's Runner; 0 done, EXIT_PREEMPTED when stopped by a
    signal (SIGUSR1, SIGTERM, a first Ctrl-C) after a checkpoint. ``command`` (meta.json): the command line
    (default: this process's). The console shows a header and a progress bar; MMEngine's own log goes to the
    run's log file (``verbose``: to the console as well, as stock MMEngine does)."""
    cfg = plan.cfg
    cfg.launcher = setup_distributed(cfg)
    work_dir = plan.work_dir = Path(_rank0(str(plan.work_dir)))  # a new run's name is rank 0's clock reading
    cfg.work_dir = str(work_dir)
    if plan.resume_from is not None:
        cfg.resume, cfg.load_from = True, str(plan.resume_from)
    _set_hook_meta(
        cfg,
        mode="finetune",
        config_file=str(config_file),
        command=" ".join(sys.argv) if command is None else command,
        **({"schedule_changes": plan.schedule_changes} if plan.schedule_changes else {}),
    )
    try:
        with _mmengine_run(
            cfg, work_dir, verbose, lambda runner: finetune_header(cfg, config_file, plan, runner.log_dir, verbose)
        ) as runner:
            runner.train()
            main, iterations = _is_main(), runner.iter
    except Preempted as e:
        print(f"depthbench finetune: {e}", file=sys.stderr)
        return EXIT_PREEMPTED
    finally:
        close_distributed()
    if main:
        print(done_line(work_dir, iterations), flush=True)
    return 0


def done_line(work_dir: Path, iterations: int) -> str:
    """The line a finished fine-tune ends with (as ``train``'s "done: best top1 ... at epoch N; DIR"): its length,
    its last validation's numbers and its run directory."""
    metrics = Path(work_dir) / "metrics.jsonl"
    evals = [r for r in read_metrics(metrics) if r.get("kind") == "eval"] if metrics.is_file() else []
    last = {k: v for k, v in numeric_metrics(evals[-1]).items() if k not in ("epoch", "global_step")} if evals else {}
    shown = "  ".join(f"{k} {v:.4f}" for k, v in list(last.items())[:4])
    return f"done: {iterations} iterations" + (f", last validation {shown}" if shown else "") + f"; {work_dir}"


@contextmanager
def _mmengine_run(cfg, work_dir: Path, verbose: bool, header, stream=None):
    """The MMEngine Runner of ``cfg`` inside the run directory's lock, for a ``finetune`` or a ``test``: its console
    (``header(runner)`` on rank 0, a progress hook unless ``verbose``, library output kept in the log) and, on the
    way out, the run marked failed by any exception but a preemption (which checkpointed), the stop handlers
    restored and the lock released. ``stream``: where the header and the progress go (default stdout)."""
    locked = _lock(work_dir)
    shown = ConsoleHook(stream=stream)
    try:
        with console(verbose) as warned:
            runner = build_runner(cfg)
            log_warnings(warned, runner)
            if _is_main():
                print(header(runner), file=stream, flush=True)
            if not verbose:
                runner.register_hook(shown, priority="LOWEST")
            with printed_to_log(runner, verbose):
                yield runner
    except Preempted:
        raise
    except BaseException as e:
        if locked:
            _mark_failed(work_dir, e)
        raise
    finally:
        shown.close()
        restore_stop_handlers()
        _unlock(work_dir, locked)


def _rank0(value):
    """Rank 0's ``value`` on every rank of a launched run (itself otherwise)."""
    if not (dist.is_available() and dist.is_initialized()):
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _is_main() -> bool:
    return is_main_process()


def _lock(work_dir: Path) -> bool:
    """The main process becomes the run directory's one writer before the Runner writes anything into it (the
    RunDirHook's RunDir then holds the same lock); a second fine-tune of the same directory is one line."""
    if not _is_main():
        return False

    Path(work_dir).mkdir(parents=True, exist_ok=True)
    lock_run_dir(work_dir)
    return True


def _unlock(work_dir: Path, locked: bool) -> None:
    if locked:
        unlock_run_dir(work_dir)


class RunWarnings:
    """Library warnings of one fine-tune/test on their way to its log file: held in ``pending`` until the Runner's
    logger exists, then written to it (:func:`log_warnings`). The Runner's own logger (MMEngine's public
    ``runner.logger``), never another run's: an in-process caller may hold several."""

    def __init__(self):
        self.pending: list[str] = []
        self.logger = None

    def warn(self, text: str) -> None:
        if self.logger is not None:  # the Runner's: its console handler lets only errors through
            self.logger.warning(text)
        else:
            self.pending.append(text)


@contextmanager
def console(verbose: bool):
    """What a fine-tune/test shows while it runs: without ``verbose``, MMEngine's log goes to its log file only
    (:func:`downstream.mmengine_compat.quiet_console`) and so do other libraries' warnings (ours still reach the
    console); with it, MMEngine's console log and every warning, as before. Yields the :class:`RunWarnings` that
    :func:`log_warnings` connects to the Runner's log once it exists."""
    warned = RunWarnings()
    with quiet_console(not verbose), warnings.catch_warnings():
        warnings.simplefilter("default")
        if not verbose:
            show = warnings.showwarning

            def to_log_file(message, category, filename, lineno, file=None, line=None):
                if _ours(filename):
                    return show(message, category, filename, lineno, file, line)
                warned.warn(warnings.formatwarning(message, category, filename, lineno, line).rstrip())

            warnings.showwarning = to_log_file
        yield warned


def log_warnings(warned: RunWarnings, runner) -> None:
    """The warnings :func:`console` collected before the Runner's logger existed into its log file, and the later
    ones straight there."""
    warned.logger = runner.logger
    for text in warned.pending:
        runner.logger.warning(text)
    warned.pending.clear()


@contextmanager
def printed_to_log(runner, verbose: bool):
    """What libraries print while the Runner runs (pycocotools' "loading annotations..." and AP tables) goes to
    the run's log file, unless ``verbose``; the ConsoleHook writes to the console's own stream."""
    if verbose:
        yield
        return

    with redirect_stdout(LogWriter(runner.logger)):
        yield


def _ours(filename: str) -> bool:
    root = Path(__file__).resolve().parent.parent
    try:
        return Path(filename).resolve().relative_to(root).parts[0] in (
            "harness",
            "models",
            "downstream",
            "results",
            "slurm",
        )
    except (ValueError, IndexError):
        return False


def finetune_header(cfg, config_file, plan: FinetunePlan, log_dir, verbose: bool) -> str:
    """The lines printed before training: config, work dir, model, data, iterations (and what changed)."""
    loop = cfg.get("train_cfg") or {}
    unit = "iterations" if "max_iters" in loop else "epochs"
    length = loop.get("max_iters") or loop.get("max_epochs")
    interval = loop.get("val_interval")
    resumed = f"; resuming {plan.resume_from}" if plan.resume_from else ""
    train, val = describe_data(cfg, "train"), describe_data(cfg, "val")
    lines = [
        f"depthbench finetune: {config_file} -> {plan.work_dir}",
        f"  model: {describe_model(cfg)}",
        f"  data: {train}" + (f"; validation: {val}" if val != train else ""),
        f"  {length} {unit}"
        + (f", validation every {interval}" if interval else "")
        + (f"; {cfg.scale}" if cfg.get("scale") else "")
        + resumed,
    ]
    if plan.schedule_changes:
        lines.append(f"  schedule follows {unit}={length}: " + "; ".join(plan.schedule_changes))
    lines.append(
        f"  log: {Path(log_dir) / (Path(log_dir).name + '.log')}"
        + ("" if verbose else " (--verbose shows MMEngine's log here)")
    )
    return "\n".join(lines)


def describe_model(cfg) -> str:
    model = cfg.get("model") or {}
    if model.get("type") in ("DetTTAModel", "SegTTAModel"):
        model = model.get("module") or {}
    backbone = model.get("backbone") or {}
    name = backbone.get("model_name") or backbone.get("type") or "?"
    init = (backbone.get("init_cfg") or {}) if isinstance(backbone.get("init_cfg"), dict) else {}
    if cfg.get("load_from") and not cfg.get("resume"):  # the whole model's weights, the backbone's init replaced
        weights = f"all weights from {cfg.load_from}"
    else:
        weights = f"backbone from {init['checkpoint']}" if init.get("checkpoint") else "backbone random init"
    return f"{model.get('type', '?')} with {name} ({weights})"


def describe_data(cfg, split: str) -> str:
    loader = cfg.get(f"{split}_dataloader") or {}
    found = list(_datasets(loader.get("dataset"), split))
    if not found:
        return "none"
    _, dataset = found[0]
    return f"{dataset.get('type', '?')} {dataset.get('data_root') or ''}".rstrip()


def close_distributed() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def build_runner(cfg):
    try:
        return RUNNERS.build(cfg)
    except DepthbenchError:
        raise
    except (ValueError, KeyError, TypeError, AssertionError) as e:  # MMEngine's own checks of the config
        raise DepthbenchError(
            f"the MMEngine Runner does not accept this config: {type(e).__name__}: {_first_line(e)[:500]}"
        ) from None


def setup_distributed(cfg) -> str:
    """The MMEngine launcher: 'pytorch' under a launcher (torchrun, srun, ``--nproc``), with the process group
    initialised here, because MMEngine's own ``init_dist`` calls ``torch.cuda.set_device``, which fails on a
    CPU machine; there (gloo) DDP also needs ``device_ids=None``, where MMEngine passes the local rank."""
    if not launched():
        return "none"

    env = export_distributed_env()
    cuda = torch.cuda.is_available()
    if not dist.is_initialized():
        if cuda:
            torch.cuda.set_device(int(env["LOCAL_RANK"]) % torch.cuda.device_count())
        dist.init_process_group(backend="nccl" if cuda else "gloo")
    if not cuda and not cfg.get("model_wrapper_cfg"):
        cfg.model_wrapper_cfg = dict(
            type="MMDistributedDataParallel",
            device_ids=None,
            broadcast_buffers=False,
            find_unused_parameters=cfg.get("find_unused_parameters", False),
        )
    return "pytorch"


def _set_hook_meta(cfg, **meta) -> None:
    for hook in cfg.custom_hooks:
        if hook.get("type") == "RunDirHook":
            hook["meta"] = {**(hook.get("meta") or {}), **meta}


def _mark_failed(work_dir: Path, error: BaseException) -> None:
    """Status failed (preempted for a second Ctrl-C) in the run this process writes (holds the lock of)."""
    if (Path(work_dir) / "meta.json").is_file():
        status = "preempted" if isinstance(error, KeyboardInterrupt) else "failed"
        RunDir.open(work_dir).finish(status, error=f"{type(error).__name__}: {error}")


# ----------------------------------------------------------------------------------------- test
@dataclass
class TestResult:
    """One ``depthbench test``: the numeric metrics (bbox/segm AP, mIoU, ...), the run directory its logs went
    to, and whether this process is the main one (the one that reports)."""

    __test__ = False  # not a pytest test class, despite its name

    metrics: dict
    run_dir: Path
    is_main: bool = True


def evaluate(
    config,
    checkpoint,
    *,
    overrides=(),
    tta: bool = False,
    work_dir: str | Path | None = None,
    command: str | None = None,
    verbose: bool = False,
) -> TestResult:
    """Evaluate ``checkpoint`` (an MMEngine checkpoint, read weights-only) on the test split of ``config`` (with
    ``overrides``); ``tta``: the config's test-time augmentation. The run directory is ``work_dir``, by default
    next to the checkpoint's run (:func:`default_test_dir`). Inputs are checked before anything is written."""
    cfg = load_downstream_config(config, overrides)
    if work_dir is not None:
        work_dir = check_work_dir(work_dir)
        if (work_dir / "meta.json").is_file():
            raise DepthbenchError(
                f"--work-dir {work_dir} is a run directory already; give a new directory for the test's logs"
            )
    check_data(cfg, ("test",))
    if not Path(checkpoint).is_file():
        raise DepthbenchError(f"checkpoint {checkpoint}: no such file")
    work_dir = work_dir or default_test_dir(checkpoint)
    cfg.load_from, cfg.resume = None, False
    check_model(cfg, checkpoint=checkpoint)
    if tta:  # after the check: the checkpoint fits the model the TTA wrapper holds
        apply_tta(cfg)
    cfg.load_from = str(checkpoint)
    cfg.launcher = setup_distributed(cfg)
    work_dir = Path(_rank0(str(work_dir)))  # every rank writes where rank 0 chose (-2, -3... are first come)
    cfg.work_dir = str(work_dir)
    run = checkpoint_run_of(checkpoint)
    cfg.scale = tested_scale(run)  # the checkpoint's run's setting, not the config's schedule
    _set_hook_meta(
        cfg,
        mode="test",
        checkpoint=str(checkpoint),
        tta=tta,
        config_file=str(config),
        command=" ".join(sys.argv) if command is None else command,
        **({"tested_run": str(run)} if run else {}),
    )

    def header(runner) -> str:
        return (
            f"depthbench test: {config}, checkpoint {checkpoint}{' with TTA' if tta else ''} -> {work_dir}\n"
            f"  model: {describe_model(cfg)}\n  data: {describe_data(cfg, 'test')}\n"
            f"  log: {Path(runner.log_dir) / (Path(runner.log_dir).name + '.log')}"
        )

    # stderr: stdout is for the metrics, printed by the command
    with _mmengine_run(cfg, work_dir, verbose, header, stream=sys.stderr) as runner:
        metrics = runner.test()
    main = _is_main()
    close_distributed()
    return TestResult(numeric_metrics(metrics) if main else {}, work_dir, main)


def checkpoint_run_of(checkpoint) -> Path | None:
    return checkpoint_run(checkpoint)  # the folder holding the file, when it is a run directory


def tested_scale(run: Path | None) -> str | None:
    """meta.json's ``scale`` of a test: that of the run whose checkpoint it evaluates (a 40-iteration fine-tune is
    tested as one, whatever length the config names); None for a run at the paper's setting or a checkpoint from
    outside any run (results labels every test by its checkpoint: results/runs.py)."""
    if run is None:
        return None
    try:
        scale = read_json(run / "meta.json", inside=run, what="meta.json").get("scale")
    except (OSError, DepthbenchError):
        return None
    return scale if isinstance(scale, str) else None


def default_test_dir(checkpoint) -> Path:
    """Where ``depthbench test`` writes by default: beside the checkpoint's run, named as a test of that checkpoint
    (``<run>-test-iter_500``, ``-2``... when tested again), or beside a checkpoint outside any run
    (``<file>-test``); never into the repository's runs folder. One line when that folder cannot be written."""
    path = Path(checkpoint)
    stem = (path.resolve() if path.is_symlink() else path).stem  # last.pth -> the iter_N.pth it points at
    run = checkpoint_run_of(path)
    base = run.parent / f"{run.name}-test-{stem}" if run else path.parent / f"{stem}-test"
    problem = unwritable_folder(base)
    if problem is not None:
        raise DepthbenchError(f"the test's run directory {base}: {problem}; give --work-dir DIR")
    found, n = base, 1
    while found.exists():
        n += 1
        found = base.with_name(f"{base.name}-{n}")
    return found


def apply_tta(cfg) -> None:
    """The config's test-time augmentation, as mmdet's/mmseg's tools/test.py --tta apply it."""
    if not cfg.get("tta_model") or not cfg.get("tta_pipeline"):
        raise DepthbenchError("this config defines no tta_model/tta_pipeline, so --tta has nothing to apply")
    dataset = cfg.test_dataloader.dataset
    while "dataset" in dataset:
        dataset = dataset["dataset"]
    dataset.pipeline = cfg.tta_pipeline
    cfg.model = dict(**cfg.tta_model, module=cfg.model)
