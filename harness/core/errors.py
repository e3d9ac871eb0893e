"""The one error type of depthbench and the exit codes of every command.

Every command raises :class:`DepthbenchError` (or a subclass) for bad input (a path, a number, a name, a config,
a checkpoint or log that cannot be used) and for expected failures; ``harness.cli.main`` catches it in one place,
prints ``depthbench <command>: error: <message>`` on one line and exits with ``exit_code``. Check input and raise
before any expensive work starts or anything is written.

It is not a ``ValueError`` on purpose: a broad ``except ValueError`` around library code must never swallow a
message meant for the user.
"""

from __future__ import annotations

# the exit codes of every command (sysexits' EX_TEMPFAIL for "checkpointed, try again later")
EXIT_OK = 0
EXIT_FAILED = 1  # the work itself failed (a non-finite loss, a failed check in verify)
EXIT_BAD_INPUT = 2  # bad input: nothing was done or written
EXIT_PREEMPTED = 75  # stopped by a signal after a checkpoint; rerun with --resume auto
EXIT_HUNG = 76  # a rank's watchdog saw no step end in time: stacks dumped, restart from the checkpoint
EXIT_INTERRUPTED = 130  # a second Ctrl-C: stopped at once


class DepthbenchError(Exception):
    """A one-line, user-facing error: what is wrong and what to do. ``exit_code`` is what the command exits with."""

    def __init__(self, message: str, exit_code: int = EXIT_BAD_INPUT):
        # one line, whole: newlines from wrapped library messages are folded, never cut
        text = str(message)
        if text.startswith("Caught ") and "Original Traceback" in text:
            # torch's DataLoader re-raises a worker's error as type(error)("Caught ... <traceback> ...: message"):
            # the message is what follows the error's name on the traceback's last line
            last = text.rstrip().splitlines()[-1]
            text = last.split(": ", 1)[1] if ": " in last else last
        super().__init__(" ".join(text.split()))
        self.exit_code = exit_code


class ConfigError(DepthbenchError):
    """A bad config file or override; the message is one line saying what is wrong and what to do."""


class DataError(ConfigError):
    """A missing or malformed dataset; the message names the path and the expected layout."""
