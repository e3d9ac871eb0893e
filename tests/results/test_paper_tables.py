"""results.paper_tables: every paper's tables file parses and every row points at a registered model or an existing
config; eval selectors are validated; a printed number keeps its printed precision through copy and pickle."""

import re
from pathlib import Path

import pytest

from results import paper_tables

ROOT = Path(__file__).resolve().parents[2]


def test_every_paper_yaml_parses_and_every_row_points_somewhere():
    import timm

    import models  # noqa: F401
    from models.scalenet_llama import LLAMA_MODELS  # Hugging Face Llama rows (ScaleNet Table X), not timm models

    problems = []
    for paper in paper_tables.available_papers():
        for table in paper_tables.load_paper(paper):
            for row in table.rows:
                where = f"{paper} table {table.id} row {row.name!r}"
                if row.reason:
                    continue
                if not row.model and not row.config:
                    problems.append(f"{where}: no model, config or reason")
                if row.model and not timm.is_model(row.model) and row.model not in LLAMA_MODELS:
                    problems.append(f"{where}: model {row.model} is not registered")
                if row.config and not (ROOT / row.config).is_file():
                    problems.append(f"{where}: config {row.config} does not exist")
    assert not problems, "\n".join(problems)


@pytest.mark.tier("integration")
def test_eval_selectors_are_validated(tmp_path):
    bad = tmp_path / "bad.yaml"
    for row, message in [
        ("{name: A, evals: {nope: {dataset: imagenet-a}}}", "evals for undeclared column(s) ['nope']"),
        ("{name: A, evals: {top1: {dataset: imagenet-x}}}", "dataset 'imagenet-x' is not a depthbench eval protocol"),
        ("{name: A, eval: {size: 224}}", "unknown selector key(s) ['size']"),
    ]:
        bad.write_text(f"paper: x\ntables:\n  - {{id: '1', caption: c, columns: {{top1: T}}, rows: [{row}]}}\n")
        with pytest.raises(paper_tables.TableError, match=re.escape(message)):
            paper_tables.load(bad)


def test_printed_number_survives_copy_and_pickle():
    import copy
    import pickle

    value = paper_tables.PrintedNumber("86.70")
    for clone in (copy.deepcopy(value), copy.copy(value), pickle.loads(pickle.dumps(value))):
        assert clone == 86.7 and clone.decimals == 2 and isinstance(clone, paper_tables.PrintedNumber)
