"""``depthbench finetune`` and ``depthbench test``: detection/segmentation with the stock MMEngine Runner.

    depthbench finetune CONFIG [--nproc N] [--resume auto|PATH] [--work-dir DIR] [key=value ...]
    depthbench test CONFIG CHECKPOINT [--tta] [--work-dir DIR] [key=value ...]

CONFIG is an MMDetection 3 / MMSegmentation 1 config (configs/det, configs/seg). The Runner is MMEngine's own
(``DepthbenchRunner``, downstream/mmengine_compat.py), so its logs, checkpoints (``iter_N.pth``) and
``last_checkpoint`` are MMEngine's; ``RunDirHook`` (downstream/hooks.py) adds depthbench's run-directory contract.
``key=value`` overrides use harness/config.py's language; ``data_root=DIR`` moves every path of the config that
was under its data root (datasets and evaluator annotation files) to DIR. ``embedded://<set>/`` roots are
generated on first use (downstream/embedded.py).

Everything that can be wrong with the inputs -- config, model/backbone names, dataset folders and annotation
files, ``load_from``/backbone checkpoints that fit nothing -- is checked before anything is written: the model is
built and its weights initialised once on the CPU for that. ``--nproc N`` starts N local processes (gloo on
CPU); under torchrun/srun each process finds its rank in the environment (harness/launch.py) and joins
MMEngine's ``pytorch`` launcher. Exit codes: 0 done, 1 failed, 2 bad input, 75 preempted (continue with
``--resume auto``). See docs/downstream.md.
"""
from __future__ import annotations

import json
import logging
import sys
from contextlib import contextmanager
from pathlib import Path

from harness.errors import DepthbenchError
from harness.launch import EXIT_PREEMPTED, launched, spawn

TASKS = {"mmdet": "detection", "mmseg": "segmentation"}


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("finetune", help="fine-tune a detector/segmentor (MMDetection/MMSegmentation config)")
    p.add_argument("config", help="e.g. configs/det/mask-rcnn_steps-resnet18-w32_fpn_2k_embedded-coco.py")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="config overrides, e.g. train_cfg.max_iters=100 data_root=data/coco/ (+key=value adds)")
    p.add_argument("--nproc", type=int, default=1, help="processes to start on this machine (default 1)")
    p.add_argument("--resume", metavar="auto|PATH",
                   help="auto: continue the run's newest checkpoint if there is one; PATH: an MMEngine checkpoint")
    p.add_argument("--work-dir", help="the run directory (default results/runs/<experiment>/<run-id>)")
    p.set_defaults(func=finetune_main)

    t = subparsers.add_parser("test", help="evaluate a detector/segmentor checkpoint (bbox/segm AP or mIoU)")
    t.add_argument("config")
    t.add_argument("checkpoint", help="an MMEngine checkpoint, e.g. <run dir>/last.pth")
    t.add_argument("overrides", nargs="*", metavar="key=value")
    t.add_argument("--tta", action="store_true", help="test-time augmentation (the config's tta_model/tta_pipeline)")
    t.add_argument("--work-dir", help="where to write the test's logs (default results/runs/<experiment>-test/<id>)")
    t.add_argument("--json", action="store_true", help="print the metrics as JSON")
    t.set_defaults(func=test_main)


# ----------------------------------------------------------------------------------------- config
def load_downstream_config(path, overrides=()):
    """The config with overrides, the depthbench runner/hook/imports, and embedded data roots resolved."""
    from harness.config import apply_overrides, load_config

    cfg = load_config(path)
    if cfg.get("default_scope") not in TASKS:
        raise DepthbenchError(f"{path} is not an MMDetection/MMSegmentation config (default_scope is "
                              f"{cfg.get('default_scope')!r}); `depthbench train` runs classification recipes")
    old_root = cfg.get("data_root")
    apply_overrides(cfg, overrides)
    if old_root and cfg.get("data_root") != old_root:
        retarget_data_root(cfg, old_root, cfg.data_root)
    imports = list((cfg.get("custom_imports") or {}).get("imports", []))
    cfg.custom_imports = dict(imports=imports + [m for m in ["downstream"] if m not in imports],
                              allow_failed_imports=False)
    cfg.runner_type = "DepthbenchRunner"
    hooks = list(cfg.get("custom_hooks") or [])
    if not any(h.get("type") == "RunDirHook" for h in hooks):
        hooks.append(dict(type="RunDirHook"))
    cfg.custom_hooks = hooks
    import downstream  # noqa: F401  (registers the runner, hook, datasets, backbone)
    from downstream.embedded import resolve_embedded_roots

    resolve_embedded_roots(cfg)
    return cfg


def retarget_data_root(cfg, old: str, new: str) -> None:
    """Every string value that starts with ``old`` now starts with ``new`` (MMEngine configs resolve
    ``data_root + '...'`` when the file is read, so overriding ``data_root`` alone would change nothing)."""
    new = new.rstrip("/") + "/" if old.endswith("/") else new

    def visit(node):
        for key, value in list(node.items() if hasattr(node, "items") else enumerate(node)):
            if isinstance(value, str) and value.startswith(old):
                node[key] = new + value[len(old):]
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
                raise DepthbenchError(f"dataset folder {root} ({where}.data_root) does not exist; set data_root=DIR to "
                                      f"a COCO/ADE20K-format folder, or use an embedded-data preset")
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
    from mmengine.registry import MODELS, init_default_scope

    from harness.checkpoint import extract_weights

    given = [(what, path) for what, path in (("load_from", cfg.get("load_from")), ("checkpoint", checkpoint)) if path]
    weights = [(what, path, extract_weights(read_any_checkpoint(path), source=str(path))) for what, path in given]
    init_default_scope(cfg.default_scope)
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
    from mmengine.logging import MMLogger

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
    backbone = {k[len("backbone."):] for k in own if k.startswith("backbone.")}
    hint = ""
    if backbone and any(k in backbone or k.split(".", 1)[-1] in backbone for k in weights):
        hint = (f"; it looks like backbone weights: pass them as model.backbone.init_cfg.checkpoint={path} "
                f"instead")
    raise DepthbenchError(f"{what} {path}: none of its {len(weights)} tensors fits the {type(model).__name__} "
                          f"(e.g. {', '.join(list(weights)[:2])}){hint}")


def read_any_checkpoint(path) -> dict:
    """A checkpoint as a dict: weights-only, except MMEngine checkpoints of depthbench's own runs (a run
    directory with ``meta.json`` engine ``mmengine``), whose message hub pickles objects."""
    from harness.checkpoint import read_checkpoint

    if trusted_run_checkpoint(path):
        import torch

        return torch.load(path, map_location="cpu", weights_only=False)
    return read_checkpoint(path)


def trusted_run_checkpoint(path) -> bool:
    meta = Path(path).resolve().parent / "meta.json"
    try:
        return Path(path).is_file() and json.loads(meta.read_text()).get("engine") == "mmengine"
    except (OSError, ValueError):
        return False


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# ----------------------------------------------------------------------------------------- finetune
def finetune_main(args) -> int:
    from harness.rundir import DEFAULT_ROOT, new_run_path

    if args.nproc < 1:
        raise DepthbenchError(f"--nproc {args.nproc}: it must be at least 1")
    if args.nproc > 1 and launched():
        raise DepthbenchError("--nproc starts processes itself; under torchrun/srun leave it out")
    cfg = load_downstream_config(args.config, args.overrides)
    check_data(cfg, ("train", "val"))
    work_dir = Path(args.work_dir) if args.work_dir else None
    if work_dir is None and args.resume == "auto":
        work_dir = latest_mmengine_run(DEFAULT_ROOT / cfg.experiment)
    work_dir = work_dir or new_run_path(cfg.experiment)
    resume_from = resume_checkpoint(args.resume, work_dir)
    if args.resume and args.resume != "auto" and resume_from is None:
        raise DepthbenchError(f"--resume {args.resume}: no such checkpoint file")
    if not args.resume and latest_checkpoint(work_dir):
        raise DepthbenchError(f"--work-dir {work_dir} already holds checkpoints; add --resume auto to continue it or "
                              f"choose another directory")
    if not launched():  # under a launcher every process would repeat this; rank 0's parent did it
        check_model(cfg)
    if args.nproc > 1:
        argv = ["finetune", args.config, *args.overrides, "--work-dir", str(work_dir)]
        return spawn(args.nproc, argv + (["--resume", args.resume] if args.resume else []))
    return run_finetune(cfg, work_dir, resume_from, args)


def latest_checkpoint(work_dir: Path) -> Path | None:
    """MMEngine's newest checkpoint of a work dir (its ``last_checkpoint`` file), if there is one."""
    marker = Path(work_dir) / "last_checkpoint"
    if marker.is_file():
        path = Path(marker.read_text().strip())
        if path.is_file():
            return path
    return None


def resume_checkpoint(resume: str | None, work_dir: Path) -> Path | None:
    if not resume:
        return None
    if resume == "auto":
        return latest_checkpoint(work_dir)
    return Path(resume) if Path(resume).is_file() else None


def latest_mmengine_run(experiment_root: Path) -> Path | None:
    """The newest unfinished downstream run of an experiment that has a checkpoint."""
    from harness.checkpoint import latest_run

    return latest_run(experiment_root, checkpoint_of=lambda run: run / "last_checkpoint"
                      if latest_checkpoint(run) else None)


def run_finetune(cfg, work_dir: Path, resume_from: Path | None, args) -> int:
    from downstream.hooks import Preempted
    from harness.rundir import RunDir

    cfg.work_dir = str(work_dir)
    cfg.launcher = setup_distributed(cfg)
    if resume_from is not None:
        cfg.resume, cfg.load_from = True, str(resume_from)
    _set_hook_meta(cfg, mode="finetune", config_file=str(args.config), command=" ".join(sys.argv))
    runner = build_runner(cfg)
    try:
        runner.train()
    except Preempted as e:
        print(f"depthbench finetune: {e}", file=sys.stderr)
        return EXIT_PREEMPTED
    except BaseException as e:
        _mark_failed(RunDir, work_dir, e)
        raise
    finally:
        close_distributed()
    return 0


def close_distributed() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def build_runner(cfg):
    from mmengine.registry import RUNNERS

    try:
        return RUNNERS.build(cfg)
    except DepthbenchError:
        raise
    except (ValueError, KeyError, TypeError, AssertionError) as e:  # MMEngine's own checks of the config
        raise DepthbenchError(f"the MMEngine Runner does not accept this config: {type(e).__name__}: "
                              f"{_first_line(e)[:500]}") from None


def setup_distributed(cfg) -> str:
    """The MMEngine launcher: 'pytorch' under a launcher (torchrun, srun, ``--nproc``), with the process group
    initialised here, because MMEngine's own ``init_dist`` calls ``torch.cuda.set_device``, which fails on a
    CPU machine; there (gloo) DDP also needs ``device_ids=None``, where MMEngine passes the local rank."""
    if not launched():
        return "none"
    import torch
    import torch.distributed as dist

    from harness.launch import export_distributed_env

    env = export_distributed_env()
    cuda = torch.cuda.is_available()
    if not dist.is_initialized():
        if cuda:
            torch.cuda.set_device(int(env["LOCAL_RANK"]) % torch.cuda.device_count())
        dist.init_process_group(backend="nccl" if cuda else "gloo")
    if not cuda and not cfg.get("model_wrapper_cfg"):
        cfg.model_wrapper_cfg = dict(type="MMDistributedDataParallel", device_ids=None, broadcast_buffers=False,
                                     find_unused_parameters=cfg.get("find_unused_parameters", False))
    return "pytorch"


def _set_hook_meta(cfg, **meta) -> None:
    for hook in cfg.custom_hooks:
        if hook.get("type") == "RunDirHook":
            hook["meta"] = {**(hook.get("meta") or {}), **meta}


def _mark_failed(RunDir, work_dir: Path, error: BaseException) -> None:
    from mmengine.dist import is_main_process

    if is_main_process() and (Path(work_dir) / "meta.json").is_file():
        status = "preempted" if isinstance(error, KeyboardInterrupt) else "failed"
        RunDir.open(work_dir).finish(status, error=f"{type(error).__name__}: {error}")


# ----------------------------------------------------------------------------------------- test
def test_main(args) -> int:
    from downstream.mmengine_compat import trusted_checkpoint_loading
    from harness.rundir import DEFAULT_ROOT, RunDir, new_run_path

    cfg = load_downstream_config(args.config, args.overrides)
    check_data(cfg, ("test",))
    if not Path(args.checkpoint).is_file():
        raise DepthbenchError(f"checkpoint {args.checkpoint}: no such file")
    cfg.load_from, cfg.resume = None, False
    check_model(cfg, checkpoint=args.checkpoint)
    if args.tta:  # after the check: the checkpoint fits the model the TTA wrapper holds
        apply_tta(cfg)
    cfg.load_from = str(args.checkpoint)
    work_dir = Path(args.work_dir) if args.work_dir else new_run_path(f"{cfg.experiment}-test", DEFAULT_ROOT)
    cfg.work_dir, cfg.launcher = str(work_dir), setup_distributed(cfg)
    _set_hook_meta(cfg, mode="test", checkpoint=str(args.checkpoint), tta=args.tta, config_file=str(args.config),
                   command=" ".join(sys.argv))
    runner = build_runner(cfg)
    trusted = trusted_run_checkpoint(args.checkpoint)
    try:
        if trusted:
            with trusted_checkpoint_loading():
                metrics = runner.test()
        else:
            metrics = runner.test()
    except BaseException as e:
        _mark_failed(RunDir, work_dir, e)
        raise
    from mmengine.dist import is_main_process

    from downstream.hooks import numeric_metrics

    main = is_main_process()
    close_distributed()
    if main:
        numbers = numeric_metrics(metrics)
        print(json.dumps(numbers) if args.json else
              "  ".join(f"{k} {v:.4f}" for k, v in numbers.items()) + f"  ({work_dir})")
    return 0


def apply_tta(cfg) -> None:
    """The config's test-time augmentation, as mmdet's/mmseg's tools/test.py --tta apply it."""
    if not cfg.get("tta_model") or not cfg.get("tta_pipeline"):
        raise DepthbenchError("this config defines no tta_model/tta_pipeline, so --tta has nothing to apply")
    dataset = cfg.test_dataloader.dataset
    while "dataset" in dataset:
        dataset = dataset["dataset"]
    dataset.pipeline = cfg.tta_pipeline
    cfg.model = dict(**cfg.tta_model, module=cfg.model)
