"""Issues 25 and 26 for `depthbench finetune`/`test`/`eval`/`diagnose`: a file or run directory a user receives is
data (MMEngine checkpoints load weights-only with an allow-list, a run's config.py is never executed), a run
directory has one writer, bad input is one line before any work, a shortened fine-tune brings its schedule along,
the console is a header and a progress bar, `test` writes beside its checkpoint's run, Ctrl-C is a preemption.

Each crafted pickle or config here would create a file when unpickled or executed; every test checks that the
file never appears.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from harness import cli
from harness.core.errors import DepthbenchError

ROOT = Path(__file__).resolve().parents[2]
DET = str(ROOT / "configs/det/mask-rcnn_steps-resnet18-w32_fpn_500it_embedded-coco.py")
STEPS = f"{ROOT}/configs/demo/steps-deit-w64-d8_1xb64-8e_digits.py"  # steps_deit_tiny, 16 px, width 64
TINY_FINETUNE = ["train_cfg.max_iters=2", "default_hooks.logger.interval=1", "+val_dataloader.dataset.indices=4"]


class _Evil:
    """Unpickling it runs os.system(touch <marker>)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _evil_mmengine_checkpoint(path: Path, marker: Path) -> Path:
    """What an MMEngine checkpoint looks like (meta, state_dict, optimizer, message_hub) plus a payload."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "meta": {"iter": 1, "epoch": 0},
            "state_dict": {"backbone.model.conv1.weight": torch.zeros(1)},
            "optimizer": {"state": {}, "param_groups": []},
            "message_hub": {"payload": _Evil(marker)},
        },
        path,
    )
    return path


def _one_line(capsys, code, needle) -> str:
    err = [line for line in capsys.readouterr().err.strip().splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and needle in err[0], err
    return err[0]


def _hold_lock(path: Path):
    """Another process that writes the run directory ``path`` (holds its lock) until killed."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import time; from harness.core.rundir import RunDir; "
                f"RunDir.create('exp', path={str(path)!r}); print('locked', flush=True); time.sleep(120)"
            ),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    return holder


# ------------------------------------------------------------------------------------------------ the allow-list
def test_the_mmengine_allow_list_admits_its_own_state_and_nothing_else(tmp_path):
    from mmengine.logging.history_buffer import HistoryBuffer

    from downstream.mmengine_compat import load_mmengine_checkpoint

    buffer = HistoryBuffer()
    for value in (1.0, 3.0):
        buffer.update(value)
    torch.save(
        {
            "message_hub": {"log_scalars": {"loss": buffer}, "eta": np.float64(2.5)},
            "meta": {"dataset_meta": {"classes": ("a", "b")}},
            "state_dict": {"w": torch.ones(2)},
            "array": np.arange(3, dtype=np.int64),
        },
        tmp_path / "good.pth",
    )
    loaded = load_mmengine_checkpoint(tmp_path / "good.pth")
    assert type(loaded["message_hub"]["log_scalars"]["loss"]) is HistoryBuffer
    assert loaded["message_hub"]["log_scalars"]["loss"].mean() == 2.0 and loaded["array"].tolist() == [0, 1, 2]

    class _Sneaky:  # pickles as getattr(HistoryBuffer, "register_statistics"): an attribute outside the four
        def __reduce__(self):
            return getattr, (HistoryBuffer, "register_statistics")

    torch.save({"x": _Sneaky()}, tmp_path / "getattr.pth")
    with pytest.raises(pickle.UnpicklingError, match="is not allowed"):
        load_mmengine_checkpoint(tmp_path / "getattr.pth")
    before = dict(HistoryBuffer._statistics_methods)
    HistoryBuffer._statistics_methods["mean"] = np.ndarray  # an allowed global planted as a statistics method
    try:
        torch.save({"buffer": buffer}, tmp_path / "planted.pth")
    finally:
        HistoryBuffer._statistics_methods.update(before)
    with pytest.raises(pickle.UnpicklingError, match="statistics methods other than its own"):
        load_mmengine_checkpoint(tmp_path / "planted.pth")
    assert HistoryBuffer._statistics_methods == before
    marker = tmp_path / "pwned"
    _evil_mmengine_checkpoint(tmp_path / "evil.pth", marker)
    with pytest.raises(pickle.UnpicklingError):
        load_mmengine_checkpoint(tmp_path / "evil.pth")
    assert not marker.exists()


def test_resume_auto_resolves_only_inside_the_work_dir(tmp_path):
    from downstream.finetune import latest_checkpoint, resume_checkpoint

    work, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    (elsewhere / "iter_1.pth").write_bytes(b"x")
    (work / "last_checkpoint").write_text(str(elsewhere / "iter_1.pth"))
    assert latest_checkpoint(work) is None
    with pytest.raises(DepthbenchError, match="names no checkpoint inside"):
        resume_checkpoint("auto", work)
    (work / "iter_1.pth").symlink_to(elsewhere / "iter_1.pth")  # a link out of the work dir is outside too
    assert latest_checkpoint(work) is None
    (work / "iter_1.pth").unlink()
    (work / "iter_1.pth").write_bytes(b"y")  # a copied run: the pointer's old absolute path, the file here
    assert resume_checkpoint("auto", work) == work / "iter_1.pth"


# ------------------------------------------------------------------------------------------------ finetune / test
@pytest.mark.tier("integration")
@pytest.mark.slow
@pytest.mark.parametrize("how", ["test", "load_from", "resume", "resume-auto"])
def test_crafted_mmengine_checkpoints_are_refused_by_test_finetune_and_resume(how, embedded_cache, tmp_path, capsys):
    """A crafted iter_1.pth in a directory whose meta.json says engine mmengine (what used to grant trust), given
    to `test`, to `load_from=`, to `--resume FILE`, or reached by `--resume auto` through a last_checkpoint pointer
    out of the work dir: one line, nothing runs, nothing is written."""
    marker = tmp_path / "pwned"
    shared = tmp_path / "shared"
    evil = _evil_mmengine_checkpoint(shared / "iter_1.pth", marker)
    (shared / "meta.json").write_text(json.dumps({"engine": "mmengine", "status": "done"}))
    work = tmp_path / "work"
    argv, needle = {
        "test": (["test", DET, str(evil), "--work-dir", str(work)], "posix.system"),
        "load_from": (["finetune", DET, "--work-dir", str(work), f"load_from={str(evil)!r}"], "posix.system"),
        "resume": (["finetune", DET, "--work-dir", str(work), "--resume", str(evil), *TINY_FINETUNE], "posix.system"),
        "resume-auto": (
            ["finetune", DET, "--work-dir", str(work), "--resume", "auto", *TINY_FINETUNE],
            "names no checkpoint inside",
        ),
    }[how]
    if how == "resume-auto":
        work.mkdir()
        (work / "last_checkpoint").write_text(str(evil))
    code = cli.main(argv)
    assert not marker.exists(), "the crafted pickle ran"
    line = _one_line(capsys, code, needle)
    assert how == "resume-auto" or "weights-only load refuses" in line
    assert not work.exists() or sorted(p.name for p in work.iterdir()) == ["last_checkpoint"]
    assert sorted(p.name for p in shared.iterdir()) == ["iter_1.pth", "meta.json"]


@pytest.mark.tier("integration")
def test_a_file_as_work_dir_is_one_line(embedded_cache, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("")
    _one_line(capsys, cli.main(["finetune", DET, "--work-dir", str(afile)]), "is a file, not a directory")
    _one_line(capsys, cli.main(["test", DET, str(afile), "--work-dir", str(afile)]), "is a file, not a directory")


@pytest.mark.tier("integration")
def test_a_second_finetune_of_a_run_directory_is_one_line(embedded_cache, tmp_path, capsys):
    work = tmp_path / "run"
    holder = _hold_lock(work)
    try:
        before = sorted(p.name for p in work.iterdir())
        meta = (work / "meta.json").read_text()
        _one_line(
            capsys,
            cli.main(["finetune", DET, "--work-dir", str(work), "--resume", "auto", *TINY_FINETUNE]),
            "is in use by pid",
        )
        assert sorted(p.name for p in work.iterdir()) == before and (work / "meta.json").read_text() == meta
    finally:
        holder.kill()
        holder.wait()


def test_a_shortened_finetune_brings_its_schedule_along():
    """Issue 26 item 7: train_cfg.max_iters=40 on the 500-iteration preset: the warm-up is 4 iterations, the cosine
    ends at 40, evaluation and checkpoints every 20, and the rates are the closed forms of that schedule (at
    iteration 25 the run is past its warm-up, where the unscaled schedule still warmed up at lr 4.9e-4)."""
    from mmengine.optim.scheduler import LinearLR, CosineAnnealingLR  # noqa: F401  (registers)
    from mmengine.registry import PARAM_SCHEDULERS

    from downstream.finetune import load_downstream_config

    changes = []
    cfg = load_downstream_config(DET, ["train_cfg.max_iters=40"], changes)
    warmup, cosine = cfg.param_scheduler
    assert (warmup.begin, warmup.end, cosine.begin, cosine.end) == (0, 4, 4, 40)
    assert cfg.train_cfg.val_interval == 20 and cfg.default_hooks.checkpoint.interval == 20
    assert cfg.scale == "embedded coco-shapes 128px, 40 iterations" and len(changes) == 4
    base, start, eta_min = cfg.optim_wrapper.optimizer.lr, warmup.start_factor, cosine.eta_min
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=base)
    schedulers = [PARAM_SCHEDULERS.build(dict(s, optimizer=optimizer)) for s in cfg.param_scheduler]
    rates = []
    for _ in range(40):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        for s in schedulers:
            s.step()
    for k in range(4):  # linear warm-up from start_factor to 1 over its 4 iterations
        assert rates[k] == pytest.approx(base * (start + (1 - start) * k / 3))
    for k in (4, 25, 39):
        assert rates[k] == pytest.approx(eta_min + (base - eta_min) * (1 + math.cos(math.pi * (k - 4) / 36)) / 2)

    constant = [dict(type="ConstantLR", factor=1.0, by_epoch=False)]
    kept = load_downstream_config(
        DET, ["train_cfg.max_iters=40", "train_cfg.val_interval=5", f"param_scheduler={constant!r}"]
    )
    assert kept.param_scheduler == constant
    assert kept.train_cfg.val_interval == 5  # set on the command line: kept as given
    epochs = load_downstream_config(
        "configs/det/stepsnet/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-1x_coco.py", ["train_cfg.max_epochs=6"]
    )
    warmup, steps = epochs.param_scheduler
    assert warmup.end == 500 and (steps.end, steps.milestones) == (6, [4, 5])  # the warm-up counts iterations
    assert epochs.scale == "6 epochs (the config's 12)"


def test_a_schedule_that_cannot_be_rescaled_says_which_key_to_set(tmp_path):
    from downstream.finetune import load_downstream_config

    config = tmp_path / "custom.py"
    config.write_text(
        f"_base_ = [{DET!r}]\nparam_scheduler = [dict(type='ReduceOnPlateauLR', by_epoch=False, "
        f"monitor='loss', patience=50)]\n"
    )
    with pytest.raises(
        DepthbenchError,
        match=r"param_scheduler\[0\] \(ReduceOnPlateauLR\) cannot be rescaled from "
        r"500 to 40 iterations; set param_scheduler=\[\.\.\.\]",
    ):
        load_downstream_config(str(config), ["train_cfg.max_iters=40"])
    assert load_downstream_config(str(config), []).param_scheduler[0].patience == 50  # no override: untouched


@pytest.fixture(scope="module")
def finetuned(embedded_cache, tmp_path_factory):
    """A 2-iteration fine-tune of the Mask R-CNN preset, as a user runs it (a subprocess, its console kept)."""
    from clitools import run_cli

    run = tmp_path_factory.mktemp("ft") / "run"
    done = run_cli("finetune", DET, "--work-dir", run, *TINY_FINETUNE, env={"DEPTHBENCH_CACHE": str(embedded_cache)})
    assert done.returncode == 0, done.stderr[-3000:]
    return run, done


@pytest.mark.tier("integration")
@pytest.mark.slow
def test_finetune_console_is_a_header_and_progress_and_the_run_keeps_its_config_as_data(finetuned):
    run, done = finetuned
    out = done.stdout.splitlines()
    assert out[0].startswith(f"depthbench finetune: {DET} -> {run}") and "model: MaskRCNN with steps_resnet18" in out[1]
    assert any(line.startswith("  2 iterations") for line in out) and any("schedule follows" in line for line in out)
    # training progress and the evaluations (every 250 of 500 iterations: here every 1 of 2)
    assert [line.split(":")[0] for line in out if line.startswith("iter ")] == [
        "iter 1/2",
        "iter 1",
        "iter 2/2",
        "iter 2",
    ]
    assert len(out) <= 12 and "mmengine - INFO" not in done.stdout and "loading annotations" not in done.stdout
    assert done.stderr.strip() == ""  # no library warnings, no MMEngine log
    log = next(run.glob("2*/2*.log")).read_text()
    assert "System environment" in log and "loading annotations into memory" in log  # the full log is kept
    meta = json.loads((run / "meta.json").read_text())
    assert meta["scale"] == "embedded coco-shapes 128px, 2 iterations" and meta["schedule_changes"]
    config = json.loads((run / "config.json").read_text())
    assert config["model"]["backbone"]["model_name"] == "steps_resnet18_w32" and config["train_cfg"]["max_iters"] == 2
    assert not (run / ".lock").exists() or subprocess.run(["flock", "-n", str(run / ".lock"), "true"]).returncode == 0


@pytest.mark.tier("integration")
@pytest.mark.slow
def test_test_writes_beside_its_checkpoints_run_and_verbose_shows_the_mmengine_log(finetuned, embedded_cache, capsys):
    run, _ = finetuned
    capsys.readouterr()
    assert (
        cli.main(["test", DET, str(run / "last.pth"), "--json", "--verbose", "+test_dataloader.dataset.indices=4"]) == 0
    )
    captured = capsys.readouterr()
    assert "coco/bbox_mAP" in json.loads(captured.out.strip().splitlines()[-1])
    # --verbose: MMEngine's console log is back, on stderr: stdout holds only the metrics (issue 45)
    assert "mmengine - INFO" in captured.err and "mmengine - " not in captured.out
    tested = run.parent / f"{run.name}-test-iter_2"  # last.pth -> iter_2.pth
    meta = json.loads((tested / "meta.json").read_text())
    assert meta["mode"] == "test" and meta["status"] == "done" and meta["tested_run"] == str(run)
    assert not (ROOT / "results/runs" / f"{json.loads((run / 'meta.json').read_text())['experiment']}-test").exists()


@pytest.mark.tier("integration")
@pytest.mark.slow
def test_ctrl_c_preempts_a_finetune_and_a_resume_continues(embedded_cache, tmp_path):
    """Issue 26 item 2: a first SIGINT checkpoints after the iteration and exits 75 with the resume hint (status
    preempted); --resume auto continues from that checkpoint (here for one more iteration)."""
    from clitools import run_cli, start_cli

    work = tmp_path / "run"
    env = {**os.environ, "DEPTHBENCH_CACHE": str(embedded_cache), "OMP_NUM_THREADS": "1"}
    args = [
        "finetune",
        DET,
        "--work-dir",
        str(work),
        "train_cfg.max_iters=60",
        "train_cfg.val_interval=1000",
        "default_hooks.checkpoint.interval=1000",
        "default_hooks.logger.interval=1",
        "+val_dataloader.dataset.indices=4",
    ]
    process = start_cli(*args, env=env)  # a fork of the preloaded server: `depthbench finetune` as a user starts it
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and process.poll() is None:
            metrics = work / "metrics.jsonl"
            if metrics.exists() and metrics.read_text().count("\n") >= 1:
                break
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 75, err[-2000:]
    assert (
        "Ctrl-C again to stop at once" in err
        and "continue with: depthbench finetune " in err
        and f"--work-dir {work} --resume auto" in err
    )
    meta = json.loads((work / "meta.json").read_text())
    step = meta["global_step"]
    assert meta["status"] == "preempted" and 1 <= step < 60
    assert (work / f"iter_{step}.pth").is_file() and (work / "last.pth").resolve() == (work / f"iter_{step}.pth")
    resumed = [a.replace("max_iters=60", f"max_iters={step + 1}") for a in args] + ["--resume", "auto"]
    done = run_cli(*resumed, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    meta = json.loads((work / "meta.json").read_text())
    assert meta["status"] == "done" and [r["global_step"] for r in meta["resumes"]] == [step]


# ------------------------------------------------------------------------------------------------ eval
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
        "is a directory; give a file name",
    )
    _one_line(
        capsys,
        cli.main(["eval", STEPS, "--checkpoint", str(weights), "--out", str(tmp_path / "no/x.csv")]),
        "is not a directory",
    )
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **k: False if Path(p) == folder else real_access(p, mode, **k))
    _one_line(
        capsys,
        cli.main(["eval", STEPS, "--checkpoint", str(weights), "--out", str(folder / "rows.csv")]),
        "is not writable",
    )
    run = tmp_path / "run"
    run.mkdir()
    (run / "meta.json").write_text("{}")
    monkeypatch.setattr(os, "access", lambda p, mode, **k: False if Path(p) == run else real_access(p, mode, **k))
    _one_line(capsys, cli.main(["eval", STEPS, "--checkpoint", str(weights), "--out-run", str(run)]), "is not writable")


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


# ------------------------------------------------------------------------------------------------ diagnose
@pytest.mark.tier("integration")
def test_diagnose_checks_its_inputs_before_it_creates_a_run(tmp_path, capsys):
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pth"
    torch.save({"model": {"w": torch.zeros(1)}, "x": _Evil(marker)}, evil)
    runs = tmp_path / "runs"
    _one_line(
        capsys,
        cli.main(
            [
                "diagnose",
                "shortcut-ratio",
                "steps_deit_tiny",
                "--checkpoint",
                str(evil),
                "--input-size",
                "32",
                "--batch-size",
                "2",
                "--out-dir",
                str(runs),
            ]
        ),
        "posix.system",
    )
    assert not runs.exists() and not marker.exists()
    afile = tmp_path / "afile"
    afile.write_text("")
    _one_line(
        capsys,
        cli.main(["diagnose", "shortcut-ratio", "steps_deit_tiny", "--input-size", "32", "--out-dir", str(afile)]),
        "is a file, not a directory",
    )
    wrong = tmp_path / "wrong.pth"  # readable, but the weights of another model: measured first, nothing written
    torch.save({"model": {"w": torch.zeros(1)}}, wrong)
    _one_line(
        capsys,
        cli.main(
            [
                "diagnose",
                "shortcut-ratio",
                "steps_deit_tiny",
                "--checkpoint",
                str(wrong),
                "--input-size",
                "32",
                "--batch-size",
                "2",
                "--out-dir",
                str(runs),
            ]
        ),
        "does not fit",
    )
    assert not runs.exists()
