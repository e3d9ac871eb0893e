"""harness.tasks.alpaca: the instruction-tuning data file is read as a bounded record."""

from __future__ import annotations

import os

import pytest

from fixtures.files import in_time as _in_time


def test_a_deeply_nested_or_fifo_alpaca_file_is_one_line(tmp_path):
    from harness.core.errors import DataError
    from harness.tasks.alpaca import _read

    (tmp_path / "deep.json").write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(DataError, match="deep.json is nested more than"):
        _read(str(tmp_path / "deep.json"), "k")
    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(DataError, match="fifo.json is a FIFO"):
        _in_time(lambda: _read(str(tmp_path / "fifo.json"), "k"))
