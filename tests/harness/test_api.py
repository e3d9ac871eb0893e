"""Issue 45 item 4: the Python API example (README's until issue 56, now docs/guides/pretraining.md, "The Python
API") runs as written from any working directory, writes only into the runs root (or the ``/tmp`` outputs it
names), and what it trained appears in ``api.results``; config paths resolve against the working directory, then
the repository, and a missing one says where it looked."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.config import load_config
from harness.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
PRESET = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"


def readme_api_example() -> str:
    text = (ROOT / "docs" / "guides" / "pretraining.md").read_text()
    start = text.index("Every command is also a Python function")
    return re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)


def test_a_config_path_resolves_against_the_working_directory_then_the_repository(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_config(PRESET).experiment == Path(PRESET).stem
    (tmp_path / "configs").mkdir()
    (tmp_path / PRESET.replace("horesnet/", "")).write_text("epochs = 3\nexperiment = 'mine'\n")
    assert load_config(PRESET.replace("horesnet/", "")).experiment == "mine"  # the working directory's first
    with pytest.raises(ConfigError) as e:
        load_config("configs/horesnet/horesnet10-rk4_1xb64-20e_digitz.py")
    message = str(e.value)
    assert f"tried {tmp_path}/configs/horesnet/" in message and f" and {ROOT}/configs/horesnet/" in message
    assert f"did you mean {ROOT}/{PRESET}?" in message  # not the identical relative path that failed


@pytest.mark.tier("integration")
@pytest.mark.slow
def test_readme_python_api_example_runs_from_another_directory(tmp_path):
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    out = tmp_path / "out"
    # the example's own outputs (/tmp/...) go to this test's folder: tests run side by side
    code = readme_api_example().replace('"/tmp/', f'"{out}/')
    assert "api.train(" in code and "api.results(" in code
    code += (
        "\nimport json\nprint(json.dumps({'run_dir': str(run.run_dir.resolve()), 'status': run.status, "
        "'runs': report.runs, 'files': [str(f) for f in report.files]}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DEPTHBENCH_RUNS", None)
    result = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["status"] == "done" and summary["runs"] >= 1
    run_dir = Path(summary["run_dir"])  # the checkout's runs folder, whatever the working directory (issue 58)
    assert run_dir.is_relative_to((ROOT / "results" / "runs").resolve())
    shutil.rmtree(run_dir)  # this test's run, in the checkout's runs folder (git-ignored)
    assert not any(cwd.rglob("*")), list(cwd.rglob("*"))  # nothing written in the working directory
    assert (out / "horesnet10" / "model.safetensors").is_file() and any(f.endswith(".html") for f in summary["files"])
    assert not (ROOT / "runs").exists() and not (ROOT / "exports").exists()
