"""downstream.hooks: the work-dir guard refuses links planted where MMEngine writes."""

from __future__ import annotations

import os

import pytest

from harness.core.files import BadFile


def test_the_work_dir_guard_refuses_planted_links_and_removes_them_mid_run(tmp_path, capsys):
    from downstream.hooks import guard_work_dir

    work, other = tmp_path / "work", tmp_path / "other"
    (work / "20261127_000000" / "vis_data").mkdir(parents=True)
    other.mkdir()
    (other / "precious.pth").write_bytes(b"precious")
    (work / "iter_1.pth").write_bytes(b"ours")
    (work / "last.pth").symlink_to("iter_1.pth")  # depthbench's own link, beside it: allowed
    guard_work_dir(work)
    for planted in ("iter_2.pth", "last_checkpoint", "20261127_000000/vis_data/scalars.json"):
        (work / planted).symlink_to(other / "precious.pth")
        with pytest.raises(BadFile, match=f"{planted} in the work dir is a symbolic link"):
            guard_work_dir(work)
        guard_work_dir(work, remove=True)  # mid-run: the link goes, its target stays
        assert not os.path.lexists(work / planted) and (other / "precious.pth").read_bytes() == b"precious"
    (work / "epoch_1.pth").unlink(missing_ok=True)
    (work / "20261127_000000" / "vis_data").rmdir()
    (work / "20261127_000000" / "vis_data").symlink_to(other)
    with pytest.raises(BadFile, match="vis_data in the work dir is a symbolic link"):
        guard_work_dir(work)
    (work / "20261127_000000" / "vis_data").unlink()
    os.mkfifo(work / "epoch_1.pth")
    with pytest.raises(BadFile, match="epoch_1.pth in the work dir is not a regular file"):
        guard_work_dir(work)
    assert "removed" in capsys.readouterr().err
