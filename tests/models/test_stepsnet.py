"""StepsNet (models/stepsnet.py): the macro, every registered variant, the Table 6/7 hooks and the audit.

Expected numbers come from the paper and from analytic counts of its architectures (docs/stepsnet.md),
never from running this code.
"""

import pytest
import timm
import torch
from torch import nn

import models  # noqa: F401  (registers the models)
from harness.engine.models import build_model
from harness.measure.flops import count_params
from models.stepsnet import ReverseStepsNet, StepsNet, TransformerLM, residual_blocks, stepsnet_analysis
from torch.fx import symbolic_trace

VARIANTS = timm.list_models(module="stepsnet")


pytestmark = pytest.mark.usefixtures("one_thread")


def small(name: str, **kwargs) -> nn.Module:
    """A registered variant at test size: same architecture, tiny input, 10 classes, cheap init."""
    if name.startswith(("steps_lm", "transformer_lm")):
        return timm.create_model(name, vocab_size=64, **kwargs)
    kw = dict(num_classes=10)
    if "resnet" not in name:
        kw["weight_init"] = "skip"  # modules keep their own init; timm's trunc-normal pass is slow on CPU
    if "swin" in name:
        kw.update(img_size=64, window_size=2)  # stage 3 (4×4) still has shifted windows
    elif "deit" in name:
        kw.update(img_size=32)
    model = timm.create_model(name, **{**kw, **kwargs})
    if getattr(model, "cls_token", None) is not None:  # left uninitialised by weight_init='skip'
        nn.init.normal_(model.cls_token, std=0.02)
        nn.init.normal_(model.pos_embed, std=0.02)
    return model


def sample(model: nn.Module, name: str) -> torch.Tensor:
    if isinstance(model, TransformerLM):
        return model.example_inputs(8, 2)[0]
    side = 32 if "deit" in name else 64
    return torch.randn(2, 3, side, side)


# --------------------------------------------------------------------------------------- every variant
def test_all_paper_variants_are_registered():
    expected = {
        "steps_resnet18",
        "steps_resnet34",
        "steps_resnet50",
        "steps_deit_tiny",
        "steps_deit_small",
        "steps_deit_base",
        "steps_deit_base_302l",
        "steps_swin_tiny",
        "steps_swin_small",
        "steps_swin_base",
        "steps_lm_30m",
        "steps_lm_45m",
        "steps_lm_64m",
        "steps_swin_tiny_reverse",
    }
    expected |= {f"steps_deit_small_n{n}" for n in range(1, 6)}
    expected |= {f"{p}deit_w136_d{d}" for p in ("", "steps_") for d in (24, 36, 48, 72, 96)}
    expected |= {f"swin_fixflops_d{d}" for d in (24, 48, 72, 96)} | {"steps_swin_fixflops_d14"}
    expected |= {f"steps_swin_tiny_stage{s}" for s in range(1, 5)}
    expected |= {
        "steps_deit_small_d0_0_12",
        "steps_deit_small_d2_1_11",
        "steps_deit_small_d6_3_9",
        "steps_deit_small_d12_6_6",
        "steps_deit_small_d18_9_3",
        "steps_deit_small_d22_11_1",
    }
    assert expected <= set(VARIANTS)
    from harness.measure.catalog import registered

    assert expected <= {name for name, family in registered() if family == "stepsnet"}


@pytest.mark.parametrize("name", VARIANTS)
def test_forward_and_backward(name):
    # timm's ResNets start every block's last BatchNorm at γ = 0 (zero_init_last), which makes the block's conv
    # gradients exactly 0 at step 0 on either path; with it off, the slow-path assertion below tests ResNets too
    model = small(name, **({"zero_init_last": False} if "resnet" in name else {}))
    x = sample(model, name)
    out = model(x)
    expected = (2, 8, 64) if isinstance(model, TransformerLM) else (2, 10)
    assert tuple(out.shape) == expected and torch.isfinite(out).all()
    out.float().square().mean().backward()
    missing = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not missing, f"no gradient reached {missing[:3]}"
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())
    # the slow path: the first block of the first non-empty step learns (its input is channels 0..C_1)
    first = residual_blocks(model)[0]
    assert any(p.grad.abs().sum() > 0 for p in first.parameters() if p.dim() > 1)


# --------------------------------------------------------------------------------------------- the macro
class Record(nn.Module):
    """A 'block' that remembers its input and doubles it, so a block's output is distinguishable from raw x."""

    def __init__(self, log, tag):
        super().__init__()
        self.log, self.tag = log, tag

    def forward(self, x):
        self.log.append((self.tag, x.clone()))
        return 2 * x


def recording_net(widths, depths, log, **kwargs):
    return StepsNet(widths, depths, lambda i, j, w: Record(log, (i, j, w)), **kwargs)


def test_slices_are_contiguous_in_order_with_the_previous_output_first():
    log = []
    net = recording_net([2, 3, 5], [1, 1, 1], log)
    x = torch.arange(5.0).view(1, 5) + 1  # channel c holds c + 1
    y = net(x)
    (tag1, in1), (tag2, in2), (tag3, in3) = log
    assert tag1 == (0, 0, 2) and in1.tolist() == [[1.0, 2.0]]  # x_1 = the first 2 channels
    assert tag2 == (1, 0, 3) and in2.tolist() == [[2.0, 4.0, 3.0]]  # [y_1, x_2]: y_1 first, then raw x_2
    assert tag3 == (2, 0, 5) and in3.tolist() == [[4.0, 8.0, 6.0, 4.0, 5.0]]  # [y_2, x_3]
    assert y.tolist() == [[8.0, 16.0, 12.0, 8.0, 10.0]]
    assert net.slices() == [(0, 2), (2, 3), (3, 5)]


def test_channel_zero_reaches_every_step_and_the_last_channel_only_the_last():
    net = StepsNet([2, 4, 6], [1, 1, 1], lambda i, j, w: nn.Linear(w, w))
    x = torch.randn(3, 6, requires_grad=True)
    step_out = {}
    for i, step in enumerate(net.steps):
        step[0].register_forward_hook(lambda m, a, out, i=i: step_out.setdefault(i, out))
    net(x)
    # y_i depends on exactly the channels [0, C_i): x_1 from step 1 on, x_3 (channels 4, 5) only in step 3
    for i, width in enumerate(net.widths):
        (grad,) = torch.autograd.grad(step_out[i].sum(), x, retain_graph=True)
        assert (grad[:, :width].abs().sum(0) > 0).all() and grad[:, width:].abs().sum() == 0, i


def test_one_step_is_the_plain_residual_stack():
    torch.manual_seed(0)
    blocks = [timm.models.vision_transformer.Block(32, 2) for _ in range(3)]
    net = StepsNet([32], [3], lambda i, j, w: blocks[j])
    plain = nn.Sequential(*blocks)
    x = torch.randn(2, 5, 32)
    assert torch.equal(net(x), plain(x))
    assert count_params(net) == count_params(plain)


def _remap(state, old, new):
    return {(new + k[len(old) :] if k.startswith(old) else k): v for k, v in state.items()}


@pytest.mark.parametrize(
    "steps_name, baseline_name, remap",
    [
        # Table 8's 1 step and Table 9's (0, 0, 12) are DeiT-S (spec §7.4); empty steps just pass their slices
        ("steps_deit_small_n1", "deit_small_patch16_224", lambda s: _remap(s, "blocks.", "blocks.steps.0.")),
        ("steps_deit_small_d0_0_12", "deit_small_patch16_224", lambda s: _remap(s, "blocks.", "blocks.steps.2.")),
    ],
)
def test_one_step_models_equal_their_timm_baseline(steps_name, baseline_name, remap):
    torch.manual_seed(0)
    baseline = timm.create_model(baseline_name, img_size=32, num_classes=10).eval()
    steps = timm.create_model(steps_name, img_size=32, num_classes=10).eval()
    steps.load_state_dict(remap(baseline.state_dict()))
    x = torch.randn(2, 3, 32, 32)
    assert torch.allclose(steps(x), baseline(x), atol=1e-6)


def test_one_step_swin_and_resnet_stages_equal_timm():
    """A 1-step StepsNet stage built from timm's blocks is timm's stage (shifted windows alternate the same)."""
    torch.manual_seed(0)
    kw = dict(img_size=64, window_size=2, num_classes=10)
    swin = timm.create_model("swin_tiny_patch4_window7_224", **kw).eval()
    steps = timm.create_model("steps_swin_tiny", stage_steps=(None, None, ((384, 12, 6),), None), **kw).eval()
    steps.load_state_dict(_remap(swin.state_dict(), "layers.2.blocks.", "layers.2.blocks.steps.0."))
    x = torch.randn(1, 3, 64, 64)
    assert torch.allclose(steps(x), swin(x), atol=1e-5)

    resnet = timm.create_model("resnet34", num_classes=10).eval()
    steps = timm.create_model("steps_resnet34", stage_steps=(None, None, ((256, 5),), None), num_classes=10).eval()
    state = {}
    for k, v in resnet.state_dict().items():
        parts = k.split(".")
        if parts[0] == "layer3" and parts[1] != "0":
            k = ".".join(["layer3", "1", "steps", "0", str(int(parts[1]) - 1)] + parts[2:])
        state[k] = v
    steps.load_state_dict(state)
    x = torch.randn(1, 3, 64, 64)
    assert torch.allclose(steps(x), resnet(x), atol=1e-5)


def _frozen_stepsnet_forward(self, x):
    """``StepsNet.forward`` as it was before the data-movement work of issue 27 (one split of the input, one
    ``cat`` per step, the blocks in order), frozen here as the reference: any faster forward must give
    bit-identical outputs and gradients."""
    d = self.channel_dim
    pieces = torch.split(x, self._split_sizes, dim=d)
    y = pieces[0]
    for i, step in enumerate(self.steps):
        lo, hi = self._slices[i]
        if i > 0 and hi > lo:
            y = torch.cat([y, pieces[i]], dim=d)
        for block in step:
            y = block(y)
    return y


@pytest.mark.parametrize(
    "name", ["steps_deit_small", "steps_swin_tiny", "steps_resnet18_w32", "steps_resnet50", "steps_lm_30m"]
)
def test_forward_and_gradients_are_bit_identical_to_the_frozen_reference(name, monkeypatch):
    model = small(name, drop_path_rate=0.0)
    x = sample(model, name)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        for p in model.parameters():  # weight_init='skip' leaves some tensors at their (constant) init
            p.data.add_(0.02 * torch.randn_like(p))
    state = {k: v.clone() for k, v in model.state_dict().items()}  # BatchNorm statistics move in training
    results = []
    for forward in (_frozen_stepsnet_forward, StepsNet.forward):
        monkeypatch.setattr(StepsNet, "forward", forward)
        model.load_state_dict(state)
        model.zero_grad(set_to_none=True)
        model.train()
        out = model(x)
        out.float().pow(2).mean().backward()
        with torch.no_grad():
            inference = model.eval()(x)
        results.append((out.detach(), inference, [p.grad.clone() for p in model.parameters()]))
    (out_ref, inf_ref, grads_ref), (out, inf, grads) = results
    assert torch.equal(out, out_ref) and torch.equal(inf, inf_ref)
    assert all(torch.equal(a, b) for a, b in zip(grads, grads_ref))


def test_half_width_steps_resnet18_is_registered_with_the_presets_steps():
    """``steps_resnet18_w32``: the embedded det/seg presets' backbone (stage widths 32/64/128/256, Table 12's steps
    halved), one registered name instead of the kwargs repeated in three configs."""
    model = build_model("steps_resnet18_w32")
    assert tuple(info["num_chs"] for info in model.feature_info[1:]) == (32, 64, 128, 256)
    nets = [m for m in model.modules() if isinstance(m, StepsNet)]
    assert [net.widths for net in nets] == [[32, 45, 64, 90, 128], [32, 45, 64, 90, 128, 181, 256]]
    assert [net.depths for net in nets] == [[2, 1, 1, 1, 0], [2, 1, 1, 1, 1, 1, 0]]
    explicit = build_model(
        "steps_resnet18",
        channels=(32, 64, 128, 256),
        stage_steps=(
            None,
            None,
            ((32, 2), (45, 1), (64, 1), (90, 1), (128, 0)),
            ((32, 2), (45, 1), (64, 1), (90, 1), (128, 1), (181, 1), (256, 0)),
        ),
    )
    assert count_params(model) == count_params(explicit)
    assert model.pretrained_cfg["input_size"] == (3, 224, 224)


def test_empty_widest_step_keeps_the_nominal_width():
    log = []
    net = recording_net([2, 3, 5], [1, 1, 0], log)  # like Steps-ResNet-18's 256×0: the last slice bypasses
    y = net(torch.ones(1, 5))
    assert y.shape == (1, 5) and y.tolist() == [[4.0, 4.0, 2.0, 1.0, 1.0]]


def test_narrowed_in_width_drops_the_empty_step():
    log = []
    net = recording_net([2, 3, 5], [1, 1, 0], log, in_width=3)  # like Steps-Swin-T's 544-wide stage 4
    assert net(torch.ones(1, 3)).shape == (1, 3)
    with pytest.raises(ValueError, match="expects 3 channels"):
        net(torch.ones(1, 5))


@pytest.mark.parametrize(
    "widths, depths, kwargs, message",
    [
        ([4, 2], [1, 1], {}, "strictly increasing"),
        ([2, 4], [1], {}, "one depth per width"),
        ([2, 4], [1, -1], {}, ">= 0"),
        ([2, 4], [1, 1], {"in_width": 3}, "must be one of"),
        ([2, 4], [1, 1], {"in_width": 2}, "must be empty"),
    ],
)
def test_bad_configurations_fail_with_one_line(widths, depths, kwargs, message):
    with pytest.raises(ValueError, match=message) as info:
        StepsNet(widths, depths, lambda i, j, w: nn.Identity(), **kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "name, kwargs, message",
    [
        (
            "steps_resnet50",
            dict(stage_steps=(None, None, ((64, 2), (300, 1)), None)),
            "widest step must be the stage width",
        ),
        ("steps_swin_tiny", dict(stage_steps=(None, None, ((192, 6, 0), (384, 12, 0)), None)), "no blocks in any step"),
        ("steps_deit_tiny", dict(steps=((100, 3, 2), (192, 3, 2))), "width divisible by heads"),
        ("steps_deit_tiny", dict(embed_dim=100), "takes its widths from 'steps'"),
    ],
)
def test_bad_model_arguments_fail_with_one_line(name, kwargs, message):
    with pytest.raises(ValueError, match=message) as info:
        build_model(name, **kwargs)
    assert "\n" not in str(info.value)


def test_baseline_block_arguments_and_device_reach_the_step_blocks():
    # a Steps twin differs from its baseline only in the macro: block options must reach every step's blocks
    deit = timm.create_model("steps_deit_tiny", device="meta", mlp_layer=timm.layers.GluMlp, qk_norm=True)
    assert {p.device.type for p in deit.parameters()} == {"meta"}
    assert all(
        isinstance(b.mlp, timm.layers.GluMlp) and not isinstance(b.attn.q_norm, nn.Identity) for b in deit.blocks
    )
    resnet = timm.create_model("steps_resnet18", device="meta", block_args=dict(attn_layer="se"))
    assert {p.device.type for p in resnet.parameters()} == {"meta"}
    assert all(b.se is not None for b in residual_blocks(resnet))  # timm's BasicBlock: se is None without attn_layer
    for name in ("steps_swin_tiny", "steps_lm_30m"):
        assert {p.device.type for p in timm.create_model(name, device="meta").parameters()} == {"meta"}, name


def test_reverse_design_splits_first_channels_onward_and_outputs_y1_first():
    log = []
    net = ReverseStepsNet([5, 3, 2], [1, 1, 1], lambda i, j, w: Record(log, (i, w)))
    x = torch.arange(5.0).view(1, 5) + 1
    y = net(x)
    assert [t for t, _ in log] == [(0, 5), (1, 3), (2, 2)]
    assert log[1][1].tolist() == [[2.0, 4.0, 6.0]] and log[2][1].tolist() == [[4.0, 8.0]]
    assert y.tolist() == [[8.0, 10.0, 12.0, 8.0, 16.0]]  # [y_1 (F_1's last 2), y_2 (F_2's last 1), y_3]


# ------------------------------------------------------------------------------- Table 6 / 7 hooks
def test_mask_hooks_zero_the_slow_or_the_fast_path():
    log = []
    net = recording_net([2, 3, 5], [1, 1, 1], log)
    x = torch.ones(1, 5)
    with stepsnet_analysis(net, mask_first=1):
        net(x)
    assert log[0][1].tolist() == [[0.0, 1.0]]  # x_1 lost its first channel
    log.clear()
    with stepsnet_analysis(net, mask_last=3):  # the last 3 = x_3 (2 channels) then x_2
        net(x)
    assert log[0][1].tolist() == [[1.0, 1.0]] and log[1][1].tolist() == [[2.0, 2.0, 0.0]]
    assert log[2][1][0, 3:].tolist() == [0.0, 0.0]
    log.clear()
    net(x)  # the context restored the model
    assert log[1][1].tolist() == [[2.0, 2.0, 1.0]]


def test_drop_last_blocks_skips_exactly_those_blocks():
    log = []
    net = recording_net([2, 3, 5], [4, 2, 1], log)
    with stepsnet_analysis(net, drop_last={0: 3, 2: 1}):
        y = net(torch.ones(1, 5))
    assert [t for t, _ in log] == [(0, 0, 2), (1, 0, 3), (1, 1, 3)]
    assert y.tolist() == [[8.0, 8.0, 4.0, 1.0, 1.0]]
    with pytest.raises(ValueError, match="cannot drop 5 blocks of step 1"):
        with stepsnet_analysis(net, drop_last={1: 5}):
            pass


def test_table6_and_7_hooks_on_steps_deit_small():
    torch.manual_seed(0)
    model = small("steps_deit_small").eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        reference = model(x)
        with stepsnet_analysis(model):
            assert torch.equal(model(x), reference)
        with stepsnet_analysis(model, mask_first=32):
            slow = model(x)
        with stepsnet_analysis(model, mask_last=32):
            fast = model(x)
        with stepsnet_analysis(model, drop_last={0: 4}):
            dropped = model(x)
        # masking 32 of the fast-path channels (x_3 = 272..383) must leave the slow path F_1 untouched
        f1_out = []
        hook = model.blocks.steps[0][-1].register_forward_hook(lambda m, a, out: f1_out.append(out))
        model(x)
        with stepsnet_analysis(model, mask_last=32):
            model(x)
        with stepsnet_analysis(model, mask_first=32):
            model(x)
        hook.remove()
    assert not torch.allclose(slow, reference) and not torch.allclose(fast, reference)
    assert not torch.allclose(dropped, reference)
    assert torch.equal(f1_out[1], f1_out[0]) and not torch.allclose(f1_out[2], f1_out[0])
    assert torch.equal(model(x).detach(), reference)
    with pytest.raises(ValueError, match="pass stage="):
        with stepsnet_analysis(small("steps_swin_tiny")):
            pass


# -------------------------------------------------------------------------- counts against the spec
# spec §7.3: exact analytic parameter counts (timm-equivalent modules)
EXACT_PARAMS = {
    "steps_deit_tiny": 5_732_632,
    "steps_deit_small": 22_090_312,
    "steps_deit_base": 86_683_816,
    "steps_deit_base_302l": 42_111_880,
    "steps_swin_tiny": 27_803_770,
    "steps_swin_small": 49_121_674,
    "steps_swin_base": 86_671_764,
    "steps_resnet18": 11_689_060,
    "steps_resnet34": 21_795_824,
    "steps_resnet50": 25_567_176,
}


@pytest.mark.parametrize("name", sorted(EXACT_PARAMS))
def test_exact_parameter_counts_of_the_spec(name):
    kwargs = {} if "resnet" in name else {"weight_init": "skip"}
    assert count_params(build_model(name, **kwargs)) == EXACT_PARAMS[name]


def test_reverse_design_has_steps_swin_t_parameters():
    # Table 10: "identical parameters and FLOPs"
    assert count_params(build_model("steps_swin_tiny_reverse", weight_init="skip")) == EXACT_PARAMS["steps_swin_tiny"]


@pytest.mark.parametrize(
    "name, widths",
    [
        ("steps_swin_tiny", (96, 192, 384, 544)),  # spec §7.4.7
        ("steps_swin_base", (128, 256, 512, 720)),
    ],
)
def test_steps_swin_stage_widths(name, widths):
    model = build_model(name, weight_init="skip")
    assert tuple(info["num_chs"] for info in model.feature_info) == widths
    assert model.num_features == widths[-1] and model.head.fc.in_features == widths[-1]


def test_steps_resnet50_slices():
    model = build_model("steps_resnet50")
    stage3 = [m for m in model.layer3 if isinstance(m, StepsNet)][0]
    assert [hi - lo for lo, hi in stage3.slices()] == [256, 104, 152, 212, 300]  # spec §3.1


def test_drop_path_rises_linearly_over_all_blocks():
    model = build_model("steps_deit_small", drop_path_rate=0.23, weight_init="skip")
    blocks = list(model.blocks)
    assert isinstance(blocks[0].drop_path1, nn.Identity)
    rates = [b.drop_path1.drop_prob for b in blocks[1:]]
    assert rates == pytest.approx([0.23 * k / 23 for k in range(1, 24)])


def test_language_model_is_causal():
    torch.manual_seed(0)
    model = small("steps_lm_30m").eval()
    tokens = torch.randint(0, 64, (1, 10))
    changed = tokens.clone()
    changed[0, 6:] = (changed[0, 6:] + 1) % 64
    with torch.no_grad():
        a, b = model(tokens), model(changed)
    assert torch.allclose(a[:, :6], b[:, :6], atol=1e-5) and not torch.allclose(a[:, 6:], b[:, 6:])


# ------------------------------------------------------------------------------------- the audit
def test_verify_passes_every_checkable_stepsnet_row():
    from harness.commands.verify import run

    checks = run(papers=["stepsnet"], progress=False)
    bad = [(c.table, c.row, c.column, c.note) for c in checks if c.status not in ("pass", "reason")]
    assert not bad, bad
    checked = {(c.table, c.column) for c in checks if c.status == "pass"}
    for table in ("1", "5a", "5b", "8", "9", "12", "13", "14"):
        for column in ("blocks", "layers"):
            assert (table, column) in checked, (table, column)
    for table in ("1", "5a", "5b", "8", "9", "10", "12", "13", "14"):
        for column in ("params_m",) + (() if table == "10" else ("flops_g",)):
            assert (table, column) in checked, (table, column)
    reasons = [c for c in checks if c.status == "reason"]
    assert all(c.note for c in reasons)
    assert {c.row for c in reasons if c.table == "5b"} == {"Steps-Swin 48", "Steps-Swin 64", "Steps-Swin 96"}


# timm's feature API, checked against values computed by hand (tests/models/timm_contract checks only shapes and that it runs)
TINY_DEIT = dict(img_size=32, steps=((16, 2, 2), (24, 2, 1), (32, 2, 1)))  # 2x2 patches + cls, widths 16/24/32


def _tiny_steps_deit(**kwargs):
    torch.manual_seed(0)
    return timm.create_model("steps_deit_tiny", **TINY_DEIT, **kwargs).eval()


def _states_by_hand(model, x):
    """Full-width state [y_i, x_{i+1..n}] after every block, running the blocks one by one."""
    tokens = model.norm_pre(model.patch_drop(model._pos_embed(model.patch_embed(x))))
    states, bounds = [], [0, 16, 24, 32]
    y = tokens[..., :16]
    for i, step in enumerate(model.blocks.steps):
        if i:
            y = torch.cat([y, tokens[..., bounds[i] : bounds[i + 1]]], -1)
        for block in step:
            y = block(y)
            states.append(torch.cat([y, tokens[..., y.shape[-1] :]], -1))
    return states


def test_steps_deit_features_are_the_full_width_state_after_every_block():
    model = _tiny_steps_deit()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        expected = _states_by_hand(model, x)
        final, feats = model.forward_intermediates(x, output_fmt="NLC")
        nchw = model.forward_intermediates(x, indices=[1], intermediates_only=True)
        features = _tiny_steps_deit(features_only=True, out_indices=(0, 3))(x)
    assert len(model.feature_info) == len(feats) == 4 and {f["num_chs"] for f in model.feature_info} == {32}
    for got, want in zip(feats, expected):
        torch.testing.assert_close(got, want[:, 1:], rtol=0, atol=0)  # prefix (cls) token removed, as timm's ViT
    torch.testing.assert_close(final, model.forward_features(x), rtol=0, atol=0)
    torch.testing.assert_close(final, model.norm(expected[-1]), rtol=0, atol=0)
    assert nchw[0].shape == (2, 32, 2, 2)
    torch.testing.assert_close(nchw[0], expected[1][:, 1:].transpose(1, 2).reshape(2, 32, 2, 2), rtol=0, atol=0)
    torch.testing.assert_close(features[1], expected[3][:, 1:].transpose(1, 2).reshape(2, 32, 2, 2), rtol=0, atol=0)


def test_steps_deit_pruned_and_stopped_early_end_at_the_wanted_block():
    model = _tiny_steps_deit()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        expected = _states_by_hand(model, x)
        stopped, _ = model.forward_intermediates(x, indices=[1], stop_early=True)
        torch.testing.assert_close(stopped, model.norm(expected[1]), rtol=0, atol=0)
        model.prune_intermediate_layers([1], prune_norm=True)
        assert len(model.blocks) == 2 and [len(s) for s in model.blocks.steps] == [2, 0, 0]
        torch.testing.assert_close(model.forward_features(x), expected[1], rtol=0, atol=0)
        torch.testing.assert_close(model(x), expected[1], rtol=0, atol=0)  # head pruned (timm: no pooling either)


def test_analysis_hooks_still_see_every_block_state():
    model = _tiny_steps_deit()
    seen = []
    handle = model.blocks.register_state_hook(lambda net, i, j, state: seen.append((i, j, state)))
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        _, feats = model.forward_intermediates(x, output_fmt="NLC")
    handle.remove()
    assert [(i, j) for i, j, _ in seen] == [(0, 0), (0, 1), (1, 0), (2, 0)]
    for (_, _, state), feat in zip(seen, feats):
        torch.testing.assert_close(state[:, 1:], feat, rtol=0, atol=0)


def test_scripted_and_traced_steps_deit_compute_the_eager_output():
    model = _tiny_steps_deit()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        expected = model(x)
        with timm.layers.set_layer_config(scriptable=True):
            torch.testing.assert_close(torch.jit.script(model)(x), expected)
        torch.testing.assert_close(symbolic_trace(model)(x), expected)
