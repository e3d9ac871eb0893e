"""results.reporting: `depthbench results` checks its --claims folder and its --out folder in one line before any
work (a folder without a claims report, an unreadable claims.json, a read-only --out) and writes nothing."""

import contextlib
import io

import pytest

from fixtures.files import read_only
from fixtures.paper_views import FIXTURES
from harness.cli import main as depthbench


def test_results_claims_folder_without_a_report_is_one_line(tmp_path, capsys):
    assert (
        depthbench(
            ["results", "--format", "html", "--out", str(tmp_path / "site"), "--no-audit", "--claims", str(tmp_path)]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no claims.json" in err[0] and not (tmp_path / "site").exists()
    for broken in ("{not json", '[{"claim": {"paper": "stepsnet"}}]'):  # not JSON; a record missing fields
        (tmp_path / "claims.json").write_text(broken)
        assert (
            depthbench(
                [
                    "results",
                    "--format",
                    "html",
                    "--out",
                    str(tmp_path / "site"),
                    "--no-audit",
                    "--claims",
                    str(tmp_path),
                ]
            )
            == 2
        )
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "claims.json is unreadable" in err[0] and not (tmp_path / "site").exists()


@pytest.mark.tier("integration")
def test_results_out_read_only_is_one_line_before_any_work(tmp_path, monkeypatch):
    """A read-only --out is refused in one line before the runs are collected (it failed after all the work)."""
    from results import runs as run_data

    folder = tmp_path / "read-only"
    folder.mkdir()
    with read_only(folder):
        monkeypatch.setattr(run_data, "collect", lambda *a, **k: pytest.fail("collected runs before checking --out"))
        for out in (folder, folder / "new" / "report"):
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                code = depthbench(
                    ["results", "--runs", str(FIXTURES / "runs"), "--format", "csv", "--out", str(out), "--no-audit"]
                )
            assert code == 2 and err.getvalue().count("\n") == 1, err.getvalue()
            assert f"--out {out}: cannot write in {folder}" in err.getvalue(), err.getvalue()
    assert list(folder.iterdir()) == []
