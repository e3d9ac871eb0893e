"""ScaleNet (models/scalenet.py): weight-shared depth expansion, adjustments, tying through save/load and
distributed wrappers, the WSPT growth schedule, the baselines, the registered variants and the paper-table rows.

Expected numbers come from the paper (section cited; docs/scalenet.md) or from independent arithmetic, never
from running the code under test. Functional checks compare against models the tests build themselves."""

from __future__ import annotations

import copy

import pytest
import timm
import torch
import torch.distributed as dist
from timm.models.swin_transformer import SwinTransformer
from timm.models.vision_transformer import VisionTransformer
from torch import nn

import models  # noqa: F401  (registers the models)
from harness.engine.models import build_model
from harness.measure.flops import count_params
from harness.commands.verify import run as verify_run
from harness.engine.checkpoint import load_weights
from harness.core.errors import ConfigError
from harness.engine.hooks import GrowthSchedule
from models.scalenet_surgery import (
    AdjustedLinear,
    LoRA,
    ParallelAdapter,
    TyingError,
    assert_tied,
    expand,
    grow,
    growth_mapping,
    layer_mapping,
    retie,
    tied_groups,
    tied_state_dict,
)


pytestmark = pytest.mark.usefixtures("one_thread")


def small_deit(depth=4, dim=32, heads=2, **kw):
    torch.manual_seed(0)
    return VisionTransformer(
        img_size=32, patch_size=8, embed_dim=dim, depth=depth, num_heads=heads, num_classes=10, **kw
    )


def small_swin(depths=(2, 2, 2, 2), **kw):
    """Patch 2 on 32² → stage resolutions 16/8/4/2 with window 4: stages 1–2 really shift their windows."""
    torch.manual_seed(0)
    return SwinTransformer(
        img_size=32,
        patch_size=2,
        window_size=4,
        embed_dim=12,
        depths=depths,
        num_heads=(3, 6, 12, 24),
        num_classes=10,
        **kw,
    )


def randomize_adapters(model):
    """Give every adjustment branch non-zero weights (they start at B = 0), so tests can see them act."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (ParallelAdapter, LoRA)):
                m.up.weight.normal_(std=0.1)


# ---------------------------------------------------------------------------------------------------------------
# Layer mappings (spec §2.2, §2.7, §7.8)
# ---------------------------------------------------------------------------------------------------------------


def test_layer_mappings_follow_the_spec():
    assert layer_mapping(12, 2, "interpolate") == [i // 2 for i in range(24)]
    assert layer_mapping(12, 2, "stack") == list(range(12)) * 2
    assert layer_mapping(12, 3, "interpolate") == [i // 3 for i in range(36)]
    assert layer_mapping(2, 3, "stack") == [0, 1, 0, 1, 0, 1]  # Swin-B stage 4 ×3
    # Eq. 6 read 1-based: g(l') = ((l' − 1) mod L) + 1 for l' = 1..2L
    assert layer_mapping(12, 2, "stack") == [((lp - 1) % 12 + 1) - 1 for lp in range(1, 25)]
    # Table III: copies of layers {1,2,3} (1-based) right after their sources, 15 layers
    assert layer_mapping(12, 2, "interpolate", [0, 1, 2]) == [0, 0, 1, 1, 2, 2] + list(range(3, 12))
    assert layer_mapping(12, 1, "interpolate") == list(range(12))
    # Baseline Interpolate (§2.7): L'=13 duplicates block 0; L'=14 duplicates blocks 0 and 6
    assert growth_mapping(12, 1, "interpolate") == [0, 0] + list(range(1, 12))
    assert growth_mapping(12, 2, "interpolate") == [0, 0] + list(range(1, 7)) + [6] + list(range(7, 12))
    assert growth_mapping(12, 2, "stack") == list(range(12)) + [0, 1]
    assert growth_mapping(12, 2, "random") == list(range(12)) + [None, None]


# ---------------------------------------------------------------------------------------------------------------
# Sharing is real (§7.3)
# ---------------------------------------------------------------------------------------------------------------


def test_shared_tensors_are_the_same_objects_and_the_rest_is_per_instance():
    model = expand(small_deit())
    b = model.blocks
    assert len(b) == 8
    for src, copy_ in ((b[0], b[1]), (b[6], b[7])):
        for path in (
            "attn.qkv.weight",
            "attn.qkv.bias",
            "attn.proj.weight",
            "attn.proj.bias",
            "mlp.fc1.weight",
            "mlp.fc1.bias",
            "mlp.fc2.weight",
            "mlp.fc2.bias",
        ):
            assert copy_.get_parameter(path) is src.get_parameter(path), path
        assert copy_.norm1.weight is not src.norm1.weight and torch.equal(copy_.norm1.weight, src.norm1.weight)
        assert copy_.norm2.bias is not src.norm2.bias and torch.equal(copy_.norm2.bias, src.norm2.bias)
        assert copy_.mlp.fc1.adjust is not src.mlp.fc1.adjust
        assert copy_.mlp.fc1.adjust.down.weight is not src.mlp.fc1.adjust.down.weight
    assert b[2].attn.qkv.weight is not b[0].attn.qkv.weight
    assert isinstance(b[1].mlp.fc1, AdjustedLinear) and isinstance(b[1].mlp.fc1, nn.Linear)
    # model.parameters() counts each shared tensor once: 4 groups × 8 tensors tied pairwise
    assert len(tied_groups(model)) == 4 * 8
    assert all(len(g) == 2 for g in tied_groups(model))


def test_swin_shares_bias_tables_and_takes_the_shift_of_its_position():
    model = expand(small_swin())  # default: stage 4, Stack order
    s4 = model.layers[3].blocks
    assert len(s4) == 4 and [len(st.blocks) for st in model.layers] == [2, 2, 2, 4]
    assert s4[2].attn.relative_position_bias_table is s4[0].attn.relative_position_bias_table
    assert s4[3].attn.qkv.weight is s4[1].attn.qkv.weight and s4[3].mlp.fc2.weight is s4[1].mlp.fc2.weight
    # adapters on every block of every stage (§2.4)
    assert all(isinstance(b.mlp.fc1, AdjustedLinear) for st in model.layers for b in st.blocks)

    model = expand(small_swin(), layers=[0], order="interpolate")  # stage 1 is 16×16 with window 4
    s1 = model.layers[0].blocks
    assert [b.shift_size for b in s1] == [(0, 0), (2, 2), (0, 0), (2, 2)]  # by position, not by source
    assert s1[1].attn.qkv.weight is s1[0].attn.qkv.weight and s1[2].attn.qkv.weight is not s1[0].attn.qkv.weight
    assert s1[1].attn_mask is not None and s1[2].attn_mask is None


# ---------------------------------------------------------------------------------------------------------------
# Function at initialisation (§7.4), gradients of shared tensors (§7.4c)
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("adjust", ["adapter", "lora"])
def test_k1_with_zero_initialised_branches_is_the_original_model(adjust):
    base = small_deit().double().eval()
    scaled = expand(copy.deepcopy(base), k=1, adjust=adjust).eval()
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    assert torch.equal(scaled(x), base(x))
    randomize_adapters(scaled)
    assert not torch.allclose(scaled(x), base(x))  # the branches are really in the forward pass


def _untied_reference(blocks, mapping):
    """An explicitly deep-copied stack built with the same source mapping: independent tensors."""
    return nn.Sequential(*[copy.deepcopy(blocks[s]) for s in mapping])


@pytest.mark.parametrize("order", ["interpolate", "stack"])
def test_k2_equals_the_untied_deep_copy_and_shared_grads_are_sums(order):
    base = small_deit().double().eval()
    mapping = [i // 2 for i in range(8)] if order == "interpolate" else [0, 1, 2, 3, 0, 1, 2, 3]
    reference = copy.deepcopy(base)
    reference.blocks = _untied_reference(list(base.blocks), mapping)
    scaled = expand(copy.deepcopy(base), order=order, trainable="all").eval()
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    out_scaled, out_ref = scaled(x), reference(x)
    assert torch.allclose(out_scaled, out_ref, rtol=0, atol=1e-12)
    out_scaled.square().sum().backward()
    out_ref.square().sum().backward()
    for source in range(4):
        positions = [p for p, s in enumerate(mapping) if s == source]
        for path in ("attn.qkv.weight", "attn.proj.bias", "mlp.fc1.weight", "mlp.fc2.bias"):
            shared = scaled.blocks[positions[0]].get_parameter(path)
            copies = [reference.blocks[p].get_parameter(path).grad for p in positions]
            assert torch.allclose(shared.grad, copies[0] + copies[1], rtol=1e-10, atol=1e-12), (source, path)
            assert not torch.allclose(shared.grad, copies[0])  # both instances contribute


def test_swin_stack_equals_the_untied_deep_copy():
    base = small_swin().double().eval()
    reference = copy.deepcopy(base)
    reference.layers[1].blocks = _untied_reference(list(base.layers[1].blocks), [0, 1, 0, 1])
    scaled = expand(copy.deepcopy(base), layers=[1]).eval()  # stage 2 is 8×8, window 4: shifts active
    x = torch.randn(1, 3, 32, 32, dtype=torch.float64)
    assert torch.allclose(scaled(x), reference(x), rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------------------------------------------
# Parameter counts: the formula (10·r·d per instance) and the spec's exact recounts (§7.2, §7.5, §7.7)
# ---------------------------------------------------------------------------------------------------------------


def test_increments_follow_the_formulas():
    d, L, r = 32, 4, 4
    base = count_params(small_deit())
    new_ln = L * 4 * d  # norm1 + norm2 (weight + bias) per new instance
    assert count_params(expand(small_deit(), rank=r)) - base == 2 * L * 10 * r * d + new_ln
    assert count_params(expand(small_deit(), adjust="lora", rank=r)) - base == 2 * L * 16 * r * d + new_ln
    assert count_params(expand(small_deit(), adjust=None)) - base == new_ln
    assert count_params(expand(small_deit(), k=3, rank=r)) - base == 3 * L * 10 * r * d + 2 * new_ln
    # partial sharing: only the 2 instances of each of the 2 shared layers carry adapters
    assert count_params(expand(small_deit(), layers=[1, 2], rank=r)) - base == 4 * 10 * r * d + 2 * 4 * d
    # Swin: adapters on all blocks of every stage (width c: 10·r·c), plus the stage-4 copies' norms
    widths = [12, 24, 48, 96]
    expected = sum(2 * 10 * r * c for c in widths) + 2 * 10 * r * 96 + 2 * 4 * 96
    assert count_params(expand(small_swin(), rank=r)) - count_params(small_swin()) == expected


SPEC_COUNTS = {  # spec §7.2 (unique parameters)
    "scalenet_deit_tiny_2x": 6_463_912,
    "scalenet_deit_small_2x": 23_543_656,
    "scalenet_deit_base_2x": 89_553_640,
    "scalenet_swin_tiny_2x": 29_246_818,
    "scalenet_swin_small_2x": 51_302_002,
    "scalenet_swin_base_2x": 90_029_216,
    "scalenet_swin_base_2x_stage3": 91_204_768,
    "scalenet_swin_base_2x_allstages": 91_666_592,
    "scalenet_deit_base_2x_layers1to3": 87_314_152,
    "scalenet_swin_tiny_2x_stage3": 29_372_770,
    "scalenet_deit_base_2x_lora16": 86_567_656 + 36_864 + 4_718_592,  # base + new LNs + LoRA
    # Table I baselines (§5 derived checks)
    "scalenet_deit_tiny_grow_stack": 6_607_144,
    "scalenet_deit_small_grow_swa": 23_825_128,
    "scalenet_swin_base_grow_random": 90_923_312,
    # Table II ✗ WSPT rows (§5 derived)
    "scalenet_deit_tiny_1x_lora16": 6_307_240,
    "scalenet_swin_tiny_1x_adapter16": 28_994_914,
}


def test_unique_parameter_counts_match_the_spec():
    counts = {name: count_params(build_model(name)) for name in SPEC_COUNTS}
    assert counts == SPEC_COUNTS


def test_trainable_sets_follow_the_spec():
    def trainable(model):
        return sum(p.numel() for p in model.parameters() if p.requires_grad)

    # §7.5: DeiT-B and Swin train adapters + every norm (head frozen); DeiT-T/S train everything
    for name, expected in [
        ("scalenet_deit_base_2x", 3_024_384),
        ("scalenet_swin_tiny_2x", 983_232),
        ("scalenet_swin_small_2x", 1_738_944),
        ("scalenet_swin_base_2x", 2_318_592),
        ("scalenet_deit_tiny_2x", 6_463_912),
    ]:
        assert trainable(build_model(name)) == expected, name
    model = build_model("scalenet_deit_base_2x", trainable=["adjust", "norms", "head"])
    assert trainable(model) == 3_024_384 + 768 * 1000 + 1000
    model = build_model("scalenet_deit_base_2x_noadjust")  # literal rule without adapters: norms only
    assert trainable(model) == 75_264


def test_drop_path_is_spread_over_the_scaled_depth():
    model = expand(small_deit(drop_path_rate=0.3), drop_path=0.5)
    rates = [b.drop_path1.drop_prob if hasattr(b.drop_path1, "drop_prob") else 0.0 for b in model.blocks]
    assert rates == pytest.approx([0.5 * i / 7 for i in range(8)])
    kept = expand(small_deit(drop_path_rate=0.3))  # None: the model's own rate, re-spread
    assert kept.blocks[-1].drop_path2.drop_prob == pytest.approx(0.3)
    assert kept.blocks[4].drop_path1.drop_prob == pytest.approx(0.3 * 4 / 7)


# ---------------------------------------------------------------------------------------------------------------
# Tying through save / load
# ---------------------------------------------------------------------------------------------------------------


def test_save_load_keeps_tying(tmp_path):
    model = expand(small_deit())
    randomize_adapters(model)
    sd = model.state_dict()
    assert "blocks.0.attn.qkv.weight" in sd and "blocks.1.attn.qkv.weight" not in sd  # saved once
    assert "blocks.1.norm1.weight" in sd and "blocks.1.mlp.fc1.adjust.up.weight" in sd
    torch.save(sd, tmp_path / "ckpt.pth")
    fresh = expand(small_deit(depth=4))
    fresh.load_state_dict(torch.load(tmp_path / "ckpt.pth", weights_only=True))  # strict
    assert_tied(fresh)
    assert fresh.blocks[1].attn.qkv.weight is fresh.blocks[0].attn.qkv.weight
    x = torch.randn(1, 3, 32, 32)
    assert torch.equal(fresh.eval()(x), model.eval()(x))
    # a checkpoint that carries every alias path (e.g. DeepSpeed's consolidated one) loads too
    full = {k: v.clone() for k, v in model.state_dict().items()}
    full["blocks.1.attn.qkv.weight"] = full["blocks.0.attn.qkv.weight"].clone()
    expand(small_deit()).load_state_dict(full)


def test_loading_a_checkpoint_whose_tied_tensors_differ_fails():
    model = expand(small_deit())
    sd = dict(model.state_dict())
    sd["blocks.1.mlp.fc1.weight"] = sd["blocks.0.mlp.fc1.weight"] + 1.0  # as an untied deep model would save
    with pytest.raises(RuntimeError, match="shares"):
        expand(small_deit()).load_state_dict(sd)


def test_untying_is_detected_and_repaired():
    model = expand(small_deit())
    assert_tied(model)
    # a naive loader that assigns a fresh tensor to one path silently unties the group
    model.blocks[1].attn.qkv.weight = nn.Parameter(model.blocks[0].attn.qkv.weight.detach().clone())
    with pytest.raises(TyingError, match="blocks.0.attn.qkv.weight"):
        assert_tied(model)
    assert retie(model) == 1
    assert_tied(model)
    # assign=True gives every path its own Parameter; the model re-ties itself after the load
    model.load_state_dict(expand(small_deit()).state_dict(), assign=True)
    assert_tied(model)
    # to_empty() (materialising a meta-built model) unties: detected, then repaired by retie()
    with torch.device("meta"):
        meta = expand(small_deit())
    meta.to_empty(device="cpu")
    with pytest.raises(TyingError):
        assert_tied(meta)
    with pytest.raises(TyingError, match="values differ"):  # the copies hold different garbage
        retie(meta)
    retie(meta, check_values=False)
    assert_tied(meta)
    # ... or just load a checkpoint: the aliases get the same values, and the load re-ties them
    with torch.device("meta"):
        meta = expand(small_deit())
    meta.to_empty(device="cpu")
    meta.load_state_dict(expand(small_deit()).state_dict())
    assert_tied(meta)
    # .double() / .to() keep the objects
    assert_tied(expand(small_deit()).double())


def test_ddp_wrapper_trains_and_saves_tied(tmp_path):
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        model = expand(small_deit(), trainable="all")
        ddp = nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.AdamW([p for p in ddp.parameters() if p.requires_grad], lr=1e-2)
        ddp(torch.randn(2, 3, 32, 32)).sum().backward()
        opt.step()
        assert_tied(ddp)
        sd = ddp.state_dict()
        assert "module.blocks.0.attn.qkv.weight" in sd and "module.blocks.1.attn.qkv.weight" not in sd
        fresh = expand(small_deit())
        assert load_weights(fresh, sd).complete  # the one loader strips 'module.'; the hooks re-tie
        assert_tied(fresh)
        assert torch.equal(fresh.blocks[1].attn.qkv.weight, model.blocks[0].attn.qkv.weight)
        assert tied_state_dict(ddp).keys() == model.state_dict().keys()
    finally:
        dist.destroy_process_group()


# ---------------------------------------------------------------------------------------------------------------
# WSPT schedule and baselines
# ---------------------------------------------------------------------------------------------------------------


def test_growth_schedule_grows_once_per_stage_and_on_resume():
    schedule = GrowthSchedule.from_config(
        {"stages": [{"epoch": 0, "k": 2, "rank": 4}, {"epoch": 2, "k": 2, "adjust": None}]}
    )
    model = small_deit()
    model, changed = schedule.maybe_grow(model, 0)
    assert changed and len(model.blocks) == 8
    assert schedule.maybe_grow(model, 0) == (model, False) and schedule.maybe_grow(model, 1) == (model, False)
    model, changed = schedule.maybe_grow(model, 2)
    assert changed and len(model.blocks) == 16
    # the second growth copies instances that already share: each source now has 4 instances
    assert sorted(len(g) for g in tied_groups(model)) == [4] * 32
    # resume at epoch 5 from a fresh base: both stages at once, then the checkpoint loads strictly
    resumed, changed = schedule.maybe_grow(small_deit(), 5)
    assert changed and len(resumed.blocks) == 16
    resumed.load_state_dict(model.state_dict())
    assert_tied(resumed)
    with pytest.raises(ConfigError, match="unknown key"):
        GrowthSchedule.from_config({"k": 2, "ranks": 16})


def test_grow_baselines_add_independent_blocks():
    base = small_deit()
    stacked = grow(copy.deepcopy(base), new_blocks=2, init="stack")
    assert len(stacked.blocks) == 6 and tied_groups(stacked) == []
    assert torch.equal(stacked.blocks[4].attn.qkv.weight, base.blocks[0].attn.qkv.weight)  # θ_{4 mod 4}
    assert torch.equal(stacked.blocks[5].mlp.fc2.weight, base.blocks[1].mlp.fc2.weight)
    swa = grow(copy.deepcopy(base), new_blocks=1, init="swa", swa_layers=4)
    mean = sum(b.mlp.fc1.weight for b in base.blocks) / 4
    assert torch.allclose(swa.blocks[4].mlp.fc1.weight, mean)
    rand = grow(copy.deepcopy(base), new_blocks=1, init="random")
    assert torch.equal(rand.blocks[4].norm1.weight, torch.ones(32))
    assert all(not torch.equal(rand.blocks[4].attn.qkv.weight, b.attn.qkv.weight) for b in base.blocks)
    assert rand.blocks[4].attn.qkv.weight.std().item() == pytest.approx(0.02, rel=0.15)
    # parameter matching (§7.7): DeiT-T +2, DeiT-S +1, DeiT-B +1, Swin-T +1 stage-3 block
    for arch, added in [("deit_tiny_patch16_224", 2), ("deit_small_patch16_224", 1), ("deit_base_patch16_224", 1)]:
        assert len(grow(build_model(arch)).blocks) == 12 + added, arch
    assert len(grow(build_model("swin_tiny_patch4_window7_224")).layers[2].blocks) == 6 + 1


def test_bad_arguments_say_what_is_wrong():
    with pytest.raises(ValueError, match="unknown order"):
        expand(small_deit(), order="shuffle")
    with pytest.raises(ValueError, match="unknown adjust"):
        expand(small_deit(), adjust="prefix")
    with pytest.raises(ValueError, match="unknown trainable group"):
        expand(small_deit(), trainable=["adapters"])
    with pytest.raises(ValueError, match="Swin stages"):
        expand(small_swin(), layers=[4])
    with pytest.raises(TypeError, match="supports timm VisionTransformer"):
        expand(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="unknown growth init"):
        grow(small_deit(), init="copy")


# ---------------------------------------------------------------------------------------------------------------
# Registered variants and the tables
# ---------------------------------------------------------------------------------------------------------------


def _reduced(name):
    """Kwargs that shrink a registered variant but keep its structure (depths, heads, expansion)."""
    if "_swin_" in name:
        return dict(img_size=32, window_size=4, embed_dim=16 if "_base_" in name else 12, num_classes=5)
    return dict(img_size=32, embed_dim=24, num_classes=5)


@pytest.mark.parametrize("name", timm.list_models(module="scalenet"))
def test_every_registered_variant_runs_forward_backward(name):
    model = timm.create_model(name, **_reduced(name))
    out = model(torch.randn(2, 3, 32, 32))
    assert out.shape == (2, 5)
    out.logsumexp(-1).sum().backward()
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(model.get_parameter(n).grad is not None for n in trainable)


def test_registered_variants_are_listed_and_cover_the_tables():
    names = set(timm.list_models(module="scalenet"))
    for size in ("tiny", "small", "base"):
        assert {f"scalenet_deit_{size}_2x", f"scalenet_swin_{size}_2x"} <= names
    assert {
        "scalenet_deit_base_3x",
        "scalenet_swin_base_3x",
        "scalenet_deit_base_2x_stack",
        "scalenet_swin_base_2x_interp",
        "scalenet_deit_base_2x_lora8",
        "scalenet_deit_base_2x_layers10to12",
        "scalenet_deit_base_depth24",
    } <= names
    assert timm.models.get_pretrained_cfg("scalenet_deit_base_2x").input_size == (3, 224, 224)


def test_verify_rows_pass():
    checks = verify_run(papers=["scalenet"], table="III", progress=False)
    checks += verify_run(papers=["scalenet"], table="VI", progress=False)
    assert checks and not [c for c in checks if c.status in ("fail", "error")]
    passed = {(c.row, c.column) for c in checks if c.status == "pass"}
    assert ("DeiT-Base {10,11,12}", "params_inc_m") in passed and ("LoRA r=8", "params_inc_nonorm_m") in passed
    flagged = [c for c in checks if c.status == "reason"]
    assert {c.row for c in flagged} == {"Adapter r=8", "Adapter r=32"}


# ---------------------------------------------------------------------------------------------------------------
# The done-when flow, in plain PyTorch
# ---------------------------------------------------------------------------------------------------------------


def test_deit_small_checkpoint_expanded_trained_saved_reloaded(tmp_path):
    torch.manual_seed(1)
    pretrained = timm.create_model("deit_small_patch16_224")
    torch.save({"model": pretrained.state_dict()}, tmp_path / "deit_small.pth")

    model = timm.create_model("scalenet_deit_small_2x", base_checkpoint=str(tmp_path / "deit_small.pth"))
    assert len(model.blocks) == 24
    assert torch.equal(model.blocks[23].mlp.fc2.weight, pretrained.blocks[11].mlp.fc2.weight)
    assert torch.equal(model.blocks[22].norm1.weight, pretrained.blocks[11].norm1.weight)
    x = torch.randn(1, 3, 224, 224)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    nn.functional.cross_entropy(model(x), torch.tensor([3])).backward()
    optimizer.step()
    assert model.blocks[5].mlp.fc1.adjust.up.weight.abs().sum() > 0  # adapters trained
    assert not torch.equal(model.blocks[0].attn.qkv.weight, pretrained.blocks[0].attn.qkv.weight)
    torch.save(model.state_dict(), tmp_path / "scaled.pth")

    reloaded = timm.create_model("scalenet_deit_small_2x")
    reloaded.load_state_dict(torch.load(tmp_path / "scaled.pth", weights_only=True))
    assert_tied(reloaded)
    assert reloaded.blocks[1].attn.qkv.weight is reloaded.blocks[0].attn.qkv.weight
    assert torch.equal(reloaded.blocks[1].attn.qkv.weight, model.blocks[0].attn.qkv.weight)
    model.eval(), reloaded.eval()
    assert torch.equal(reloaded(x), model(x))


# timm's feature API, checked against values computed by hand (tests/models/timm_contract checks only shapes and that it runs)
def test_scalenet_features_follow_the_expanded_depth_and_keep_the_ties():
    model = timm.create_model("scalenet_deit_tiny_2x", img_size=32, features_only=True, out_indices=(0, 23))
    assert len(model.model.feature_info) == 24  # 12 pretrained + 12 weight-shared layers
    assert_tied(model.model)
    feats = model(torch.randn(1, 3, 32, 32))
    assert [tuple(f.shape) for f in feats] == [(1, 192, 2, 2)] * 2
    swin = timm.create_model("scalenet_swin_tiny_2x", device="meta", features_only=True)
    assert swin.feature_info.channels() == [96, 192, 384, 768]
