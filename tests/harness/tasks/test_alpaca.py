"""harness.tasks.alpaca: the instruction-tuning data file is read as a bounded record, the LLaMA weights never as
a pickle."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from fixtures.files import in_time as _in_time
from fixtures.files import refused as _refused

ROOT = Path(__file__).resolve().parents[3]


def test_a_deeply_nested_or_fifo_alpaca_file_is_one_line(tmp_path):
    from harness.core.errors import DataError
    from harness.tasks.alpaca import _read

    (tmp_path / "deep.json").write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(DataError, match="deep.json is nested more than"):
        _read(str(tmp_path / "deep.json"), "k")
    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(DataError, match="fifo.json is a FIFO"):
        _in_time(lambda: _read(str(tmp_path / "fifo.json"), "k"))


def test_a_llama_bin_of_pickles_is_one_line(tmp_path):
    from harness.tasks.alpaca import load_llama

    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "config.json").write_text((ROOT / "harness/assets/llama/tiny-llama.json").read_text())

    class Payload:
        def __reduce__(self):
            return (os.system, ("true",))

    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"w": Payload()}))
    _refused(lambda: load_llama(folder), "pytorch_model.bin", "not a readable PyTorch state dict")
