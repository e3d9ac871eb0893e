"""Library logging off stdout: the one place depthbench reaches into another library's behaviour to keep stdout for
what a command reports (a table, JSON, metrics a script parses).

MMEngine's ``MMLogger`` and DeepSpeed's logger hard-code a ``logging.StreamHandler(sys.stdout)`` when they are made
(mmengine/logging/logger.py, deepspeed/utils/logging.py) and offer no setting to move it, so their messages -- e.g.
``mmengine - WARNING - The current default scope "mmseg" is not "mmdet"`` in the middle of ``verify`` -- would land
in a report. Python's logging has no hook for handlers other code creates, so the one remedy is to make every
``StreamHandler`` created on stdout write to stderr instead. That relies on ``StreamHandler.__init__(self,
stream=None)`` and on those libraries using the plain ``StreamHandler``: tests/harness/core/test_stdout_logs.py
fails when either changes.
"""

from __future__ import annotations

import logging
import sys


def library_logs_to_stderr() -> None:
    """From here on every logging stream handler made on stdout writes to stderr, and the ones in logging's registry
    made before (a process that imported the libraries before the command line's ``main``) are moved there; file
    handlers (a run's log) are untouched. Idempotent."""
    init = logging.StreamHandler.__init__
    if not getattr(init, "to_stderr", False):

        def __init__(self, stream=None):
            init(self, sys.stderr if _is_stdout(stream) else stream)

        __init__.to_stderr = True
        logging.StreamHandler.__init__ = __init__
    loggers = [
        logging.getLogger(),
        *(v for v in logging.Logger.manager.loggerDict.values() if isinstance(v, logging.Logger)),
    ]
    for handler in {h for logger in loggers for h in logger.handlers}:
        if type(handler) is logging.StreamHandler and _is_stdout(handler.stream):
            handler.setStream(sys.stderr)


def _is_stdout(stream) -> bool:
    if stream is None:
        return False
    if stream is sys.stdout or stream is sys.__stdout__:
        return True
    try:  # a stdout object of the process this one was forked from (harness/engine/launch.py)
        return stream.fileno() == 1 and sys.stderr.fileno() != 1
    except (AttributeError, OSError, ValueError):
        return False
