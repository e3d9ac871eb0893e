"""harness.engine.loop: the progress lines' unit and the run's ETA; a non-finite skip on one ZeRO shard counted."""

from types import SimpleNamespace

import pytest


@pytest.mark.slow
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


def test_a_skip_on_one_zero_shard_is_reported_as_a_skip():
    """Under ZeRO 1-3 each rank's guard sees only its gradient shard: one rank of 4 skipping summed to 1, divided by
    the world size printed "0 update(s) skipped". Rounded up, the stop message counts it."""
    from harness.engine.loop import NonFiniteLoss, TrainState, check_finite, updates_skipped

    assert updates_skipped(1.0, 4) == 1 and updates_skipped(8.0, 4) == 2 and updates_skipped(0.0, 4) == 0
    read = {"skipped": updates_skipped(1.0, 4), "bad_ranks": 0}
    with pytest.raises(NonFiniteLoss, match=r"; 1 update\(s\) skipped"):
        check_finite(read, TrainState())
