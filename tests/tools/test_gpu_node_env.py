"""The bare GPU node's Python environment, simulated (issue 52): what the GPU check imports must import there.

That node (../shared/notes/environment.md, "The bare GPU node") has torch, torchvision, timm and a short list of
packages, no network, and what tools/gpu_wheels.sh carries. Here a meta-path finder refuses every package installed
in this venv that the node would not have -- neither one of its own distributions (:data:`devices.GPU_NODE`) or
what they require, nor one the carried wheels bring (gpu_wheels.sh's lists, read from the script) -- and the GPU
check's test modules are collected and the modules its tests import lazily are imported under it. ``import
deepspeed`` failed there: its flops profiler and pipeline modules import einops and msgpack at the top.
"""

import importlib.metadata as metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from devices import GPU_NODE, GPU_CHECK_FILES

pytestmark = pytest.mark.tier("integration")

ROOT = Path(__file__).resolve().parents[2]
# imported inside the GPU check's tests (the command modules import their work lazily), by the engine on DeepSpeed
LAZY = [
    "harness.commands.train",
    "harness.commands.bench",
    "harness.commands.preflight",
    "harness.commands.data",
    "loader_throughput",
    "deepspeed",
    "deepspeed.runtime.zero.stage_1_and_2",
    "deepspeed.runtime.zero.stage3",
    "deepspeed.runtime.bf16_optimizer",
    "mmengine.config",
]

FINDER = r'''
import importlib.abc, json, sys
REFUSED = frozenset(json.loads(sys.argv[1]))

class GpuNodeLacks(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in REFUSED:
            raise ModuleNotFoundError(f"No module named {name!r} (the GPU node lacks it)", name=name)
        return None

sys.meta_path.insert(0, GpuNodeLacks())
sys.path.insert(0, "benchmarks")
import pytest
code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "pytest_timeout", *json.loads(sys.argv[2])])
failed = []
for module in json.loads(sys.argv[3]):
    try:
        __import__(module)
    except ImportError as e:
        failed.append(f"{module}: {e}")
print("LAZY-FAILED " + json.dumps(failed))
sys.exit(code or bool(failed))
'''


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def carried() -> set[str]:
    """The distributions tools/gpu_wheels.sh carries: its PURE and COMPILED lists, and DeepSpeed."""
    text = (ROOT / "tools" / "gpu_wheels.sh").read_text()
    names = {"deepspeed"}
    for array in ("PURE", "COMPILED"):
        names |= set(re.search(rf"^{array}=\(([^)]*)\)", text, re.M).group(1).split())
    return {normalised(n) for n in names}


def on_the_node(installed: dict) -> set[str]:
    """The node's own distributions and everything they require (as installed here), plus the carried ones."""
    seen, todo = set(), [normalised(n) for n in GPU_NODE]
    while todo:
        name = todo.pop()
        if name in seen or name not in installed:
            continue
        seen.add(name)
        todo += [
            normalised(re.match(r"[A-Za-z0-9_.-]+", r).group(0))
            for r in installed[name].requires or []
            if "extra ==" not in r
        ]
    return seen | carried() | {"pip", "setuptools", "depthbench"}


def refused_modules() -> list[str]:
    installed = {normalised(d.metadata["Name"]): d for d in metadata.distributions()}
    allowed = on_the_node(installed)
    providers = metadata.packages_distributions()
    # our packages, and tests/: pytest's importlib mode names its modules tests.<path> (some wheels here also ship a
    # top-level "tests" package, which the GPU node lacks; ours travels with the checkout)
    ours = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()} | {"tests"}
    return sorted(
        module
        for module, dists in providers.items()
        if module not in ours and not module.startswith("_") and not any(normalised(d) in allowed for d in dists)
    )


def test_the_gpu_check_imports_on_the_gpu_node_with_the_carried_wheels():
    refused = refused_modules()
    assert {"mmcv", "mmdet", "mmseg"} <= set(refused)  # the simulation refuses what the node lacks and no wheel brings
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-c", FINDER, json.dumps(refused), json.dumps(GPU_CHECK_FILES), json.dumps(LAZY)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lazy = next((line for line in proc.stdout.splitlines() if line.startswith("LAZY-FAILED ")), "LAZY-FAILED null")
    errors = [line for line in proc.stdout.splitlines() if "Error" in line][:10]
    assert proc.returncode == 0 and json.loads(lazy.split(" ", 1)[1]) == [], (
        f"{lazy}\n" + "\n".join(errors) + proc.stderr[-2000:]
    )


def test_the_pinned_timm_is_carried_because_the_node_s_own_is_another_build():
    """The node's timm says 1.0.31 but lacks ``swin_transformer.resolve_stage_window_sizes``, which models/stepsnet.py
    imports from the index's 1.0.31: both GPU sessions' first calls (26 and 29 Nov 2026) failed at that import, the
    second after the wheel had dropped out of tools/gpu_wheels.sh's list."""
    import timm.models.swin_transformer as swin

    assert hasattr(swin, "resolve_stage_window_sizes")  # ours: what StepsNet's Swin needs
    assert "resolve_stage_window_sizes" in (ROOT / "models" / "stepsnet.py").read_text()
    assert "timm" in carried()
