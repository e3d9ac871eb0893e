"""slurm/submit.py: what a submission reads is data -- ``submit --table PAPER:TABLE`` never executes a config the
table names outside configs/."""

from pathlib import Path

import pytest

from fixtures.configs import names_out_of_configs
from harness.core import config_paths
from harness.core.errors import DepthbenchError


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
