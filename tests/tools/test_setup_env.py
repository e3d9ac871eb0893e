"""tools/setup_env.py: the patches it applies to mmcv's sdist and the one-line errors users see."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.tier("system")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "setup_env.py"
spec = importlib.util.spec_from_file_location("setup_env", SCRIPT)
setup_env = importlib.util.module_from_spec(spec)
spec.loader.exec_module(setup_env)

# The lines of mmcv 2.1.0's setup.py that break on setuptools >= 82 and torch 2.14.
MMCV_SETUP_EXCERPT = """import os
from pkg_resources import DistributionNotFound, get_distribution, parse_version
from setuptools import find_packages, setup
def choose_requirement(primary, secondary):
    try:
        get_distribution(primary)
    except DistributionNotFound:
        return secondary
if parse_version(torch.__version__) <= parse_version('1.12.1'):
    extra_compile_args['cxx'] = ['-std=c++14']
else:
    extra_compile_args['cxx'] = ['-std=c++17']
extra_compile_args['nvcc'] += ['-std=c++17']
"""


def test_mmcv_setup_is_patched_for_new_setuptools_and_cxx20(tmp_path):
    setup_py = tmp_path / "setup.py"
    setup_py.write_text(MMCV_SETUP_EXCERPT)
    setup_env.patch_mmcv_setup(setup_py)
    patched = setup_py.read_text()
    assert "pkg_resources" not in patched and "c++17" not in patched and "c++14" not in patched
    assert patched.count("-std=c++20") == 3
    namespace = {}
    exec(patched.split("from setuptools")[0], namespace)  # the replacement imports really work
    assert namespace["parse_version"]("2.14.1") > namespace["parse_version"]("1.12.1")
    with pytest.raises(namespace["DistributionNotFound"]):
        namespace["get_distribution"]("surely-not-an-installed-distribution")


def test_an_unexpected_mmcv_sdist_is_refused(tmp_path):
    setup_py = tmp_path / "setup.py"
    setup_py.write_text("print('something else')\n")
    with pytest.raises(setup_env.SetupError, match="not the expected one"):
        setup_env.patch_mmcv_setup(setup_py)


@pytest.mark.parametrize(
    "log, expected",
    [
        (["copying x", "OSError: [Errno 28] No space left on device"], "no space left on device"),
        (["Retrying...", "Failed to establish a new connection: [Errno 111]"], "cannot reach the package index"),
        (["c++: fatal error: Killed signal terminated program cc1plus"], "MAX_JOBS=1"),
        (["x.cpp:1: #error C++20 or later compatible compiler is required to use ATen."], "C++20 or later"),
        (["ERROR: No matching distribution found for torch==9.9"], "No matching distribution found for torch==9.9"),
    ],
)
def test_pip_and_compiler_logs_become_one_line(log, expected):
    message = setup_env.diagnose(["noise"] * 50 + log)
    assert expected in message and "\n" not in message


def test_low_disk_space_is_one_clear_line(tmp_path):
    with pytest.raises(setup_env.SetupError, match=r"GiB free .* needs about 999999 GiB"):
        setup_env.check_disk(tmp_path, 999999, "a test")


def test_wrong_python_is_one_clear_line(monkeypatch, tmp_path):
    # pretend depthbench needed a Python that no interpreter here has
    monkeypatch.setattr(setup_env, "PYTHON_VERSION", (3, 99))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("PYTHON", raising=False)
    with pytest.raises(setup_env.SetupError) as error:
        setup_env.find_python()
    assert "needs Python 3.99" in str(error.value) and "\n" not in str(error.value)
    monkeypatch.setenv("PYTHON", sys.executable)  # a $PYTHON of the wrong version is refused too
    with pytest.raises(setup_env.SetupError, match="needs Python 3.99"):
        setup_env.find_python()


def test_a_second_setup_is_a_no_op():
    env = {**os.environ, "DEPTHBENCH_VENV": str(Path(sys.executable).parent.parent)}
    for attempt in ("first", "second"):  # the first brings a stale environment up to date, if it is stale
        out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=900, env=env)
        assert out.returncode == 0, out.stderr
    assert "nothing to do" in out.stdout, out.stdout


def test_setup_installs_every_font_package_the_glyphs_dataset_renders():
    """make setup cannot import the package before the venv exists, so it keeps its own list of the glyphs
    dataset's Debian font packages: it must be the dataset's (a font added there and not here would fail on a fresh
    machine only)."""
    from harness.tasks.glyphs import FONT_DEBIAN_PACKAGES

    assert tuple(sorted(setup_env.GLYPH_FONT_PACKAGES)) == FONT_DEBIAN_PACKAGES


def test_concurrent_steps_say_whole_lines(monkeypatch):
    """Setup's steps run in threads; each message is one whole line (it lost a newline: "...while mmcv
    builds)setup: downloading..."). The stream lets a second writer in between any two writes of the first."""
    import threading

    class Interleaving:
        def __init__(self):
            self.text, self.gate = "", threading.Barrier(2)

        def write(self, text):
            self.text += text
            if not text.endswith("\n"):  # a message without its newline: let the other thread write now
                try:
                    self.gate.wait(timeout=1)
                except threading.BrokenBarrierError:
                    pass
            return len(text)

        def flush(self):
            pass

    stream = Interleaving()
    monkeypatch.setattr(sys, "stdout", stream)
    threads = [
        threading.Thread(target=setup_env.say, args=(m,))
        for m in ("installing the pinned stack", "downloading the timm sdist")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(stream.text.splitlines()) == [
        "setup: downloading the timm sdist",
        "setup: installing the pinned stack",
    ], stream.text


def test_the_mmcv_build_estimate_is_the_measured_one():
    """2.5 min on a fresh 2-core machine (27 Nov 2026); setup announced ~7."""
    line = setup_env.mmcv_build_estimate(2, cuda=False)
    minutes = float(line.split("~")[1].split(" min")[0])
    assert 2.0 <= minutes <= 3.5 and "2 idle cores" in line
    assert "~7 min" not in setup_env.mmcv_build_estimate(2, cuda=True)
