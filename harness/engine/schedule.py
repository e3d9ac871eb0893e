"""The one schedule rescaler of train and finetune: a run made shorter or longer than its recipe brings its
schedule along, so a 4-epoch digits run decays where the 20-epoch recipe would, scaled.

Both configs count the same things -- points of the run (a milestone, where a scheduler begins or ends) and spans
(a warm-up, a period) -- and scale them with one rule, :func:`scale_count`; :func:`rescale_schedule` reads either
kind of config: depthbench's recipes (``epochs``, timm's ``sched``; ``depthbench train``) and MMEngine's
(``train_cfg.max_iters``/``max_epochs``, ``param_scheduler``; ``depthbench finetune``).
"""

from __future__ import annotations

import math
import re

from harness.core.errors import ConfigError
from harness.core.wording import plural


def scale_count(value, factor: float, least: int = 0, most: float = math.inf) -> int:
    """``value`` epochs/iterations of the recipe, in a run ``factor`` times as long: rounded, within
    ``[least, most]`` (a warm-up of 2 steps stays 2, a milestone stays inside the run)."""
    return int(min(most, max(least, round(value * factor))))


def rescale_schedule(cfg, planned, explicit: tuple[str, ...] = ()) -> list[str]:
    """Make ``cfg``'s schedule follow a changed run length and return what changed (for the log and meta.json).
    ``planned``: the recipe's length -- its ``epochs`` (depthbench's configs) or its ``train_cfg`` (MMEngine's);
    keys the command line sets itself (``explicit``) are kept as given."""
    if isinstance(planned, dict) or "param_scheduler" in cfg or "train_cfg" in cfg:
        return _rescale_mmengine(cfg, dict(planned or {}), explicit)
    return _rescale_epochs(cfg, planned, explicit)


def _rescale_epochs(cfg, planned_epochs: int, explicit: tuple[str, ...]) -> list[str]:
    """depthbench's recipes: the recipe's fixed epoch counts (``sched.decay_milestones``, ``warmup_epochs``,
    ``cooldown_epochs``) are scaled by ``epochs / planned_epochs`` (timm's cosine/step schedules already end at the
    run's last epoch)."""
    sched = cfg.get("sched")
    if not sched or not planned_epochs or cfg.epochs == planned_epochs:
        return []
    factor = cfg.epochs / planned_epochs
    changes = []
    if sched.get("decay_milestones") and "sched.decay_milestones" not in explicit:
        # a milestone that lands at or after the end would never fire: dropped (a 1-epoch run does not decay)
        scaled = sorted(
            {m for m in (scale_count(m, factor, least=1) for m in sched.decay_milestones) if m < cfg.epochs}
        )
        changes.append(f"sched.decay_milestones {list(sched.decay_milestones)} -> {scaled}")
        sched.decay_milestones = scaled
    for key in ("warmup_epochs", "cooldown_epochs"):
        value = sched.get(key)
        if value and f"sched.{key}" not in explicit:
            scaled = scale_count(value, factor)
            changes.append(f"sched.{key} {value} -> {scaled}")
            sched[key] = scaled
    return changes


# MMEngine's parameter schedulers (``<stem>LR``/``<stem>Momentum``/``<stem>ParamScheduler``) whose positions and
# lengths are the keys below; any other scheduler cannot be rescaled safely, so an override of the run's length
# then says which key to set instead
SCHEDULER_STEMS = (
    "Constant",
    "CosineAnnealing",
    "CosineRestart",
    "Exponential",
    "Linear",
    "MultiStep",
    "OneCycle",
    "Poly",
    "QuadraticWarmup",
    "Step",
)
POSITION_KEYS = ("begin", "end")  # points of the run: 0 and the end stay put
LENGTH_KEYS = ("T_max", "step_size", "total_steps", "total_iters")  # spans: scaled, at least 1
LIST_KEYS = {"milestones": "position", "periods": "length"}


def _rescale_mmengine(cfg, planned: dict, explicit: tuple[str, ...]) -> list[str]:
    """MMEngine configs: the run's length is ``train_cfg.max_iters`` (iteration-based loops) or
    ``train_cfg.max_epochs`` (epoch-based ones); every
    scheduler counted in that unit has its ``begin``/``end``/``milestones``/``T_max``... scaled by new / planned
    (a warm-up of 50 of 500 iterations is 4 of 40, and at least 2), the validation and checkpoint intervals in
    that unit follow, and ``scale`` (meta.json) says what runs. Keys the command line sets itself (``explicit``,
    e.g. ``param_scheduler=[...]``) are kept as given. Returns what changed; a scheduler it cannot rescale is one
    line naming the key to set."""
    loop = cfg.get("train_cfg") or {}
    key = "max_iters" if "max_iters" in loop else "max_epochs"
    old, new = planned.get(key), loop.get(key)
    if f"train_cfg.{key}" not in explicit or not old or new == old:
        return []
    if not isinstance(new, int) or isinstance(new, bool) or new < 1:
        raise ConfigError(f"train_cfg.{key}={new!r}: give a positive whole number")
    by_epoch, unit = key == "max_epochs", "epochs" if key == "max_epochs" else "iterations"
    factor = new / old

    def position(v):
        if not isinstance(v, (int, float)) or v <= 0 or v > old:  # 0 and "until the end" (INF) stay
            return v
        # a warm-up keeps at least 2 steps: in 1 it would leave the rate at its start factor for good
        return new if v == old else scale_count(v, factor, least=2, most=new)

    def length(v):
        return scale_count(v, factor, least=1, most=new) if isinstance(v, (int, float)) and v < old else v

    changes = []
    if not any(k == "param_scheduler" or k.startswith("param_scheduler.") for k in explicit):
        schedulers = cfg.get("param_scheduler")
        # changed in place, none dropped: MMEngine's resume pairs schedulers with the checkpoint's by position
        for i, scheduler in enumerate([schedulers] if isinstance(schedulers, dict) else list(schedulers or [])):
            if bool(scheduler.get("by_epoch", True)) != by_epoch:  # counted in the other unit (a warm-up in
                continue  # iterations of an epoch-based run)
            name = str(scheduler.get("type", ""))
            stem = name.split(".")[-1]
            for suffix in ("ParamScheduler", "Momentum", "LR"):
                if stem.endswith(suffix):
                    stem = stem[: -len(suffix)]
                    break
            where = f"param_scheduler[{i}] ({name})"
            if stem not in SCHEDULER_STEMS:
                raise ConfigError(
                    f"train_cfg.{key}={new}: {where} cannot be rescaled from {old} to {new} {unit}; "
                    f"set param_scheduler=[...] for {new} {unit} as well"
                )
            before = dict(scheduler)
            for k in POSITION_KEYS:
                if k in scheduler:
                    scheduler[k] = position(scheduler[k])
            for k in LENGTH_KEYS:
                if k in scheduler:
                    scheduler[k] = length(scheduler[k])
            for k, kind in LIST_KEYS.items():
                if scheduler.get(k) and kind == "position":  # a decay before the end stays before it (1x: 8, 11
                    scheduler[k] = sorted(
                        {
                            min(position(v), new - 1) if v < old else v  # of 12 -> 4, 5 of 6)
                            for v in scheduler[k]
                        }
                        - {0}
                    )
                elif scheduler.get(k):
                    scheduler[k] = [length(v) for v in scheduler[k]]
            if scheduler.get("begin", 0) >= scheduler.get("end", float("inf")):
                # starts at the (new) end: kept, so a resume pairs the same schedulers, but it never acts
                scheduler["end"] = scheduler["begin"] + 1
            diff = {k: (before.get(k), scheduler[k]) for k in scheduler if before.get(k) != scheduler[k]}
            if diff:
                changes.append(f"{where} " + ", ".join(f"{k} {a} -> {b}" for k, (a, b) in diff.items()))
    intervals = [("train_cfg.val_interval", loop, "val_interval")]
    checkpoint = (cfg.get("default_hooks") or {}).get("checkpoint")
    if checkpoint and bool(checkpoint.get("by_epoch", True)) == by_epoch:
        intervals.append(("default_hooks.checkpoint.interval", checkpoint, "interval"))
    for name, section, k in intervals:
        value = section.get(k)
        if name not in explicit and isinstance(value, int) and 0 < value < old:
            section[k] = length(value)
            if section[k] != value:
                changes.append(f"{name} {value} -> {section[k]}")
    cfg.scale = describe_scale(cfg.get("scale"), old, new, unit)
    return changes


def describe_scale(scale, old: int, new: int, unit: str) -> str:
    """meta.json's ``scale`` of a run shortened or lengthened from ``old`` to ``new`` ``unit``: the config's own
    label with its count replaced (``embedded coco-shapes 128px, 40 iterations``), else one that says so."""
    if scale:
        noun = unit.removesuffix("s")
        text, n = re.subn(rf"\b{old} {noun}s?\b", plural(new, noun), str(scale))
        return text if n else f"{scale}, {plural(new, noun)}"
    return f"{plural(new, unit.removesuffix('s'))} (the config's {old})"
