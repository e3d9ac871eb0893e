"""harness/engine/models.py: a meta-device build skips weight initialisation and builds the same architecture."""

import pytest
import timm
import torch

from fixtures.dispatch import DispatchedOps
from harness.engine.models import build_model, meta_build


INITIALISATION = {"uniform_", "normal_", "erfinv_", "fill_", "zero_"}


@pytest.mark.parametrize("name", ["deit_tiny_patch16_224", "steps_swin_tiny", "transnext_micro"])
def test_a_meta_build_skips_initialisation_and_keeps_the_architecture(name):
    with DispatchedOps() as ops:
        model = build_model(name)
    assert not ops.counts.keys() & INITIALISATION, ops.counts.keys() & INITIALISATION
    with torch.device("meta"):
        reference = timm.create_model(name)
    assert [(n, p.shape, p.requires_grad) for n, p in model.named_parameters()] == [
        (n, p.shape, p.requires_grad) for n, p in reference.named_parameters()
    ]
    assert [(n, b.shape) for n, b in model.named_buffers()] == [(n, b.shape) for n, b in reference.named_buffers()]


def test_only_meta_tensors_skip_in_place_ops():
    with meta_build("meta"):
        on_meta = torch.empty(3)
        assert on_meta.fill_(1.0) is on_meta
    real = torch.zeros(3)
    with meta_build("meta"):
        real.fill_(2.0)  # a real tensor made outside (a loaded weight): written as always
    assert torch.equal(real, torch.full((3,), 2.0))
    with meta_build("cpu"):
        assert torch.empty(2).device.type == "cpu"
