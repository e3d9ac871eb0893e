"""harness/core/config_paths.py (issue 39 item 1): code runs only from what the user names. A paper table or a claims
file is data: the config it names must lie inside this repository's configs/ (relative, no ``..``, no link out);
anything else is one line naming the file and the rule -- and the named config never executes (it would create a
marker file: tests/slurm/test_submit.py, tests/results/test_claims.py)."""

import pytest

from fixtures.configs import PRESET
from harness.core import config_paths
from harness.core.config import config_named_by
from harness.core.errors import ConfigError


def test_a_config_inside_configs_is_accepted_as_written():
    assert config_named_by(PRESET, "t.yaml") == PRESET
    assert config_named_by("./" + PRESET, "t.yaml") == PRESET  # one spelling, as runs record config_file


@pytest.mark.tier("integration")
@pytest.mark.parametrize(
    "name", ["/etc/passwd.py", "configs/../setup.py", "harness/cli.py", "configs/x.txt", "configs/a\nb.py", 3, None]
)
def test_a_config_outside_configs_is_one_line_naming_file_and_rule(name):
    with pytest.raises(ConfigError) as e:
        config_named_by(name, "results/tables/x.yaml: table 1 row #2")
    message = str(e.value)
    assert "results/tables/x.yaml: table 1 row #2" in message and "inside configs/" in message
    assert "\n" not in message


def test_a_link_inside_configs_that_points_out_is_refused(tmp_path, monkeypatch, hostile_config):
    config, _ = hostile_config
    repo = tmp_path / "repo"
    (repo / "configs" / "deit").mkdir(parents=True)
    (repo / "configs" / "deit" / "x.py").symlink_to(config)
    (repo / "configs" / "deit" / "ok.py").write_text("epochs = 1\n")
    monkeypatch.setattr(config_paths, "REPO", repo)
    monkeypatch.setattr(config_paths, "CONFIGS_DIR", repo / "configs")
    assert config_named_by("configs/deit/ok.py", "t.yaml") == "configs/deit/ok.py"
    with pytest.raises(ConfigError, match="no '..', not a link out of configs/"):
        config_named_by("configs/deit/x.py", "t.yaml")
