"""``depthbench train`` end to end: what the command refuses before training (tests/harness/engine/test_train.py
trains)."""

from __future__ import annotations

import pytest

from fixtures.cli import one_line as _one_line

pytestmark = pytest.mark.tier("integration")


def test_train_resume_auto_with_a_linked_last_pth_is_one_line(tmp_path, cli):
    other = tmp_path / "other"
    other.mkdir()
    (other / "last.pth").write_bytes(b"not a checkpoint")
    work = tmp_path / "run"
    work.mkdir()
    (work / "meta.json").write_text('{"status": "preempted"}')
    (work / "last.pth").symlink_to(other / "last.pth")
    out = cli("train", "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py", "--work-dir", work, "--resume", "auto")
    assert "is a symbolic link" in _one_line(out)
