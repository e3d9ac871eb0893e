"""results.evaluate through ``depthbench eval`` (issues 25 and 26): a run directory a user receives is data (its
config.py is never executed, its config.json says which model it holds), a run has one writer, the output paths are
checked before any work, and a plain eval of a run it cannot record into prints its result and says so.

Each crafted config here would create a file when executed; every test checks that the file never appears.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from fixtures.cli import one_line_captured as _one_line
from fixtures.files import hold_lock as _hold_lock
from fixtures.files import read_only
from harness import cli

ROOT = Path(__file__).resolve().parents[2]
STEPS = f"{ROOT}/configs/demo/steps-deit-w64-d8_1xb64-8e_digits.py"  # steps_deit_tiny, 16 px, width 64


def _steps_model(*overrides):
    from harness.core.config import load_config
    from harness.engine.builders import build_model

    torch.manual_seed(0)
    return build_model(load_config(STEPS, list(overrides)), pretrained=False).eval()


def _evil_run(path: Path, marker: Path, model: dict | None = None) -> Path:
    """A run directory (locked by nobody) whose config.py would create ``marker`` if executed."""
    path.mkdir(parents=True)
    (path / "meta.json").write_text(json.dumps({"status": "done", "experiment": "x", "run_id": path.name}))
    text = f"__import__('os').system('touch {marker}')\n"  # no import statement: MMEngine would execute it
    if model is not None:
        text += f"model = {model!r}\n"
    (path / "config.py").write_text(text)
    return path


def _suite_rows(run: Path):
    return [
        json.loads(line)
        for line in (run / "metrics.jsonl").read_text().splitlines()
        if json.loads(line)["kind"] == "eval_suite"
    ]


@pytest.fixture
def _data_env(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("DEPTHBENCH_DATA", str(tmp_path_factory.getbasetemp() / "digits"))
    torch.set_num_threads(1)


@pytest.mark.tier("integration")
def test_eval_never_executes_a_run_directorys_config(tmp_path, capsys, _data_env):
    marker = tmp_path / "pwned"
    run = _evil_run(tmp_path / "run", marker, model=dict(name="steps_deit_tiny", width=64))
    torch.save(_steps_model("data.val_subset=8").state_dict(), run / "w.pth")
    assert cli.main(["eval", STEPS, "data.val_subset=8", "--checkpoint", str(run / "w.pth")]) == 0  # plain path
    other = _evil_run(tmp_path / "other", marker)
    assert (
        cli.main(
            [
                "eval",
                STEPS,
                "data.val_subset=8",
                "--checkpoint",
                str(run / "w.pth"),
                "--analysis",
                "none",
                "--out-run",
                str(other),
            ]
        )
        == 0
    )  # suite path
    assert not marker.exists()
    assert {r["metric"] for r in _suite_rows(run)} == {"top1", "top5", "loss"}
    assert {r["metric"] for r in _suite_rows(other)} == {"top1", "top5"}
    # config.json is what a run's config is read from: a run of another model is refused before any work
    (run / "config.json").write_text(json.dumps({"model": {"name": "horesnet10_euler"}}))
    capsys.readouterr()
    _one_line(
        capsys,
        cli.main(["eval", STEPS, "--checkpoint", str(run / "w.pth"), "--analysis", "none"]),
        "is a horesnet10_euler run but the config builds steps_deit_tiny",
    )
    assert not marker.exists()


@pytest.mark.tier("integration")
def test_eval_into_a_run_another_process_writes_is_one_line_before_any_work(tmp_path, capsys, monkeypatch, _data_env):
    import harness.engine.builders

    run = tmp_path / "run"
    holder = _hold_lock(run)
    try:
        torch.save(_steps_model().state_dict(), run / "w.pth")
        monkeypatch.setattr(harness.engine.builders, "build_model", lambda *a, **k: pytest.fail("model built"))
        for extra in ([], ["--analysis", "none"]):
            _one_line(capsys, cli.main(["eval", STEPS, "--checkpoint", str(run / "w.pth"), *extra]), "is in use by pid")
        assert not (run / "metrics.jsonl").exists()
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.tier("integration")
def test_eval_output_paths_are_checked_before_any_work(tmp_path, capsys, monkeypatch, _data_env):
    import harness.engine.builders

    weights = tmp_path / "w.pth"
    torch.save(_steps_model().state_dict(), weights)
    monkeypatch.setattr(harness.engine.builders, "build_model", lambda *a, **k: pytest.fail("model built"))
    folder = tmp_path / "out"
    folder.mkdir()
    _one_line(
        capsys,
        cli.main(["eval", STEPS, "--checkpoint", str(weights), "--out", str(folder)]),
        f"--out {folder}: {folder} is a directory; give a file",
    )
    _one_line(
        capsys,
        cli.main(["eval", STEPS, "--checkpoint", str(weights), "--out", str(weights / "x.csv")]),
        f"{weights} is a file, not a directory",
    )
    run = tmp_path / "run"
    run.mkdir()
    (run / "meta.json").write_text("{}")
    (folder / "rows.csv").write_text("kept\n")
    (run / "metrics.jsonl").write_text("{}\n")
    # really unwritable, root included (CI runs as root): os.access says yes to root, the checks create a file
    with read_only(folder), read_only(run):
        for out in (folder / "rows.csv", folder / "new" / "rows.csv"):
            _one_line(
                capsys,
                cli.main(["eval", STEPS, "--checkpoint", str(weights), "--out", str(out)]),
                f"--out {out}: cannot write in {folder}",
            )
        _one_line(
            capsys,
            cli.main(["eval", STEPS, "--checkpoint", str(weights), "--out-run", str(run)]),
            f"--out-run {run}: cannot write in {run}",
        )
    # the folders writable, the files not: the CSV is replaced and the record appended to, both would fail
    # after the evaluation (the old check asked only about the CSV's folder)
    with read_only(folder / "rows.csv"), read_only(run / "metrics.jsonl"):
        _one_line(
            capsys,
            cli.main(["eval", STEPS, "--checkpoint", str(weights), "--out", str(folder / "rows.csv")]),
            f"--out {folder / 'rows.csv'}: cannot write {folder / 'rows.csv'}",
        )
        _one_line(
            capsys,
            cli.main(["eval", STEPS, "--checkpoint", str(weights), "--out-run", str(run)]),
            f"cannot write {run / 'metrics.jsonl'}",
        )
    assert (folder / "rows.csv").read_text() == "kept\n" and (run / "metrics.jsonl").read_text() == "{}\n"


@pytest.mark.tier("integration")
def test_plain_eval_of_a_run_it_cannot_record_into_prints_the_result_and_says_so(tmp_path, capsys, _data_env):
    from harness.core.rundir import RunDir

    run = RunDir.create("eval", path=tmp_path / "run")
    run.finish("done")
    torch.save(_steps_model("data.val_subset=8").state_dict(), run.path / "w.pth")
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("precious\n")
    (run.path / "metrics.jsonl").symlink_to(target)
    capsys.readouterr()
    assert cli.main(["eval", STEPS, "data.val_subset=8", "--checkpoint", str(run.path / "w.pth")]) == 0
    captured = capsys.readouterr()
    assert "(8 images)" in captured.out and "metrics.jsonl is a symbolic link" in captured.err
    assert "--out-run DIR" in captured.err and target.read_text() == "precious\n"
