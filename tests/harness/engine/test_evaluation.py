"""harness.engine.evaluation: evaluate()'s sums against a hand computation, padding targets counted nowhere, and
one host read for the whole evaluation set (none per batch: on a GPU each would wait for the device)."""

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from harness.engine.evaluation import evaluate, evaluation_backend

pytestmark = pytest.mark.tier("unit")

# aten ops that wait for the device: a scalar read (.item(), float(t), bool(t)) and a data-dependent shape
# (boolean-mask indexing runs nonzero)
WAITING_OPS = {torch.ops.aten._local_scalar_dense.default, torch.ops.aten.nonzero.default}


class HostReads(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.reads = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.reads += func in WAITING_OPS
        return func(*args, **(kwargs or {}))


def batches():
    generator = torch.Generator().manual_seed(0)
    out = []
    for _ in range(4):
        images = torch.randn(6, 3, generator=generator)
        targets = torch.randint(0, 7, (6,), generator=generator)
        targets[::3] = -1  # padding positions: not samples
        out.append((images, targets))
    return out


def test_evaluate_matches_a_hand_computation_with_padding_counted_nowhere():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 7)
    data = batches()
    result = evaluate(model, data, evaluation_backend("fp32"))

    logits = torch.cat([model(x) for x, _ in data]).detach()
    targets = torch.cat([t for _, t in data])
    keep = targets >= 0
    logits, targets = logits[keep], targets[keep]
    top5 = logits.topk(5, dim=1).indices
    assert result["images"] == int(keep.sum()) == 16
    assert result["top1"] == pytest.approx(100.0 * (logits.argmax(1) == targets).float().mean().item())
    assert result["top5"] == pytest.approx(100.0 * (top5 == targets[:, None]).any(1).float().mean().item())
    assert result["loss"] == pytest.approx(F.cross_entropy(logits, targets).item(), rel=1e-6)


def test_evaluate_waits_on_the_device_only_after_the_last_batch():
    model = torch.nn.Linear(3, 7)
    backend = evaluation_backend("fp32")
    data = batches()
    with HostReads() as counter:
        evaluate(model, data, backend)
    # the final read of the four sums (Tensor.tolist is not an aten op: it shows up as none here)
    assert counter.reads == 0, f"{counter.reads} host reads inside evaluate's batch loop"
