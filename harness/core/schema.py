"""The one typed schema of a training config: every key's default, type, range and help, in one place.

``configs/_base_/default_runtime.py`` is generated from :data:`KEYS` (``python -m harness.core.schema --write``; a
test keeps the two equal), the engine fills missing sections from :func:`section_defaults`, :func:`check_values`
checks every value against its type and range before any work, ``depthbench train --help-config`` prints
:func:`describe` (docs/config.md). Keys whose default depends on the data or the recipe (``data.*``, ``aug.*``,
``optim.*``, ``sched.*``) have :data:`FROM_BASE` as default: ``configs/_base_/datasets/`` and ``schedules/`` set
them, the schema still types and bounds them. Ranges have an upper bound wherever a runaway value costs a machine
(epochs, steps, workers, batch, image size, seed): ``epochs=10**30`` or ``data.workers=1000000`` is one line,
not a run of 1e24 days or a million forked workers.

Torchtitan's JobConfig does this with dataclasses and argparse; our configs are MMEngine files (inheritance,
``key=value`` overrides), so the schema is a table the config is validated against rather than the config itself.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass

from harness.core.choices import not_one_of
from harness.core.errors import ConfigError


class _FromBase:
    def __repr__(self) -> str:
        return "<set by the dataset/schedule base>"


FROM_BASE = _FromBase()
INF = math.inf
COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class Key:
    """One config key: ``kind`` is int, number, bool, str, choice, dict, list, ints (a list of int), numbers (a
    list of numbers) or any; ``low``/``high`` bound numbers (and each element of ``ints``/``numbers``),
    ``open_low``/``open_high`` exclude the bound. A number is finite whatever its bounds: NaN and inf are no
    value of any key."""

    name: str
    default: object
    kind: str
    help: str
    low: float = -INF
    high: float = INF
    open_low: bool = False
    open_high: bool = False
    choices: tuple = ()
    none: bool = True  # None is allowed ("off", "torch's default", "from the data")
    scope: str = "train"  # "train": depthbench's recipes; "finetune": MMEngine's (configs/det, configs/seg)

    def interval(self) -> str:
        low = "-inf" if self.low == -INF else _number(self.low)
        high = "inf" if self.high == INF else _number(self.high)
        return f"{'(' if self.open_low else '['}{low}, {high}{')' if self.open_high or self.high == INF else ']'}"

    def describe_type(self, none: bool = True) -> str:
        """``an integer in [1, 100000]``; ``none``: say whether None is allowed too."""
        if self.kind == "choice":
            return "one of " + ", ".join(map(repr, self.choices))
        bounded = self.kind in ("int", "number", "ints", "numbers") and (self.low != -INF or self.high != INF)
        name = {
            "int": "an integer",
            "ints": "a list of integers",
            "number": "a number",
            "numbers": "a list of numbers",
            "bool": "True or False",
            "str": "a string",
            "dict": "a dict",
            "list": "a list",
        }.get(self.kind, self.kind)
        return name + (f" in {self.interval()}" if bounded else "") + (" or None" if none and self.none else "")


def _number(x: float) -> str:
    if float(x).is_integer() and abs(x) >= 2**20 and math.log2(abs(x)).is_integer():
        return f"2**{int(math.log2(abs(x)))}"
    if float(x).is_integer():
        return str(int(x))
    return repr(x)


EPOCHS = 100_000  # ~270 years of one epoch a day: anything above is a typo
STEPS = 10**9
BATCH = 2**20
WORKERS = 256  # loader processes per rank; more would fork the machine to a halt
IMAGE = 8192  # pixels per side
LR = 100.0  # learning rates (before batch scaling): real ones are below 10
SEED = 2**32 - 1  # numpy's and the loader generators' range

KEYS: tuple[Key, ...] = (
    # --- the engine (configs/_base_/default_runtime.py) ---
    Key("experiment", None, "str", "results/runs/<experiment>/<run-id>; None: the config file's name"),
    Key("seed", 0, "int", "seeds python, numpy, torch and the loaders", 0, SEED, none=False),
    Key(
        "deterministic",
        False,
        "bool",
        "torch.use_deterministic_algorithms; CPU runs resume bit-identically without it",
        none=False,
    ),
    Key(
        "engine",
        "accelerate",
        "choice",
        "'accelerate' (DDP) or 'deepspeed' (ZeRO); --engine overrides",
        choices=("accelerate", "deepspeed"),
        none=False,
    ),
    Key(
        "precision",
        "fp32",
        "choice",
        "autocast dtype (fp16 only on CUDA, CPU falls back to bf16)",
        choices=("fp32", "bf16", "fp16"),
        none=False,
    ),
    Key("deepspeed.zero_stage", 2, "int", "0-3; 3 shards the weights too (no EMA then)", 0, 3, none=False),
    Key(
        "deepspeed.config",
        {},
        "dict",
        "merged into the DeepSpeed config we build (e.g. zero_optimization=dict(overlap_comm=True))",
    ),
    Key("find_unused_parameters", False, "bool", "DDP's find_unused_parameters", none=False),
    Key(
        "compile.enable",
        False,
        "bool",
        "torch.compile the model's training forward (and backward); evaluation runs eagerly",
        none=False,
    ),
    Key(
        "compile.mode",
        None,
        "choice",
        "None (inductor's default), 'reduce-overhead' (CUDA graphs), 'max-autotune', ...",
        choices=COMPILE_MODES,
    ),
    Key("compile.backend", "inductor", "str", "a torch.compile backend (torch._dynamo.list_backends())", none=False),
    Key(
        "compile.dynamic",
        False,
        "bool",
        "the training shapes are fixed (drop_last): one graph, no dynamic-shape kernels",
    ),
    Key(
        "channels_last", False, "bool", "NHWC weights and image batches (CNNs and conv stems on GPUs with tensor cores)"
    ),
    Key(
        "grad_checkpointing",
        False,
        "bool",
        "the model's set_grad_checkpointing(True): recompute activations in backward",
    ),
    Key(
        "optim.fused",
        None,
        "bool",
        "True: torch's fused kernel (AdamW/Adam/SGD/Adagrad; CPU and CUDA); None: torch's default",
    ),
    Key(
        "optim.foreach",
        None,
        "bool",
        "True/False: torch's multi-tensor (foreach) implementation; None: torch's default",
    ),
    Key(
        "loader.pipeline",
        "cpu",
        "choice",
        "'cpu': timm's transforms in the loader workers; 'device': workers read "
        "bytes, the training device decodes (nvJPEG) and augments in batches (docs/data.md)",
        choices=("cpu", "device"),
        none=False,
    ),
    Key(
        "loader.device_normalize",
        False,
        "bool",
        "image batches leave the workers as uint8 and are normalised "
        "(and randomly erased) on the training device: timm's prefetcher",
    ),
    Key(
        "loader.prefetch_factor",
        None,
        "int",
        "batches each loader worker keeps ready (None: torch's default, 2)",
        1,
        64,
    ),
    Key("loader.persistent_workers", True, "bool", "keep loader workers alive between epochs"),
    Key(
        "epochs",
        300,
        "int",
        "epochs to train (an override rescales the schedule's epoch counts)",
        1,
        EPOCHS,
        none=False,
    ),
    Key(
        "batch_size",
        1024,
        "int",
        "GLOBAL images per optimizer step = processes x per-process batch x grad_accum",
        1,
        BATCH,
        none=False,
    ),
    Key("grad_accum", 1, "int", "micro-batches per optimizer step", 1, 4096, none=False),
    Key("clip_grad", None, "number", "max gradient norm, None: no clipping", 0, INF, open_low=True),
    Key(
        "eval_interval",
        1,
        "int",
        "epochs between evaluations (the last epoch is always evaluated)",
        1,
        EPOCHS,
        none=False,
    ),
    Key("log_interval", 10, "int", "optimizer steps between metrics.jsonl lines", 1, STEPS, none=False),
    Key("log.tensorboard", True, "bool", "TensorBoard events in the run directory's tb/"),
    Key(
        "hang.watchdog",
        True,
        "bool",
        "a rank's hang watchdog (harness/engine/watchdog.py): dump every rank's stacks "
        "and exit 76 (requeued) when a training step takes longer than the bound below",
        none=False,
    ),
    Key(
        "hang.factor",
        20.0,
        "number",
        "... max(factor x the median step x log_interval, floor_s) seconds",
        1,
        10_000,
        none=False,
    ),
    Key(
        "hang.floor_s",
        300.0,
        "number",
        "the least time a step may take before it counts as hung",
        0,
        7 * 86400,
        open_low=True,
        none=False,
    ),
    Key(
        "hang.collective_timeout_s",
        1800,
        "number",
        "the process group's timeout (torch's default: 10 min NCCL, 30 min gloo)",
        0,
        7 * 86400,
        open_low=True,
        none=False,
    ),
    Key(
        "testing.kill_at_step",
        None,
        "int",
        "TEST SWITCH, off unless set (docs/trust.md): the rank "
        "below SIGKILLs itself after this optimizer step, on every attempt (tries the requeue rules on a cluster)",
        1,
        STEPS,
    ),
    Key("testing.kill_rank", None, "int", "... that rank (None: the last)", 0, 2**20),
    Key(
        "testing.step_delay_s",
        0.0,
        "number",
        "TEST SWITCH, off at 0: every rank sleeps this long after each "
        "optimizer step (a job that only has to be training when a signal comes idles instead)",
        0,
        3600,
        none=False,
    ),
    Key(
        "ckpt.interval_steps",
        0,
        "int",
        "also write last.pth every N optimizer steps (0: only at epoch ends and on signals)",
        0,
        STEPS,
    ),
    Key("ckpt.interval_minutes", 30, "number", "... and at least this often (None: off)", 0, 10**6, open_low=True),
    Key(
        "ckpt.best_metric",
        "top1",
        "str",
        "eval metric that picks best.pth ('top1', 'top5', 'ema_top1'; the task's metrics)",
        none=False,
    ),
    Key("model.name", None, "str", "any timm-registered name, ours included (`depthbench models`)"),
    Key("model.pretrained", None, "str", "path to weights to start from (loaded with weights_only=True)"),
    Key("ema.enable", False, "bool", "timm's ModelEmaV3 of the weights", none=False),
    Key("ema.decay", 0.99996, "number", "EMA decay per optimizer step", 0, 1, open_high=True),
    Key("ema.warmup", False, "bool", "timm's EMA warm-up"),
    Key(
        "distill.kind",
        "soft",
        "choice",
        "'soft': soft labels (SReT Eq. 17); 'hard': DeiT's GT + hard distillation",
        choices=("soft", "hard"),
        none=False,
    ),
    Key("distill.teacher", None, "str", "timm name of the teacher, e.g. 'regnety_160'; None: no distillation"),
    Key("distill.teacher_checkpoint", None, "str", "the teacher's trained weights"),
    Key("distill.teacher_kwargs", {}, "dict", "passed to timm.create_model for the teacher"),
    Key("distill.temperature", 1.0, "number", "softmax temperature of the soft targets", 0, INF, open_low=True),
    Key(
        "distill.weight",
        1.0,
        "number",
        "soft: loss = (1 - weight) * task + weight * KD, SReT: 1 (no one-hot term); hard: alpha",
        0,
        1,
    ),
    # --- the data (configs/_base_/datasets/) ---
    Key("data.type", FROM_BASE, "str", "the dataset type: its task reads the data.* keys (harness/tasks/)", none=False),
    Key("data.root", FROM_BASE, "str", "where the data lives (None: the embedded set's cache)"),
    Key("data.workers", FROM_BASE, "int", "loader processes per rank", 0, WORKERS, none=False),
    Key("data.input_size", FROM_BASE, "int", "image side in pixels", 1, IMAGE),
    Key("data.num_classes", FROM_BASE, "int", "classes of the head", 1, 10**6),
    Key("data.eval_batch_size", FROM_BASE, "int", "per process; None: the training batch per process", 1, BATCH),
    Key("data.num_repeats", FROM_BASE, "int", "repeated augmentation's repeats (DeiT's RASampler)", 1, 64),
    Key("data.train_subset", FROM_BASE, "int", "train on a fixed random subset of N samples (quick runs)", 1, 10**10),
    Key("data.val_subset", FROM_BASE, "int", "evaluate on a fixed random subset of N samples", 1, 10**10),
    Key("data.mean", FROM_BASE, "numbers", "per-channel mean of the normalisation, on the 0-1 scale", 0, 1),
    Key(
        "data.std",
        FROM_BASE,
        "numbers",
        "per-channel standard deviation of the normalisation (divides the image: never 0), on the 0-1 scale",
        0,
        1,
        open_low=True,
    ),
    Key(
        "data.crop_pct", FROM_BASE, "number", "eval: resize to input_size / crop_pct, centre crop", 0, 1, open_low=True
    ),
    Key("data.max_length", FROM_BASE, "int", "tokens per sequence (instruction data)", 1, 2**20),
    Key("data.seq_len", FROM_BASE, "int", "tokens per sequence (language modelling)", 1, 2**20),
    Key("data.val_size", FROM_BASE, "int", "records held out for validation", 1, 10**9),
    Key("data.vocab_size", FROM_BASE, "int", "entries of the byte-level BPE trained on data.root", 2, 10**7),
    # --- the augmentation ---
    Key("aug.mixup", FROM_BASE, "number", "mixup alpha (0: off)", 0, INF),
    Key("aug.cutmix", FROM_BASE, "number", "cutmix alpha (0: off)", 0, INF),
    Key("aug.mixup_prob", FROM_BASE, "number", "probability of mixing a batch", 0, 1),
    Key("aug.mixup_switch_prob", FROM_BASE, "number", "probability of cutmix instead of mixup", 0, 1),
    Key("aug.smoothing", FROM_BASE, "number", "label smoothing", 0, 1, open_high=True),
    Key("aug.reprob", FROM_BASE, "number", "random erasing probability", 0, 1),
    Key("aug.hflip", FROM_BASE, "number", "horizontal flip probability", 0, 1),
    Key("aug.color_jitter", FROM_BASE, "number", "colour jitter strength", 0, INF),
    # --- the optimizer and schedule (configs/_base_/schedules/) ---
    Key(
        "optim.lr",
        FROM_BASE,
        "number",
        "learning rate (x batch_size / lr_base_batch when that is set)",
        0,
        LR,
        open_low=True,
        none=False,
    ),
    Key("optim.weight_decay", FROM_BASE, "number", "weight decay", 0, INF),
    Key("optim.momentum", FROM_BASE, "number", "SGD-family momentum", 0, 1),
    Key("optim.eps", FROM_BASE, "number", "Adam-family epsilon", 0, INF, open_low=True),
    Key(
        "optim.lr_base_batch",
        FROM_BASE,
        "number",
        "lr is scaled by batch_size / lr_base_batch (None: no scaling)",
        0,
        INF,
        open_low=True,
    ),
    Key("sched.warmup_epochs", FROM_BASE, "number", "linear warm-up, shorter than epochs", 0, EPOCHS),
    Key("sched.warmup_lr", FROM_BASE, "number", "learning rate the warm-up starts from", 0, LR),
    Key("sched.min_lr", FROM_BASE, "number", "floor of the decay", 0, LR),
    Key(
        "sched.decay_rate",
        FROM_BASE,
        "number",
        "multistep/step: lr *= decay_rate at each milestone",
        0,
        INF,
        open_low=True,
    ),
    Key(
        "sched.decay_milestones",
        FROM_BASE,
        "ints",
        "multistep: epochs from which lr *= decay_rate (PyTorch "
        "MultiStepLR meaning); each inside the run, 1 <= m < epochs",
        1,
        EPOCHS,
    ),
    Key("sched.cooldown_epochs", FROM_BASE, "number", "epochs at min_lr after the decay", 0, EPOCHS),
    # --- the model's regularisation (other model.* keys go to timm.create_model) ---
    Key("model.drop_path_rate", FROM_BASE, "number", "stochastic depth", 0, 1, open_high=True),
    Key("model.drop_rate", FROM_BASE, "number", "dropout before the head", 0, 1, open_high=True),
    # --- MMEngine's configs (depthbench finetune/test; their defaults are the configs' own) ---
    Key(
        "train_cfg.max_iters",
        FROM_BASE,
        "int",
        "iterations of an iteration-based run (an override rescales the schedule)",
        1,
        10**8,
        scope="finetune",
    ),
    Key("train_cfg.max_epochs", FROM_BASE, "int", "epochs of an epoch-based run", 1, EPOCHS, scope="finetune"),
    Key(
        "train_cfg.val_interval", FROM_BASE, "int", "iterations/epochs between validations", 1, 10**8, scope="finetune"
    ),
    Key(
        "train_dataloader.batch_size", FROM_BASE, "int", "images per process and iteration", 1, 65536, scope="finetune"
    ),
    Key("train_dataloader.num_workers", FROM_BASE, "int", "loader processes per rank", 0, WORKERS, scope="finetune"),
    Key("val_dataloader.batch_size", FROM_BASE, "int", "images per process in validation", 1, 65536, scope="finetune"),
    Key("val_dataloader.num_workers", FROM_BASE, "int", "loader processes per rank", 0, WORKERS, scope="finetune"),
    Key("test_dataloader.batch_size", FROM_BASE, "int", "images per process in testing", 1, 65536, scope="finetune"),
    Key("test_dataloader.num_workers", FROM_BASE, "int", "loader processes per rank", 0, WORKERS, scope="finetune"),
    Key("randomness.seed", FROM_BASE, "int", "MMEngine's seed", 0, SEED, scope="finetune"),
)
BY_NAME = {k.name: k for k in KEYS}

# the sections of default_runtime.py, in order, with the comment above each
SECTION_HELP = {
    "compile": "Speed options (issue 27; docs/training.md \"Speed options\"). Each is off by default, and off, "
    "training is bit-identical to a run without the option. --compile/--channels-last/"
    "--grad-checkpointing set them too.",
    "model": "every model key other than name/pretrained is passed to timm.create_model (drop_path_rate=..., "
    "img_size=...); ScaleNet adds grow=dict(k=2, ...) (expand once after loading `pretrained`) or "
    "grow=dict(stages=[dict(epoch=.., ...)])",
    "distill": "distillation when `teacher` is set (harness.tasks.losses.TrainingLoss)",
}


def lookup(cfg, key: str, missing=None):
    """The value of the dotted ``key`` in a (nested) config or dict; ``missing`` when a part is absent."""
    node = cfg
    for part in key.split("."):
        if not hasattr(node, "get") or part not in node:
            return missing
        node = node[part]
    return node


def section_defaults(section: str) -> dict:
    """The schema's defaults of ``section`` (``compile`` -> ``{"enable": False, ...}``): what a config written
    before the section existed gets."""
    return {
        k.name.split(".", 1)[1]: k.default
        for k in KEYS
        if k.name.startswith(section + ".") and k.default is not FROM_BASE
    }


def with_defaults(cfg, section: str) -> dict:
    """``cfg[section]`` over the schema's defaults of that section."""
    return {**section_defaults(section), **(cfg.get(section) or {})}


def section_keys(section: str) -> list[str]:
    """The keys a section of the schema takes (for a type error: ``compile`` takes enable, mode, ...)."""
    return [k.name.split(".", 1)[1] for k in KEYS if k.name.startswith(section + ".")]


def value_problem(key: Key, value) -> str | None:
    """Why ``value`` is not a value of ``key`` (None when it is)."""
    if value is None:
        return None if key.none else "it must be set"
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if key.kind == "bool":
        ok = isinstance(value, bool)
    elif key.kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool) and _inside(key, value)
    elif key.kind == "number":
        ok = number and _finite(value) and _inside(key, value)
    elif key.kind == "numbers":
        ok = (
            isinstance(value, (list, tuple))
            and len(value) > 0
            and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and _finite(v) and _inside(key, v)
                for v in value
            )
        )
    elif key.kind == "ints":
        ok = isinstance(value, (list, tuple)) and all(
            isinstance(v, int) and not isinstance(v, bool) and _inside(key, v) for v in value
        )
    elif key.kind == "choice":
        ok = value in key.choices
    elif key.kind == "str":
        ok = isinstance(value, str)
    elif key.kind == "dict":
        ok = isinstance(value, dict)
    elif key.kind == "list":
        ok = isinstance(value, (list, tuple))
    else:
        ok = True
    return None if ok else f"it must be {key.describe_type(none=False)}"


def _finite(x) -> bool:
    return isinstance(x, int) or math.isfinite(x)  # an int is finite (math.isfinite overflows on 10**400)


def _inside(key: Key, x) -> bool:
    low_ok = x > key.low if key.open_low else x >= key.low
    high_ok = x < key.high if key.open_high else x <= key.high
    return low_ok and high_ok


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def check_values(cfg) -> None:
    """Every key of the schema that ``cfg`` sets has a value of its type and range; one line naming the key and
    what it takes (``epochs=10**30``, ``data.workers=1000000``, ``seed=2**70`` or a negative milestone is refused
    here, before any work). Keys the config does not have are skipped (a dataset without ``crop_pct``). Bounds
    relative to other keys (milestones inside the run) are the schedule's check, after an ``epochs`` override has
    rescaled it (harness.engine.builders.check_schedule_length)."""
    absent = object()
    for key in KEYS:
        value = lookup(cfg, key.name, absent)
        if value is absent:
            continue
        problem = value_problem(key, value)
        if problem and key.kind == "choice":  # the message the choices always had, with the closest choice
            raise ConfigError(not_one_of(key.name, value, key.choices))
        if problem:
            raise ConfigError(f"{key.name}={_shown(value)}: {problem}")


def per_device_batch(batch_size: int, world_size: int, grad_accum: int) -> int:
    """The batch of one process per micro-step: ``batch_size`` is global (processes x per-process batch x
    ``grad_accum``). The one place this is worked out; a batch that does not divide is one line."""
    per_step = world_size * grad_accum
    if batch_size % per_step:
        raise ConfigError(
            f"batch_size={batch_size} (global) is not divisible by {world_size} processes x "
            f"grad_accum={grad_accum}; use a multiple of {per_step}"
        )
    return batch_size // per_step


def describe(cfg=None, name: str | None = None) -> str:
    """Every key of the schema: name, default, type and range, help (``depthbench train --help-config``); with a
    loaded config ``cfg`` (file ``name``), that config's value of each key in place of the default, the default
    beside it where they differ."""
    lines = [
        "Every key a training config takes (harness/core/schema.py; docs/config.md). Set one with key=value,",
        "add a model argument with +model.KEY=value. Defaults marked 'base' come from configs/_base_/datasets/",
        "or schedules/.",
        "",
    ]
    if cfg is not None:
        lines[-1:] = [
            f"Values of {name} (its default in brackets where the config sets another; '-': it has no such key).",
            "",
        ]
    width = max(len(k.name) for k in KEYS)
    absent = object()
    for scope, title in (
        ("train", None),
        ("finetune", "MMEngine configs (depthbench finetune/test); the default is the config's own:"),
    ):
        lines += ["", title] if title else []
        for k in (k for k in KEYS if k.scope == scope):
            default = ("base" if scope == "train" else "config") if k.default is FROM_BASE else repr(k.default)
            shown = default
            if cfg is not None:
                value = lookup(cfg, k.name, absent)
                shown = "-" if value is absent else repr(value)
                shown += f" [{default}]" if value is not absent and shown != default and default != "base" else ""
            lines.append(f"  {k.name:<{width}}  {shown:<12} {k.describe_type()}")
            lines.append(f"  {'':<{width}}  {k.help}")
    return "\n".join(lines)


def render_default_runtime() -> str:
    """The text of configs/_base_/default_runtime.py: the schema's engine defaults, each with its help."""
    out = [
        "# GENERATED from harness/core/schema.py, the one source of every config key's default, type, range and",
        "# help: edit the schema, then `python -m harness.core.schema --write` (a test keeps the two equal).",
        "# Datasets (_base_/datasets/) and schedules (_base_/schedules/) fill in data/aug and optim/sched.",
        "# Command-line `key=value` overrides may only name keys that exist; `+key=value` adds one.",
        "# `depthbench train --help-config` lists every key with its range (docs/config.md).",
    ]

    def comment(text: str, indent: str) -> list[str]:
        return [indent + "# " + line for line in textwrap.wrap(text, 116 - len(indent))]

    sections: dict[str, list[Key]] = {}
    for k in KEYS:
        if k.default is not FROM_BASE:
            sections.setdefault(k.name.split(".")[0], []).append(k)
    for name, keys in sections.items():
        if name in SECTION_HELP:
            out += [""] + comment(SECTION_HELP[name], "")
        if "." not in keys[0].name:
            out += comment(keys[0].help, "") + [f"{name} = {keys[0].default!r}"]
            continue
        out.append(f"{name} = dict(")
        for k in keys:
            out += comment(k.help, "    ") + [f"    {k.name.split('.', 1)[1]}={_literal(k.default)},"]
        out.append(")")
    return "\n".join(out) + "\n"


def _literal(value) -> str:
    return "dict()" if value == {} else repr(value)


if __name__ == "__main__":  # python -m harness.core.schema [--write]
    import sys
    from pathlib import Path

    target = Path(__file__).resolve().parents[2] / "configs/_base_/default_runtime.py"
    if sys.argv[1:] == ["--write"]:
        target.write_text(render_default_runtime())
    else:
        print(render_default_runtime(), end="")
