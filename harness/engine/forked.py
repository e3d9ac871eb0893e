"""Runs started as forks of a server that imported the stack once (``depthbench claims``' and the demo's runs).

A fresh interpreter spends ~4 s of CPU importing torch, timm and the rest before a run starts; dozens of short runs
spend minutes on it. :func:`start_forked` runs ``python -m MODULE ARGS`` as a fork of a server of our own that has
imported :data:`PRELOAD` once. Built on public interfaces only (``os.fork``, a Unix socket, ``os.wait4``,
``prctl(PR_SET_PDEATHSIG)``); multiprocessing's fork server does not fit: it ends its forks with ``os._exit``
(an interpreter's exit handlers would have to be run by hand), one server is shared by a whole process, and it
is neither waited for nor stopped with its caller. Here:

- the server is this process's child (a subprocess), and each run is the server's child. Nothing outlives the
  caller: the server kills its runs and exits when the caller's end of its stdin closes -- the caller exited or
  was killed -- and a run is killed (``PR_SET_PDEATHSIG``) if the server dies. When this process exits it waits
  for the server, and the server for its runs, so their CPU time reaches ``RUSAGE_CHILDREN`` here and in every
  process above (``time``, ``make``) as a subprocess's does;
- a run is the same program as the fresh interpreter: the fork does what an ``exec`` would have set up
  (environment, working directory, ``sys.argv``, ``sys.path[0]``, standard streams, signal handling, torch's
  thread count, fresh random seeds), then ``runpy`` runs the module as ``__main__``, and it ends as an interpreter
  does (exit handlers, flushed streams, the exit code of ``SystemExit``, a traceback and 1, ``-N`` if signal N).

The server is private to the process that started it: a Unix socket in a 0700 temporary directory, whose
requests are pickles from that process alone.

:func:`fork_run` is the same fork without a server: this process itself, which has imported the stack, forks into
the run (``depthbench train --nproc N``'s ranks: harness/engine/launch.py says when that is safe).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib
import io
import os
import pickle
import runpy
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

# What a training run imports anyway: ~4 s of CPU in every fresh interpreter (torch ~2 s; torch._dynamo over a
# second, which torchvision imports and Accelerate's prepare needs). The server imports them once.
PRELOAD = [
    "torch",
    "torch._dynamo",
    "torchvision",
    "timm",
    "accelerate",
    "mmengine",
    "torch.utils.tensorboard",
    "models",
    "harness.engine.runner",
]
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@dataclass
class Request:
    """One run: ``python -m module argv`` (or ``function(*args, **kwargs)``, ``function`` = ``"module:name"``)."""

    module: str = ""
    argv: list = field(default_factory=list)
    function: str = ""
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    env: dict | None = None  # the whole environment; None: the server's (the caller's when it started)
    cwd: str = ""
    stdout_path: str = ""  # "": the server's streams (the caller's terminal)
    stderr_path: str = ""
    interruptible: bool = True  # Ctrl-C is KeyboardInterrupt (else ignored), as it was in the caller
    new_session: bool = False
    process_group: bool = False  # a process group of its own, as Popen(process_group=0) (not a new session)
    usage_path: str = ""  # where the server writes the run's CPU seconds (its own and its children's)


# ----------------------------------------------------------------------------------------- the caller's side
def _send(sock: socket.socket, obj) -> None:
    data = pickle.dumps(obj)
    sock.sendall(struct.pack("!I", len(data)) + data)


def _receive(sock: socket.socket):
    header = _read_exactly(sock, 4)
    return pickle.loads(_read_exactly(sock, struct.unpack("!I", header)[0]))


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError("the run server closed the connection")
        data += chunk
    return data


class _Server:
    """The preloaded server, a subprocess of this process; stopped and waited for when this process exits."""

    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="depthbench-forked-")  # 0700: this user's alone
        self.address = os.path.join(self.folder, "socket")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.address)
        listener.listen(64)  # runs asked for while the server still imports queue here
        # its torch takes the machine's default thread count (OMP_NUM_THREADS is each run's: see _become_run)
        env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "harness.engine.forked", str(listener.fileno())],
            stdin=subprocess.PIPE,
            pass_fds=[listener.fileno()],
            env=env,
        )
        listener.close()
        self.pid = os.getpid()
        atexit.register(self.stop)

    def stop(self) -> None:
        """Close the server's stdin (it kills the runs still going and exits) and wait for it."""
        if self.pid != os.getpid() or self.process.poll() is not None:
            return
        self.process.stdin.close()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        finally:
            Path(self.address).unlink(missing_ok=True)
            os.rmdir(self.folder)


_lock = threading.Lock()
_servers: dict[int, _Server] = {}  # by pid: a fork of this process starts a server of its own


def _server() -> _Server:
    with _lock:
        server = _servers.get(os.getpid())
        if server is None or server.process.poll() is not None:
            server = _servers[os.getpid()] = _Server()
        return server


class ForkedRun:
    """A run the server forked: ``multiprocessing.Process``'s interface (``pid``, ``exitcode`` -- None while it runs,
    then its exit code, ``-N`` if killed by signal N --, ``join``, ``is_alive``, ``terminate``, ``kill``)."""

    def __init__(self, request: Request):
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._socket.connect(_server().address)
        _send(self._socket, asdict(request))  # a dict: the server runs this module as __main__
        self.pid: int = _receive(self._socket)
        self._exitcode: int | None = None

    @property
    def exitcode(self) -> int | None:
        if self._exitcode is None:
            self._socket.setblocking(False)
            try:
                self._socket.recv(1, socket.MSG_PEEK)
            except BlockingIOError:
                return None
            finally:
                self._socket.setblocking(True)
            self._finish()
        return self._exitcode

    def join(self, timeout: float | None = None) -> None:
        if self._exitcode is None:
            self._socket.settimeout(timeout)
            try:
                self._socket.recv(1, socket.MSG_PEEK)
            except TimeoutError:
                return
            finally:
                self._socket.settimeout(None)
            self._finish()

    def _finish(self) -> None:
        try:
            self._exitcode = _receive(self._socket)
        except EOFError:  # the server died: so did the run (PR_SET_PDEATHSIG)
            self._exitcode = -signal.SIGKILL
        self._socket.close()

    def is_alive(self) -> bool:
        return self.exitcode is None

    def send_signal(self, signum: int) -> None:
        if self.exitcode is None:  # not reaped yet: the pid is still the run's
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def start_forked(
    module: str,
    argv: list[str],
    env: dict,
    log_path,
    cwd=None,
    *,
    stderr_path=None,
    new_session: bool = False,
    usage_path=None,
) -> ForkedRun:
    """Start ``python -m module *argv`` with environment ``env`` and its output appended to ``log_path``
    (stderr to ``stderr_path`` if given), as a fork of the server that has imported :data:`PRELOAD` (started by the
    first call). It is in this process's process group, so a terminal's Ctrl-C reaches it as it reaches a
    subprocess; ``new_session``: in a session and process group of its own, whose id is its pid, as
    ``Popen(start_new_session=True)`` (``os.killpg(pid, sig)`` reaches it and its children). ``usage_path``: where
    its CPU seconds (its own and its children's) are written when it ends, before ``exitcode`` says so."""
    return ForkedRun(
        Request(
            module=module,
            argv=[str(a) for a in argv],
            env=dict(env),
            cwd=str(cwd or os.getcwd()),
            stdout_path=str(log_path),
            stderr_path=str(stderr_path or log_path),
            interruptible=_interruptible(),
            new_session=new_session,
            usage_path=str(usage_path or ""),
        )
    )


def start_forked_call(function, *args, **kwargs) -> ForkedRun:
    """``function(*args, **kwargs)`` (a module-level function) as a fork of the server, with this process's
    streams, environment and working directory; exit code 0 when it returns, 1 and its traceback when it raises."""
    return ForkedRun(
        Request(
            function=f"{function.__module__}:{function.__qualname__}",
            args=args,
            kwargs=kwargs,
            env=dict(os.environ),
            cwd=os.getcwd(),
            interruptible=_interruptible(),
        )
    )


def _interruptible() -> bool:
    # Ctrl-C as a fresh interpreter would have it: ignored if ignored here, else Python's KeyboardInterrupt
    return signal.getsignal(signal.SIGINT) is not signal.SIG_IGN


class ForkedProcess:
    """A fork of this process (:func:`fork_run`): ``subprocess.Popen``'s interface (``pid``, ``returncode``,
    ``poll``, ``wait``, ``send_signal``, ``terminate``, ``kill``) over ``os.waitpid``."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None and self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        deadline = time.monotonic() + (timeout or 0)
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            time.sleep(0.01)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:  # not reaped yet: the pid is still the fork's
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def fork_run(request: Request) -> ForkedProcess:
    """Run ``request`` as a fork of this process (no server: this process has imported what the run needs).

    The fork does what :func:`start_forked`'s forks do (``exec``'s setup, ``PR_SET_PDEATHSIG`` on this process),
    then ends by raising ``SystemExit`` with the run's exit code, which unwinds the caller's stack to the
    interpreter's end (exit handlers, flushed streams, the code). So the caller must be the program itself, with
    nothing above it that catches ``SystemExit`` or does more than clean up (``launch.spawn`` checks that this
    process is the ``depthbench`` command), and safe to fork: one thread, no CUDA, no OpenMP pool started.
    Python's buffered output is flushed first, or the fork would write it again."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid:
        if request.process_group:  # also here: a signal to the group may come before the fork has set it
            with contextlib.suppress(OSError):
                os.setpgid(0, 0)
        return ForkedProcess(pid)
    try:
        _become_run(request, parent)
    except SystemExit:
        raise
    except BaseException:  # as the interpreter ends on an uncaught exception: its traceback, exit code 1
        sys.excepthook(*sys.exc_info())
        raise SystemExit(1) from None
    raise SystemExit(0)


# ----------------------------------------------------------------------------------------- the server's side
def _serve(listener: socket.socket) -> Request | None:
    """Fork a run per request until stdin closes; returns in a fork (its request), or None when stopped."""
    runs: dict[int, tuple[socket.socket, Request]] = {}
    wake_read, wake_write = socket.socketpair()
    wake_write.setblocking(False)
    signal.set_wakeup_fd(wake_write.fileno())
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)  # wakes the selector below
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(0, selectors.EVENT_READ)  # stdin: the caller's pipe, open as long as the caller lives
    selector.register(wake_read, selectors.EVENT_READ)
    server_fds = [listener, wake_read, wake_write]
    while True:
        for key, _ in selector.select():
            if key.fileobj is wake_read:
                wake_read.recv(4096)
            elif key.fileobj is listener:
                connection, _ = listener.accept()
                try:
                    request = Request(**_receive(connection))
                except (EOFError, OSError):  # the caller went away mid-request: nothing to start
                    connection.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    selector.close()
                    for sock in server_fds + [connection] + [c for c, _ in runs.values()]:
                        sock.close()
                    devnull = os.open(os.devnull, os.O_RDONLY)  # as multiprocessing gives its processes
                    os.dup2(devnull, 0)
                    os.close(devnull)
                    return request
                runs[pid] = (connection, request)
                try:
                    _send(connection, pid)
                except OSError:  # the caller went away: the run ends when the caller's stdin pipe closes
                    pass
            elif not os.read(0, 4096):  # the caller closed stdin (exited or was killed): stop, runs included
                for pid, (_, request) in runs.items():
                    _kill(pid, request)
                while runs:
                    _reap(runs, block=True)
                return None
        _reap(runs, block=False)


def _kill(pid: int, request: Request) -> None:
    """SIGKILL a run, and its process group if it has one: a fork that has not reached its ``setsid`` yet has none."""
    for kill, target in ((os.kill, pid),) + (((os.killpg, pid),) if request.new_session else ()):
        try:
            kill(target, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _reap(runs: dict, block: bool) -> None:
    """Collect ended runs: write each one's CPU seconds, then send its exit code to its caller."""
    while runs:
        try:
            pid, status, usage = os.wait4(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:  # none left (cannot happen while runs are listed; never wait forever)
            runs.clear()
            return
        if pid == 0:
            return
        connection, request = runs.pop(pid, (None, None))
        if connection is None:
            continue
        if request.usage_path:
            try:
                Path(request.usage_path).write_text(f"{usage.ru_utime + usage.ru_stime:.3f}\n")
            except OSError as e:
                print(f"depthbench: cannot write {request.usage_path}: {e.strerror}", file=sys.stderr)
        try:
            _send(connection, os.waitstatus_to_exitcode(status))
        except OSError:  # the caller let go of the run: nobody to tell
            pass
        connection.close()
        if block:
            return


def _become_run(request: Request, parent_pid: int) -> None:
    """In the fork of ``parent_pid``: what ``exec`` of a fresh interpreter would have set up, then the run itself."""
    import numpy  # lazy: the server imports the stack (PRELOAD) in main(), after it ignores SIGINT
    import torch  # lazy: (as numpy)

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os.kill(os.getpid(), signal.SIGKILL)
    if request.new_session:
        os.setsid()
    elif request.process_group:
        os.setpgid(0, 0)
    for signum in signal.valid_signals():  # exec resets handled signals (ignored ones stay ignored)
        if callable(signal.getsignal(signum)):
            signal.signal(signum, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGINT, signal.default_int_handler if request.interruptible else signal.SIG_IGN)
    os.chdir(request.cwd)
    if request.env is not None:
        os.environ.clear()
        os.environ.update(request.env)
    env = os.environ
    if request.stdout_path:
        shared = request.stderr_path == request.stdout_path  # one open file for both, as Popen(stderr=STDOUT)
        for fd, path in ((1, request.stdout_path),) + (() if shared else ((2, request.stderr_path),)):
            log = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.dup2(log, fd)
            os.close(log)
        if shared:
            os.dup2(1, 2)
        unbuffered = bool(env.get("PYTHONUNBUFFERED"))
        encoding = getattr(sys.__stdout__, "encoding", None) or "utf-8"
        sys.stdout = sys.__stdout__ = io.TextIOWrapper(
            io.FileIO(1, "w", closefd=False), encoding, line_buffering=True, write_through=unbuffered
        )
        sys.stderr = sys.__stderr__ = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False),
            encoding,
            "backslashreplace",
            line_buffering=True,
            write_through=unbuffered,
        )
    # torch sized its thread pool when the parent imported it: the server without OMP_NUM_THREADS (the machine's
    # default, which is also the most torch takes from OMP_NUM_THREADS: MKL caps it at the cores), a launcher with
    # its own, which its ranks keep when it is set
    threads = env.get("OMP_NUM_THREADS", "").strip()
    if threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(min(int(threads), torch.get_num_threads()))
    # a fresh interpreter seeds torch's and numpy's global generators from the OS; forks would share the parent's
    torch.seed()
    numpy.random.seed()
    if request.function:
        module, _, name = request.function.partition(":")
        getattr(importlib.import_module(module), name)(*request.args, **request.kwargs)
        return
    sys.argv = ["-m", *request.argv]
    sys.path[0] = request.cwd  # `python -m` puts the working directory first
    runpy.run_module(request.module, run_name="__main__", alter_sys=True)


def main(listener_fd: int) -> None:
    # a Ctrl-C at the terminal reaches the whole process group: the runs take it as they were told, the server not
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    for name in PRELOAD:
        importlib.import_module(name)
    server_pid = os.getpid()
    request = _serve(socket.socket(fileno=listener_fd))
    if request is not None:  # a fork: the run ends as the interpreter ends (exit handlers, streams flushed)
        _become_run(request, server_pid)


if __name__ == "__main__":
    main(int(sys.argv[1]))
