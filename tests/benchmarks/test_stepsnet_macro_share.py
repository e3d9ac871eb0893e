"""benchmarks/stepsnet_macro_share.py: its parts of a step -- the blocks alone, the model without them, the macro
alone -- are the parts they stand for, and its ratios are computed the right way round."""

import pytest
import timm
import torch
from torch.utils.flop_counter import FlopCounterMode

from benchmarks.stepsnet_macro_share import (
    BASELINE,
    pair_ratios,
    recorded_shapes,
    replay_blocks,
    replay_macro,
    shape_preserving_blocks,
    steps_copying_first_slice,
    without_blocks,
)
from fixtures.dispatch import DispatchedOps
from models.stepsnet import residual_blocks, stepsnet_modules

pytestmark = pytest.mark.slow


def _flops(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


@pytest.mark.tier("integration")
@pytest.mark.parametrize("name", [m for pair in BASELINE.items() for m in pair])
def test_the_blocks_alone_and_the_model_without_them_split_the_models_work(name):
    model = timm.create_model(name).eval()
    blocks = shape_preserving_blocks(model, batch=1)
    all_blocks = residual_blocks(model)
    # every block but ResNet's first of a stage (stride 2 or wider), in forward order
    assert [b for b, _ in blocks] == [
        b for b in all_blocks if b not in {getattr(model, f"layer{i}", [None])[0] for i in range(1, 5)}
    ]
    stripped = without_blocks(model, [b for b, _ in blocks])
    assert residual_blocks(model) == all_blocks  # the model itself keeps its blocks
    assert len(residual_blocks(stripped)) == len(all_blocks) - len(blocks)

    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        whole, rest = _flops(lambda: model(x)), _flops(lambda: stripped.eval()(x))
        assert stripped(x).shape == model(x).shape
    alone = _flops(replay_blocks(blocks, train=False))
    assert alone == whole - rest > 0
    # training runs the backward too (about twice the forward's FLOPs) and leaves no gradient behind for the next round
    assert _flops(replay_blocks(blocks, train=True)) > 2.5 * alone
    assert all(p.grad is None for block, _ in blocks for p in block.parameters())


@pytest.mark.tier("integration")
@pytest.mark.parametrize("name", list(BASELINE))
def test_the_macros_replay_hands_on_what_the_steps_first_blocks_receive(name):
    model = timm.create_model(name).eval()
    nets = stepsnet_modules(model)
    macros = [(m, shape) for m, shape, _ in recorded_shapes(model, nets, batch=1)]
    firsts = [step[0] for net in nets for step in net.steps if len(step)]
    received = {tuple(shape) for _, shape, _ in recorded_shapes(model, firsts, batch=1)}
    for train in (False, True):
        produced = replay_macro(macros, train)()
        assert received <= {tuple(t.shape) for t in produced}


@pytest.mark.tier("integration")
@pytest.mark.parametrize("name", list(BASELINE))
def test_the_model_without_its_blocks_still_runs_the_macro(name):
    # the rest keeps the macro's split and concatenations: only the blocks' own work leaves the step
    model = timm.create_model(name).eval()
    stripped = without_blocks(model, [b for b, _ in shape_preserving_blocks(model, batch=1)])
    counts = {}
    for label, net in (("model", model), ("stripped", stripped)):
        with DispatchedOps() as mode, torch.no_grad():
            net(torch.randn(1, 3, 224, 224))
        counts[label] = mode.counts
    macro_ops = ("split_with_sizes", "cat")
    assert [counts["stripped"][op] for op in macro_ops] == [counts["model"][op] for op in macro_ops]
    assert counts["stripped"]["cat"] >= len(stepsnet_modules(model)) > 0


@pytest.mark.tier("integration")
@pytest.mark.parametrize("name", list(BASELINE))
def test_the_copying_variant_hands_the_first_block_a_contiguous_slice_and_computes_the_same(name):
    model = timm.create_model(name).eval()
    copied = steps_copying_first_slice(model).eval()
    contiguous = {}
    for label, net in (("model", model), ("copied", copied)):
        firsts = [n.steps[0][0] for n in stepsnet_modules(net)]
        hooks = [
            b.register_forward_pre_hook(
                lambda m, args, label=label: contiguous.setdefault(label, []).append(args[0].is_contiguous())
            )
            for b in firsts
        ]
        x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            out = net(x)
        for hook in hooks:
            hook.remove()
        contiguous[label + " out"] = out
    assert contiguous["model"] and not any(contiguous["model"])  # the split's first slice is strided
    # the copying hook runs before the recording one (registration order), so the block itself receives the copy
    assert all(contiguous["copied"]) and len(contiguous["copied"]) == len(contiguous["model"])
    torch.testing.assert_close(contiguous["copied out"], contiguous["model out"])


def test_pair_ratios_are_the_right_way_round():
    times = {
        "baseline step": 10.0,
        "baseline rest": 2.0,
        "baseline blocks alone": 8.0,
        "steps step": 12.0,
        "steps rest": 3.0,
        "steps blocks alone": 10.0,
    }
    ratios = pair_ratios(times)
    assert ratios["measured"] == pytest.approx(10 / 12)  # below 1: the Steps model is the slower
    assert ratios["blocks in the model"] == pytest.approx(9 / 8)
    assert ratios["blocks alone"] == pytest.approx(10 / 8)
    assert ratios["outside the blocks, beyond the baseline (share of the Steps step)"] == pytest.approx(1 / 12)
    assert ratios["predicted by the blocks"] == pytest.approx(10 / 11)  # its blocks with the baseline's rest
