"""SReT models (models/sret.py) against the paper and docs/sret.md: counts, mechanism, checkpoints, determinism.

Expected numbers come from the spec (§3, §7) or from reasoning written out here, never from running the code.
Real forward passes use tiny inputs (32² images: 16/4/1 tokens per stage) to stay fast on CPU.
"""

from __future__ import annotations

import copy
import math

import pytest
import timm
import torch
import torch.nn.functional as F
from timm.layers.attention import Attention
from timm.models.vision_transformer import Block

import models  # noqa: F401  (registers the models)
from harness.engine.models import build_model
from harness.measure.flops import count_flops, count_params
from harness.core.errors import DepthbenchError
from harness.engine.checkpoint import load_weights
from models.sret import (
    LRC_LABELS,
    InferenceLinear,
    LRCBlock,
    LearnableCoefficient,
    MixedDepthLogits,
    NonLinearProjection,
    RecursiveMlpMixer,
    SlicedGroupAttention,
    lrc_coefficients,
)

OFFICIAL_NAMES = [
    "SReT_T",
    "SReT_LT",
    "SReT_S",
    "SReT_T_distill",
    "SReT_LT_distill",
    "SReT_S_distill",
    "SReT_T_wo_slice",
    "SReT_LT_wo_slice",
    "SReT_S_wo_slice",
    "SReT_LT_wo_slice_distill",
    "SReT_S_wo_slice_finetune_384",
]
SMALL = 32  # image side for real forward passes


pytestmark = pytest.mark.usefixtures("one_thread")


def tiny(name: str = "SReT_T", **kwargs):
    torch.manual_seed(0)
    return timm.create_model(name, img_size=SMALL, **kwargs)


def image(batch: int = 2, seed: int = 1) -> torch.Tensor:
    return torch.randn(batch, 3, SMALL, SMALL, generator=torch.Generator().manual_seed(seed))


# ------------------------------------------------------------------------------------------- registry, counts


def test_official_names_are_registered_in_family_sret():
    names = set(timm.list_models(module="sret"))
    missing = [n for n in OFFICIAL_NAMES if n not in names]
    assert not missing, f"not registered: {missing}"


@pytest.mark.parametrize(
    "name,size,expected",
    [
        ("SReT_T", 224, 4_755_979),
        ("SReT_LT", 224, 4_988_024),
        ("SReT_S", 224, 20_899_692),
        ("SReT_T_wo_slice", 224, 4_755_979),
        ("SReT_S_wo_slice_distill", 224, 20_899_692),
        ("SReT_T", 384, 4_853_259),
        ("SReT_LT", 384, 5_085_304),
        ("SReT_S", 384, 21_091_212),
        ("SReT_T", 512, 4_967_947),
        ("SReT_LT", 512, 5_199_992),
        ("SReT_S", 512, 21_317_004),
    ],
)
def test_parameter_counts_match_spec_exactly(name, size, expected):
    assert count_params(build_model(name, img_size=size)) == expected  # spec §7.1


def test_finetune_variants_have_their_resolution():
    assert count_params(build_model("SReT_S_wo_slice_finetune_384")) == 21_091_212
    assert count_params(build_model("SReT_S_wo_slice_finetune_512")) == 21_317_004


def test_sret_t_parameter_breakdown():
    m = build_model("SReT_T")

    def n(module):
        return sum(p.numel() for p in module.parameters())

    assert n(m.patch_embed) == 56_640 and m.pos_embed.numel() == 50_176  # spec §3
    assert [n(p) for p in m.pools] == [1_280, 2_560]
    assert n(m.norm) + n(m.head) == 257_512
    assert [n(s) for s in m.transformers] == [127_068, 1_257_380, 3_003_363]
    # closed forms (spec §3): block = 4C² + 2Ch + 9C + h + 4, NLL = 2Ch' + 3C + h' + 2
    for stage, c in zip(m.transformers, (64, 128, 256)):
        h = int(c * 3.6)
        assert n(stage.blocks[0]) == 4 * c * c + 2 * c * h + 9 * c + h + 4
        assert n(stage.blocks[1]) == 2 * c * c + 3 * c + c + 2


def test_sret_b_as_printed_reproduces_the_spec_count():
    # spec §8.1: built as printed (with the usual C0/2→C0→C0 stem) SReT-B has 145,588,872 params, not 71.2M
    assert count_params(build_model("SReT_B_as_printed", stem_channels=(168, 336, 336))) == 145_588_872


def test_weight_sharing_structure():
    m = build_model("SReT_T")
    blocks = [s.blocks for s in m.transformers]
    distinct = [len({id(b) for b in bl if isinstance(b, LRCBlock)}) for bl in blocks]
    applications = [sum(isinstance(b, LRCBlock) for b in bl) for bl in blocks]
    nlls = [b for bl in blocks for b in bl if isinstance(b, NonLinearProjection)]
    assert distinct == [2, 5, 3] and applications == [4, 10, 6]  # spec §7.3, §7.18 (20 layers)
    assert len(nlls) == 20 and len({id(b) for b in nlls}) == 20
    params = list(m.parameters())
    assert len({id(p) for p in params}) == len(params)
    coefficients = [mod for mod in m.modules() if isinstance(mod, LearnableCoefficient)]
    assert len(coefficients) == 10 * 4 + 20 * 2 == 80
    real = tiny()
    assert all(float(c.bias.detach()) == 1.0 for c in real.modules() if isinstance(c, LearnableCoefficient))
    # the interleaved official order: B0, N0, B0, N1, B1, N2, B1, N3
    b = real.transformers[0].blocks
    assert b[0] is b[2] and b[4] is b[6] and b[0] is not b[4]


def test_shared_block_gradient_sums_both_loops():
    shared = tiny("SReT_T").eval()
    untied = copy.deepcopy(shared)
    stage = untied.transformers[0].blocks
    stage[2] = copy.deepcopy(stage[0])  # the second loop of block 0 gets its own copy of the weights
    x = image()
    shared(x).square().mean().backward()
    untied(x).square().mean().backward()
    g_shared = shared.transformers[0].blocks[0].attn.qkv.weight.grad
    g_first, g_second = stage[0].attn.qkv.weight.grad, stage[2].attn.qkv.weight.grad
    assert g_second.abs().sum() > 0 and g_first.abs().sum() > 0
    torch.testing.assert_close(g_shared, g_first + g_second, rtol=1e-4, atol=1e-6)


# ------------------------------------------------------------------------------------------ forward / backward


@pytest.mark.parametrize("name", sorted(timm.list_models(module="sret")))
def test_forward_backward_every_variant(name):
    # SReT_B_as_printed (145M params) runs on the meta device: same graph, no 1.2 GB of weights and gradients
    device = "meta" if name == "SReT_B_as_printed" else "cpu"
    with torch.device(device):
        model = tiny(name, num_classes=10)
    model.train()
    out = model(image(batch=1).to(device))
    outputs = list(out) if isinstance(out, tuple) else [out]
    assert all(o.shape == (1, 10) for o in outputs)
    sum(o.float().square().mean() for o in outputs).backward()
    missing = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not missing, f"no gradient for {missing[:5]}"
    if device == "cpu":
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize(
    "name,size,channels,grids",
    [
        ("SReT_T", 224, (64, 128, 256), (28, 14, 7)),
        ("SReT_S", 224, (126, 252, 504), (28, 14, 7)),
        ("SReT_T_finetune_384", 384, (64, 128, 256), (48, 24, 12)),
    ],
)
def test_stage_shapes(name, size, channels, grids):
    m = build_model(name)
    maps = m.forward_stages(torch.empty(2, 3, size, size, device="meta"))
    assert [tuple(t.shape) for t in maps] == [(2, c, g, g) for c, g in zip(channels, grids)]  # spec §7.10
    assert m(torch.empty(2, 3, size, size, device="meta")).shape == (2, 1000)


# ------------------------------------------------------------------------------------- sliced group attention


def _attention(dim=16, heads=2):
    torch.manual_seed(3)
    return SlicedGroupAttention(dim, num_heads=heads, qkv_bias=True).eval()


def test_one_group_equals_plain_attention():
    sliced = _attention()
    plain = Attention(16, num_heads=2, qkv_bias=True).eval()
    plain.load_state_dict(sliced.state_dict())
    x = torch.randn(2, 12, 16)
    torch.testing.assert_close(sliced(x, groups=1), plain(x), atol=1e-5, rtol=1e-5)  # spec §7.11


def _reference_sliced_attention(attn, x, groups, perm):
    """Algorithm 1 written out: attention per contiguous group of x[:, perm], inverse, then proj."""
    B, L, C = x.shape
    heads, d = attn.num_heads, C // attn.num_heads
    xp = x[:, perm]
    q, k, v = F.linear(xp, attn.qkv.weight, attn.qkv.bias).split(C, dim=-1)
    out = torch.zeros_like(xp)
    n = L // groups
    for g in range(groups):
        rows = slice(g * n, (g + 1) * n)
        for h in range(heads):
            cols = slice(h * d, (h + 1) * d)
            weights = torch.softmax(q[:, rows, cols] @ k[:, rows, cols].transpose(1, 2) / math.sqrt(d), dim=-1)
            out[:, rows, cols] = weights @ v[:, rows, cols]
    out = out[:, torch.argsort(perm)]
    return F.linear(out, attn.proj.weight, attn.proj.bias)


def test_sliced_attention_matches_written_out_algorithm():
    attn, x = _attention(), torch.randn(2, 12, 16)
    perm = torch.randperm(12, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(
        attn(x, groups=3, perm=perm), _reference_sliced_attention(attn, x, 3, perm), atol=1e-5, rtol=1e-5
    )  # spec §7.12
    identity = torch.arange(12)
    torch.testing.assert_close(
        attn(x, groups=4), _reference_sliced_attention(attn, x, 4, identity), atol=1e-5, rtol=1e-5
    )  # loop 1: contiguous chunks


def test_inverse_permutation_restores_token_order():
    attn, x = _attention(), torch.randn(2, 12, 16)
    perm = torch.randperm(12, generator=torch.Generator().manual_seed(7))
    # global attention is permutation-equivariant: permute → attend → inverse == attend (spec §7.13)
    torch.testing.assert_close(attn(x, groups=1, perm=perm), attn(x, groups=1), atol=1e-5, rtol=1e-5)
    # without the inverse the tokens stay shuffled (Table 5's "P")
    shuffled = attn(x, groups=1, perm=perm, inverse=False)
    torch.testing.assert_close(shuffled, attn(x, groups=1)[:, perm], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(shuffled, attn(x, groups=1), atol=1e-3)


@pytest.mark.parametrize("training", [False, True])
def test_model_undoes_its_permutation_before_the_projection(training):
    # One group everywhere: permute → attend → inverse is the identity (spec §7.13), so "P+I" (which permutes
    # even where G = 1) must give the unpermuted model's output, and "P" (no inverse) must not.
    x = image()
    outputs = {}
    for design in ("none", "P+I", "P"):
        model = tiny("SReT_T_wo_slice", permutation=design, drop_path_rate=0.0).train(training)
        with torch.no_grad():
            outputs[design] = model(x)
    torch.testing.assert_close(outputs["P+I"], outputs["none"], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(outputs["P"], outputs["none"], atol=1e-3)


def test_theorem_1_attention_cost():
    class Loops(torch.nn.Module):
        def __init__(self, loops, groups):
            super().__init__()
            self.attn, self.loops, self.groups = SlicedGroupAttention(64, num_heads=2, qkv_bias=True), loops, groups

        def forward(self, x):
            for _ in range(self.loops):
                x = self.attn(x, groups=self.groups)
            return x

    def macs(loops, groups):
        with torch.device("meta"):
            module = Loops(loops, groups)
        by_op = count_flops(module, inputs=(torch.empty(1, 784, 64, device="meta"),)).by_op
        linear = sum(v for k, v in by_op.items() if k.startswith(("addmm", "mm")))
        return sum(by_op.values()) - linear, linear

    matmul_2x2, linear_2 = macs(2, 2)
    matmul_1x1, linear_1 = macs(1, 1)
    assert matmul_2x2 == matmul_1x1 == 2 * 784**2 * 64 == 78_675_968  # spec §7.9: (N/G)·2L²D
    assert linear_1 == 784 * 4 * 64 * 64 and linear_2 == 2 * linear_1  # qkv + proj scale with the loops


# ----------------------------------------------------------------------------------------- permutation modes


def test_eval_is_deterministic_by_default_and_official_mode_is_stochastic():
    model, x = tiny().eval(), image()
    with torch.no_grad():
        assert torch.equal(model(x), model(x))
        fresh = tiny().eval()  # the fixed permutations depend on the seed only, not on the instance
        assert torch.equal(fresh(x), model(x))
        model.eval_permutation = "random"
        torch.manual_seed(11)
        a = model(x)
        b = model(x)
        torch.manual_seed(11)
        c = model(x)
    assert not torch.equal(a, b)  # spec §7.14: stochastic eval in the official code ...
    assert torch.equal(a, c)  # ... reproducible with the same seed


def test_training_draws_a_fresh_permutation_per_step():
    model, x = tiny(drop_path_rate=0.0).train(), image()
    torch.manual_seed(5)
    a = model(x)
    b = model(x)
    torch.manual_seed(5)
    c = model(x)
    assert not torch.allclose(a, b) and torch.allclose(a, c)


def test_unsliced_model_has_no_permutation_randomness():
    model, x = tiny("SReT_T_wo_slice", drop_path_rate=0.0).train(), image()
    assert torch.allclose(model(x), model(x), atol=1e-5)


# ---------------------------------------------------------------------------------------------------- LRC


def test_lrc_at_one_is_a_plain_block_and_zero_branch_is_identity():
    torch.manual_seed(0)
    lrc = LRCBlock(16, 2, qkv_bias=True, lrc="both").eval()
    plain = Block(16, 2, qkv_bias=True).eval()
    missing, unexpected = plain.load_state_dict(lrc.state_dict(), strict=False)
    assert not missing and all(k.startswith("coefficient") for k in unexpected)
    x = torch.randn(2, 6, 16)
    torch.testing.assert_close(lrc(x), plain(x))  # spec §7.15
    with torch.no_grad():
        lrc.coefficient2.bias.zero_()
    torch.testing.assert_close(lrc(x), x + lrc.mlp(lrc.norm2(x)))


def test_lrc_design_variants_have_the_right_coefficients():
    for design, on_identity, on_branch in (("identity", True, False), ("branch", False, True), ("none", False, False)):
        block = LRCBlock(8, 2, lrc=design)
        assert isinstance(block.coefficient1, LearnableCoefficient) == on_identity
        assert isinstance(block.coefficient2, LearnableCoefficient) == on_branch


def test_lrc_coefficients_hook_reports_values_by_role():
    model = tiny()
    with torch.no_grad():
        model.transformers[0].blocks[0].coefficient4.bias.fill_(0.25)
        model.transformers[2].blocks[1].coefficient1.bias.fill_(2.0)
    values = lrc_coefficients(model)
    assert len(values) == 10 + 20  # a shared block once, every NLL
    assert values["transformers.0.blocks.0"] == {"attn_id": 1.0, "attn_res": 1.0, "ffn_id": 1.0, "ffn_res": 0.25}
    assert values["transformers.2.blocks.1"] == {"nll_id": 2.0, "nll_res": 1.0}
    assert "transformers.0.blocks.2" not in values  # the second loop of the same block
    assert set(LRC_LABELS) == {"attn_id", "attn_res", "ffn_id", "ffn_res", "nll_id", "nll_res"}
    assert model.lrc_coefficients() == values


def test_no_weight_decay_group_holds_lrc_biases_norms_and_pos_embed():
    from timm.optim import param_groups_weight_decay

    model = build_model("SReT_T")
    groups = param_groups_weight_decay(model, 0.05, no_weight_decay_list=model.no_weight_decay())
    no_decay = {id(p) for g in groups if g["weight_decay"] == 0 for p in g["params"]}
    named = dict(model.named_parameters())
    expected = [
        n
        for n in named
        if n.endswith(".bias") or ".norm" in n or n.startswith("norm.") or n == "pos_embed" or ".bn" in n
    ]
    assert named["pos_embed"] is not None and id(named["pos_embed"]) in no_decay  # spec §7.17
    assert all(id(named[n]) in no_decay for n in expected)
    assert id(named["transformers.0.blocks.0.attn.qkv.weight"]) not in no_decay


# ------------------------------------------------------------------------------------------------ checkpoints


def official_key_list(num_blocks=(2, 5, 3), loops=2) -> list[str]:
    """The official SReT.py state-dict keys, from its layout (anchors §2.3), written out independently."""
    keys = ["pos_embed"]
    for i in (1, 2, 3):
        keys += [f"patch_embed.conv{i}.weight", f"patch_embed.conv{i}.bias"]
        keys += [
            f"patch_embed.bn{i}.{k}" for k in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")
        ]
    block = [
        "norm1.weight",
        "norm1.bias",
        "attn.qkv.weight",
        "attn.qkv.bias",
        "attn.proj.weight",
        "attn.proj.bias",
        "norm2.weight",
        "norm2.bias",
        "mlp.fc1.weight",
        "mlp.fc1.bias",
        "mlp.fc2.weight",
        "mlp.fc2.bias",
        "coefficient1.bias",
        "coefficient2.bias",
        "coefficient3.bias",
        "coefficient4.bias",
    ]
    nll = [
        "norm1.weight",
        "norm1.bias",
        "mlp.fc1.weight",
        "mlp.fc1.bias",
        "mlp.fc2.weight",
        "mlp.fc2.bias",
        "coefficient1.bias",
        "coefficient2.bias",
    ]
    for s, a in enumerate(num_blocks):
        for k in range(2 * a * loops):  # even k: a (shared) block, odd k: an NLL
            keys += [f"transformers.{s}.blocks.{k}.{key}" for key in (block if k % 2 == 0 else nll)]
    keys += [f"pools.{s}.conv.{p}" for s in (0, 1) for p in ("weight", "bias")]
    keys += ["norm.weight", "norm.bias", "head.weight", "head.bias"]
    return keys


def _official_file(state: dict, path):
    """An official-style file: DeiT's ``{"model": state_dict, "epoch": ...}``."""
    torch.save({"model": state, "epoch": 299}, path)
    return path


def test_state_dict_has_the_official_keys_including_shared_copies():
    assert sorted(build_model("SReT_T").state_dict()) == sorted(official_key_list())


def test_official_checkpoint_round_trip_keeps_shared_tensors_tied(tmp_path):
    source = tiny()
    with torch.no_grad():  # make the coefficients and BN statistics non-trivial
        for p in source.parameters():
            p.add_(0.01 * torch.randn_like(p))
        source.patch_embed.bn1.running_mean.fill_(0.3)
    target = tiny()
    report = load_weights(target, _official_file(source.state_dict(), tmp_path / "SReT_T.pth"))  # the one loader
    assert report.complete and not report.missing and not report.unexpected
    shared = target.transformers[0].blocks
    assert shared[0] is shared[2] and shared[0].attn.qkv.weight is shared[2].attn.qkv.weight
    assert len(list(target.parameters())) == len(list(source.parameters()))
    x = image()
    with torch.no_grad():
        torch.testing.assert_close(target.eval()(x), source.eval()(x))


def test_checkpoint_with_one_copy_per_shared_block_loads_and_disagreeing_copies_are_refused():
    source = tiny()
    state = source.state_dict()
    second_copies = [k for k in state if k.startswith("transformers.0.blocks.2.")]
    deduplicated = {k: v for k, v in state.items() if k not in second_copies}
    assert load_weights(tiny(), {"model": deduplicated}).complete
    broken = dict(state)
    broken["transformers.0.blocks.2.attn.qkv.weight"] = state["transformers.0.blocks.2.attn.qkv.weight"] + 1
    with pytest.raises(DepthbenchError, match="shared block"):
        load_weights(tiny(), {"model": broken})


def test_checkpoint_pos_embed_is_resized_for_finetuning_and_timm_file_loading_works(tmp_path):
    source = timm.create_model("SReT_T", img_size=64)
    path = tmp_path / "SReT_T.pth"
    torch.save({"model": source.state_dict()}, path)
    model = timm.create_model("SReT_T", img_size=96, pretrained=True, pretrained_cfg_overlay={"file": str(path)})
    assert model.pos_embed.shape == (1, 64, 12, 12)
    torch.testing.assert_close(model.head.weight, source.head.weight)


# ------------------------------------------------------------------------------------------ mixed depth, heads


def test_mixed_depth_branches():
    model, x = tiny("SReT_T_wo_slice", mixed_depth=True, drop_path_rate=0.0).train(), image()
    calls = []
    for m in model.modules():
        if isinstance(m, LRCBlock):
            m.register_forward_hook(lambda *_: calls.append(1))
    out = model(x)
    assert isinstance(out, MixedDepthLogits)
    assert len(calls) == 20 + 10  # deep: 10 blocks × 2 loops; shallow: each block once
    assert not torch.allclose(out.deep, out.shallow)
    torch.testing.assert_close(out.shallow, model.forward_head(model.forward_features(x, max_loops=1)))
    model.eval()
    plain = tiny("SReT_T_wo_slice").eval()
    plain.load_state_dict(model.state_dict())  # incl. the BN statistics the training passes updated
    with torch.no_grad():
        torch.testing.assert_close(model(x), plain(x))  # inference uses the deep branch


def test_distill_head_option():
    model, x = tiny("SReT_T", distill_head=True), image()
    cls, dist = model.train()(x)
    assert cls.shape == dist.shape == (2, 1000)
    model.eval()
    with torch.no_grad():
        feat = model.forward_head(model.forward_features(x), pre_logits=True)
        torch.testing.assert_close(model(x), (model.head(feat) + model.head_dist(feat)) / 2)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(lrc="sometimes"), "lrc="),
        (dict(groups=((3, 1), (1, 1), (1, 1))), "not divisible"),
        (dict(eval_permutation="never"), "eval_permutation="),
        (dict(class_token=True), "class_token"),
        (dict(loops=0), "loops="),
    ],
)
def test_bad_arguments_raise_one_clear_line(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_model("SReT_T", **kwargs)


def test_wrong_input_size_is_reported():
    with pytest.raises(ValueError, match="img_size=224"):
        build_model("SReT_T")(torch.empty(1, 3, 256, 256, device="meta"))


# ------------------------------------------------------------------------------------------ inference fusion


def _trained_looking(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` in float64, eval mode, with coefficients far from their initial 1 (negative ones too), every
    other parameter perturbed and non-trivial BatchNorm statistics: what folding must get right."""
    model = model.double().eval()
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g, dtype=p.dtype))
        for m in model.modules():
            if isinstance(m, LearnableCoefficient):
                m.bias.uniform_(-1.5, 1.5, generator=g)
            elif isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5, generator=g)
                m.running_var.uniform_(0.5, 2.0, generator=g)
    return model


@pytest.mark.parametrize(
    "name,kwargs",
    [
        ("SReT_T", {}),
        ("SReT_S", {}),
        ("SReT_LT_wo_slice", {}),
        ("SReT_T", {"mixed_depth": True}),
        ("SReT_T", {"mixed_depth": True, "mixed_depth_fusion": "mean_features"}),
        ("SReT_S", {"distill_head": True}),
        ("SReT_T", {"lrc": "identity"}),
        ("SReT_T", {"lrc": "branch"}),
        ("SReT_T", {"lrc": "none"}),
        ("SReT_T_wo_slice", {"stem": "patch"}),
        ("SReT_108_mixed_depth", {"depth": 4}),
        ("SReT_108", {"depth": 3, "nll_ratio": 1.0}),
    ],
)
def test_fused_model_outputs_equal_the_unfused_model(name, kwargs):
    """fuse_for_inference folds c2/c4 (and NLLs' c2) into proj/fc2 and the stem's BNs into its convs: in float64
    the outputs agree to 1e-12 (the folds are exact up to rounding), features included."""
    model = _trained_looking(tiny(name, **kwargs))
    fused = copy.deepcopy(model).fuse_for_inference()
    assert not any(type(m) is LearnableCoefficient or isinstance(m, torch.nn.BatchNorm2d) for m in fused.modules())
    x = image().double()
    with torch.no_grad():
        torch.testing.assert_close(fused(x), model(x), rtol=1e-12, atol=1e-12)
        if hasattr(model, "forward_stages"):
            for a, b in zip(fused.forward_stages(x), model.forward_stages(x)):
                torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_fused_sret_s_float32_outputs_within_1e5_and_recursive_mixer_fuses():
    model = _trained_looking(tiny("SReT_S")).float()
    fused = copy.deepcopy(model).fuse_for_inference()
    # fp32 on CPU: the linear layers run oneDNN's matmul (bias and the MLPs' GELU fused), where it is available
    assert sum(isinstance(m, InferenceLinear) and m.gelu == "none" for m in fused.modules()) == 10 + 20
    x = image()
    with torch.no_grad():
        reference = model.double()(x.double())
        # fp32 rounding of both against the float64 reference: the fused model is no further from it
        err_fused = (fused(x).double() - reference).abs().max()
        err_plain = (model.float()(x).double() - reference).abs().max()
        assert err_fused <= 1e-5 * reference.abs().max() and err_fused <= 4 * err_plain + 1e-7
    torch.manual_seed(0)
    mixer = _trained_looking(
        RecursiveMlpMixer(loops=2, lrc="both", img_size=SMALL, patch_size=8, num_blocks=2, embed_dim=32, num_classes=10)
    )
    fused_mixer = copy.deepcopy(mixer).fuse_for_inference()
    x = image().double()
    with torch.no_grad():
        torch.testing.assert_close(fused_mixer(x), mixer(x), rtol=1e-12, atol=1e-12)


def test_fuse_for_inference_is_idempotent_returns_the_model_and_refuses_training():
    model = _trained_looking(tiny("SReT_T"))
    fused = model.fuse_for_inference()
    assert fused is model and not model.training and model.fused_for_inference
    state = {k: v.clone() for k, v in model.state_dict().items()}
    assert model.fuse_for_inference() is model  # a second call changes nothing
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    # the coefficients left the state dict (c2/c4 are in proj/fc2; c1/c3 moved to residual1/2.bias)
    assert not any(".coefficient" in k for k in state) and "transformers.0.blocks.0.residual1.bias" in state
    assert not any(k.startswith("patch_embed.bn") for k in state)
    with pytest.raises(RuntimeError, match="fused for inference"):
        model.train()
    model.eval()  # evaluation stays allowed
    assert not model.training


# --------------------------------------------------------------------------------- recursive ViT / Mixer


def test_naive_recursive_deit_is_deit_with_repeated_blocks():
    torch.manual_seed(0)
    deit = timm.create_model("deit_tiny_patch16_224", img_size=SMALL, depth=2).eval()
    once = timm.create_model("deit_tiny_naive_recursive", img_size=SMALL, depth=2, loops=1).eval()
    twice = timm.create_model("deit_tiny_naive_recursive", img_size=SMALL, depth=2, loops=2).eval()
    external = timm.create_model(
        "deit_tiny_naive_recursive", img_size=SMALL, depth=2, loops=2, loop_order="external"
    ).eval()
    for m in (once, twice, external):
        m.load_state_dict(deit.state_dict())  # same layout as timm's DeiT
    x = image()
    with torch.no_grad():
        torch.testing.assert_close(once(x), deit(x))
        b0, b1 = deit.blocks
        tokens = deit.norm_pre(deit.patch_drop(deit._pos_embed(deit.patch_embed(x))))
        internal_ref = deit.forward_head(deit.norm(b1(b1(b0(b0(tokens))))))
        external_ref = deit.forward_head(deit.norm(b1(b0(b1(b0(tokens))))))
        torch.testing.assert_close(twice(x), internal_ref)
        torch.testing.assert_close(external(x), external_ref)


def test_recursive_mixer_is_timm_mixer_with_repeated_layers():
    from timm.models.mlp_mixer import MlpMixer

    config = dict(img_size=SMALL, patch_size=16, num_blocks=2, embed_dim=64)
    torch.manual_seed(0)
    mixer = MlpMixer(**config).eval()
    recursive = RecursiveMlpMixer(loops=2, **config).eval()
    recursive.load_state_dict(mixer.state_dict())
    x = image()
    with torch.no_grad():
        b0, b1 = mixer.blocks
        torch.testing.assert_close(recursive(x), mixer.forward_head(mixer.norm(b1(b1(b0(b0(mixer.stem(x))))))))
    assert count_params(build_model("mixer_b16_224_recursive")) == 59_880_472  # spec §2.8


# ----------------------------------------------------------------------------------------------- verify rows


def test_verify_rows_pass_and_slicing_saves_10_to_35_percent():
    """The 'exact' rows of results/tables/sret.yaml pass verify: exact params and the FLOPs cut of slicing."""
    from results.audit import Audit
    from results.paper_tables import load_paper

    tables = {t.id: t for t in load_paper("sret")}
    names = ("SReT-T", "SReT-TL", "SReT-S", "SReT-T @384", "SReT-TL @384", "SReT-S @384")
    rows = [r for r in tables["exact"].rows if r.name in names]
    rows += [r for r in tables["4"].rows if r.name == "SReT-S"] + [r for r in tables["10"].rows if r.name == "SReT-B"]
    for r in rows:  # flops_g is checked by `depthbench verify`; here only the exact counts and the cut (speed)
        r.paper = {k: v for k, v in r.paper.items() if k in ("params", "flops_cut")}
    checks = [c for r in rows for c in Audit(cache=False).check_row(r)]
    by_key = {(c.table, c.row, c.column): c for c in checks}
    for name, params in (("SReT-T", 4_755_979), ("SReT-TL", 4_988_024), ("SReT-S", 20_899_692)):
        check = by_key[("exact", name, "params")]
        assert check.status == "pass" and check.ours == params
    cuts = [by_key[("exact", name, "flops_cut")].ours for name in names]
    assert len(cuts) == 6 and all(10.0 <= cut <= 35.0 for cut in cuts)  # spec §7.8, every variant at 224/384
    assert by_key[("4", "SReT-S", "flops_cut")].status == "pass"  # the printed ↓10.6 %
    assert by_key[("10", "SReT-B", "-")].status == "reason" and "71.2M" in by_key[("10", "SReT-B", "-")].note
    assert not [c for c in checks if c.status in ("fail", "error")]


# ------------------------------------------------------------------------------------------------- TorchScript


def test_torchscript_model_matches_eager_in_eval_and_training():
    """docs/sret.md: the scripted SReT computes what the eager one does, fixed and freshly drawn permutations alike."""
    model, x = tiny(num_classes=10, distill_head=True).eval(), image()
    scripted = torch.jit.script(model)
    with torch.no_grad():
        assert torch.equal(scripted(x), model(x))  # fixed evaluation permutations (buffers)
        model.train()
        scripted.train()
        torch.manual_seed(4)
        cls, dist = model(x)
        torch.manual_seed(4)
        # the same randperm / drop-path draws in the same order; TorchScript has one return type, so the
        # training-mode pair of heads comes back averaged, as from timm's distilled DeiT (docs/sret.md)
        assert torch.equal(scripted(x), (cls + dist) / 2)
    scripted.eval()
    with pytest.raises(Exception, match="img_size"):
        scripted(torch.zeros(1, 3, 64, 64))


def test_torchscript_feature_extraction_matches_eager():
    from timm.models._features import FeatureGetterNet

    getter, x = FeatureGetterNet(tiny("SReT_T_wo_slice", class_token=True), out_indices=(0, 2)).eval(), image()
    with torch.no_grad():
        maps = getter(x)
        assert [m.shape[1] for m in maps] == [64, 256]
        assert all(torch.equal(a, b) for a, b in zip(torch.jit.script(getter)(x), maps))


@pytest.mark.parametrize("loop_order", ["internal", "external"])
def test_torchscript_recursive_deit_with_nlls_matches_eager(loop_order):
    model = timm.create_model(
        "SReT_108_mixed_depth", img_size=SMALL, depth=2, nll_ratio=0.5, loop_order=loop_order
    ).eval()
    x = image()
    with torch.no_grad():
        torch.testing.assert_close(torch.jit.script(model)(x), model(x), rtol=0, atol=0)


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("SReT_108", dict(depth=2, embed_dim=32, num_heads=2, img_size=32, patch_size=16)),
        ("mixer_b16_224_recursive", dict(num_blocks=2, embed_dim=32, img_size=32, patch_size=16)),
    ],
)
def test_grad_checkpointing_recomputes_each_block_application_with_equal_gradients(name, kwargs, monkeypatch):
    """The recursive ViT and Mixer inherit timm's set_grad_checkpointing; their own forward honours it (one
    checkpoint per block application) and the gradients equal the plain backward's."""
    import torch.utils.checkpoint

    torch.manual_seed(0)
    model = timm.create_model(name, num_classes=5, **kwargs).train()
    x = torch.randn(2, 3, 32, 32)
    model(x).square().sum().backward()
    plain = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    calls = []
    original = torch.utils.checkpoint.checkpoint
    monkeypatch.setattr(torch.utils.checkpoint, "checkpoint", lambda *a, **kw: calls.append(1) or original(*a, **kw))
    model.set_grad_checkpointing(True)
    model(x).square().sum().backward()
    assert len(calls) == len(model.blocks) * model.loops
    for n, p in model.named_parameters():
        torch.testing.assert_close(p.grad, plain[n], rtol=1e-5, atol=1e-6, msg=n)
