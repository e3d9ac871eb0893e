"""The FLOP convention (harness/measure/flops.py) on modules whose MACs are known by hand, and on the baselines."""
import pytest
import torch
from torch import nn
import torch.nn.functional as F

from harness.engine.models import build_model
from harness.measure import flops
from harness.measure.flops import MetaOutputs, count_flops, count_params


def test_linear_and_conv_count_one_flop_per_multiply_accumulate():
    assert count_flops(nn.Linear(10, 7), inputs=(torch.randn(3, 10),)).total == 3 * 10 * 7
    conv = nn.Conv2d(4, 6, kernel_size=3, padding=1)
    # every output element (6 x 8 x 8) takes 4*3*3 MACs
    assert count_flops(conv, inputs=(torch.randn(1, 4, 8, 8),)).total == 6 * 8 * 8 * 4 * 9


def test_norms_follow_fvcore():
    x = torch.randn(2, 5, 16)
    assert count_flops(nn.LayerNorm(16), inputs=(x,)).total == 5 * x.numel()
    assert count_flops(nn.LayerNorm(16, elementwise_affine=False), inputs=(x,)).total == 4 * x.numel()
    y = torch.randn(2, 8, 4, 4)
    assert count_flops(nn.BatchNorm2d(8), inputs=(y,)).total == 2 * y.numel()  # eval mode, affine
    assert count_flops(nn.GroupNorm(2, 8), inputs=(y,)).total == 5 * y.numel()


class _Attention(nn.Module):
    def forward(self, q):
        return F.scaled_dot_product_attention(q, q, q)


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_attention_products_are_counted_with_fused_sdpa(device):
    b, h, n, d = 1, 3, 10, 8
    q = torch.randn(b, h, n, d, device=device)
    # q@kᵀ and attn@v: 2 · n·n·d MACs per head
    assert count_flops(_Attention(), inputs=(q,)).total == 2 * b * h * n * n * d


def test_meta_and_real_tensors_agree_on_a_timm_model():
    meta = build_model("deit_tiny_patch16_224", img_size=64)
    real = build_model("deit_tiny_patch16_224", device="cpu", img_size=64)
    assert count_flops(meta, 64).total == count_flops(real, 64).total
    assert count_params(meta) == count_params(real)


aten = torch.ops.aten
META_CASES = [  # (op, args): contiguous and not, several ranks and dtypes, multi-dimensional normalized_shape
    *[(aten.native_layer_norm.default, (torch.empty(shape, dtype=dtype, device="meta"), norm, None, None, 1e-5))
      for shape, norm in (((2, 5, 8), [8]), ((3, 4, 6, 6), [6, 6]), ((7, 8), [8]))
      for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64)],
    (aten.native_layer_norm.default, (torch.empty(2, 5, 8, device="meta").transpose(0, 1), [8], None, None, 1e-5)),
    (aten.addmm.default, (torch.empty(4, device="meta"), torch.empty(3, 6, device="meta"),
                          torch.empty(4, 6, device="meta").t())),
    (aten.addmm.default, (torch.empty(3, 4, device="meta"), torch.empty(6, 3, device="meta").t(),
                          torch.empty(6, 4, device="meta"))),
    *[(aten._safe_softmax.default, (torch.empty(2, 3, 5, 5, device="meta"), dim)) for dim in (-1, 1)],
    (aten._safe_softmax.default, (torch.empty(2, 5, 5, device="meta", dtype=torch.bfloat16), -1, torch.float32)),
    (aten._safe_softmax.default, (torch.empty(2, 5, 4, device="meta").transpose(1, 2), -1)),
    *[(aten._softmax.default, (torch.empty(4, 9, device="meta", dtype=dtype), -1, half)) for dtype, half in
      ((torch.float32, False), (torch.float16, True), (torch.bfloat16, False))],
    *[(aten.gelu.default, (torch.empty(2, 7, 16, device="meta"),), kw) for kw in ({}, {"approximate": "tanh"})],
    (aten.gelu.default, (torch.empty(2, 7, 16, device="meta").transpose(1, 2),)),
    *[(op, (torch.empty(2, 3, 4, device="meta", dtype=dtype),)) for dtype in (torch.float32, torch.bfloat16)
      for op in (aten.relu.default, aten.sigmoid.default, aten.silu.default, aten.tanh.default, aten.neg.default,
                 aten.hardswish.default)],
    (aten.relu.default, (torch.empty(2, 3, 4, device="meta", dtype=torch.int64),)),
    (aten.sigmoid.default, (torch.empty(2, 3, 4, device="meta", dtype=torch.int64),)),
    (aten.clamp_min.default, (torch.empty(5, 6, device="meta"), 0.0)),
    (aten.clamp_min.default, (torch.empty(5, 6, device="meta", dtype=torch.int32), 0.5)),
    (aten.roll.default, (torch.empty(2, 8, 8, 4, device="meta"), (3, 3), (1, 2))),
    (aten.roll.default, (torch.empty(2, 8, 8, 4, device="meta").permute(0, 3, 1, 2), (-3,), (2,))),
    *[(op, (a, b)) for op in (aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor) for a, b in (
        (torch.empty(2, 5, 8, device="meta"), torch.empty(8, device="meta")),
        (torch.empty(8, device="meta"), torch.empty(2, 5, 8, device="meta")),
        (torch.empty(2, 1, 8, device="meta"), torch.empty(1, 5, 1, device="meta")),
        (torch.empty(2, 5, 8, device="meta", dtype=torch.bfloat16), torch.empty(8, device="meta")),
        (torch.empty(2, 5, 8, device="meta", dtype=torch.float16), torch.empty((), device="meta")),
        (torch.empty(2, 5, device="meta", dtype=torch.int64), torch.empty(5, device="meta", dtype=torch.int32)),
        (torch.empty(2, 5, device="meta", dtype=torch.int64), torch.tensor(2.0)),
        (torch.empty(2, 5, 8, device="meta").transpose(1, 2), torch.empty(5, device="meta")),
        (torch.empty(4, 1, device="meta").expand(4, 6), torch.empty(6, device="meta")))],
    (aten.add.Tensor, (torch.empty(3, 4, device="meta"), torch.empty(3, 4, device="meta")), {"alpha": 2}),
    *[(op, (torch.empty(3, 4, device="meta", dtype=dtype), scalar)) for op in (aten.mul.Scalar, aten.add.Scalar,
                                                                              aten.div.Scalar)
      for dtype, scalar in ((torch.float16, 2.5), (torch.int64, 3), (torch.int64, 0.5), (torch.float32, 2))],
]


@pytest.mark.parametrize("case", META_CASES, ids=lambda case: str(case[0]))
def test_meta_outputs_are_the_shapes_torch_s_meta_kernels_give(case):
    op, args, kwargs = (*case, {}) if len(case) == 2 else case
    want = op(*args, **kwargs)
    with MetaOutputs():
        got = op(*args, **kwargs)
    want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    assert [(t.shape, t.stride(), t.dtype, t.device.type) for t in got] == \
           [(t.shape, t.stride(), t.dtype, t.device.type) for t in want]


@pytest.mark.parametrize("name, size", [("deit_small_patch16_224", 224), ("steps_swin_tiny", 224),
                                        ("transnext_micro", 224), ("SReT_T", 224), ("resnet18", 224)])
def test_counts_with_meta_outputs_are_the_counts_with_torch_s_kernels(name, size, monkeypatch):
    model = build_model(name)
    fast = count_flops(model, size)
    monkeypatch.setattr(flops, "_META_OUTPUTS", {})
    assert count_flops(model, size) == fast


def test_tied_parameters_are_counted_once():
    shared = nn.Linear(4, 4)
    model = nn.Sequential(shared, nn.ReLU(), shared)
    assert count_params(model) == 4 * 4 + 4


# The papers' baseline numbers (StepsNet Table 1, TransNeXt Table 1): params in M and GMACs at 224².
PAPER_BASELINES = {
    "resnet18": (11.7, 1.8), "resnet34": (21.8, 3.7), "resnet50": (25.6, 4.1),
    "deit_tiny_patch16_224": (5.7, 1.3), "deit_small_patch16_224": (22.1, 4.6), "deit_base_patch16_224": (86.6, 17.6),
    "swin_tiny_patch4_window7_224": (28.3, 4.5), "swin_small_patch4_window7_224": (49.6, 8.8),
    "swin_base_patch4_window7_224": (87.8, 15.5),
}


@pytest.mark.parametrize("name", PAPER_BASELINES)
def test_baselines_round_to_the_papers_numbers(name):
    params_m, flops_g = PAPER_BASELINES[name]
    model = build_model(name)
    assert round(count_params(model) / 1e6, 1) == params_m
    assert round(count_flops(model, 224).giga, 1) == flops_g


class _HandsParameterToSubmodule(nn.Module):
    """timm's PiT passes its cls token (a Parameter) into a submodule, which torch's module tracker trips on."""

    def __init__(self):
        super().__init__()
        self.token = nn.Parameter(torch.zeros(1, 4))
        self.proj = nn.Linear(4, 3)

    def forward(self, x):
        return self.proj(self.token) + x.sum()


def test_models_passing_parameters_between_modules_are_counted():
    model = _HandsParameterToSubmodule()
    assert count_flops(model, inputs=(torch.randn(2),)).total == 4 * 3
    assert model.token.requires_grad  # restored afterwards
    assert round(count_flops(build_model("pit_ti_224"), 224).giga, 1) == 0.7  # PiT-Ti as SReT Table 10 prints it
