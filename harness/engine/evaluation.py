"""What the engine offers tasks and tools for evaluating a model: :func:`evaluate` (top-1, top-5, loss over an
evaluation set on a backend, summed over ranks), :func:`evaluation_backend` (the backend an evaluation-only process
runs it on), and how a prediction is read from a model's outputs (:func:`primary_logits`, :func:`is_branch_output`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from harness.engine.backends import AccelerateBackend, Backend


def is_branch_output(output) -> bool:
    """True for a NamedTuple of per-branch logits (mixed-depth), whose losses are summed."""
    return isinstance(output, tuple) and hasattr(output, "_fields")


def primary_logits(outputs) -> torch.Tensor:
    """The logits a prediction is read from: the tensor, the class head of a ``(cls, dist)`` pair, or the first
    (deepest) branch of a per-branch NamedTuple."""
    return outputs[0] if isinstance(outputs, (tuple, list)) else outputs


@torch.no_grad()
def evaluate(model, loader, backend: Backend) -> dict:
    """Top-1, top-5 (%) and mean cross-entropy over the whole evaluation set (every target: an image's label,
    or each position of a sequence), summed over ranks."""
    backend.sync_buffers(model)
    model.eval()
    loss_sum = correct1 = correct5 = count = 0.0
    for images, targets in loader:
        images = images.to(backend.device, non_blocking=True)
        targets = targets.to(backend.device, non_blocking=True)
        if backend.input_dtype is not None:
            images = images.to(backend.input_dtype)
        with backend.autocast():
            outputs = model(images)
        # a sequence model's (B, T, V) logits count every position as a sample (language models: tokens)
        outputs, targets = outputs.reshape(-1, outputs.shape[-1]), targets.reshape(-1)
        valid = targets >= 0
        outputs, targets = outputs.float()[valid], targets[valid]
        top = outputs.topk(min(5, outputs.shape[1]), dim=1).indices
        loss_sum += F.cross_entropy(outputs, targets, reduction="sum").item()
        correct1 += (top[:, 0] == targets).sum().item()
        correct5 += (top == targets[:, None]).any(dim=1).sum().item()
        count += len(targets)
    loss_sum, correct1, correct5, count = backend.all_reduce_sum([loss_sum, correct1, correct5, count])
    count = max(count, 1.0)
    return {
        "top1": 100.0 * correct1 / count,
        "top5": 100.0 * correct5 / count,
        "loss": loss_sum / count,
        "images": int(count),
    }


def evaluation_backend(precision: str) -> Backend:
    """The backend an evaluation-only process runs :func:`evaluate` on: Accelerate over the ranks the environment
    names (one process without any), under ``precision``'s autocast."""
    return AccelerateBackend(precision, 1)
