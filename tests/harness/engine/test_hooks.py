"""harness.engine.hooks: the coefficient hook logs SReT's learnable residual coefficients (``lrc`` records) that
results.figures.sret_lrc draws, and nothing for a model without them; ScaleNet's growth hook survives a preemption."""

import json
import signal
from pathlib import Path

import pytest

from fixtures.paper_views import png_ok as _png_ok
from fixtures.training import (
    EXIT_PREEMPTED,
    finish,
    launch,
    load,
    train,
    training_env,  # noqa: F401 -- the env fixture
    wait_for_step,
)
from results import figures

ROOT = Path(__file__).resolve().parents[3]


def test_coefficient_hook_logs_sret_lrc_records_the_figure_draws(tmp_path):
    import timm
    import torch

    import models  # noqa: F401
    from harness.engine.hooks import CoefficientLogHook, build_hooks
    from harness.core.config import load_config

    class Log:  # RunLog.metrics' signature: what the training loop hands the hook
        def __init__(self):
            self.records = []

        def metrics(self, kind, **values):
            self.records.append({"kind": kind, "epoch": len(self.records), **values})

    cfg = load_config(ROOT / "configs/sret/sret-t_8xb64-300e_in1k.py")
    hook = next(h for h in build_hooks(cfg) if isinstance(h, CoefficientLogHook))
    model, log = timm.create_model("SReT_T", img_size=64, num_classes=10), Log()
    hook.after_epoch(model, log)
    block = model.get_submodule("transformers.0.blocks.0")
    with torch.no_grad():
        block.coefficient1.bias.fill_(0.25)  # an optimizer step moved one coefficient
    hook.after_epoch(model, log)
    first, second = (r["coefficients"]["transformers.0.blocks.0"] for r in log.records)
    assert [r["kind"] for r in log.records] == ["lrc", "lrc"] and first["attn_id"] != 0.25
    assert second["attn_id"] == 0.25 and second["attn_res"] == first["attn_res"]
    hook.after_epoch(timm.create_model("resnet18", num_classes=10), log)  # no coefficients: nothing logged
    assert len(log.records) == 2
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log.records))
    assert _png_ok(figures.sret_lrc([run], tmp_path / "lrc"))


@pytest.mark.slow
@pytest.mark.tier("integration")
def test_scalenet_growth_hook_survives_preemption(env, tmp_path):
    """WSPT as a growth schedule: the model is expanded at the start of epoch 1 (optimizer rebuilt), preempted
    in that epoch, and resumed: the growth is replayed before loading, and the weight tying must hold."""
    run = tmp_path / "run"
    overrides = [
        "epochs=2",
        "data.train_subset=64",
        "data.val_subset=16",
        "data.input_size=8",
        "batch_size=8",
        "model.img_size=8",
        "model.depth=2",
        "+model.embed_dim=32",
        "+model.num_heads=2",
        "ema.enable=False",
        "log_interval=1",
        "log.tensorboard=False",
        "ckpt.interval_minutes=None",
        "+model.grow={'stages': [{'epoch': 1, 'k': 2, 'adjust': 'adapter', 'rank': 4}]}",
    ]
    config = "configs/deit/deit-tiny-p4_1xb64-30e_digits.py"
    proc = launch(env, run, overrides=overrides, config=config)
    wait_for_step(proc, run, 8 + 2)  # 8 steps per epoch: two steps into the grown model's first epoch
    proc.send_signal(signal.SIGUSR1)
    rc, out, err = finish(proc)
    assert rc == EXIT_PREEMPTED, err[-2000:]
    assert "model grown" in out
    grown = load(run)["model"]
    assert any(k.startswith("blocks.3.") for k in grown) and not any(k.startswith("blocks.4.") for k in grown)
    out = train(env, run, "--resume", "auto", overrides=overrides, config=config)
    assert json.loads((run / "meta.json").read_text())["status"] == "done"
    import timm

    import models  # noqa: F401
    from models.scalenet import assert_tied, expand

    model = expand(
        timm.create_model(
            "deit_tiny_patch16_224", img_size=8, patch_size=4, depth=2, embed_dim=32, num_heads=2, num_classes=10
        ),
        k=2,
        adjust="adapter",
        rank=4,
    )
    model.load_state_dict(load(run)["model"])
    assert_tied(model)
    assert model.blocks[1].attn.qkv.weight is model.blocks[0].attn.qkv.weight  # interleaved copy of block 0
