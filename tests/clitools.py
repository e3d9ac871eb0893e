"""``run_cli``: run ``depthbench ARGS`` in a subprocess exactly as a user would.

A module of its own (not ``conftest``) so test modules can import it by name: tests/timm_contract has a
conftest of its own, and ``from conftest import ...`` would find whichever conftest pytest loaded first."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args, cwd=None, env=None, timeout=600):
    """Run ``depthbench ARGS`` in a subprocess exactly as a user would; returns CompletedProcess."""
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or ROOT, env={**os.environ, **(env or {})}, timeout=timeout)
