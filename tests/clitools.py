"""``run_cli`` / ``start_cli``: ``depthbench ARGS`` in a process of its own; ``run_cli_here``: in this process.

The processes are forks of a server that imported the stack once (:func:`harness.engine.forked.start_forked`, the
way ``depthbench claims`` starts its runs): the same program as ``python -m harness.cli ARGS`` -- argv, cwd,
environment, thread count, fresh seeds, signals, exit codes (tests/harness/engine/test_forked.py compares the
two) -- without the ~4 s of CPU a fresh interpreter spends importing torch, timm and the rest; the suite starts ~100
of them.
``fresh=True`` starts a fresh interpreter, for tests whose subject is the process itself.

A module of its own (not ``conftest``) so test modules can import it by name: tests/models/timm_contract has a
conftest of its own, and ``from conftest import ...`` would find whichever conftest pytest loaded first."""

import atexit
import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_running: list = []


class ForkedCli:
    """``subprocess.Popen``'s interface (pid, returncode, poll, wait, communicate, send_signal, kill) over
    ``depthbench ARGS`` started as a fork of the preloaded server; stdout and stderr are read when it has ended."""

    def __init__(self, args, cwd, env, new_session=False):
        from harness.engine.forked import start_forked

        self.args = [str(a) for a in args]
        streams = Path(tempfile.mkdtemp(prefix="depthbench-cli-"))
        self._stdout, self._stderr = streams / "stdout", streams / "stderr"
        self._process = start_forked(
            "harness.cli", self.args, env, self._stdout, cwd=cwd, stderr_path=self._stderr, new_session=new_session
        )
        self.pid = self._process.pid
        if not _running:
            atexit.register(_kill_running)  # before the server's exit hook (which kills what is left, too)
        _running.append(self)

    @property
    def returncode(self):
        return self._process.exitcode

    def poll(self):
        return self._process.exitcode

    def wait(self, timeout=None):
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(["depthbench", *self.args], timeout)
        return self._process.exitcode

    def communicate(self, timeout=None):
        try:
            self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.wait()
            raise
        out, err = self._stdout.read_text(errors="replace"), self._stderr.read_text(errors="replace")
        shutil.rmtree(self._stdout.parent, ignore_errors=True)
        return out, err

    def send_signal(self, sig):
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)


def _kill_running():
    for process in _running:
        process.kill()


def start_cli(*args, cwd=None, env=None, new_session=False):
    """Start ``depthbench ARGS`` (a fork of the preloaded server) with ``env`` as its whole environment."""
    return ForkedCli(args, cwd or ROOT, dict(os.environ if env is None else env), new_session)


def run_cli(*args, cwd=None, env=None, timeout=600, fresh=False):
    """Run ``depthbench ARGS`` as a user would (``env`` on top of this process's environment); returns
    CompletedProcess. ``fresh``: in a fresh interpreter rather than a fork of the preloaded server."""
    env = {**os.environ, **(env or {})}
    if fresh:
        return subprocess.run(
            [sys.executable, "-m", "harness.cli", *map(str, args)],
            capture_output=True,
            text=True,
            cwd=cwd or ROOT,
            env=env,
            timeout=timeout,
        )
    process = start_cli(*args, cwd=cwd, env=env)
    out, err = process.communicate(timeout=timeout)
    return subprocess.CompletedProcess(["depthbench", *process.args], process.returncode, out, err)


def run_cli_here(*args) -> tuple[int, str, str]:
    """``depthbench ARGS`` in this process (no 5 s torch import per call): (exit code, stdout, stderr)."""
    from harness.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def fresh_imports(code: str, modules) -> tuple[str, list[str]]:
    """Run ``code`` in a fresh interpreter from the repository (a fork of the preloaded server has the stack imported
    already): its standard output, and which of ``modules`` it had imported -- the check that a command stays light."""
    probe = f"{code}\nimport sys\nprint('\\nIMPORTED:' + ','.join(m for m in {tuple(modules)!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    text, marker, imported = out.stdout.rpartition("\nIMPORTED:")
    assert out.returncode == 0 and marker, f"exit {out.returncode}: " + out.stdout[-2000:] + out.stderr[-2000:]
    return text, [m for m in imported.strip().split(",") if m]
