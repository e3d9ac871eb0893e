"""Finished claims runs without training, for the tests of what reads them (`claims --tier confirmatory` over a
finished folder, `claims PAPER --scale paper`): each written by the real run-directory writer
(harness/core/rundir.py) as `depthbench train` leaves it -- meta.json done, the resolved config.json, one eval record
per epoch in metrics.jsonl."""

from __future__ import annotations

from harness.core.rundir import RunDir
from harness.engine.builders import load_training_config
from results.claims import REPO


def finished_run(spec, top1: float, loss: float, minutes: float = 10.0, epochs: int = 2, config: bool = True) -> None:
    """``spec``'s run (a results.claims.RunSpec) finished after ``minutes``, its last evaluation ``top1`` and
    ``loss`` (the earlier epochs' a little worse)."""
    run = RunDir.create(f"claims-{spec.paper}-{spec.arm}", path=spec.work_dir)
    if config:  # what `depthbench train` records: the stale check compares it with the recipe
        run.write_config("", load_training_config(REPO / spec.config, spec.overrides)[0].to_dict())
    for epoch in range(epochs):
        worse = epochs - 1 - epoch
        run.log_metrics(kind="eval", epoch=epoch, global_step=epoch + 1, top1=top1 - worse, loss=loss + worse / 10)
    run.update_meta(start="2026-11-29T09:00:00+00:00")
    run.finish("done")
    run.update_meta(end=f"2026-11-29T09:{minutes:02.0f}:00+00:00")
