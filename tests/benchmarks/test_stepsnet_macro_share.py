"""benchmarks/stepsnet_macro_share.py: its replay of a model's residual blocks does the work those blocks do in the
model, so the pair it predicts from them stands for the model."""

import pytest
import timm
import torch
from torch.utils.flop_counter import FlopCounterMode

from benchmarks.stepsnet_macro_share import BASELINE, recorded_inputs, replay_blocks
from models.stepsnet import residual_blocks

pytestmark = pytest.mark.slow


def _flops(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


@pytest.mark.tier("integration")
@pytest.mark.parametrize("name", [m for pair in BASELINE.items() for m in pair])
def test_the_blocks_replay_does_the_flops_the_models_blocks_do(name):
    model = timm.create_model(name).eval()
    blocks = residual_blocks(model)
    recorded = recorded_inputs(model, blocks, batch=1)
    assert [block for block, _ in recorded] == blocks  # every block once, in forward order

    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(torch.randn(1, 3, 224, 224))
    per_module = counter.get_flop_counts()  # keyed "<class name>.<qualified name>"
    names = {module: f"{type(model).__name__}.{qualified}" for qualified, module in model.named_modules()}
    in_blocks = sum(sum(per_module[names[block]].values()) for block in blocks)

    inference = _flops(replay_blocks(recorded, train=False))
    assert inference == in_blocks > 0
    # training runs the backward too (about twice the forward's FLOPs) and leaves no gradient behind for the next round
    training = _flops(replay_blocks(recorded, train=True))
    assert training > 2.5 * inference
    assert all(p.grad is None for block in blocks for p in block.parameters())
