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
    # loss, top-1, top-5, count summed on the device: one host read after the last batch, none per batch (a
    # per-batch .item() or boolean-mask indexing waits for the device and stalls the next batch's copy)
    sums = torch.zeros(4, dtype=torch.float64, device=backend.device)
    for images, targets in loader:
        images = images.to(backend.device, non_blocking=True)
        targets = targets.to(backend.device, non_blocking=True)
        if backend.input_dtype is not None:
            images = images.to(backend.input_dtype)
        with backend.autocast():
            outputs = model(images)
        # a sequence model's (B, T, V) logits count every position as a sample (language models: tokens)
        outputs, targets = outputs.reshape(-1, outputs.shape[-1]).float(), targets.reshape(-1)
        valid = targets >= 0  # negative targets (padding) count nowhere
        safe_targets = targets.clamp_min(0)
        top = outputs.topk(min(5, outputs.shape[1]), dim=1).indices
        losses = F.cross_entropy(outputs, safe_targets, reduction="none")
        hit5 = (top == safe_targets[:, None]).any(dim=1)
        batch_sums = torch.stack(
            [
                losses.where(valid, 0.0).sum(dtype=torch.float64),
                (valid & (top[:, 0] == safe_targets)).sum(dtype=torch.float64),
                (valid & hit5).sum(dtype=torch.float64),
                valid.sum(dtype=torch.float64),
            ]
        )
        sums += batch_sums
    loss_sum, correct1, correct5, count = backend.reduce_and_read(sums)
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
