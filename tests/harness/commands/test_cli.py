"""The command line as a whole: every command's module is light to import (``depthbench --help``, a command's
``--help`` and an option typo answer without importing torch), and every command is also a Python function
(harness/api.py)."""

import pytest

from clitools import ROOT, fresh_imports

pytestmark = pytest.mark.tier("integration")

HEAVY = ("torch", "timm", "mmengine", "numpy", "pandas", "accelerate", "deepspeed")
PROBE = """
from harness import cli
parser = cli.build_parser()
try:
    parser.parse_args({argv!r})
except (SystemExit, cli.UsageError):  # --help exits; a bad option is the one error type (main prints it)
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


@pytest.mark.parametrize(
    "argv, expected",
    [
        (
            ["train", "--help-config", "no/such/config.py"],
            "depthbench train: error: config file no/such/config.py does not exist",
        ),
        (
            ["results", "--format", "docx"],
            "depthbench results: error: argument --format: invalid choice: 'docx' (choose from 'md', 'csv', 'tex', "
            "'html') (depthbench results --help lists the options)",
        ),
        (
            ["eval", PRESET],
            "depthbench eval: error: the following arguments are required: --checkpoint "
            "(depthbench eval --help lists the options)",
        ),
        (
            ["env", "extra"],
            "depthbench: error: unrecognized arguments: extra (depthbench env --help lists the options)",
        ),
    ],
)
def test_bad_input_found_while_parsing_takes_the_one_error_path(argv, expected):
    """`train --help-config CONFIG` with a bad CONFIG left through parser.exit inside an argparse Action, and
    argparse's own errors printed the usage and raised SystemExit out of ``main``: every bad input found while
    parsing is now the one error line of ``main``'s DepthbenchError path (its prefix as before), exit 2."""
    from clitools import run_cli_here

    code, out, err = run_cli_here(*argv)  # a SystemExit out of main fails here
    assert (code, out) == (2, ""), (code, out, err)
    assert err.splitlines() == [err.strip()] and err.startswith(expected), err
    assert "usage:" not in err
