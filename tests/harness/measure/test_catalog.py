"""harness/measure/catalog.py: the counts it shares with the audit through the measurement cache."""


def test_verify_reads_the_counts_depthbench_models_measured(tmp_path, monkeypatch):
    """Issue 58 item 5: `depthbench models` then `verify` measured the same parameters and FLOPs twice (61 s, then
    70 s), though README says the cache is shared: the audit now reads the counts the catalog stored, measuring
    nothing -- and the other way round."""
    from harness.measure import catalog
    from harness.measure.cache import MeasurementCache
    from results import audit
    from results.paper_tables import Row

    monkeypatch.setenv("DEPTHBENCH_CACHE", str(tmp_path))
    name = "deit_tiny_patch16_224"
    listed = catalog.describe(name, "baseline (timm)", cache=(cache := MeasurementCache()))
    cache.save()

    def measured_again(*args, **kwargs):
        raise AssertionError("measured again")

    monkeypatch.setattr(audit, "build_row_model", measured_again)
    monkeypatch.setattr(audit, "count_flops", measured_again)
    monkeypatch.setattr(audit, "count_params", measured_again)
    row = Row("1", "DeiT-Ti", model=name, input_size=224, paper={"params_m": 5.72, "flops_g": 1.26}, paper_id="x")
    checks = audit.Audit().check_row(row)
    assert [(c.column, c.status) for c in checks] == [("params_m", "pass"), ("flops_g", "pass")], checks
    assert [round(c.ours, 3) for c in checks] == [listed["params_m"], listed["flops_g"]]

    # the other order: what the audit measured, `models` lists without counting
    other = "resnet18"
    monkeypatch.undo()
    monkeypatch.setenv("DEPTHBENCH_CACHE", str(tmp_path))
    audited = audit.Audit()
    audited.check_row(Row("1", "R18", model=other, paper={"params_m": 11.7, "flops_g": 1.8}, paper_id="x"))
    audited.save()
    assert catalog.uncounted([other, "resnet34"]) == ["resnet34"]
