"""``cluster_fixture(PORT)``: a test module's real Slurm cluster -- slurm/local-cluster.sh with a state folder and a
controller port of the module's own, two nodes of two CPU slots, started once for the module and stopped after it
(tests/slurm/test_slurm.py, tests/harness/measure/test_preflight.py).

One cluster a module, not a session: ``make test`` runs test files side by side (pytest-xdist, ``--dist loadfile``),
so two modules' clusters may run at once, each in its worker's process; their own ports and state folders keep them
apart, and :meth:`Cluster.stop` leaves a munged that the other one still uses.

A module of its own (not ``conftest``) so test modules can import it by name, as tests/clitools.py is."""

import os
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "slurm" / "local-cluster.sh"


def wait_for(predicate, timeout: float, what: str, gone=None):
    """Poll ``predicate`` until it holds; ``gone()`` (optional) returns why it never will, to fail at once."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        why = gone() if gone else None
        if why:
            raise AssertionError(f"gave up waiting for {what}: {why}")
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def queue() -> list[str]:
    """Every job in the queue, as ``id state``."""
    out = subprocess.run(["squeue", "-h", "-r", "-o", "%i %T"], capture_output=True, text=True).stdout
    return out.split("\n")[:-1] if out.strip() else []


def alive(pid: str) -> bool:
    """A running process, not a zombie its parent has yet to reap."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class Cluster:
    def __init__(self, state: Path, port: str):
        self.state = state
        self.env = dict(os.environ, DEPTHBENCH_SLURM_DIR=str(state), DEPTHBENCH_SLURM_PORT=port)
        self.shape = None

    def script(self, *args, check=True) -> subprocess.CompletedProcess:
        out = subprocess.run(["bash", str(SCRIPT), *args], env=self.env, capture_output=True, text=True, timeout=300)
        assert not check or out.returncode == 0, out.stdout + out.stderr
        return out

    def start(self, nodes: int, cpus: int = 2) -> None:
        if self.shape != (nodes, cpus):
            if self.shape is not None:  # restarting slurmd under a job would end it: a job keeps its cluster
                wait_for(
                    lambda: not queue(),
                    600,
                    f"the queue to drain before the cluster becomes {nodes} node(s) (a test left a job behind?)",
                )
            out = self.script("start", "--nodes", str(nodes), "--cpus", str(cpus))
            assert f"{nodes} node(s) idle" in out.stdout, out.stdout
            self.shape = (nodes, cpus)
        os.environ["SLURM_CONF"] = str(self.state / "etc" / "slurm.conf")  # ours, whatever /etc/slurm points at

    def stop(self) -> None:
        """Stop what :meth:`start` started; every daemon of ours is gone after it. A munged that another module's
        cluster uses (one started beside this one; local-cluster.sh shares the munged that answers) is handed to
        that cluster to stop, rather than cut its authentication."""
        pidfile = self.state / "run" / "slurmctld.pid"
        ours = {pidfile.read_text().strip()} if pidfile.exists() else set()
        found = subprocess.run(["pgrep", "-x", "slurmctld"], capture_output=True, text=True).stdout.split()
        others = [pid for pid in found if pid not in ours and alive(pid)]
        munged = self.state / "run" / "munged.pid"
        if others and munged.exists():
            heir = state_of(others[0])  # None: a slurmctld local-cluster.sh did not start (then nobody stops it)
            munged.replace(heir / "run" / "munged.pid") if heir else munged.unlink()
        self.script("stop")
        status = self.script("status", check=False)
        assert status.returncode == 3 and "slurmctld  stopped" in status.stdout and "pid" not in status.stdout, (
            status.stdout
        )


def state_of(slurmctld_pid: str) -> Path | None:
    """A running slurmctld's state folder: local-cluster.sh starts it as ``slurmctld -i -f DIR/etc/slurm.conf``."""
    try:
        argv = Path(f"/proc/{slurmctld_pid}/cmdline").read_text().split("\0")
        run = Path(argv[argv.index("-f") + 1]).parent.parent / "run"
    except (OSError, ValueError, IndexError):
        return None
    return run.parent if run.is_dir() else None


def cluster_fixture(port: str, first_job: int = 1):
    """The module-scoped ``cluster`` fixture of a test module (``cluster = cluster_fixture(PORT)``): a
    :class:`Cluster` of two nodes, its ``SLURM_CONF`` exported for the module's tests. ``first_job``: the first job
    id the module's tests get -- a job's rendezvous port is 20000 + its id (slurm/depthbench.sbatch) and a fresh
    cluster numbers jobs from 1, so a module whose cluster may run beside another's starts its ids clear of them.
    The fixture's name carries ``system`` to every test that uses it (tests/tiers.py's FIXTURE_TIERS)."""

    @pytest.fixture(scope="module")
    def cluster(tmp_path_factory, request):
        if os.geteuid() != 0:
            test_file = Path(request.module.__file__).relative_to(ROOT)
            pytest.fail(
                "the Slurm tests start a real local cluster, which needs root (apt-get, munged, slurmd): run "
                f"them as root, e.g. sudo .venv/bin/python -m pytest {test_file} (CI runs as root)"
            )
        c = Cluster(tmp_path_factory.mktemp("slurm-state"), port)
        saved = os.environ.get("SLURM_CONF")
        c.start(nodes=2)
        held = [
            subprocess.run(
                ["sbatch", "--parsable", "--hold", "--job-name=burn-id", "--wrap", "true"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            for _ in range(first_job - 1)
        ]
        if held:
            subprocess.run(["scancel", *held], check=True)
        yield c
        c.stop()
        os.environ.pop("SLURM_CONF") if saved is None else os.environ.__setitem__("SLURM_CONF", saved)

    return cluster
