"""The Python API of depthbench: every command as a function, with the command line's semantics.

Each function is the command's own ``run`` (harness/commands/<command>.py): the command line parses its options
and calls the same function, so a notebook, a Slurm script and ``depthbench`` do exactly the same thing. Bad input
raises :class:`harness.core.errors.DepthbenchError` before any work starts (``str(e)`` is the one line the command
line prints; ``e.exit_code`` its exit status); the functions return small result objects instead of printing
tables::

    from harness import api

    run = api.train("configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py", overrides=["epochs=2"])
    run.status, run.run_dir, run.best_metric           # 'done', Path('results/runs/...'), 93.1
    rows = api.evaluate("configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py", run.run_dir)
    checks = api.verify(papers=["stepsnet"])            # [Check(paper, table, row, column, status, ...), ...]
    report = api.results(papers=["horesnet"], format="html", out="/tmp/report")
    script = api.submit(["configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"], dry_run=True).script

Importing this module is cheap (the command modules import their dependencies when called).
"""

from harness.commands.bench import run as bench
from harness.commands.claims import run as claims
from harness.commands.data import run_pack as pack_data
from harness.commands.demo import run as demo
from harness.commands.diagnose import run as diagnose
from harness.commands.env import run as env
from harness.commands.eval import run as evaluate
from harness.commands.export import run as export
from harness.commands.finetune import run_finetune as finetune
from harness.commands.finetune import run_test as test
from harness.commands.jobs import run_cancel as cancel
from harness.commands.jobs import run_jobs as jobs
from harness.commands.models import run as models
from harness.commands.preflight import run as preflight
from harness.commands.results import run as results
from harness.commands.submit import run_submit as submit
from harness.commands.train import run as train
from harness.commands.verify import run as verify

__all__ = [
    "bench",
    "cancel",
    "claims",
    "demo",
    "diagnose",
    "env",
    "evaluate",
    "export",
    "finetune",
    "jobs",
    "models",
    "pack_data",
    "preflight",
    "results",
    "submit",
    "test",
    "train",
    "verify",
]
