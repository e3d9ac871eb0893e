"""``depthbench finetune`` end to end: what the command refuses before MMEngine writes anything."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.tier("integration")

ROOT = Path(__file__).resolve().parents[3]


def test_a_finetune_into_a_work_dir_with_a_planted_checkpoint_link_is_one_line(embedded_cache, tmp_path, capsys):
    from harness import cli

    det = str(ROOT / "configs/det/mask-rcnn_steps-resnet18-w32_fpn_500it_embedded-coco.py")
    work, target = tmp_path / "work", tmp_path / "precious.pth"
    work.mkdir()
    target.write_bytes(b"precious")
    (work / "iter_2.pth").symlink_to(target)  # MMEngine's CheckpointHook would torch.save through it
    code = cli.main(
        [
            "finetune",
            det,
            "--work-dir",
            str(work),
            "train_cfg.max_iters=2",
            "default_hooks.logger.interval=1",
            "+val_dataloader.dataset.indices=4",
        ]
    )
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and "iter_2.pth in the work dir is a symbolic link" in err[0], err
    assert target.read_bytes() == b"precious"
