"""Model-specific behaviour between epochs, outside the generic loop: :class:`EpochHook` and the two hooks of the
papers -- ScaleNet's depth growth (:class:`GrowthHook`, applying the :class:`GrowthSchedule` beside it; the model
surgery itself is models/scalenet_surgery.py) and SReT's coefficient log (:class:`CoefficientLogHook`).
"""

from __future__ import annotations

from harness.core.errors import ConfigError
from models.scalenet import assert_tied
from models.scalenet_surgery import EXPAND_KEYS, GROW_KEYS, expand, grow, unwrap


class EpochHook:
    """Model-specific behaviour between epochs, outside the generic loop.

    The loop calls :meth:`before_epoch` at the start of every epoch (and once before the optimizer is first
    built, with the epoch training starts or resumes at). Returning a model means the architecture changed:
    the loop rebuilds the optimizer, schedule and EMA for it. :meth:`after_load` runs after a checkpoint was
    loaded into the model. :meth:`after_epoch` runs at the end of every epoch (after its evaluation, before
    last.pth is written) with the run's log: ``log.metrics(kind, **values)`` appends a metrics.jsonl record.
    ``change`` is how the log describes a change.
    """

    change = "changed"

    def before_epoch(self, model, epoch: int):
        return None

    def after_load(self, model) -> None:
        pass

    def after_epoch(self, model, log) -> None:
        pass

    def describe(self) -> str:
        return ""


def growth_stages(cfg) -> list[dict]:
    grow = cfg.model.get("grow")
    if not grow:
        return []
    grow = dict(grow)
    return [dict(s) for s in grow["stages"]] if "stages" in grow else [grow]


class GrowthSchedule:
    """Depth growth at given epochs; the engine calls :meth:`maybe_grow` at the start of every epoch.

    Config (a plain dict: ``model.grow`` in a config file)::

        {"stages": [                       # applied in order; each at the start of its epoch
            {"epoch": 0,                   # default 0 (the paper: expand once, then train 100 epochs)
             "method": "scalenet",         # 'scalenet' → expand() (tied, WSPT); 'grow' → grow() (baselines)
             "k": 2, "adjust": "adapter", "rank": 16, ...},   # any other key: that function's arguments
        ]}

    A dict without ``stages`` is one stage (``{"k": 2}`` = the paper's default at epoch 0). The number of
    stages already applied is kept on the model (``model.scalenet.schedule_steps``), so calling it again at
    the same epoch, or on resume (fresh base model, ``maybe_grow(model, resume_epoch)``, then load the
    checkpoint) applies each stage exactly once.
    """

    def __init__(self, stages: list[dict] | None = None, **stage):
        if stages is not None and stage:
            raise ConfigError("give either stages=[...] or the keys of a single stage, not both")
        self.stages = [self._check(dict(s)) for s in (stages if stages is not None else [stage])]
        epochs = [s["epoch"] for s in self.stages]
        if epochs != sorted(epochs):
            raise ConfigError(f"growth stages must be in epoch order, got epochs {epochs}")

    @classmethod
    def from_config(cls, config: dict) -> "GrowthSchedule":
        config = dict(config)
        return cls(stages=config.pop("stages")) if "stages" in config else cls(**config)

    @staticmethod
    def _check(stage: dict) -> dict:
        stage.setdefault("epoch", 0)
        stage.setdefault("method", "scalenet")

        allowed = EXPAND_KEYS if stage["method"] == "scalenet" else GROW_KEYS if stage["method"] == "grow" else None
        if allowed is None:
            raise ConfigError(f"growth stage method {stage['method']!r}: use 'scalenet' (tied) or 'grow' (baseline)")
        unknown = set(stage) - allowed - {"epoch", "method"}
        if unknown:
            raise ConfigError(
                f"unknown key(s) {sorted(unknown)} in a '{stage['method']}' growth stage; allowed: "
                f"{sorted(allowed | {'epoch', 'method'})}"
            )
        if not isinstance(stage["epoch"], int) or stage["epoch"] < 0:
            raise ConfigError(f"growth stage epoch {stage['epoch']!r} must be a non-negative integer")
        return stage

    def maybe_grow(self, model, epoch: int) -> tuple:
        """Apply every stage due by ``epoch`` that this model has not had; returns (model, changed). When
        changed, rebuild the optimizer (and re-wrap DDP/DeepSpeed): the parameter set is different."""
        inner = unwrap(model)
        done = getattr(getattr(inner, "scalenet", None), "schedule_steps", 0)
        changed = False
        for stage in self.stages[done:]:
            if stage["epoch"] > epoch:
                break
            if inner is not model:
                raise RuntimeError(
                    "maybe_grow needs the bare model (grow before wrapping in DDP/DeepSpeed, then re-wrap)"
                )
            kwargs = {k: v for k, v in stage.items() if k not in ("epoch", "method")}
            (expand if stage["method"] == "scalenet" else grow)(inner, **kwargs)
            inner.scalenet.schedule_steps += 1
            changed = True
        return model, changed


class GrowthHook(EpochHook):
    """ScaleNet depth expansion (WSPT) and its growth baselines: ``model.grow`` in a config, applied by
    :class:`GrowthSchedule` (each stage at the start of its epoch; epoch 0 = expand once, after
    ``model.pretrained`` is loaded, which is the paper's setting)."""

    change = "grown"

    def __init__(self, config: dict):
        try:
            self.schedule = GrowthSchedule.from_config(dict(config))
        except ConfigError as e:
            raise ConfigError(f"model.grow: {e}") from None
        except TypeError as e:  # a stage key the surgery function does not take
            raise ConfigError(f"model.grow: {e}") from None

    def before_epoch(self, model, epoch: int):
        grown, changed = self.schedule.maybe_grow(model, epoch)
        return grown if changed else None

    def after_load(self, model) -> None:
        if getattr(model, "scalenet", None) is not None:
            assert_tied(model)  # weight tying must survive loading a checkpoint

    def describe(self) -> str:
        return "grown " + "; ".join(", ".join(f"{k}={v}" for k, v in s.items()) for s in self.schedule.stages)


class CoefficientLogHook(EpochHook):
    """Logs a model's learnable scalar coefficients once per epoch, for their evolution plot: a model that has
    them exposes ``lrc_coefficients() -> {module: {role: value}}`` (SReT's learnable residual coefficients,
    ``models.sret.SlicedRecursiveTransformer.lrc_coefficients``; read by results.figures.sret_lrc). One
    ``{"kind": "lrc", "epoch": E, "global_step": S, "coefficients": {...}}`` record per epoch, the values at the
    end of epoch E. Any other model logs nothing."""

    def after_epoch(self, model, log) -> None:
        read = getattr(model, "lrc_coefficients", None)
        if read is None:
            return
        try:
            coefficients = read()
        except (RuntimeError, ValueError):  # parameters sharded away from this process (ZeRO-3): nothing to plot
            return
        if coefficients:
            log.metrics("lrc", coefficients=coefficients)


def build_hooks(cfg) -> list[EpochHook]:
    hooks = [GrowthHook(cfg.model.grow)] if cfg.model.get("grow") else []
    return hooks + [CoefficientLogHook()]
