"""depthbench verify and the tables schema (results/paper_tables.py)."""

import json
from pathlib import Path

import pytest

from results.audit import within
from results import paper_tables
from results.paper_tables import TableError

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "baselines.yaml"


def test_printed_precision_is_kept():
    tables = paper_tables.load(FIXTURE)
    row = next(r for r in tables[0].rows if r.name == "DeiT-T")
    assert row.paper["flops_g"] == 1.3 and row.paper["flops_g"].decimals == 1
    assert row.paper["layers"] == 62


def test_tolerance_rules():
    value = paper_tables.PrintedNumber("1.3")
    assert within(value, 1.258, 0.02)  # 3 % off, but rounds to the printed 1.3
    assert not within(value, 1.24, 0.02)  # rounds to 1.2
    assert within(paper_tables.PrintedNumber("100.0"), 101.9, 0.02)
    assert not within(paper_tables.PrintedNumber("100.00"), 102.1, 0.02)
    assert within(62, 62, 0.0) and not within(62, 63, 0.0)
    assert not within(4755979, 4755980, 0.0)  # exact counts are exact


def test_baseline_rows_pass(cli):
    out = cli("verify", "--file", FIXTURE, "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    checks = json.loads(out.stdout)
    assert len(checks) == 9 * 3 and all(c["status"] == "pass" for c in checks)
    only_failures = cli("verify", "--file", FIXTURE, "--failed")
    assert only_failures.returncode == 0 and "27 passed, 0 failed" in only_failures.stdout


def test_an_altered_paper_value_fails(cli, tmp_path):
    altered = tmp_path / "baselines.yaml"
    text = FIXTURE.read_text()
    assert "params_m: 22.1," in text
    altered.write_text(text.replace("params_m: 22.1,", "params_m: 23.1,"))
    out = cli("verify", "--file", altered)
    assert out.returncode == 1
    failing = [line for line in out.stdout.splitlines() if "✗" in line]
    assert len(failing) == 1 and "DeiT-S" in failing[0] and "params_m" in failing[0]


def test_rows_with_reasons_are_shown_not_skipped(cli, tmp_path):
    path = tmp_path / "reasons.yaml"
    path.write_text(
        "paper: demo\ntables:\n  - id: '1'\n    columns: {params_m: P, flops_g: F}\n    rows:\n"
        "      - {name: Lost row, reason: the OCR destroyed this row, paper: {params_m: 1.0}}\n"
        "      - {name: ResNet-18, model: resnet18, paper: {params_m: 11.7, flops_g: 9.9},"
        " unchecked: {flops_g: printed value is a typo}}\n"
    )
    out = cli("verify", "--file", path)
    assert out.returncode == 0, out.stdout
    assert "the OCR destroyed this row" in out.stdout and "printed value is a typo" in out.stdout


@pytest.mark.parametrize(
    "body, message",
    [
        ("tables: [{id: '1', rows: [{name: x, model: resnet18, modle_kwargs: {}}]}]", "unknown field"),
        ("tables: [{id: '1', columns: {a: A}, rows: [{name: x, paper: {b: 1}}]}]", "undeclared column"),
        ("tables: [{rows: []}]", "needs 'id'"),
        ("tables: [{id: '1', rows: [{name: x\n", "not valid YAML"),
    ],
)
def test_malformed_tables_fail_with_one_clear_line(tmp_path, body, message, cli):
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    with pytest.raises(TableError, match=message):
        paper_tables.load(path)
    out = cli("verify", "--file", path)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and message in out.stderr


def test_unknown_model_is_a_failed_row_not_a_crash(cli, tmp_path):
    path = tmp_path / "unknown.yaml"
    path.write_text(
        "tables: [{id: '1', columns: {params_m: P}, rows: [{name: x, model: no_such_net, paper: {params_m: 1.0}}]}]"
    )
    out = cli("verify", "--file", path)
    assert out.returncode == 1 and "no_such_net" in out.stdout


def test_every_paper_tables_file_loads():
    papers = paper_tables.available_papers()
    assert {"stepsnet", "transnext"} <= set(papers)
    for paper in papers:
        assert paper_tables.load_paper(paper), paper


def test_every_linked_config_exists_and_trains_the_rows_model():
    from harness.core.config import load_config

    linked = [
        (paper, row)
        for paper in paper_tables.available_papers()
        for table in paper_tables.load_paper(paper)
        for row in table.rows
        if row.config
    ]
    assert len(linked) > 150
    configs = {}
    for paper, row in linked:
        path = Path(__file__).resolve().parents[3] / row.config
        assert path.is_file(), f"{paper} table {row.table} row {row.name}: {row.config} does not exist"
        if row.config not in configs:
            configs[row.config] = load_config(str(path), []).model
        model = configs[row.config]
        if model.get("expand") or model.get("grow"):  # ScaleNet: a pretrained base, expanded by the config
            assert row.model.startswith("scalenet_") and model.name.split("_patch")[0].replace(
                "_", ""
            ) in row.model.replace("_", ""), (row.name, row.config)
        else:
            assert model.name == row.model, f"{paper} {row.table}/{row.name}: {row.config} trains {model.name}"


def test_failed_only_still_shows_why_rows_are_not_checkable(capsys):
    """Issue 58 item 7: `verify --failed` hides the not-checkable rows from the table; the summary's count of them
    comes with their reasons, not "(reason shown)" over none."""
    from harness.commands.verify import print_report
    from results.audit import Check

    failing = Check("stepsnet", "3", "Steps-ResNet-18", "params", "fail", 11.7, 12.5, 6.8)
    unsure = Check("stepsnet", "3", "Steps-Swin-T", "flops_g", "reason", note="the paper's FLOPs count is ambiguous")
    print_report([failing], [failing, unsure])
    out = capsys.readouterr().out
    assert "0 passed, 1 failed, 1 not checkable:" in out
    assert "stepsnet 3 Steps-Swin-T flops_g: the paper's FLOPs count is ambiguous" in out
    assert "(reason shown)" not in out


def test_verify_json_on_every_real_table(cli, monkeypatch):
    """Issue 11: `depthbench verify --paper P --json` crashed (PrintedNumber through copy.deepcopy) on four papers.
    Measured values come from a stub here (the real measures are tested in test_verify.py); what is checked is
    that every check of every real table serialises."""
    import argparse
    import io
    from contextlib import redirect_stdout

    from harness.commands import verify

    monkeypatch.setattr("results.audit.Audit.value", lambda self, column, row, ctx=None: {"value": 1.0})
    for paper in paper_tables.available_papers():
        buf = io.StringIO()
        with redirect_stdout(buf):
            verify.main(
                argparse.Namespace(paper=[paper], file=None, table=None, json=True, failed=False, no_cache=True)
            )
        checks = json.loads(buf.getvalue())
        assert checks and {c["paper"] for c in checks} == {paper}
        reasons = [c for c in checks if c["status"] == "reason" and c["paper_value"] is not None]
        assert all(isinstance(c["paper_value"], (int, float, str)) for c in reasons)
