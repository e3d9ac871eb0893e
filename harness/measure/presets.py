"""What ``depthbench bench`` offers: its options' names and the papers' pairs of models, apart from the measuring
code (harness/measure/bench.py) so that the command's parser reads them without importing torch."""

from __future__ import annotations

from dataclasses import dataclass, field

AMP_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}  # --amp name -> torch dtype name
MODES = {"infer": ("infer",), "train": ("train",), "both": ("infer", "train")}
# the training step's optimizer (timm's benchmark: SGD with momentum); AdamW in torch's three implementations
OPTIMIZERS = ("sgd", "adamw", "adamw-foreach", "adamw-fused")
# --compare NAME: every model also runs as a variant with one option changed, interleaved with the model itself in
# the same rounds and inputs, and each (model, variant) is a pair: (baseline options, variant options)
COMPARE = {
    "compile": ({}, {"compile": True}),
    "channels-last": ({}, {"channels_last": True}),
    "grad-checkpointing": ({}, {"grad_checkpointing": True}),
    "bf16": ({}, {"amp": "bf16"}),
    "fused": ({"optimizer": "adamw"}, {"optimizer": "adamw-fused"}),
    "foreach": ({"optimizer": "adamw"}, {"optimizer": "adamw-foreach"}),
}
STEP_OPTIONS = ("amp", "channels_last", "compile", "grad_checkpointing", "optimizer")  # what a variant may change


# ------------------------------------------------------------------------------------------------ what to run
@dataclass
class Participant:
    """One model to measure: a registered name, its keyword arguments and input size (C, H, W)."""

    name: str
    kwargs: dict = field(default_factory=dict)
    input_size: tuple = (3, 224, 224)
    label: str = ""
    config: str | None = None  # built as this config trains it (``model.grow`` stages applied)
    overrides: tuple = ()
    options: dict = field(default_factory=dict)  # STEP_OPTIONS this participant runs with besides --amp etc.

    def __post_init__(self):
        self.label = self.label or self.name

    def spec(self) -> dict:
        """What a memory subprocess needs to rebuild exactly this model (Python literals)."""
        return {
            "name": self.name,
            "kwargs": self.kwargs,
            "input_size": tuple(self.input_size),
            "config": self.config,
            "overrides": tuple(self.overrides),
        }


# ------------------------------------------------------------------------------------------- pair presets
@dataclass(frozen=True)
class Pair:
    """A paper's claim about ``candidate`` against ``baseline`` (labels of the preset's participants)."""

    baseline: str
    candidate: str
    claim: str


def _p(name, size=None, label=None, **kwargs) -> Participant:
    return Participant(name, kwargs, (3, size, size) if size else None, label=label or name)


_DEIT_S, _SWIN_T, _SWIN_B = "deit_small_patch16_224", "swin_tiny_patch4_window7_224", "swin_base_patch4_window7_224"
_EQUAL = "equal FLOPs (Table 1), 'no additional operations' (Sec. 5.2): 1.0x expected, target >= 0.95x"

# paper:group -> (participants, pairs). Claims cite the paper (docs/benchmarks.md quotes them with conditions).
PRESETS: dict[str, tuple[list[Participant], list[Pair]]] = {
    "stepsnet:equal-flops": (
        [_p(_DEIT_S), _p("steps_deit_small"), _p(_SWIN_T), _p("steps_swin_tiny"), _p("resnet50"), _p("steps_resnet50")],
        [
            Pair(_DEIT_S, "steps_deit_small", _EQUAL),
            Pair(_SWIN_T, "steps_swin_tiny", _EQUAL),
            Pair("resnet50", "steps_resnet50", _EQUAL),
        ],
    ),
    "stepsnet:equal-accuracy": (
        [_p(_SWIN_B), _p("steps_swin_small")],
        [
            Pair(
                _SWIN_B,
                "steps_swin_small",
                "Fig. 6(a,b), Sec. 5.2: 1.3-1.4x throughput at better accuracy "
                "(Steps-Swin-S 83.6 vs Swin-B 83.5, Table 1), CPU and RTX 3090",
            )
        ],
    ),
    "stepsnet:depth": (
        [_p(f"{p}deit_w136_d{d}") for d in (24, 36, 48, 72, 96) for p in ("", "steps_")]
        + [
            _p(_SWIN_T),
            _p("steps_swin_fixflops_d14"),
            _p("swin_fixflops_d24"),
            _p("steps_swin_tiny"),
            _p("swin_fixflops_d48"),
            _p("swin_fixflops_d72"),
            _p("swin_fixflops_d96"),
        ],
        [
            Pair(f"deit_w136_d{d}", f"steps_deit_w136_d{d}", "Table 5(a): equal FLOPs at equal depth, 1.0x expected")
            for d in (24, 36, 48, 72, 96)
        ]
        + [
            Pair(_SWIN_T, "steps_swin_fixflops_d14", "Table 5(b): 12 vs 14 blocks at 4.5G, 1.0x expected"),
            Pair("swin_fixflops_d24", "steps_swin_tiny", "Table 5(b): 24 vs 26 blocks at 4.5G, 1.0x expected"),
        ]
        + [
            Pair(
                _SWIN_T,
                f"swin_fixflops_d{d}",
                f"Fig. 6(c,d): Swin at {d} blocks loses throughput and gains "
                "memory with depth; Steps-Swin 1.6x faster, 1.3x less memory at large depth (its 48-96-block "
                "models are not recoverable)",
            )
            for d in (24, 48, 72, 96)
        ],
    ),
    "sret:slicing": (
        [_p(f"SReT_{v}{s}") for v in ("T", "LT", "S") for s in ("_wo_slice", "")],
        [
            Pair("SReT_T_wo_slice", "SReT_T", "Table 4: slicing cuts FLOPs 21.4 % (1.4G -> 1.1G); no speed claim"),
            Pair("SReT_LT_wo_slice", "SReT_LT", "Table 4: slicing cuts FLOPs 14.3 % (1.4G -> 1.2G); no speed claim"),
            Pair("SReT_S_wo_slice", "SReT_S", "Table 4: slicing cuts FLOPs 10.6 % (4.7G -> 4.2G); no speed claim"),
        ],
    ),
    "horesnet:schemes": (
        [_p(f"horesnet58_{s}") for s in ("euler", "midpoint", "rk4", "verner")],
        [
            Pair("horesnet58_euler", "horesnet58_midpoint", "Table 2: time 1x, memory 1x"),
            Pair("horesnet58_euler", "horesnet58_rk4", "Table 2: time 1x, memory 1.5x (1x with y = x + k4)"),
            Pair("horesnet58_euler", "horesnet58_verner", "Table 2: time 1.15-1.2x (throughput 0.83-0.87x), memory 7x"),
        ],
    ),
    "transnext:competitors": (
        [_p(_SWIN_T), _p(_DEIT_S), _p("transnext_tiny")],
        [
            Pair(
                _SWIN_T,
                "transnext_tiny",
                "Table 11: 413 vs 790 img/s = 0.52x (V100, fp32, batch 64), at 1.27x the FLOPs (5.7G vs 4.5G)",
            ),
            Pair(_DEIT_S, "transnext_tiny", "no paper figure (DeiT-S is not in Table 11)"),
        ],
    ),
    "transnext:pool-mode": (
        [
            _p("transnext_tiny", 384, "transnext_tiny@384"),
            _p("transnext_tiny", 384, "transnext_tiny@384 linear", pool_mode="linear"),
        ],
        [
            Pair(
                "transnext_tiny@384",
                "transnext_tiny@384 linear",
                "Sec. 3 'linear complexity mode': the pool "
                "fixed at 7x7 makes the cost linear in the tokens (normal mode pools to 1/32 of the input); no "
                "speed figure. Identical to normal mode at 224",
            )
        ],
    ),
}
PAPERS = sorted({key.split(":")[0] for key in PRESETS})
