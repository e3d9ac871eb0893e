"""results.claims: claims reports and claim runs read as bounded records."""

from __future__ import annotations

import os

import pytest

from fixtures.files import in_time as _in_time


@pytest.mark.parametrize("text", ["[" * 100000, "[1e999999999999]", '[{"claim": 1}]', "{}", "not json"])
def test_a_bad_claims_report_is_one_line(tmp_path, text):
    from results.claims import ClaimError, read_report

    (tmp_path / "claims.json").write_text(text)
    with pytest.raises(ClaimError) as error:
        read_report(tmp_path / "claims.json")
    assert "\n" not in str(error.value) and "claims.json" in str(error.value)


def test_a_claims_run_whose_meta_json_is_not_json_is_not_done(tmp_path):
    from results.claims import RunSpec, run_done

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "meta.json").write_text("{not json")
    spec = RunSpec("deit", "a", 0, "configs/x.py", [], tmp_path / "run")
    assert run_done(spec) is False
    (tmp_path / "run" / "meta.json").unlink()
    os.mkfifo(tmp_path / "run" / "meta.json")
    assert _in_time(lambda: run_done(spec)) is False
