"""timm's feature API on StepsNet, HO-ResNet and ScaleNet models, checked against values computed by hand.

timm's own model tests (tests/models/timm_contract) check shapes and that the API runs; these check *which* tensors the
features are: Steps-DeiT's per-block full-width states, HO-ResNet's RK stage values, pruning that ends the
network exactly there, and scripted / fx-traced models that compute what the eager model does.
"""

import pytest
import timm
import torch
import torch.nn.functional as F
from torch.fx import symbolic_trace

import models  # noqa: F401  (registers the models)
from models.horesnet import HOResNet
from models.scalenet import assert_tied

pytestmark = pytest.mark.usefixtures("one_thread")

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


def test_scalenet_features_follow_the_expanded_depth_and_keep_the_ties():
    model = timm.create_model("scalenet_deit_tiny_2x", img_size=32, features_only=True, out_indices=(0, 23))
    assert len(model.model.feature_info) == 24  # 12 pretrained + 12 weight-shared layers
    assert_tied(model.model)
    feats = model(torch.randn(1, 3, 32, 32))
    assert [tuple(f.shape) for f in feats] == [(1, 192, 2, 2)] * 2
    swin = timm.create_model("scalenet_swin_tiny_2x", device="meta", features_only=True)
    assert swin.feature_info.channels() == [96, 192, 384, 768]
