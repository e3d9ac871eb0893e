"""A CONFIG as its runs will see it on the planned layout (:class:`Plan`): the model, its per-device batch, its
checkpoint size; and which of a sweep's points differ at all (:func:`distinct`), so each is measured once."""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness.core.errors import ConfigError
from harness.core.schema import per_device_batch
from harness.engine.builders import load_training_config, optimizer_name, speed_options
from harness.engine.tasks import task_for
from harness.measure.bench import _plain, build, participant_from_config
from harness.measure.flops import count_flops, count_params, example_inputs
from harness.measure.preflight.common import Target

# optimizer states per parameter in a checkpoint (timm optimizer names); unknown ones count as Adam's two
OPTIMIZER_STATES = {"sgd": 1, "momentum": 1, "nesterov": 1, "lion": 1, "adafactor": 0, "adagrad": 1, "rmsprop": 1}


@dataclass
class Plan:
    """A CONFIG as its runs will see it on the layout: the model, its per-device batch, its checkpoint size."""

    target: Target
    cfg: object
    participant: object
    world: int
    micro_batch: int | None
    problem: str | None
    params: int
    macs: int
    precision: str

    @property
    def label(self) -> str:
        return self.target.label

    @property
    def unit(self) -> str:
        """What a sample is called in rates (img, tok, ...): the task's unit."""
        try:
            return task_for(self.cfg.data.type).unit
        except Exception:
            return "img"

    def optimizer_states(self) -> int:
        opt = str(optimizer_name(self.cfg)).lower().split("_")[-1]
        return OPTIMIZER_STATES.get(opt, 2)

    def ema(self) -> int:
        """1 when the run keeps EMA weights (one more fp32 copy of the model), else 0."""
        return int(self.cfg.ema.enable)

    def checkpoint_bytes(self) -> int:
        """``last.pth``: model weights, optimizer state and EMA weights, all fp32."""
        return 4 * self.params * (1 + self.optimizer_states() + self.ema())

    def best_bytes(self) -> int:
        return 4 * self.params * (1 + self.ema())

    def identity(self) -> dict:
        """What makes a step time reusable: the model, its arguments and input, the precision, the batch."""
        p = self.participant
        return {
            "model": p.name,
            "model_kwargs": p.kwargs,
            "input_size": list(p.input_size),
            "precision": self.precision,
            "micro_batch": self.micro_batch,
            **self.speed_options(),
        }

    def speed_options(self) -> dict:
        """The engine options that change a step's time and memory and that the step check applies (compile is
        not: its compile time does not fit the check's time box; the step is timed eagerly and says so)."""
        options = speed_options(self.cfg)
        return {key: options[key] for key in ("channels_last", "grad_checkpointing")}


def make_plan(target: Target, world: int) -> Plan:
    """Load ``target``'s config (bad input raises :class:`DepthbenchError` here, before any work) and size its
    model on the meta device. ``world``: the ranks the runs will have."""
    cfg, _ = load_training_config(target.config, list(target.overrides))  # as `depthbench train` reads it
    participant = participant_from_config(target.config, target.overrides)
    model = build(participant)
    params = count_params(model)
    try:
        macs = count_flops(model, inputs=example_inputs(model, participant.input_size)).total
    except Exception:  # a model the counter cannot follow still gets every other check
        macs = 0
    accum = cfg.grad_accum
    problem, micro = None, None
    try:
        micro = per_device_batch(cfg.batch_size, world, accum)
    except ConfigError as e:
        problem = f"{e} or another layout"
    precision = cfg.precision
    return Plan(target, cfg, participant, world, micro, problem, params, macs, precision)


def distinct(plans: list[Plan]) -> tuple[list[Plan], dict[str, str]]:
    """The plans whose step, loader and checkpoint differ, and ``{label: the label measured for it}`` for the rest
    (same model, arguments, input, precision, per-device batch, optimizer state and data pipeline)."""
    unique, same, seen = [], {}, {}
    for plan in plans:
        if plan.problem:
            unique.append(plan)
            continue
        cfg = plan.cfg
        key = json.dumps(
            [
                plan.identity(),
                _plain(cfg.get("data") or {}),
                _plain(cfg.get("aug") or {}),
                plan.checkpoint_bytes(),
            ],
            sort_keys=True,
            default=str,
        )
        if key in seen:
            same[plan.label] = seen[key]
        else:
            seen[key] = plan.label
            unique.append(plan)
    return unique, same
