"""The FLOP convention (harness/measure/flops.py) on modules whose MACs are known by hand, and on the baselines."""

import pytest
import torch
from torch import nn
import torch.nn.functional as F

from harness.engine.models import build_model
from harness.measure.flops import count_flops, count_params


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


def test_tied_parameters_are_counted_once():
    shared = nn.Linear(4, 4)
    model = nn.Sequential(shared, nn.ReLU(), shared)
    assert count_params(model) == 4 * 4 + 4


# The papers' baseline numbers (StepsNet Table 1, TransNeXt Table 1): params in M and GMACs at 224².
PAPER_BASELINES = {
    "resnet18": (11.7, 1.8),
    "resnet34": (21.8, 3.7),
    "resnet50": (25.6, 4.1),
    "deit_tiny_patch16_224": (5.7, 1.3),
    "deit_small_patch16_224": (22.1, 4.6),
    "deit_base_patch16_224": (86.6, 17.6),
    "swin_tiny_patch4_window7_224": (28.3, 4.5),
    "swin_small_patch4_window7_224": (49.6, 8.8),
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
