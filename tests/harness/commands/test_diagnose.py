"""``depthbench diagnose`` (harness/commands/diagnose.py) checks its inputs before it creates a run: a crafted
checkpoint (it would create a file when unpickled), a file as --out-dir, weights of another model -- one line each,
nothing written."""

from __future__ import annotations

import pytest
import torch

from fixtures.cli import one_line_captured as _one_line
from fixtures.files import Evil as _Evil
from harness import cli


@pytest.mark.tier("integration")
def test_diagnose_checks_its_inputs_before_it_creates_a_run(tmp_path, capsys):
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pth"
    torch.save({"model": {"w": torch.zeros(1)}, "x": _Evil(marker)}, evil)
    runs = tmp_path / "runs"
    _one_line(
        capsys,
        cli.main(
            [
                "diagnose",
                "shortcut-ratio",
                "steps_deit_tiny",
                "--checkpoint",
                str(evil),
                "--input-size",
                "32",
                "--batch-size",
                "2",
                "--out-dir",
                str(runs),
            ]
        ),
        "posix.system",
    )
    assert not runs.exists() and not marker.exists()
    afile = tmp_path / "afile"
    afile.write_text("")
    _one_line(
        capsys,
        cli.main(["diagnose", "shortcut-ratio", "steps_deit_tiny", "--input-size", "32", "--out-dir", str(afile)]),
        "is a file, not a directory",
    )
    wrong = tmp_path / "wrong.pth"  # readable, but the weights of another model: measured first, nothing written
    torch.save({"model": {"w": torch.zeros(1)}}, wrong)
    _one_line(
        capsys,
        cli.main(
            [
                "diagnose",
                "shortcut-ratio",
                "steps_deit_tiny",
                "--checkpoint",
                str(wrong),
                "--input-size",
                "32",
                "--batch-size",
                "2",
                "--out-dir",
                str(runs),
            ]
        ),
        "does not fit",
    )
    assert not runs.exists()
