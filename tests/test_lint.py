"""ruff's rules (pyproject.toml [tool.ruff]) hold on the whole tree, and pre-commit runs the three checks of the
code's hygiene: ruff, the layer contract (lint-imports) and the import-circle check (issue 56)."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.tier("integration")

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def test_ruff_check_passes_on_the_whole_tree():
    done = subprocess.run(
        [str(BIN / "ruff"), "check", "--no-cache", "--output-format", "concise", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"ruff check (bash tools/ruff_fix.sh fixes what it can):\n{done.stdout[-4000:]}"


def test_ruff_format_leaves_the_whole_tree_as_it_is():
    done = subprocess.run(
        [str(BIN / "ruff"), "format", "--check", "--no-cache", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"ruff format would change these (make lint-fix formats them):\n{done.stdout[-4000:]}"


def test_ruff_reads_the_rules_of_pyproject():
    """A finding of a chosen rule is reported with this configuration (so a pass above is not a blind check)."""
    done = subprocess.run(
        [str(BIN / "ruff"), "check", "--no-cache", "--stdin-filename", "harness/probe.py", "-"],
        cwd=ROOT,
        input="import os\nx = [" + "1, " * 60 + "]\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "F401" in done.stdout and "E501" in done.stdout, done.stdout


def test_pre_commit_runs_ruff_the_contract_and_the_circle_check():
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = {hook["id"]: hook for repo in config["repos"] for hook in repo["hooks"]}
    assert {"ruff", "import-contract", "import-cycles"} <= set(hooks)
    assert "ruff format" in hooks["ruff-format"]["entry"]
    assert "ruff check" in hooks["ruff"]["entry"] and "lint-imports" in hooks["import-contract"]["entry"]
    assert "import_cycles.py" in hooks["import-cycles"]["entry"]
    done = subprocess.run(
        [str(BIN / "pre-commit"), "validate-config", ".pre-commit-config.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
