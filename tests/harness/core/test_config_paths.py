"""Issue 39 item 1: code runs only from what the user names. A paper table or a claims file is data: the config
it names must lie inside this repository's configs/ (relative, no ``..``, no link out); anything else is one line
naming the file and the rule -- and the named config never executes (it would create a marker file)."""

import os
from pathlib import Path

import pytest

from harness.core import config_paths
from harness.core.config import config_named_by
from harness.core.errors import ConfigError, DepthbenchError

ROOT = Path(__file__).resolve().parents[3]
PRESET = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"


@pytest.fixture
def hostile_config(tmp_path):
    """A config outside configs/ that leaves a marker when executed, and the marker's path."""
    marker = tmp_path / "executed"
    config = tmp_path / "evil.py"
    config.write_text(
        f"_base_ = [{str(ROOT / PRESET)!r}]\nmarker = __import__('pathlib').Path({str(marker)!r}).write_text('ran')\n"
    )
    return config, marker


def names_out_of_configs(config: Path) -> list[str]:
    """The ways a data file can name ``config`` (outside configs/): absolute, with ``..``, through a link."""
    up = os.path.relpath(config, ROOT)  # ../../tmp/.../evil.py
    return [str(config), f"configs/{up}", up]


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


def write_table(folder: Path, config: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "evil.yaml").write_text(
        "paper: evil\ntitle: t\ntables:\n  - id: '1'\n    caption: c\n    columns: {top1: {}}\n    rows:\n"
        f"      - {{name: row, model: resnet18, config: {config!r}}}\n"
    )


@pytest.mark.parametrize("way", [0, 1, 2], ids=["absolute", "dotdot-under-configs", "dotdot"])
def test_submit_table_never_executes_a_config_a_table_names_outside_configs(tmp_path, monkeypatch, hostile_config, way):
    """``submit --table PAPER:TABLE``: the table's row names the config; a hostile one is refused before loading."""
    from results import paper_tables
    from slurm.submit import SubmitOptions, table_submission

    config, marker = hostile_config
    tables = tmp_path / "tables"
    write_table(tables, names_out_of_configs(config)[way])
    monkeypatch.setattr(paper_tables, "TABLES_DIR", tables)
    with pytest.raises(DepthbenchError) as e:
        table_submission("evil:1", None, [], SubmitOptions(dry_run=True), 1)
    assert "is refused" in str(e.value) and "evil.yaml" in str(e.value)
    assert not marker.exists()


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
