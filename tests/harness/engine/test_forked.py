"""``harness.engine.forked.start_forked`` (``depthbench claims``' runs): a run forked from the preloaded server is the
same program as ``python -m MODULE ARGS`` in a fresh interpreter -- argv, ``__main__``, working directory,
environment, torch's thread count and seed, stdout/stderr into the log, the exit code (a signal's as ``-N``) --
except the seeds of torch's and numpy's global generators, which each fork draws anew as a fresh interpreter does."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness.core.errors import EXIT_BAD_INPUT
from harness.engine.forked import start_forked
from rank_launcher import RANK_ENV

pytestmark = pytest.mark.tier("integration")

TESTS = Path(__file__).resolve().parents[2]


def probe_env(**extra):
    # one thread: not the machine default the server has (a 1-core machine cannot tell them apart)
    return {**os.environ, "OMP_NUM_THREADS": "1", "PROBE_MARKER": "the run's own", **extra}


def forked(tmp_path, name, env, args=("a", "b c")):
    log = tmp_path / f"{name}.log"
    process = start_forked("forked_probe", list(args), env, log, cwd=TESTS)
    process.join(timeout=300)
    return process.exitcode, log.read_text()


def test_a_forked_run_sees_what_a_fresh_interpreter_sees(tmp_path):
    fresh = subprocess.run(
        [sys.executable, "-m", "forked_probe", "a", "b c"],
        cwd=TESTS,
        env=probe_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert fresh.returncode == 0, fresh.stderr
    code, log = forked(tmp_path, "one", probe_env())
    assert code == 0, log
    want, got = json.loads(fresh.stdout), json.loads(log.splitlines()[0])
    assert log.splitlines()[1] == "to stderr"  # stderr into the same log, after stdout (both line-buffered)
    assert want["threads"] == got["threads"] == 1 and got["marker"] == "the run's own"
    numbers = [got.pop("numpy"), want.pop("numpy")]
    seeds = [got.pop("torch_seed"), want.pop("torch_seed")]
    got.pop("line_buffered"), want.pop("line_buffered")  # a pipe is block-buffered, the log line-buffered
    assert (got.pop("preloaded"), want.pop("preloaded")) == (True, False)
    assert got == want
    _, again = forked(tmp_path, "two", probe_env())
    third = json.loads(again.splitlines()[0])
    numbers.append(third["numpy"])
    seeds.append(third["torch_seed"])
    assert len(set(numbers)) == len(set(seeds)) == 3, "each fork seeds the global generators anew"


def test_the_run_reports_its_own_cpu_time(tmp_path):
    """``usage_path``: the fork is the server's child, not ours, so RUSAGE_CHILDREN here never counts it."""
    usage = tmp_path / "cpu"
    process = start_forked("forked_probe", [], probe_env(), tmp_path / "log", cwd=TESTS, usage_path=usage)
    process.join(timeout=300)
    assert process.exitcode == 0 and float(usage.read_text()) > 0


def test_exit_codes_and_signals_come_back_as_from_a_subprocess(tmp_path):
    code, _ = forked(tmp_path, "exit", probe_env(PROBE_EXIT="7"))
    assert code == 7
    process = start_forked("forked_probe", [], probe_env(PROBE_SLEEP="60"), tmp_path / "slow.log", cwd=TESTS)
    time.sleep(0.5)
    process.terminate()
    process.join(timeout=60)
    assert process.exitcode == -signal.SIGTERM
    # Ctrl-C is Python's KeyboardInterrupt in the run, as in a fresh interpreter (the server itself ignores it)
    log = tmp_path / "interrupted.log"
    process = start_forked("forked_probe", [], probe_env(PROBE_SLEEP="60"), log, cwd=TESTS)
    time.sleep(0.5)
    os.kill(process.pid, signal.SIGINT)
    process.join(timeout=60)
    assert process.exitcode != 0 and "KeyboardInterrupt" in log.read_text()


def test_the_cli_forked_answers_bad_input_in_one_line(tmp_path):
    log = tmp_path / "train.log"
    process = start_forked(
        "harness.cli", ["train", str(tmp_path / "missing.py")], dict(os.environ), log, cwd=TESTS.parent
    )
    process.join(timeout=300)
    lines = log.read_text().splitlines()
    assert (
        process.exitcode == EXIT_BAD_INPUT
        and len(lines) == 1
        and lines[0].startswith("depthbench train: error:")
        and "missing.py" in lines[0]
    )


POOL_FIRST = """
import multiprocessing, os, sys
from harness.engine.forked import start_forked

if __name__ == "__main__":
    with multiprocessing.get_context("forkserver").Pool(1) as pool:  # as results.runs reads many runs
        pool.map(abs, [-1])
    process = start_forked("forked_probe", [], dict(os.environ), sys.argv[1], cwd=sys.argv[2])
    process.join(timeout=300)
"""


def test_a_fork_server_started_earlier_without_the_preload_is_replaced(tmp_path):
    """multiprocessing has one fork server per process: a pool started first (``results.runs``) must not leave the
    runs forking from a server that has imported nothing."""
    log = tmp_path / "probe.log"
    script = tmp_path / "pool_first.py"
    script.write_text(POOL_FIRST)
    out = subprocess.run(
        [sys.executable, str(script), str(log), str(TESTS)],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(log.read_text().splitlines()[0])["preloaded"] is True


CALLER = """
import os, sys, time
from harness.engine.forked import start_forked

if __name__ == "__main__":
    # the claims' way and the demo's (a session of its own)
    runs = [start_forked("forked_probe", [], dict(os.environ, PROBE_SLEEP="300"), f"{sys.argv[1]}.{i}", cwd=sys.argv[2],
                         new_session=bool(i)) for i in range(2)]
    print(*(run.pid for run in runs), flush=True)
    time.sleep(300)
"""


def _ended(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")  # dead, not reaped
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_no_run_outlives_its_caller(tmp_path):
    """The caller killed (SIGKILL: no exit handler runs): its runs and their server end with it, no orphan left."""
    script = tmp_path / "caller.py"
    script.write_text(CALLER)
    caller = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "probe.log"), str(TESTS)],
        cwd=TESTS.parent,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        runs = [int(pid) for pid in caller.stdout.readline().split()]
        assert len(runs) == 2, "the caller did not start its runs"
        servers = {int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) for pid in runs}
        assert servers and caller.pid not in servers  # forks of the server, the caller's child
        assert not any(_ended(pid) for pid in runs + sorted(servers))
    finally:
        caller.kill()
        caller.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(_ended(pid) for pid in runs + sorted(servers)):
        time.sleep(0.1)
    assert all(_ended(pid) for pid in runs + sorted(servers)), "a run or its server outlived the caller"


BURNER = """
import os, sys
from harness.engine.forked import start_forked

if __name__ == "__main__":
    run = start_forked("forked_probe", [], dict(os.environ, PROBE_BURN="2"), sys.argv[1], cwd=sys.argv[2],
                       usage_path=sys.argv[3])
    run.join(300)
    sys.exit(run.exitcode)
"""


def test_a_runs_cpu_reaches_the_callers_callers_as_a_subprocesss_does(tmp_path):
    """`time make test` counts the runs: the caller waits for the server at exit, the server for its runs."""
    import resource

    script, usage = tmp_path / "burner.py", tmp_path / "cpu"
    script.write_text(BURNER)

    def children_cpu() -> float:
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        return used.ru_utime + used.ru_stime

    before = children_cpu()
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "log"), str(TESTS), str(usage)],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    run_cpu = float(usage.read_text())
    assert run_cpu >= 2.0  # the probe's own burn, as the server measured it (wait4)
    assert children_cpu() - before >= run_cpu


def test_a_rank_forked_by_its_launcher_is_the_program_a_fresh_interpreter_runs(tmp_path):
    """``fork_run`` (``depthbench train --nproc N``'s ranks; tests/rank_launcher.py): the rank sees the environment
    its launcher gave it, has a process group of its own and the launcher's modules (nothing imported again), the
    launcher's unflushed output is written once, and it ends as an interpreter does -- exit handlers, its exit code
    to the launcher, its CPU in the launcher's RUSAGE_CHILDREN -- without going on with the launcher's code."""
    log, result = tmp_path / "log", tmp_path / "result"
    launcher = start_forked("rank_launcher", [result], probe_env(), log, cwd=TESTS)
    launcher.join(timeout=300)
    assert launcher.exitcode == 0, log.read_text()[-2000:]
    seen = [json.loads(line) for line in result.read_text().splitlines()]
    assert len(seen) == 1, "the rank went on with the launcher's code"
    assert seen[0]["code"] == 3 and seen[0]["children_cpu"] >= 1.0
    text = log.read_text()
    assert text.startswith("unflushed, ") and text.count("unflushed") == 1, text
    lines = text.removeprefix("unflushed, ").splitlines()  # stdout block-buffered: the rank's JSON comes at its end
    got = json.loads(next(line for line in lines if line.startswith("{")))
    assert got["launch_env"] == {**RANK_ENV, "DEPTHBENCH_LAUNCHER_PID": str(seen[0]["launcher"])}
    assert got["argv"] == ["a", "b c"] and got["name"] == "__main__" and got["cwd"] == got["path0"] == str(TESTS)
    assert got["marker"] == "the run's own" and got["threads"] == 1 and got["preloaded"] and got["own_group"]
    assert [line for line in lines if not line.startswith("{")] == ["to stderr", "exit handlers ran"]
