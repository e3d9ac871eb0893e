"""The command line as a whole (harness/cli.py): every command's module is light to import (``depthbench --help``, a
command's ``--help`` and an option typo answer without importing torch), every command is also a Python function
(harness/api.py), a command whose one input is a bad record fails in one line, and stdout carries only what a command
reports (issue 45): library logging -- MMEngine's and DeepSpeed's loggers hard-code a handler on stdout -- goes to
stderr, set once in harness/cli.py, for every command that imports MMEngine. Each command runs for real (in this
process, stdout and stderr captured) while a library logs the way MMEngine does from inside it (a new ``MMLogger``,
whose console handler is made on stdout at that moment, and a stdlib logger with a stdout handler, as DeepSpeed's)."""

import logging
import sys

import pytest

from clitools import ROOT, fresh_imports, run_cli_here
from fixtures.cli import one_line_here as _one_line_here
from fixtures.files import HOSTILE

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


DET = str(ROOT / "configs/det/mask-rcnn_steps-resnet18-w32_fpn_500it_embedded-coco.py")


LIBRARY_LINE = 'The current default scope "mmseg" is not "mmdet"'


# command -> arguments that run it for real and cheaply (a report from a cached/no-measurement table, the model list
# without FLOPs, bad input refused after the config was loaded through MMEngine; train and eval load it too)
COMMANDS = {
    "verify": ["--paper", "horesnet", "--table", "1"],
    "models": ["horesnet10_rk4", "--no-flops"],
    "finetune": [DET, "train_cfg.max_iter=3"],
    "test": [DET, "/nonexistent/iter_1.pth", "train_cfg.max_iter=3"],
    "train": ["configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py", "--nproc", "0"],
    "eval": ["configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py", "--checkpoint", "/nonexistent/best.pth"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_library_logging_stays_off_stdout(command, monkeypatch):
    import importlib

    from mmengine.logging import MMLogger

    module = importlib.import_module(f"harness.commands.{'finetune' if command == 'test' else command}")
    name = "test_main" if command == "test" else "main"
    real = getattr(module, name)

    def noisy(args):  # what MMEngine / DeepSpeed do in the middle of a command
        MMLogger.get_instance(f"stdout-test-{command}", logger_name="mmengine").warning(LIBRARY_LINE)
        library = logging.getLogger(f"stdout-test-library-{command}")
        library.addHandler(logging.StreamHandler(sys.stdout))
        library.warning("a library's own warning")
        return real(args)

    monkeypatch.setattr(module, name, noisy)  # the parser binds the command when main() builds it
    code, out, err = run_cli_here(command, *COMMANDS[command])
    assert LIBRARY_LINE in err and "a library's own warning" in err  # said, on stderr
    assert LIBRARY_LINE not in out and "a library's own warning" not in out, out[:2000]
    assert "WARNING" not in out and " - mmengine - " not in out
    if command in ("verify", "models"):
        assert code == 0 and out.strip(), err[-2000:]  # the report itself is on stdout
    else:
        assert code == 2 and not out.strip(), (out, err)  # refused in one line on stderr, nothing on stdout


def test_handlers_made_on_stdout_before_main_are_moved(monkeypatch):
    """A process that imported the libraries before ``main`` (the test server, an embedding program) has their
    stdout handlers already; ``main`` moves them to stderr."""
    import io

    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    library = logging.getLogger("stdout-test-early-library")
    handler = logging.StreamHandler(out)
    library.addHandler(handler)
    try:
        from harness.cli import main

        assert main(["models", "horesnet10_rk4", "--no-flops"]) == 0
        library.warning("logged after main started")
    finally:
        library.removeHandler(handler)
    assert "logged after main started" in err.getvalue() and "logged after main started" not in out.getvalue()
    assert "horesnet10_rk4" in out.getvalue()
