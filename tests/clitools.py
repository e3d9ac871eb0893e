"""``run_cli``: run ``depthbench ARGS`` in a subprocess exactly as a user would; ``run_cli_here``: in this process.

A module of its own (not ``conftest``) so test modules can import it by name: tests/timm_contract has a
conftest of its own, and ``from conftest import ...`` would find whichever conftest pytest loaded first."""
import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args, cwd=None, env=None, timeout=600):
    """Run ``depthbench ARGS`` in a subprocess exactly as a user would; returns CompletedProcess."""
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or ROOT, env={**os.environ, **(env or {})}, timeout=timeout)


def run_cli_here(*args) -> tuple[int, str, str]:
    """``depthbench ARGS`` in this process (no 5 s torch import per call): (exit code, stdout, stderr)."""
    from harness.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()
