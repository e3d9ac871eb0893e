"""harness.engine.hooks: the coefficient hook logs SReT's learnable residual coefficients (``lrc`` records) that
results.figures.sret_lrc draws, and nothing for a model without them."""

import json
from pathlib import Path

from fixtures.paper_views import png_ok as _png_ok
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
