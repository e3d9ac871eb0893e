"""downstream.finetune.console: library warnings of a fine-tune go to its Runner's log, never to another run's
logger and never to the console."""

import logging
import warnings

from mmengine.logging import MMLogger

from downstream.finetune import console, log_warnings


class _Runner:
    def __init__(self, logger):
        self.logger = logger


def _library_warning(text: str) -> None:
    # issued as if from a library's file: console() keeps only our own packages' warnings on the console
    warnings.warn_explicit(text, UserWarning, "/site-packages/somelib/module.py", 1)


def test_library_warnings_reach_only_this_run_s_log(tmp_path, capsys):
    other = MMLogger.get_instance("another-run", log_file=str(tmp_path / "other.log"))  # an earlier in-process run
    with console(verbose=False) as warned:
        _library_warning("before the runner")
        ours = MMLogger.get_instance("this-run", log_file=str(tmp_path / "this.log"))  # as the Runner builds it
        for handler in ours.handlers:  # and quiets its console (downstream.mmengine_compat.DepthbenchRunner)
            if type(handler) is logging.StreamHandler:
                handler.setLevel(logging.ERROR)
        log_warnings(warned, _Runner(ours))
        _library_warning("after the runner")
    for handler in ours.handlers + other.handlers:
        handler.flush()
    this_log = (tmp_path / "this.log").read_text()
    assert "before the runner" in this_log and "after the runner" in this_log
    assert "runner" not in (tmp_path / "other.log").read_text()
    assert "runner" not in capsys.readouterr().err
