"""``depthbench data`` end to end: ``data pack`` refuses a data root it cannot read as data, in one line."""

from __future__ import annotations

import pytest

from clitools import run_cli_here
from fixtures.images import png_folder as _folder

pytestmark = pytest.mark.tier("integration")


def test_data_pack_with_a_link_out_is_one_line_exit_2(tmp_path):
    folder = _folder(tmp_path / "folder")
    (folder / "train" / "a" / "out").symlink_to(tmp_path)
    code, _, err = run_cli_here("data", "pack", folder, tmp_path / "shards", "--splits", "train")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "symbolic link out of the data root" in lines[0], err
