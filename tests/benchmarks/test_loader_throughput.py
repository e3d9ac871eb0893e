"""benchmarks/loader_throughput.py on a tiny generated folder."""

import json
import os

import pytest

from fixtures.training import ROOT
from harness.engine.forked import start_forked

pytestmark = pytest.mark.slow


# ----------------------------------------------------------------------------------------- loader benchmark
@pytest.mark.tier("integration")
def test_loader_benchmark_runs_on_a_tiny_generated_folder(tmp_path):
    # `python -m benchmarks.loader_throughput` (the script as a module: benchmarks/ is a namespace package from the
    # repository root) as a fork of the preloaded server: its torch/timm imports are not what the test is about
    log = tmp_path / "log.txt"
    proc = start_forked(
        "benchmarks.loader_throughput",
        [
            "--root",
            tmp_path / "folder",
            "--images",
            "48",
            "--classes",
            "4",
            "--batch-size",
            "8",
            "--workers",
            "0",
            "1",
            "--batches",
            "4",
            "--rounds",
            "1",
            "--json",
            tmp_path / "r.json",
        ],
        dict(os.environ, OMP_NUM_THREADS="1"),
        log,
        cwd=ROOT,
    )
    proc.join(600)
    assert proc.exitcode == 0, log.read_text()[-3000:]
    result = json.loads((tmp_path / "r.json").read_text())
    loaders = {r["loader"] for r in result["rows"]}
    assert {"depthbench", "depthbench uint8", "timm create_loader", "depthbench, no reseed"} <= loaders
    assert all(r["images_per_s"] > 0 for r in result["rows"])
    assert len(list((tmp_path / "folder" / "train").iterdir())) == 4
