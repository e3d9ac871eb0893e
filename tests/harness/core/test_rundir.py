"""The run-directory contract (harness/core/rundir.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.files import in_time as _in_time
from fixtures.files import refused as _refused
from fixtures.training import ROOT
from harness.core.errors import DepthbenchError
from harness.core.files import BadFile
from harness.core.rundir import RunDir, read_metrics


def test_a_run_directory_holds_meta_and_metrics(tmp_path):
    run = RunDir.create("exp", root=tmp_path, engine="accelerate", world_size=2)
    assert run.path.parent == tmp_path / "exp"
    meta = json.loads((run.path / "meta.json").read_text())
    assert meta["status"] == "running" and meta["engine"] == "accelerate" and meta["world_size"] == 2
    assert meta["packages"]["torch"].startswith("2.14") and meta["start"]
    run.log_metrics(step=1, loss=2.5)
    run.log_metrics(step=2, loss=2.0)
    run.finish("done", best_top1=50.0)
    meta = RunDir.open(run.path).meta()
    assert meta["status"] == "done" and meta["end"] and meta["best_top1"] == 50.0
    assert [r["loss"] for r in read_metrics(run.path / "metrics.jsonl")] == [2.5, 2.0]


def test_runs_started_in_the_same_second_get_their_own_directories(tmp_path):
    paths = {RunDir.create("exp", root=tmp_path).path for _ in range(3)}
    assert len(paths) == 3


def test_non_writers_write_nothing(tmp_path):
    run = RunDir.create("exp", root=tmp_path, writer=False)
    run.log_metrics(step=1)
    run.update_meta(status="done")
    assert not (tmp_path / "exp").exists()


def test_bad_status_and_missing_run(tmp_path):
    run = RunDir.create("exp", root=tmp_path)
    with pytest.raises(ValueError, match="status must be one of"):
        run.update_meta(status="finished")
    with pytest.raises(DepthbenchError, match="not a run directory"):
        RunDir.open(tmp_path / "nothing")


def test_a_torn_last_metrics_line_is_ignored_but_corruption_elsewhere_is_reported(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n{"st')
    assert read_metrics(path) == [{"step": 1}, {"step": 2}]
    path.write_text('{"step": 1}\nGARBAGE\n{"step": 3}\n')
    with pytest.raises(DepthbenchError, match="metrics.jsonl:2"):
        read_metrics(path)


def test_the_runs_folder_is_the_checkouts_from_any_directory_unless_depthbench_runs_says(tmp_path, monkeypatch):
    """Issue 58/57: one function resolves the runs folder -- README's results/runs inside the checkout, so `results`,
    `jobs` and `--resume auto` find the runs from any working directory -- and $DEPTHBENCH_RUNS is read when a run
    starts (not at import), by training, preflight, results and slurm alike."""
    from harness.core import rundir
    from harness.measure.preflight import new_record_path
    from slurm.paths import runs_root as slurm_runs_root

    checkout = Path(__file__).resolve().parents[3]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEPTHBENCH_RUNS", raising=False)
    assert rundir.new_run_path("x").parent == checkout / "results" / "runs" / "x"
    assert new_record_path().parent == checkout / "results" / "runs" / "preflight"
    monkeypatch.setenv("DEPTHBENCH_RUNS", str(tmp_path / "shared"))
    assert rundir.new_run_path("x").parent == tmp_path / "shared" / "x"
    assert slurm_runs_root() == tmp_path / "shared" == rundir.runs_root()


def test_a_run_directory_reads_no_link_and_waits_on_no_fifo(tmp_path):
    from harness.core.rundir import RunDir, read_config_json, read_metrics

    run = RunDir.create("exp", path=tmp_path / "run")
    run.finish("done")
    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"private": 1}\n')
    (run.path / "metrics.jsonl").symlink_to(secret)
    with pytest.raises(BadFile, match="is a symbolic link"):
        read_metrics(run.path / "metrics.jsonl")
    (run.path / "config.json").unlink(missing_ok=True)
    os.mkfifo(run.path / "config.json")
    assert _in_time(lambda: read_config_json(run.path)) is None  # a FIFO config.json: "no config", at once
    (run.path / "meta.json").unlink()
    os.mkfifo(run.path / "meta.json")
    with pytest.raises(BadFile, match="meta.json .* is a FIFO"):
        _in_time(lambda: RunDir.open(run.path, writer=False))


def test_a_fifo_as_lock_file_is_one_line(tmp_path):
    from harness.core.rundir import lock_run_dir, run_dir_in_use

    (tmp_path / "run").mkdir()
    os.mkfifo(tmp_path / "run" / ".lock")
    assert _in_time(lambda: run_dir_in_use(tmp_path / "run")) is None
    with pytest.raises(DepthbenchError, match=r"\.lock is not a regular file"):
        _in_time(lambda: lock_run_dir(tmp_path / "run"))


def test_a_planted_tb_link_does_not_move_the_events(tmp_path):
    from harness.core.rundir import RunDir

    run = RunDir.create("exp", path=tmp_path / "run")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run.path / "tb").symlink_to(elsewhere)
    with pytest.raises(BadFile, match="tb .* is a symbolic link"):
        run.file("tb")
    with pytest.raises(BadFile, match="is a symbolic link"):
        run.file("tb/events.out")
    run.finish("done")
    assert not any(elsewhere.iterdir())


def test_a_log_txt_or_metrics_link_in_a_run_is_one_line_before_the_run_starts(tmp_path):
    from harness.core.rundir import RunDir

    target = tmp_path / "precious.txt"
    target.write_text("precious\n")
    for name in ("log.txt", "metrics.jsonl"):
        run = tmp_path / name.replace(".", "-")
        run.mkdir()
        (run / name).symlink_to(target)
        _refused(lambda: RunDir.create("exp", path=run), name, "symbolic link")
        (run / "meta.json").write_text('{"status": "preempted"}')
        _refused(lambda: RunDir.open(run), name, "symbolic link")  # a resume
    assert target.read_text() == "precious\n"


# ------------------------------------------------------------------------------------------------ run directories
@pytest.mark.tier("integration")
def test_a_run_directory_has_one_writer_and_a_killed_writer_leaves_no_stale_lock(tmp_path):
    from harness.core.rundir import RunDir, run_dir_in_use

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time; from harness.core.rundir import RunDir; "
                f"RunDir.create('exp', path={str(tmp_path / 'run')!r}); print('locked', flush=True); time.sleep(60)"
            ),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert "pid" in run_dir_in_use(tmp_path / "run")
        with pytest.raises(DepthbenchError, match="is in use by pid"):
            RunDir.open(tmp_path / "run")
    finally:
        holder.kill()  # SIGKILL: the kernel releases the lock
        holder.wait()
    assert run_dir_in_use(tmp_path / "run") is None
    run = RunDir.open(tmp_path / "run")
    run.log_metrics(step=1)
    run.finish("done")


def test_names_cannot_leave_the_runs_root(tmp_path):
    from harness.core.rundir import RunDir, new_run_path

    for name in ("../../x", "a/b", "..", ".hidden", "", "x\ny"):
        with pytest.raises(DepthbenchError, match="is not a plain name"):
            new_run_path(name, tmp_path)
    with pytest.raises(DepthbenchError, match="run id"):
        RunDir.create("exp", run_id="../escape", root=tmp_path)
    assert not (tmp_path.parent / "escape").exists()


def test_appends_never_follow_a_symlink(tmp_path):
    from harness.core.rundir import RunDir

    run = RunDir.create("exp", path=tmp_path / "run")
    target = tmp_path / "elsewhere.txt"
    target.write_text("precious\n")
    (tmp_path / "run" / "metrics.jsonl").symlink_to(target)
    from harness.core.files import BadFile

    with pytest.raises(BadFile, match="symbolic link"):  # one line naming the link, not an OSError
        run.log_metrics(step=1)
    assert target.read_text() == "precious\n"
    run.finish("done")
