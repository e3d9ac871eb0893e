"""depthbench bench: what it reports (never how fast: timings are measured, not asserted)."""
import json

import pytest
import torch
from torch import nn

from harness.bench import measure


def _mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 256), nn.ReLU(), nn.Linear(256, 10))


@pytest.mark.parametrize("mode", ["infer", "train"])
def test_measure_reports_throughput_and_memory(mode):
    model = _mlp()
    before = [p.detach().clone() for p in model.parameters()]
    result = measure(model, 16, batch_size=4, mode=mode, warmup=1, iters=2)
    assert result["samples_per_s"] > 0 and result["step_ms"] > 0 and result["batch_size"] == 4
    assert result["peak_mem_mb"] >= 0
    changed = any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert changed == (mode == "train")  # a training step really updates the weights, inference does not


def test_training_memory_is_seen_on_cpu():
    # a large activation (64 MiB of fp32 per step) must show up in the CPU peak
    model = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    result = measure(model, 128, batch_size=16, mode="train", warmup=1, iters=1)
    assert result["peak_mem_mb"] > 32


def test_bad_mode_and_unknown_model(cli):
    with pytest.raises(ValueError, match="mode"):
        measure(_mlp(), 16, mode="fast")
    out = cli("bench", "transnext_tinyy")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "unknown model 'transnext_tinyy'; did you mean transnext_tiny" in out.stderr


def test_cli_json(cli):
    out = cli("bench", "resnet18", "--batch-size", "2", "--input-size", "32", "--iters", "1", "--warmup", "0",
              "--json")
    assert out.returncode == 0, out.stderr
    (entry,) = json.loads(out.stdout)
    assert entry["model"] == "resnet18" and entry["input_size"] == [32] and entry["samples_per_s"] > 0
