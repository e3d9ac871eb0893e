"""What harness/core/stdout_logs.py relies on in other libraries: if one of these fails, a library changed how it
makes its console handler and library_logs_to_stderr must change with it (tests/harness/test_cli.py
checks the behaviour end to end)."""

import inspect
import logging
import sys

from harness.core.stdout_logs import library_logs_to_stderr


def test_stream_handler_still_takes_one_stream_argument():
    library_logs_to_stderr()  # the replaced __init__ must keep the stdlib's signature
    params = list(inspect.signature(logging.StreamHandler.__init__).parameters.values())
    assert [p.name for p in params] == ["self", "stream"] and params[1].default is None


def test_mmengine_and_deepspeed_console_handlers_are_plain_stream_handlers_and_land_on_stderr():
    from mmengine.logging import MMLogger

    library_logs_to_stderr()
    mm = MMLogger.get_instance("stdout-logs-contract")
    from deepspeed.utils import logger as ds_logger

    for logger in (mm, ds_logger):
        consoles = [h for h in logger.handlers if type(h) is logging.StreamHandler]
        assert consoles, f"{logger.name}: no plain StreamHandler any more: {logger.handlers}"
        # DeepSpeed's was made at import, maybe before the patch: the registry pass moves it
        library_logs_to_stderr()
        assert all(h.stream is not sys.stdout for h in consoles)
