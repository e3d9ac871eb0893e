"""The layers of README's Architecture hold: import-linter's `lint-imports` checks .importlinter on this checkout
(imports inside functions included), and the contract covers every package we ship, with no exceptions."""
import configparser
import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = ROOT / ".importlinter"


def _contract() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(CONTRACT)
    return parser


def test_lint_imports_keeps_every_contract():
    lint = Path(sys.executable).parent / "lint-imports"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([str(lint), "--no-cache", str(CONTRACT)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_the_contract_names_every_package_and_has_no_exceptions():
    parser = _contract()
    shipped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert set(parser["importlinter"]["root_packages"].split()) == {p.rstrip("*") for p in shipped["include"]}
    layered = {name.strip() for line in parser["importlinter:contract:layers"]["layers"].split("\n")
               for name in line.split("|") if name.strip()}
    harness = {f"harness.{p.stem}" for p in (ROOT / "harness").iterdir()
               if (p / "__init__.py").is_file() or (p.suffix == ".py" and p.stem != "__init__")}
    assert harness <= layered, f"harness modules outside the layers: {sorted(harness - layered)}"
    assert {"models", "downstream", "results", "slurm"} <= layered
    for section in parser.sections():
        assert not any(key.startswith("ignore_imports") for key in parser[section]), section
