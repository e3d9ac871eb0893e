"""stdout carries only what a command reports (issue 45): library logging -- MMEngine's and DeepSpeed's loggers
hard-code a handler on stdout -- goes to stderr, set once in harness/cli.py, for every command that imports
MMEngine. Each command runs for real (in this process, stdout and stderr captured) while a library logs the way
MMEngine does from inside it (a new ``MMLogger``, whose console handler is made on stdout at that moment, and a
stdlib logger with a stdout handler, as DeepSpeed's)."""

import logging
import sys

import pytest

from clitools import ROOT, run_cli_here

pytestmark = pytest.mark.tier("integration")

DET = str(ROOT / "configs/det/mask-rcnn_steps-resnet18-w32_fpn_500it_embedded-coco.py")
LIBRARY_LINE = 'The current default scope "mmseg" is not "mmdet"'

# command -> arguments that run it for real and cheaply (a report from a cached/no-measurement table, the model list
# without FLOPs, bad input refused after the config was loaded through MMEngine; train and eval load it too)
COMMANDS = {
    "verify": ["--paper", "horesnet", "--table", "1"],
    "models": ["horesnet10_rk4", "--no-flops"],
    "finetune": [DET, "train_cfg.max_iter=3"],
    "test": [DET, "/nonexistent/iter_1.pth", "train_cfg.max_iter=3"],
    "train": ["configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py", "--nproc", "0"],
    "eval": ["configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py", "--checkpoint", "/nonexistent/best.pth"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_library_logging_stays_off_stdout(command, monkeypatch):
    import importlib

    from mmengine.logging import MMLogger

    module = importlib.import_module(f"harness.commands.{'finetune' if command == 'test' else command}")
    name = "test_main" if command == "test" else "main"
    real = getattr(module, name)

    def noisy(args):  # what MMEngine / DeepSpeed do in the middle of a command
        MMLogger.get_instance(f"stdout-test-{command}", logger_name="mmengine").warning(LIBRARY_LINE)
        library = logging.getLogger(f"stdout-test-library-{command}")
        library.addHandler(logging.StreamHandler(sys.stdout))
        library.warning("a library's own warning")
        return real(args)

    monkeypatch.setattr(module, name, noisy)  # the parser binds the command when main() builds it
    code, out, err = run_cli_here(command, *COMMANDS[command])
    assert LIBRARY_LINE in err and "a library's own warning" in err  # said, on stderr
    assert LIBRARY_LINE not in out and "a library's own warning" not in out, out[:2000]
    assert "WARNING" not in out and " - mmengine - " not in out
    if command in ("verify", "models"):
        assert code == 0 and out.strip(), err[-2000:]  # the report itself is on stdout
    else:
        assert code == 2 and not out.strip(), (out, err)  # refused in one line on stderr, nothing on stdout


def test_handlers_made_on_stdout_before_main_are_moved(monkeypatch):
    """A process that imported the libraries before ``main`` (the test server, an embedding program) has their
    stdout handlers already; ``main`` moves them to stderr."""
    import io

    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    library = logging.getLogger("stdout-test-early-library")
    handler = logging.StreamHandler(out)
    library.addHandler(handler)
    try:
        from harness.cli import main

        assert main(["models", "horesnet10_rk4", "--no-flops"]) == 0
        library.warning("logged after main started")
    finally:
        library.removeHandler(handler)
    assert "logged after main started" in err.getvalue() and "logged after main started" not in out.getvalue()
    assert "horesnet10_rk4" in out.getvalue()
