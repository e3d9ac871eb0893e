"""results.audit: measured architecture cells are cached per version of the measuring code and of each model's
code, and `depthbench results` reads the same audit as `depthbench verify` (the dense rows)."""

import json

import pytest

from fixtures.paper_views import DEMO
from results import compare, paper_tables, runs
from results.audit import Audit
from results.status import table_status


def test_audit_is_cached_per_code_version(monkeypatch, tmp_path):
    monkeypatch.setenv("DEPTHBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr("harness.measure.cache.fingerprint", lambda: "measuring-code-1")
    row = paper_tables.load(DEMO)[0].rows[0]
    audit = Audit(progress=False)
    assert audit.row(row)["params_m"].ours == pytest.approx(11.689512)
    audit.save()
    assert audit.path == tmp_path / "measurements.json"
    cached = json.loads(audit.path.read_text())
    assert len(cached) == 1 and '"resnet18"' in next(iter(cached))
    # a second audit reads the cache and builds nothing ...
    from results.audit import RowContext

    build = RowContext.model
    monkeypatch.setattr(RowContext, "model", property(lambda self: pytest.fail("rebuilt a model")))
    assert Audit(progress=False).row(row)["params_m"].ours == pytest.approx(11.689512)
    # ... until the file that defines the model changes: then it measures again
    monkeypatch.setattr("harness.measure.cache.model_code", lambda model: "edited")
    monkeypatch.setattr(RowContext, "model", build)
    again = Audit(progress=False)
    assert again.row(row)["params_m"].ours == pytest.approx(11.689512) and again.cache.dirty


@pytest.mark.tier("integration")
def test_results_cells_and_status_give_verifys_answer_for_the_dense_rows(tmp_path):
    """Issue 26: the dense rows (TransNeXt Table 14's segmentors, built from configs/seg) rendered as "error" in
    `depthbench results` while `depthbench verify` passed them. Both now read one audit: every architecture cell
    says what verify says, and --status counts the same rows as verified or failing."""
    from harness.commands import verify
    from harness.workflows.audit import dense_counter

    table = next(t for t in paper_tables.load_paper("transnext") if t.id == "14")
    checks = [c for c in verify.run(papers=["transnext"], table="14", progress=False) if c.column != "-"]
    dense = [c for c in checks if c.column.startswith("seg_")]
    assert any(c.status == "pass" for c in dense) and all(c.status in ("pass", "reason") for c in dense)
    index = compare.RunIndex(runs.collect([tmp_path / "no-runs"])[0], compare.MODEL_RENAMES)
    view = compare.view_table(table, index, Audit(progress=False, dense=dense_counter()))
    by_cell = {
        (line.row.name, column): cell
        for line in view.lines
        for column, cell in line.cells.items()
        if cell.kind == "arch"
    }
    for check in checks:
        cell = by_cell[(check.row, check.column)]
        assert cell.status == check.status, (check, cell)
        if check.ours is not None:
            assert cell.ours == pytest.approx(check.ours), (check, cell)
    status = table_status(view)
    failing_rows = {c.row for c in checks if c.status in ("fail", "error")}
    assert set(status.failing) == failing_rows
    assert status.verified == len({c.row for c in checks if c.status in ("pass", "fail", "error")} - failing_rows)
