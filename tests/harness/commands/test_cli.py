"""The command line as a whole: every command's module is light to import (``depthbench --help``, a command's
``--help`` and an option typo answer without importing torch), and every command is also a Python function
(harness/api.py)."""

import pytest

from clitools import ROOT, fresh_imports
from fixtures.cli import one_line_here as _one_line_here
from fixtures.files import HOSTILE

pytestmark = pytest.mark.tier("integration")

HEAVY = ("torch", "timm", "mmengine", "numpy", "pandas", "accelerate", "deepspeed")
PROBE = """
from harness import cli
parser = cli.build_parser()
try:
    parser.parse_args({argv!r})
except SystemExit:
    pass
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["train", "--help"],
        ["eval", "--help"],
        ["submit", "--help"],
        ["train", "--no-such-option"],
        ["results", "--help"],
    ],
)
def test_parsing_imports_nothing_heavy(argv):
    _, heavy = fresh_imports(PROBE.format(argv=argv), HEAVY)
    assert heavy == []


def test_every_command_module_has_the_command_shape():
    import importlib

    from harness import cli

    for name in cli.COMMANDS:
        module = importlib.import_module(f"harness.commands.{name}")
        assert callable(module.add_parser) and module.__doc__, name
        runs = [attr for attr in dir(module) if attr == "run" or attr.startswith("run_")]
        assert runs, f"harness/commands/{name}.py has no typed run function"


def test_the_api_exposes_every_command_with_the_clis_semantics(tmp_path, monkeypatch):
    """The API example of docs/guides/pretraining.md, shortened: train, evaluate the run, a dry-run submission."""
    from harness import api
    from harness.core.errors import DepthbenchError

    monkeypatch.setenv("DEPTHBENCH_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    preset = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"
    tiny = [
        "model.width=8",
        "data.input_size=8",
        "data.train_subset=64",
        "data.val_subset=32",
        "batch_size=16",
        "epochs=1",
        "log.tensorboard=False",
        "ckpt.interval_minutes=None",
    ]
    monkeypatch.chdir(ROOT)
    run = api.train(preset, overrides=tiny, work_dir=tmp_path / "run")
    assert run.status == "done" and run.exit_code == 0 and (run.run_dir / "best.pth").is_file()
    assert isinstance(run.best_metric, float)
    rows = api.evaluate(preset, run.run_dir, overrides=tiny)
    top1 = rows["top1"] if isinstance(rows, dict) else next(r["value"] for r in rows if r["metric"] == "top1")
    assert top1 == pytest.approx(run.best_metric)
    with pytest.raises(DepthbenchError, match="unknown config key"):  # bad input: the CLI's one line, raised
        api.train(preset, overrides=["optim.lrr=0.1"])


PRESET = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["trian"], "depthbench: error: unknown command 'trian'; did you mean depthbench train?"),
        (
            ["train", PRESET, "--epochs", "1"],
            "depthbench train: error: --epochs is not an option of train; config keys are key=value: write epochs=1",
        ),
        (
            ["train", PRESET, "data.type=imgfolder"],
            "is not one of alpaca, cifar10, cifar100, digits, folder, glyphs, kjv, "
            "shards, text, wds; did you mean data.type=folder?",
        ),
        (["train", PRESET, "precision=bf61"], "did you mean precision=bf16?"),
    ],
)
def test_a_mistyped_command_option_or_choice_is_one_line_with_what_was_meant(argv, expected):
    """Issue 58 item 4: not the top-level usage and "unrecognized arguments"; one line, exit 2, the fix in it."""
    from clitools import run_cli_here

    code, out, err = run_cli_here(*argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert expected in err and "usage:" not in err


def test_top_level_help_names_key_value_overrides_and_the_docs(capsys):
    """Issue 58 item 9: `depthbench --help` says how config keys are overridden and where the documentation is."""
    from harness import cli

    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "key=value" in text and "depthbench train --help-config" in text
    assert "docs/" in text and "make docs" in text


@pytest.mark.parametrize("document", HOSTILE)
def test_commands_that_read_records_fail_in_one_line(tmp_path, document):
    """The commands whose input is one record exit 2 with one line naming it on every bad document: export (a run's
    config.json), results --claims (a claims report), results --file (a tables file; submit --table takes a paper's
    own tables by name, PAPER:TABLE, never a file). Every other input is valid, so the line is that record's reader:
    a line that names another file (or none) fails."""

    def hostile(path):
        path.write_text(document, errors="surrogateescape")
        return str(path)

    run = tmp_path / "run"
    run.mkdir()
    (run / "meta.json").write_text('{"status": "done"}')
    (run / "best.pth").write_bytes(b"x")
    assert f"{run} has no config.json" in _one_line_here("export", run, "--out", tmp_path / "out")
    config = hostile(run / "config.json")  # there, but bad: named as such, never "has no config.json"
    assert config in _one_line_here("export", run, "--out", tmp_path / "out")
    (tmp_path / "claims").mkdir()
    report = hostile(tmp_path / "claims" / "claims.json")
    assert report in _one_line_here(
        "results", "--claims", tmp_path / "claims", "--format", "html", "--out", tmp_path / "site", "--no-audit"
    )
    tables = hostile(tmp_path / "t.yaml")
    assert tables in _one_line_here("results", "--file", tables, "--no-audit")
