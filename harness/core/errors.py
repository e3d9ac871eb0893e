"""The one error type of depthbench.

Every command raises :class:`DepthbenchError` for bad input (a path, a number, a name, a config, a checkpoint or
log that cannot be used) and for expected failures; ``harness.cli.main`` catches it in one place, prints
``depthbench <command>: error: <message>`` on one line and exits with ``exit_code`` (2 = bad input). Check input
and raise before any expensive work starts or anything is written.
"""
from __future__ import annotations

EXIT_BAD_INPUT = 2


class DepthbenchError(ValueError):
    """A one-line, user-facing error: what is wrong and what to do. ``exit_code`` is what the command exits with."""

    def __init__(self, message: str, exit_code: int = EXIT_BAD_INPUT):
        # one line, whole: newlines from wrapped library messages are folded, never cut
        super().__init__(" ".join(str(message).split()))
        self.exit_code = exit_code
