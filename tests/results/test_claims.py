"""results/claims.py: claims reports and claim runs read as bounded records, and a claims file is data -- a config
it names outside configs/ never executes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fixtures.configs import names_out_of_configs
from fixtures.files import in_time as _in_time

ROOT = Path(__file__).resolve().parents[2]


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


def test_claims_never_execute_a_config_a_claims_file_names_outside_configs(tmp_path, hostile_config):
    """``claims PATH --status`` and ``submit --claims`` load the arms' configs; a claims file is data."""
    from results import claims

    config, marker = hostile_config
    source = (ROOT / "results/tables/claims/horesnet.yaml").read_text()
    first_arm = "configs/claims/horesnet10-euler-w16_1xb64-4e_glyphs-16px.py"
    assert first_arm in source
    for name in names_out_of_configs(config):
        path = tmp_path / "horesnet.yaml"
        path.write_text(source.replace(first_arm, name))
        with pytest.raises(claims.ClaimError, match="is refused: a data file names a config by its repository path"):
            claims.check_claims(claims.load(path), quick=True)
        assert not marker.exists()
