"""harness.engine.loop: the progress lines' unit and the run's ETA."""

from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.slow


def test_progress_lines_name_the_unit_and_the_run_eta(capsys):
    from harness.engine.loop import RunLog, TrainState, duration

    assert duration(59) == "00:00:59" and duration(90061) == "1d 01:01:01"
    run = SimpleNamespace(log_metrics=lambda **kw: None, log=lambda text: None)
    state = TrainState(epoch=1, global_step=30)
    log = RunLog(run, state, True, tensorboard=False, unit="seq", epochs=4, steps_per_epoch=20)
    log.train_step(
        state, loss=1.0, lr=0.1, grad_norm=None, images_per_s=12.5, step_time=2.0, peak_mem_mb=100, eta_s=20.0
    )
    line = capsys.readouterr().out.strip()
    # epoch 1 of 0..3 has 20 s left; epochs 2 and 3 are 2 x 20 steps x 2 s more
    assert "12.5 seq/s" in line and "epoch eta 00:00:20" in line and "run eta 00:01:40" in line
    bar = log.progress(10, 0, "epoch 1")
    bar.close()
