"""results.runs: collecting runs names hostile files as problems of their run and waits on none."""

from __future__ import annotations

import os

from fixtures.files import in_time as _in_time
import json
from pathlib import Path


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


# ------------------------------------------------------------------------------------------------ results
def test_results_never_raise_on_what_they_read(tmp_path):
    from results import figures, runs

    def run(name, meta, metrics='{"kind": "eval", "epoch": 0, "top1": 50.0}\n'):
        folder = tmp_path / "exp" / name
        folder.mkdir(parents=True)
        (folder / "meta.json").write_text(meta if isinstance(meta, str) else json.dumps(meta))
        (folder / "metrics.jsonl").write_text(metrics)

    good = {"status": "done", "experiment": "exp", "run_id": "good", "start": "1", "model": "resnet18"}
    run("good", good)
    run("nested", "[" * 100000 + "]" * 100000)
    run("digits", '{"status": "done", "epochs": ' + "9" * 5000 + "}")
    run("list-model", {**good, "run_id": "list-model", "start": "2", "model": ["resnet18"]})
    run("dict-model", {**good, "run_id": "dict-model", "start": "3", "model": {"name": "resnet18"}})
    run("list-experiment", {**good, "run_id": "list-experiment", "start": "4", "experiment": ["a"]})
    run("int-command", {**good, "run_id": "int-command", "start": "5", "command": 7, "config_file": 8})
    run("nested-metrics", {**good, "run_id": "nested-metrics", "start": "6"}, "[" * 100000 + "\n")
    run("exp$\\frac{$", {**good, "run_id": "exp$\\frac{$", "start": "7"})
    frame, problems = runs.collect([tmp_path])
    assert len(frame) == 9
    assert set(frame["status"]) <= {"done", "unknown"}
    flagged = {Path(path).name for path, _ in problems.items}
    assert {
        "nested",
        "digits",
        "list-model",
        "dict-model",
        "list-experiment",
        "int-command",
        "nested-metrics",
    } <= flagged, problems.summary()
    drawn = figures.training_curves(sorted(frame["path"]), tmp_path / "fig" / "curves")
    assert drawn and all(path.stat().st_size > 0 for path in drawn)  # the "$" run's name drawn as text
