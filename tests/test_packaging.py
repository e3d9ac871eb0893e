"""pyproject.toml declares what depthbench needs (dependencies and the extras training, downstream, lm, docs, dev)
and requirements/base.txt lists the same requirements (what `make setup` installs, tools/setup_env.py), so the
two cannot drift (issue 56): every requirement is in both, with the same version bounds, and every bound admits the
version requirements/lock.txt pins."""

import importlib.util
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("setup_env", ROOT / "tools" / "setup_env.py")
setup_env = importlib.util.module_from_spec(spec)
spec.loader.exec_module(setup_env)

# declared in pyproject but installed by tools/setup_env.py itself, before base.txt: the CUDA builds of torch and
# torchvision, and mmcv built from its sdist
SETUP_INSTALLS = {"torch": setup_env.TORCH, "torchvision": setup_env.TORCHVISION, "mmcv": setup_env.MMCV}
EXTRAS = {"training", "downstream", "lm", "docs", "dev"}


def _pyproject() -> dict[str, list[Requirement]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {
        "": [Requirement(r) for r in project["dependencies"]],
        **{extra: [Requirement(r) for r in reqs] for extra, reqs in project["optional-dependencies"].items()},
    }


def _base() -> list[Requirement]:
    lines = (line.split("#", 1)[0].strip() for line in (ROOT / "requirements" / "base.txt").read_text().splitlines())
    return [Requirement(line) for line in lines if line]


def _lock() -> dict[str, str]:
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "requirements" / "lock.txt").read_text(), re.M)
    return {canonicalize_name(name): version for name, version in pins}


def _key(req: Requirement) -> tuple[str, str]:
    return canonicalize_name(req.name), str(req.specifier)


def test_pyproject_and_base_txt_declare_the_same_requirements():
    groups = _pyproject()
    assert set(groups) == {""} | EXTRAS
    declared = [_key(r) for reqs in groups.values() for r in reqs]
    assert len(declared) == len(set(declared)), "a requirement is declared twice in pyproject.toml"
    in_setup = {(name, spec) for name, spec in declared if name in SETUP_INSTALLS}
    assert {name for name, _ in in_setup} == set(SETUP_INSTALLS)
    base = [_key(r) for r in _base()]
    assert len(base) == len(set(base)), "a requirement is listed twice in requirements/base.txt"
    assert set(declared) - in_setup == set(base), (
        f"only in pyproject.toml: {sorted(set(declared) - in_setup - set(base))}; "
        f"only in requirements/base.txt: {sorted(set(base) - set(declared))}"
    )


def test_every_bound_admits_the_pinned_version():
    lock = _lock()
    for reqs in _pyproject().values():
        for req in reqs:
            name = canonicalize_name(req.name)
            version = SETUP_INSTALLS.get(name) or lock.get(name)
            assert version, f"{req.name} is pinned neither in requirements/lock.txt nor by tools/setup_env.py"
            assert req.specifier.contains(version, prereleases=True), f"{req} does not admit the pinned {version}"


def test_the_tools_of_the_front_door_are_declared_and_pinned():
    groups, lock = _pyproject(), _lock()
    assert {"mkdocs", "mkdocs-material"} <= {canonicalize_name(r.name) for r in groups["docs"]}
    assert {"ruff", "pre-commit", "import-linter", "pytest"} <= {canonicalize_name(r.name) for r in groups["dev"]}
    assert {"mkdocs", "mkdocs-material", "ruff", "pre-commit"} <= set(lock)
