"""The layers of docs/architecture.md hold: import-linter's `lint-imports` checks .importlinter on this checkout
(imports inside functions included), and the contract covers every package we ship, with no exceptions."""

import ast
import configparser
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = ROOT / ".importlinter"


def _contract() -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.read(CONTRACT)
    return parser


@pytest.mark.tier("integration")
def test_lint_imports_keeps_every_contract():
    lint = Path(sys.executable).parent / "lint-imports"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [str(lint), "--no-cache", str(CONTRACT)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_the_contract_names_every_package_and_has_no_exceptions():
    parser = _contract()
    shipped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    # every shipped package, and the two folders of scripts above them (benchmarks/, tools/)
    assert set(parser["importlinter"]["root_packages"].split()) == {p.rstrip("*") for p in shipped["include"]} | {
        "benchmarks",
        "tools",
    }
    layered = {
        name.strip()
        for line in parser["importlinter:contract:layers"]["layers"].split("\n")
        for name in line.split("|")
        if name.strip()
    }
    harness = {
        f"harness.{p.stem}"
        for p in (ROOT / "harness").iterdir()
        if (p / "__init__.py").is_file() or (p.suffix == ".py" and p.stem != "__init__")
    }
    assert harness <= layered, f"harness modules outside the layers: {sorted(harness - layered)}"
    assert {"models", "downstream", "results", "slurm", "benchmarks", "tools"} <= layered
    for section in parser.sections():
        assert not any(key.startswith("ignore_imports") for key in parser[section]), section


# Imports inside functions (docs/architecture.md): a module imports what it needs at its top, so that what it
# depends on is read in one place and fails at import, not halfway through a run. Three exceptions:
# the command modules, which keep `depthbench --help` and a command's parsing free of torch (tests/harness/test_cli.py)
# and import the layers below where they run;
LAZY_COMMAND_MODULES = ("harness/cli.py", "harness/commands/")
# optional third-party packages, imported by the function that needs them because some place our code runs
# lacks them (the GPU machine has torch, timm, accelerate and the wheels of tools/gpu_wheels.sh; a plain
# `pip install timm` has less);
OPTIONAL_PACKAGES = {
    "deepspeed": "one training backend of two; only a run with engine.backend='deepspeed' needs it",
    "mmcv": "built from source by tools/setup_env.py; only downstream's detection/segmentation models need it",
    "mmdet": "needs mmcv; only detection configs build with it",
    "mmseg": "needs mmcv; only segmentation configs build with it",
    "transformers": "only the Hugging Face Llama rows (models/scalenet_llama.py, which `import models` loads)",
    "tokenizers": "only the language-model tasks, which every task registration loads (harness/tasks/__init__.py)",
    "lm_eval": "only `depthbench eval` of a Llama run (harness/tasks/lm_eval.py); it brings datasets and more",
    "datasets": "lm_eval's, for its task files (harness/assets/lm_eval_tasks)",
    "sklearn": "only exporting the embedded digits set once; harness/tasks/image.py is loaded with every task",
    "fontTools": "only exporting the glyph set once (harness/tasks/glyphs.py, loaded with every image task)",
    "matplotlib": "only figures (diagnose plots, benchmark charts)",
    "pandas": "only the benchmark charts (benchmarks/suite_cpu.py)",
    "imagecorruptions": "only `eval --corrupt-from`, which says how to install it when it is missing",
    "skimage": "only generating the embedded detection/segmentation sets' photographs, which says how to install it",
    "swattention": "TransNeXt's optional CUDA kernels, built by the user",
    "torch.utils.tensorboard": "needs the tensorboard package; only a run that logs to TensorBoard",
}
# and a line that says why it must be lazy: `# lazy: <why>` (e.g. an import that must follow a signal setting).
LAZY_MARK = "# lazy:"
CHECKED = ("harness", "models", "results", "downstream", "slurm", "tools", "benchmarks")


def _function_level_imports(path: Path):
    """(line, imported modules) of every import inside a function of ``path``."""
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, ast.Import):
                found.append((child.lineno, [alias.name for alias in child.names]))
            elif in_function and isinstance(child, ast.ImportFrom):
                found.append((child.lineno, ["." * child.level + (child.module or "")]))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(path.read_text(), str(path)), False)
    return found


def _optional(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in OPTIONAL_PACKAGES)


def test_imports_inside_functions_only_where_laziness_is_needed():
    misplaced = []
    for path in sorted(p for top in CHECKED for p in (ROOT / top).rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(LAZY_COMMAND_MODULES) or relative.startswith("benchmarks/results/"):
            continue
        lines = path.read_text().splitlines()
        for line, modules in _function_level_imports(path):
            if LAZY_MARK not in lines[line - 1] and not all(_optional(m) for m in modules):
                misplaced.append(f"{relative}:{line}: {lines[line - 1].strip()}")
    assert not misplaced, (
        "imports inside functions (move them to the module's top, or say `# lazy: <why>` on "
        "the line):\n" + "\n".join(misplaced)
    )


def test_the_optional_packages_are_not_imported_at_the_top_of_a_module_every_task_loads():
    """The optional packages stay optional: the models and the tasks (loaded with every training run) import
    none of them at their top."""
    for top in ("models", "harness/engine", "harness/tasks"):
        for path in (ROOT / top).rglob("*.py"):
            tree = ast.parse(path.read_text(), str(path))
            for node in tree.body:
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and not node.level
                    else []
                )
                assert not any(_optional(n) for n in names), f"{path.relative_to(ROOT)}:{node.lineno}"


# Modules loaded by a name the linter cannot see (importlib.import_module): each place, the names it loads and why
# that is not an import the contract could check. A new one fails the test below until it is declared here.
STRING_LOADS = {
    "harness/cli.py": "harness.commands.<name> of COMMANDS: the layer below the CLI, loaded per command so that "
    "--help imports no torch",
    "harness/engine/tasks.py": "harness.tasks (BUILTIN_TASKS), the built-in tasks: the task registry loads the layer "
    "above it on first use, as a plugin registry does; the engine never names a task",
    "harness/engine/launch.py": "PRELOAD and the caller's preload list: modules imported before forking ranks "
    "(what a rank imports anyway), named by the caller",
    "harness/engine/forked.py": "the module or function a forked run executes (harness.cli, a test's function), "
    "named by the request, as `python -m` names it",
    "harness/commands/env.py": "mmcv.ops, probed to report whether its compiled ops load (a third-party package)",
}


def _string_loads() -> dict[str, int]:
    """``{file: number of importlib.import_module / __import__ calls}`` in the packages the contract covers."""
    found = {}
    for top in CHECKED:
        for path in (ROOT / top).rglob("*.py"):
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith("benchmarks/results/"):
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Call) and (
                    (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                    or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__"))
                ):
                    found[relative] = found.get(relative, 0) + 1
    return found


def test_every_module_loaded_by_name_is_declared():
    found = _string_loads()
    undeclared = sorted(set(found) - set(STRING_LOADS))
    assert not undeclared, (
        f"modules loaded by name in {undeclared}: the import contract cannot see them; declare "
        f"each in tests/test_layers.py STRING_LOADS with why it is not a plain import"
    )
    assert not set(STRING_LOADS) - set(found), "STRING_LOADS names a file that no longer loads modules by name"
