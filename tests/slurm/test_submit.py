"""slurm/submit.py: what a submission reads is data -- ``submit --table PAPER:TABLE`` never executes a config the
table names outside configs/."""

from pathlib import Path

import pytest

from fixtures.configs import names_out_of_configs
from harness.core import config_paths
from harness.core.errors import DepthbenchError
import os
import subprocess
from clitools import run_cli_here as cli


def write_table(folder: Path, config: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "evil.yaml").write_text(
        "paper: evil\ntitle: t\ntables:\n  - id: '1'\n    caption: c\n    columns: {top1: {}}\n    rows:\n"
        f"      - {{name: row, model: resnet18, config: {config!r}}}\n"
    )


@pytest.mark.parametrize("way", [0, 1, 2], ids=["absolute", "dotdot-under-configs", "dotdot"])
def test_submit_table_never_executes_a_config_a_table_names_outside_configs(tmp_path, monkeypatch, hostile_config, way):
    """``submit --table PAPER:TABLE``: the table's row names the config; a hostile one is refused before loading."""
    from results import paper_tables
    from slurm.submit import SubmitOptions, table_submission

    config, marker = hostile_config
    tables = tmp_path / "tables"
    write_table(tables, names_out_of_configs(config)[way])
    monkeypatch.setattr(paper_tables, "TABLES_DIR", tables)
    with pytest.raises(DepthbenchError) as e:
        table_submission("evil:1", None, [], SubmitOptions(dry_run=True), 1)
    assert "is refused" in str(e.value) and "evil.yaml" in str(e.value)
    assert not marker.exists()


PRESET = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"


@pytest.mark.tier("integration")
def test_the_batch_script_requeues_a_crash_whatever_meta_json_is(tmp_path, monkeypatch):
    """The rendered script after a crashed attempt whose meta.json is a FIFO: nothing waits on it (the "was the run
    done already" check read it with open()), the requeue step runs and requeues."""
    monkeypatch.setenv("DEPTHBENCH_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("DEPTHBENCH_DATA", str(tmp_path / "data"))
    code, script, err = cli("submit", PRESET, "--dry-run")
    assert code == 0, err
    stubs = tmp_path / "bin"
    stubs.mkdir()
    log = tmp_path / "scontrol.log"
    for name, body in {  # srun: the attempt crashes, leaving a FIFO where meta.json belongs
        "srun": 'run=$(dirname "$(dirname "$(dirname "$DEPTHBENCH_EXITS")")")\nmkfifo "$run/meta.json"\n'
        'echo "1.0 0 n1 1" >> "$DEPTHBENCH_EXITS"\nexit 1\n',
        "scontrol": f'case "$1 $2" in\n  "show hostnames") echo n1 ;;\n  "show node") echo NodeAddr=127.0.0.1 ;;'
        f'\n  *) echo "$@" >> {log} ;;\nesac\n',
        "sinfo": "echo 'n1 idle'\n",
    }.items():
        (stubs / name).write_text("#!/bin/bash\n" + body)
        (stubs / name).chmod(0o755)
    (tmp_path / "job.sbatch").write_text(script)
    env = {
        "PATH": f"{stubs}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NODELIST": "n1",
        "SLURM_NTASKS": "1",
    }
    out = subprocess.run(
        ["bash", str(tmp_path / "job.sbatch")], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and "requeued (1 of 3 restarts)" in out.stdout, out.stdout + out.stderr
    assert log.read_text().splitlines()[0] == "requeuehold 4242"


ROOT = Path(__file__).resolve().parents[2]


def test_runs_root_follows_the_run_directory_contract(monkeypatch, tmp_path):
    """slurm uses the runs root of harness/core/rundir.py (DEPTHBENCH_RUNS, else its DEFAULT_ROOT), and says so when
    that lies inside the checkout."""
    from harness.core import rundir
    from slurm import submit

    monkeypatch.delenv("DEPTHBENCH_RUNS", raising=False)
    monkeypatch.setattr(rundir, "DEFAULT_ROOT", ROOT / "results" / "runs")
    assert submit.runs_root() == ROOT / "results" / "runs"
    assert "DEPTHBENCH_RUNS" in submit.runs_root_note() and "shared file system" in submit.runs_root_note()
    monkeypatch.setattr(rundir, "DEFAULT_ROOT", tmp_path / "elsewhere")
    assert submit.runs_root() == tmp_path / "elsewhere" and submit.runs_root_note() is None
    monkeypatch.setenv("DEPTHBENCH_RUNS", str(tmp_path / "shared"))
    assert submit.runs_root() == tmp_path / "shared" and submit.runs_root_note() is None
