"""HO-ResNet (models/horesnet.py): the tableaux as ODE solvers, the block's wiring, the registered networks and
the paper-table rows. Reference numbers come from the paper (docs/horesnet.md for what it leaves open) and the
literature orders of the methods, never from running the code under test."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import timm
import torch
from torch import nn

import models  # noqa: F401  (registers the models)
from models.horesnet import (
    SCHEMES,
    TABLEAUX,
    HOResNet,
    PreActSubBlock,
    RKBlock,
    _rooted_trees,
    checkpoint_filter_fn,
    get_tableau,
)
import torch.nn.functional as F
from torch.fx import symbolic_trace

VARIANTS = timm.list_models("horesnet*")  # every registered HO-ResNet name

# Classical orders from the literature (Butcher, "Numerical Methods for ODEs"; Verner 1978).
LITERATURE_ORDER = {
    "euler": 1,
    "midpoint": 2,
    "rk4": 4,
    "verner": 8,
    "heun3": 3,
    "rk3": 3,
    "gill4": 4,
    "kutta_nystrom5": 5,
}
STAGES = {"euler": 1, "midpoint": 2, "rk4": 4, "verner": 14, "heun3": 3, "rk3": 3, "gill4": 4, "kutta_nystrom5": 6}

pytestmark = pytest.mark.usefixtures("one_thread")


# Every depth/scheme of Tables 3-4 and the ResNet-6 pair of Fig. 10.
PAPER_MODELS = [
    f"horesnet{d}_{s}"
    for d, ss in {
        6: ["euler", "midpoint"],
        10: ["euler", "midpoint", "rk4"],
        18: ["euler", "midpoint", "rk4"],
        26: ["rk4"],
        30: ["euler", "midpoint", "verner", "verner_ada"],
        58: ["euler", "midpoint", "rk4", "verner", "verner_ada"],
        82: ["rk4"],
        86: ["euler", "midpoint", "verner", "verner_ada"],
    }.items()
    for s in ss
]


# ---------------------------------------------------------------------------------------------------------------
# Solver order: the block with its sub-block replaced by a known vector field
# ---------------------------------------------------------------------------------------------------------------


class Kepler(nn.Module):
    """Two-body problem y = (q, p): q' = p, p' = -q/|q|³ — nonlinear and vector-valued, so every order
    condition of a method up to order 8 shows in the error (a scalar ODE would hide some from order 5 on)."""

    def forward(self, y):
        q, p = y[..., :2], y[..., 2:]
        return torch.cat([p, -q / (q * q).sum(-1, keepdim=True) ** 1.5], -1)


def kepler_exact(t: float, e: float = 0.2) -> torch.Tensor:
    """Exact orbit with eccentricity e from Kepler's equation E - e sin E = t (Newton, to machine precision)."""
    E = t
    for _ in range(60):
        E -= (E - e * math.sin(E) - t) / (1 - e * math.cos(E))
    d = 1 - e * math.cos(E)
    r = math.sqrt(1 - e * e)
    state = [math.cos(E) - e, r * math.sin(E), -math.sin(E) / d, r * math.cos(E) / d]
    return torch.tensor([state], dtype=torch.float64)


def integrate(tableau, field: nn.Module, y0: torch.Tensor, t_end: float, steps: int) -> torch.Tensor:
    """Apply one RKBlock (all stages = ``field``, step h = t_end/steps, no ReLU) ``steps`` times."""
    block = RKBlock(tableau, lambda _: field, h=t_end / steps, post_relu=False)
    y = y0
    with torch.no_grad():
        for _ in range(steps):
            y = block(y)
    return y


T_END = 2.0
# Steps per scheme: inside the asymptotic range, errors well above float64 round-off (Verner: 3e-5 .. 1e-12).
# Euler's own error (~1e-2) is as large as the constant error of a 1 % wrong b; finer steps keep them apart.
STEPS = {
    1: (256, 512, 1024, 2048),
    2: (32, 64, 128, 256),
    3: (32, 64, 128, 256),
    4: (32, 64, 128, 256),
    5: (16, 32, 64, 128),
    8: (4, 8, 16, 32),
}
ORDER_TOL = 0.25


def fitted_order(tableau, expected: int) -> float:
    """Slope of log(global error at T) against log(h) on the Kepler problem."""
    y0, exact = kepler_exact(0.0), kepler_exact(T_END)
    steps = STEPS[expected]
    errors = [(integrate(tableau, Kepler(), y0, T_END, n) - exact).abs().max().item() for n in steps]
    return float(np.polyfit(np.log([T_END / n for n in steps]), np.log(errors), 1)[0])


def order_check_passes(tableau, expected: int) -> bool:
    return abs(fitted_order(tableau, expected) - expected) < ORDER_TOL


@pytest.mark.parametrize("scheme", SCHEMES)
def test_global_error_shows_the_order_of_the_scheme(scheme):
    expected = LITERATURE_ORDER[scheme]
    slope = fitted_order(get_tableau(scheme), expected)
    assert abs(slope - expected) < ORDER_TOL, f"{scheme}: fitted order {slope:.2f}, expected {expected}"


@pytest.mark.parametrize("scheme", SCHEMES)
def test_any_wrong_coefficient_fails_the_order_check(scheme):
    """Each single coefficient of A (below the diagonal, zeros included) and of b, off by 0.01, must fail."""
    tableau, expected = get_tableau(scheme), LITERATURE_ORDER[scheme]
    passing = []
    for i in range(tableau.stages):
        for j in [*range(i), None]:
            value = tableau.b[i] if j is None else tableau.a[i][j]
            if order_check_passes(tableau.with_coefficient(i, j, value + 1e-2), expected):
                passing.append("b" if j is None else f"a[{i}][{j}]")
    assert not passing, f"{scheme}: the order check does not notice wrong {passing}"


def test_the_papers_printed_verner_typos_fail_the_order_check():
    """Spec §2.6: the paper prints k4 with h/27, a54 with 206√6 and a71 = (9-√6)/1250; each breaks order 8."""
    verner, s6 = get_tableau("verner"), math.sqrt(6)
    typos = {
        "k4 /27": verner.with_coefficient(3, 0, 1 / 27).with_coefficient(3, 2, 3 / 27),
        "a54 206√6": verner.with_coefficient(4, 3, (328 + 206 * s6) / 375),
        "a71 /1250": verner.with_coefficient(6, 0, (9 - s6) / 1250),
    }
    assert [name for name, t in typos.items() if order_check_passes(t, 8)] == []
    assert not order_check_passes(get_tableau("verner", verner_coeffs="official_code"), 8)


def test_logistic_equation_reproduces_spec_reference_orders():
    """Spec §7 C3: y' = y(1-y), y(0) = 0.1, T = 2, exact 1/(1+9e^-t); pass at orders ≥ 0.9/1.8/3.8/6.8."""

    class Logistic(nn.Module):
        def forward(self, y):
            return y * (1 - y)

    y0 = torch.tensor([0.1], dtype=torch.float64)
    exact = 1 / (1 + 9 * math.exp(-2.0))
    for scheme, steps, minimum in [
        ("euler", (8, 16, 32), 0.9),
        ("midpoint", (8, 16, 32), 1.8),
        ("rk4", (8, 16, 32), 3.8),
        ("verner", (2, 4, 8), 6.8),
    ]:
        errors = [abs(integrate(get_tableau(scheme), Logistic(), y0, 2.0, n).item() - exact) for n in steps]
        orders = [math.log2(errors[k] / errors[k + 1]) for k in range(len(errors) - 1)]
        assert min(orders) >= minimum, f"{scheme}: observed orders {orders}"
    # The official code's Verner does not converge (spec: error ≈ 0.13 at N = 64).
    official = get_tableau("verner", verner_coeffs="official_code")
    assert abs(integrate(official, Logistic(), y0, 2.0, 64).item() - exact) > 0.05


# ---------------------------------------------------------------------------------------------------------------
# Tableaux
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", [*SCHEMES, "rk4_k4_only"])
def test_tableau_is_consistent(scheme):
    t = get_tableau(scheme) if scheme in SCHEMES else TABLEAUX[scheme]
    assert t.stages == (4 if scheme == "rk4_k4_only" else STAGES[scheme])
    for i, (row, c) in enumerate(zip(t.a, t.c)):
        assert abs(sum(row) - c) <= 1e-12 * max(1.0, abs(c)), f"{scheme}: row {i} sums to {sum(row)}, c = {c}"
    assert abs(sum(t.b) - 1) <= 1e-12


def test_verner_nodes_and_weights_are_the_standard_ones():
    """Spec §2.6: c and the 8th-order weights (exact fractions), k15/k16 dropped."""
    s6 = math.sqrt(6)
    c = [
        0,
        1 / 12,
        1 / 9,
        1 / 6,
        (2 + 2 * s6) / 15,
        (6 + s6) / 15,
        (6 - s6) / 15,
        2 / 3,
        1 / 2,
        1 / 3,
        1 / 4,
        4 / 3,
        5 / 6,
        1,
    ]
    b = {
        0: 103 / 1680,
        7: -27 / 140,
        8: 76 / 105,
        9: -201 / 280,
        10: 1024 / 1365,
        11: 3 / 7280,
        12: 12 / 35,
        13: 9 / 280,
    }
    v = get_tableau("verner")
    assert np.allclose(v.c, c, rtol=0, atol=1e-15)
    assert np.allclose(v.b, [b.get(i, 0.0) for i in range(14)], rtol=0, atol=1e-15)


def test_official_code_verner_has_the_spec_deviations():
    """Spec §7 C2: row 6 sums to 0.572963, row 12 to 1283.004, Σb = 1.385714."""
    v = get_tableau("verner", verner_coeffs="official_code")
    assert round(sum(v.a[5]), 6) == 0.572963
    assert round(sum(v.a[11]), 3) == 1283.004
    assert round(sum(v.b), 6) == 1.385714


def test_rooted_tree_counts():
    """Number of rooted trees per order (OEIS A000081), which the order conditions enumerate."""
    counts = [sum(1 for n, _ in _rooted_trees(9) if n == k) for k in range(1, 10)]
    assert counts == [1, 1, 2, 4, 9, 20, 48, 115, 286]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_order_conditions_give_the_literature_order(scheme):
    assert get_tableau(scheme).algebraic_order(max_order=9) == LITERATURE_ORDER[scheme]


def test_register_tableau_accepts_a_correct_scheme_and_refuses_wrong_ones():
    """Ralston's second-order method (a21 = 2/3, b = 1/4, 3/4) from the literature."""
    from models.horesnet import ButcherTableau, register_tableau

    ralston = ButcherTableau("ralston_test", ((), (2 / 3,)), (1 / 4, 3 / 4), (0.0, 2 / 3), order=2)
    try:
        register_tableau(ralston)
        model = HOResNet(6, "ralston_test")
        assert len(model.layer1) == 1 and len(model.layer1[0].stages) == 2
        with pytest.raises(ValueError, match="already registered"):
            register_tableau(ralston)
    finally:
        TABLEAUX.pop("ralston_test", None)
    with pytest.raises(ValueError, match="inconsistent"):
        register_tableau(ButcherTableau("bad_c", ((), (2 / 3,)), (1 / 4, 3 / 4), (0.0, 0.5), order=2))
    with pytest.raises(ValueError, match="claims order 3"):
        register_tableau(ButcherTableau("bad_order", ((), (2 / 3,)), (1 / 4, 3 / 4), (0.0, 2 / 3), order=3))
    assert "bad_c" not in TABLEAUX and "bad_order" not in TABLEAUX


# ---------------------------------------------------------------------------------------------------------------
# Block wiring
# ---------------------------------------------------------------------------------------------------------------


def _block(scheme, channels=4, **kw):
    torch.manual_seed(0)
    block = RKBlock(
        get_tableau(scheme, **{k: kw.pop(k) for k in ("rk4_output", "verner_coeffs") if k in kw}),
        lambda _: PreActSubBlock(channels),
        **kw,
    ).eval()
    for p in block.parameters():
        if p.ndim == 1:  # non-trivial BN affine parameters
            nn.init.normal_(p, std=0.3)
    return block


def test_midpoint_and_rk4_blocks_follow_the_papers_equations():
    x = torch.randn(2, 4, 5, 5)
    relu = torch.relu
    with torch.no_grad():
        m = _block("midpoint")
        f1, f2 = m.stages
        k1 = f1(x)
        assert torch.allclose(m(x), relu(x + f2(x + 0.5 * k1)), atol=1e-6)  # eqs. (8)-(9)

        for output in ("blend", "k4_only", "k4_sixth"):
            r = _block("rk4", rk4_output=output)
            f1, f2, f3, f4 = r.stages
            k1 = f1(x)
            k2 = f2(x + 0.5 * k1)
            k3 = f3(x + 0.5 * k2)
            k4 = f4(x + k3)
            expected = {"blend": x + (k1 + 2 * k2 + 2 * k3 + k4) / 6, "k4_only": x + k4, "k4_sixth": x + k4 / 6}
            assert torch.allclose(r(x), relu(expected[output]), atol=1e-6), output

        e = _block("euler")
        assert torch.allclose(e(x), relu(x + e.stages[0](x)), atol=1e-6)


@pytest.mark.parametrize("h", [1.0, 0.7])
def test_learnable_h_equals_fixed_h_at_the_same_value(h):
    x = torch.randn(2, 4, 5, 5)
    fixed = _block("verner", h=h)
    learnable = _block("verner", h=h, learnable_h=True)
    assert isinstance(learnable.h, nn.Parameter) and learnable.h.numel() == 1
    with torch.no_grad():
        assert torch.allclose(fixed(x), learnable(x), atol=1e-5)


def test_zeroed_subblocks_make_every_block_the_identity_up_to_relu():
    """Spec §7 C4: with each F's last conv zeroed, every block returns ReLU(x), so all schemes of one depth give
    the same network output once stem and head weights agree."""
    torch.manual_seed(1)
    nets = {s: HOResNet(30, s).eval() for s in ("euler", "midpoint", "verner")}
    ref = nets["euler"]
    for net in nets.values():
        for name, p in net.named_parameters():
            if ".stages." in name and name.endswith("conv2.weight"):
                nn.init.zeros_(p)
        net.conv1.load_state_dict(ref.conv1.state_dict())
        net.linear.load_state_dict(ref.linear.state_dict())
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        outs = {s: net(x) for s, net in nets.items()}
        stem = torch.relu(ref.bn1(ref.conv1(x)))
        assert torch.equal(nets["verner"].layer1[0](stem), torch.relu(stem))
    assert torch.equal(outs["euler"], outs["midpoint"]) and torch.equal(outs["euler"], outs["verner"])


# ---------------------------------------------------------------------------------------------------------------
# Networks
# ---------------------------------------------------------------------------------------------------------------


def test_every_table_row_is_a_registered_model():
    registered = set(timm.list_models(module="horesnet"))
    assert set(PAPER_MODELS) <= registered, sorted(set(PAPER_MODELS) - registered)
    extras = {name for name in registered if name.split("_", 1)[1] in ("heun3", "rk3", "gill4", "kutta_nystrom5")}
    assert {name.split("_", 1)[1] for name in extras} == {"heun3", "rk3", "gill4", "kutta_nystrom5"}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_forward_backward(name):
    torch.manual_seed(0)
    model = timm.create_model(name)
    x = torch.randn(2, 3, 8, 8)  # the network is fully convolutional; 8×8 keeps the deep variants cheap
    out = model(x)
    assert out.shape == (2, 10) and torch.isfinite(out).all()
    out.square().mean().backward()
    missing = [
        n
        for n, p in model.named_parameters()
        if p.grad is None or not torch.isfinite(p.grad).all() or not p.grad.abs().sum() > 0
    ]
    assert not missing, f"no usable gradient for {missing[:5]}"


def test_parameter_counts_match_the_spec_and_are_equal_across_schemes():
    """73,984 per sub-block + 2,506 (stem conv 1,728 + stem BN 128 + FC 650), +1 per block with learnable h."""
    by_depth = {}
    for name in VARIANTS:
        depth, suffix = int(name[len("horesnet") :].split("_")[0]), name.split("_", 1)[1]
        model = _meta(name)
        n_sub = (depth - 2) // 2
        blocks = n_sub // STAGES["verner" if suffix == "verner_ada" else suffix]
        expected = 73_984 * n_sub + 2_506 + (blocks if suffix == "verner_ada" else 0)
        count = sum(p.numel() for p in model.parameters())
        assert count == expected, name
        if suffix != "verner_ada":
            by_depth.setdefault(depth, set()).add(count)
    assert all(len(counts) == 1 for counts in by_depth.values()), by_depth


def _meta(name, **kw):
    with torch.device("meta"):
        return timm.create_model(name, **kw)


def test_timm_kwargs_and_default_cfg():
    cfg = timm.models.get_pretrained_cfg("horesnet58_rk4")
    assert tuple(cfg.input_size) == (3, 32, 32) and cfg.num_classes == 10
    model = timm.create_model("horesnet10_rk4", num_classes=100, in_chans=1)
    assert model(torch.randn(2, 1, 8, 8)).shape == (2, 100)
    assert len(timm.create_model("horesnet58_verner").layer1) == 2
    assert len(timm.create_model("horesnet86_euler", stem_stride=2).layer1) == 42


def test_official_checkpoint_keys_load():
    """Official code names stage k's convs/BNs conv{2k-1}, conv{2k} (anchors §3); they must load strictly."""
    torch.manual_seed(0)
    src, dst = HOResNet(10, "midpoint").eval(), HOResNet(10, "midpoint").eval()
    official = {}
    for key, value in src.state_dict().items():
        parts = key.split(".")
        if ".stages." in key:  # layer1.{i}.stages.{s}.{conv|bn}{m}.{param}
            kind, m = parts[4][:-1], int(parts[4][-1])
            key = ".".join(parts[:2] + [f"{kind}{2 * int(parts[3]) + m}"] + parts[5:])
        official[key] = value
    assert "layer1.1.conv4.weight" in official and "conv1.weight" in official and "linear.bias" in official
    dst.load_state_dict(checkpoint_filter_fn(official, dst), strict=True)
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        assert torch.equal(src(x), dst(x))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: HOResNet(86, "rk4"), "use depth 82 or 90"),
        (lambda: HOResNet(31, "euler"), "must be even"),
        (lambda: HOResNet(10, "rk5"), "unknown HO-ResNet scheme 'rk5'"),
        (lambda: HOResNet(10, "euler", rk4_output="k4_only"), "only applies to scheme 'rk4'"),
        (lambda: HOResNet(30, "verner", verner_coeffs="paper"), "verner_coeffs must be one of"),
    ],
)
def test_bad_arguments_say_what_to_do(call, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")) as info:
        call()
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------------------------------------------------------
# Paper tables
# ---------------------------------------------------------------------------------------------------------------


def test_verify_passes_and_checks_params_and_macs_of_every_model_row():
    from harness.commands import verify
    from results import paper_tables

    checks = verify.run(papers=["horesnet"], progress=False)
    bad = [(c.table, c.row, c.column, c.paper_value, c.ours, c.note) for c in checks if c.status in ("fail", "error")]
    assert not bad
    passed = {(c.table, c.row, c.column) for c in checks if c.status == "pass"}
    tables = paper_tables.load_paper("horesnet")
    rows = [(t.id, r.name) for t in tables for r in t.rows if r.model]
    assert len(rows) == 5 + 21 + 5  # Tables 2, 3, 4
    assert all((t, r, col) in passed for t, r in rows for col in ("params", "macs_m"))
    root = Path(__file__).resolve().parents[2]
    configs = [r.config for t in tables for r in t.rows if r.config]
    assert configs and [c for c in configs if not (root / c).is_file()] == []


# timm's feature API, checked against values computed by hand (tests/models/timm_contract checks only shapes and that it runs)
def _rk4_net(**kwargs):
    torch.manual_seed(0)
    return timm.create_model("horesnet10_rk4", **kwargs).eval()  # one RK4 block of 4 sub-blocks


def _rk4_stage_values(model, x):
    """Stem, then Y2 = x + k1/2, Y3 = x + k2/2, Y4 = x + k3, y = ReLU(x + (k1 + 2k2 + 2k3 + k4)/6) (eqs. 10-11)."""
    stem = F.relu(model.bn1(model.conv1(x)))
    f = model.layer1[0].stages
    k1 = f[0](stem)
    k2 = f[1](stem + k1 / 2)
    k3 = f[2](stem + k2 / 2)
    k4 = f[3](stem + k3)
    return [stem, stem + k1 / 2, stem + k2 / 2, stem + k3, F.relu(stem + (k1 + 2 * k2 + 2 * k3 + k4) / 6)]


def test_horesnet_features_are_the_stem_and_the_rk_stage_values():
    model = _rk4_net()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        expected = _rk4_stage_values(model, x)
        final, feats = model.forward_intermediates(x)
        features = _rk4_net(features_only=True)(x)
    assert [(f["num_chs"], f["reduction"]) for f in model.feature_info] == [(64, 1)] * 5
    assert len(feats) == 5
    for got, want in zip(feats, expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(final, model.forward_features(x), rtol=0, atol=0)
    assert len(features) == 3  # features_only: the last 3, as timm's ViTs
    for got, want in zip(features, expected[2:]):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("index", [0, 2, 4])
def test_horesnet_pruned_inside_a_block_outputs_that_stage_value_and_trains(index):
    model = _rk4_net()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        expected = _rk4_stage_values(model, x)[index]
        stopped, _ = model.forward_intermediates(x, indices=[index], stop_early=True)
    torch.testing.assert_close(stopped, expected, rtol=1e-5, atol=1e-5)
    model.prune_intermediate_layers([index])
    with torch.no_grad():
        torch.testing.assert_close(model.forward_features(x), expected, rtol=1e-5, atol=1e-5)
    kept_stages = {n.split(".")[3] for n, _ in model.named_parameters() if n.startswith("layer1.")}
    assert kept_stages == {str(i) for i in range(index)}  # the dropped stages' parameters are gone
    model.train()
    model(x).sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_horesnet_pruning_drops_a_kept_stage_whose_k_no_kept_stage_value_reads():
    # Kutta-Nystrom 5: a_54 = 0 (row [2/25, 12/25, 2/15, 8/75, 0]), so pruned to stage 5's input (tap 5: stem
    # is tap 0, block 0's stage values are taps 1..5) k_4 is read by nothing kept; only y used it. timm's
    # contract: every kept parameter reaches the output.
    torch.manual_seed(0)
    model = HOResNet(depth=14, scheme="kutta_nystrom5").eval()  # n_F = 6: one block of 6 stages
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        taps = model.forward_intermediates(x, intermediates_only=True)
    model.prune_intermediate_layers([5])
    kept_stages = {n.split(".")[3] for n, _ in model.named_parameters() if n.startswith("layer1.")}
    assert kept_stages == {"0", "1", "2", "3"}
    with torch.no_grad():
        torch.testing.assert_close(model.forward_features(x), taps[5], rtol=0, atol=0)
        pruned_taps = model.forward_intermediates(x, indices=[4, 5], intermediates_only=True)
    torch.testing.assert_close(pruned_taps, taps[4:6], rtol=0, atol=0)
    model.train()
    model(x).sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_horesnet_drop_path_is_identity_in_eval_and_drops_block_increments_in_training():
    torch.manual_seed(0)
    plain = HOResNet(depth=10, scheme="midpoint")
    dropped = HOResNet(depth=10, scheme="midpoint", drop_path_rate=1.0)  # second block: rate 1 → never kept
    dropped.load_state_dict(plain.state_dict())
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(dropped.eval()(x), plain.eval()(x))
        dropped.train()
        stem = dropped.act1(dropped.bn1(dropped.conv1(x)))
        after_first = dropped.layer1[0](stem)  # rate 0 for the first block
        torch.testing.assert_close(dropped.layer1[1](after_first), F.relu(after_first))


def test_scripted_and_traced_horesnet_with_learnable_h_compute_the_eager_output():
    torch.manual_seed(0)
    model = timm.create_model("horesnet30_verner_ada").eval()
    with torch.no_grad():
        for block in model.layer1:
            block.h.fill_(0.7)
        x = torch.randn(1, 3, 32, 32)
        expected = model(x)
        torch.testing.assert_close(torch.jit.script(model)(x), expected)
        torch.testing.assert_close(symbolic_trace(model)(x), expected)
