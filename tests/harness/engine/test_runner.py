"""harness/engine/runner.py's run plan and preemption, through ``depthbench train`` on real interrupted runs (issue 58
items 1-3): a resumed run keeps its config (a changed key is one line naming it, old -> new, unless allowed with
``--allow-changes``, which meta.json and ``results`` record); ``--resume auto`` says which run it continues or why it
starts a new one; the preemption message is the whole command that continues the run, and that command works as
printed (the run directory names its config); a resume trims the training records after its checkpoint."""

import json
import os
import shlex
import signal
import time
from pathlib import Path

import pytest

from clitools import start_cli

from fixtures.training import EXIT_PREEMPTED, PRESET, TINY, finish

pytestmark = [pytest.mark.slow, pytest.mark.tier("integration")]


@pytest.fixture
def env(tmp_path):
    return dict(
        os.environ,
        OMP_NUM_THREADS="1",
        DEPTHBENCH_RUNS=str(tmp_path / "runs"),
        DEPTHBENCH_DATA=str(tmp_path / "data"),
        PYTHONUNBUFFERED="1",
    )


def depthbench(env, *args):
    return start_cli(*args, env=env, new_session=True)


def stop_after_steps(proc, run_root: Path, steps: int, sig) -> tuple[int, str, str, Path]:
    """Let the run log ``steps`` more steps than it had, then send ``sig`` (a user's Ctrl-C, a preemption)."""

    def logged():
        runs = list(run_root.glob("*/*/metrics.jsonl")) or list(run_root.glob("metrics.jsonl"))
        return (sum(1 for line in runs[0].read_text().splitlines() if '"train"' in line) if runs else 0), runs

    start, _ = logged()
    while (found := logged())[0] < start + steps:
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.01)
    proc.send_signal(sig)
    rc, out, err = finish(proc)
    return rc, out, err, found[1][0].parent


def continue_line(out: str) -> list[str]:
    """The command the preemption message prints (after "continue with: ")."""
    line = next(line for line in out.splitlines() if line.startswith("preempted:"))
    command = shlex.split(line.split("continue with: ", 1)[1])
    assert command[:2] == ["depthbench", "train"], line
    return command[2:]


def test_resume_keeps_the_config_says_what_it_resumes_and_prints_a_working_command(env, tmp_path):
    runs = Path(env["DEPTHBENCH_RUNS"])
    rc, out, err, run = stop_after_steps(depthbench(env, "train", PRESET, *TINY), runs, 4, signal.SIGINT)
    assert rc == EXIT_PREEMPTED, err[-2000:]
    config_before = (run / "config.json").read_text()

    # item 1: another epochs on resume is refused, in one line naming each changed key, and nothing is touched
    rc, out, err = finish(depthbench(env, "train", PRESET, *TINY, "epochs=1", "--resume", "auto"))
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "epochs 2 -> 1" in err and "sched.decay_milestones" in err  # the rescaled schedule, too
    assert "--allow-changes epochs" in err
    assert (run / "config.json").read_text() == config_before
    assert json.loads((run / "meta.json").read_text())["status"] == "preempted"

    # item 2: --resume auto without --work-dir says which run it continues; item 3: the printed command continues it
    proc = depthbench(env, "train", PRESET, *TINY, "--resume", "auto")
    rc, out, err, same = stop_after_steps(proc, runs, 3, signal.SIGTERM)
    assert rc == EXIT_PREEMPTED and same == run, err[-2000:]
    assert f"--resume auto: continuing {run}, the newest unfinished run" in out
    args = continue_line(out)
    assert args == ["--work-dir", str(run), "--resume", "auto"]

    # exactly the printed command continues the run (its config from the run), here with a change allowed
    rc, out, err = finish(depthbench(env, "train", *args, "log_interval=2", "--allow-changes", "log_interval"))
    assert rc == 0, err[-2000:]
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "done" and len(meta["resumes"]) == 2
    assert [(c["key"], c["old"], c["new"]) for c in meta["config_changes"]] == [("log_interval", 1, 2)]
    assert "config changed on resume (--allow-changes): log_interval 1 -> 2" in out

    # ... and `results` shows the change beside the run
    from results.runs import Problems, read_run

    assert read_run(run, Problems())["config_changes"] == "log_interval 1 -> 2"

    # item 2: nothing unfinished to continue: it says so and why, and starts a new run
    rc, out, err = finish(
        depthbench(env, "train", PRESET, *TINY, "epochs=1", "data.train_subset=16", "--resume", "auto")
    )
    assert rc == 0, err[-2000:]
    experiment = runs / Path(PRESET).stem
    assert (
        f"--resume auto: no unfinished run of {Path(PRESET).stem} with a checkpoint in {experiment}; starting "
        f"a new run" in out
    )
    assert len(list(experiment.iterdir())) == 2


@pytest.mark.tier("integration")
def test_resume_trims_training_records_but_keeps_depthbench_eval_records(tmp_path):
    from harness.engine.runner import _trim_lines

    metrics = tmp_path / "metrics.jsonl"
    lines = [
        {"kind": "train", "step": 1},
        {"kind": "eval", "top1": 10.0},  # before the checkpoint: kept
        {"kind": "train", "step": 2},  # after it: dropped
        {"kind": "eval_suite", "dataset": "imagenet-c", "metric": "mce", "value": 50.0},  # depthbench eval
        {"kind": "eval", "top1": 11.0},
    ]
    metrics.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"kind": "tra')  # + a torn line
    assert _trim_lines(metrics, keep=2) == 3
    assert [json.loads(line) for line in metrics.read_text().splitlines()] == [lines[0], lines[1], lines[3]]
