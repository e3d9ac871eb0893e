"""downstream.hooks: the work-dir guard refuses links planted where MMEngine writes; a first Ctrl-C is a preemption
(RunDirHook checkpoints after the iteration) that ``--resume auto`` continues."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from harness.core.files import BadFile

ROOT = Path(__file__).resolve().parents[2]
DET = str(ROOT / "configs/det/mask-rcnn_steps-resnet18-w32_fpn_500it_embedded-coco.py")


def test_the_work_dir_guard_refuses_planted_links_and_removes_them_mid_run(tmp_path, capsys):
    from downstream.hooks import guard_work_dir

    work, other = tmp_path / "work", tmp_path / "other"
    (work / "20261127_000000" / "vis_data").mkdir(parents=True)
    other.mkdir()
    (other / "precious.pth").write_bytes(b"precious")
    (work / "iter_1.pth").write_bytes(b"ours")
    (work / "last.pth").symlink_to("iter_1.pth")  # depthbench's own link, beside it: allowed
    guard_work_dir(work)
    for planted in ("iter_2.pth", "last_checkpoint", "20261127_000000/vis_data/scalars.json"):
        (work / planted).symlink_to(other / "precious.pth")
        with pytest.raises(BadFile, match=f"{planted} in the work dir is a symbolic link"):
            guard_work_dir(work)
        guard_work_dir(work, remove=True)  # mid-run: the link goes, its target stays
        assert not os.path.lexists(work / planted) and (other / "precious.pth").read_bytes() == b"precious"
    (work / "epoch_1.pth").unlink(missing_ok=True)
    (work / "20261127_000000" / "vis_data").rmdir()
    (work / "20261127_000000" / "vis_data").symlink_to(other)
    with pytest.raises(BadFile, match="vis_data in the work dir is a symbolic link"):
        guard_work_dir(work)
    (work / "20261127_000000" / "vis_data").unlink()
    os.mkfifo(work / "epoch_1.pth")
    with pytest.raises(BadFile, match="epoch_1.pth in the work dir is not a regular file"):
        guard_work_dir(work)
    assert "removed" in capsys.readouterr().err


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
