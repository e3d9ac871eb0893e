"""results.runs: collecting runs names hostile files as problems of their run and waits on none."""

from __future__ import annotations

import os

from fixtures.files import in_time as _in_time


def test_results_name_a_fifo_or_a_link_in_a_run_and_wait_on_neither(tmp_path):
    from results import runs

    for name in ("fifo", "link"):
        (tmp_path / "exp" / name).mkdir(parents=True)
    os.mkfifo(tmp_path / "exp" / "fifo" / "meta.json")
    os.mkfifo(tmp_path / "exp" / "fifo" / "metrics.jsonl")
    (tmp_path / "secret.json").write_text('{"status": "done", "model": "private"}')
    (tmp_path / "exp" / "link" / "meta.json").symlink_to(tmp_path / "secret.json")
    frame, problems = _in_time(lambda: runs.collect([tmp_path]))
    assert len(frame) == 2 and set(frame["status"]) == {"unknown"} and "private" not in set(frame["model"])
    text = problems.summary()
    assert "a FIFO" in text and "a symbolic link" in text
