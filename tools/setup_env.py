#!/usr/bin/env python3
"""Create or update depthbench's virtual environment (``make setup``).

Idempotent: every step checks what is already there and skips itself.  The one long step, building
mmcv 2.1.0 with compiled ops from its sdist, runs once per (mmcv, torch, CUDA, Python) combination;
the wheel is cached under ``~/.cache/depthbench/wheels`` (``DEPTHBENCH_CACHE`` overrides) and reused.

Stdlib only: this runs before the venv exists.  Every failure ends in one ``setup: error:`` line that
says what is wrong and what to do; the full tool output is kept in ``.venv/setup-logs/``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("DEPTHBENCH_VENV", ROOT / ".venv"))
VPY = VENV / "bin" / "python"
LOGS = VENV / "setup-logs"
CACHE = Path(os.environ.get("DEPTHBENCH_CACHE", Path.home() / ".cache" / "depthbench"))
STAMP = VENV / ".depthbench-setup.json"

PYTHON_VERSION = (3, 11)
TORCH, TORCHVISION = "2.14.1", "0.29.1"
MMCV = "2.1.0"
MIN_FREE_GB_FRESH = 12  # torch's CUDA build alone is ~5.5 GB, the mmcv build needs ~2 GB of scratch
STAMP_INPUTS = ["requirements/base.txt", "requirements/lock.txt", "pyproject.toml", "tools/setup_env.py"]
# The modules a finished environment must import; the fast path re-checks them on every run.
SMOKE_IMPORTS = (
    "import torch, torchvision, timm, accelerate, deepspeed, mmengine, mmcv, mmcv.ops, "
    "mmdet, mmseg, pandas, matplotlib, harness, models"
)


class SetupError(Exception):
    """One line for the user; raised anywhere, printed once by main()."""


_SAY = threading.Lock()


def say(msg: str) -> None:
    """One whole line: setup's steps run in threads (:func:`concurrently`), and print() writes a message and its
    newline as two writes, which two threads interleaved ("...while mmcv builds)setup: downloading...")."""
    with _SAY:
        sys.stdout.write(f"setup: {msg}\n")
        sys.stdout.flush()


# --------------------------------------------------------------------------- helpers
def run_logged(cmd: list[str], log_name: str, env: dict | None = None, cwd: Path | None = None, on_line=None) -> None:
    """Run ``cmd``, stream its output to a log file (and to ``on_line``), raise SetupError on failure."""
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{log_name}.log"
    with open(log, "w") as fh:
        fh.write("$ " + " ".join(cmd) + "\n")
        fh.flush()
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            bufsize=1,
        )
        tail: list[str] = []
        for line in proc.stdout:
            fh.write(line)
            tail = (tail + [line.rstrip()])[-400:]
            if on_line:
                on_line(line.rstrip())
        rc = proc.wait()
    if rc != 0:
        raise SetupError(f"{log_name} failed: {diagnose(tail)} (full log: {log})")


def diagnose(lines: list[str]) -> str:
    """Turn the tail of a pip/compiler log into the one line a user needs."""
    text = "\n".join(lines)
    known = [
        (
            r"No space left on device",
            "no space left on device; free disk space (or set DEPTHBENCH_CACHE/TMPDIR "
            "to a bigger disk) and re-run make setup",
        ),
        (r"(Could not find a version that satisfies|No matching distribution found)[^\n]*", None),
        (
            r"(Failed to establish a new connection|Temporary failure in name resolution|"
            r"ConnectionError|Read timed out)",
            "cannot reach the package index; check the network or PIP_INDEX_URL and re-run make setup",
        ),
        (
            r"Killed|internal compiler error: Killed|out of memory",
            "the compiler ran out of memory; re-run with MAX_JOBS=1 make setup",
        ),
        (r"fatal error: Python\.h", "Python headers missing; install python3.11-dev (Debian/Ubuntu) and re-run"),
        (r"#error C\+\+\d+ or later compatible compiler is required[^\n]*", None),
        (r"(error: command '[^']+' failed[^\n]*)", None),
    ]
    for pattern, message in known:
        m = re.search(pattern, text)
        if m:
            return message or m.group(0).strip()
    for line in reversed(lines):  # fall back on the last line that says "error"
        if re.search(r"\berror\b", line, re.I) and len(line) < 300:
            return line.strip()
    return lines[-1].strip() if lines else "no output"


def venv_python_version() -> tuple[int, int] | None:
    if not VPY.exists():
        return None
    out = subprocess.run(
        [str(VPY), "-c", "import sys;print(sys.version_info[0], sys.version_info[1])"], capture_output=True, text=True
    )
    if out.returncode != 0:
        return None
    major, minor = out.stdout.split()
    return int(major), int(minor)


def venv_query(code: str) -> str | None:
    """Run ``code`` in the venv and return the last line it printed, or None if it fails.

    Only the last line: importing mmcv/mmengine makes DeepSpeed print an accelerator warning to stdout.
    """
    out = subprocess.run([str(VPY), "-c", code], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    lines = out.stdout.strip().splitlines()
    return (lines[-1].strip() if lines else "") if out.returncode == 0 else None


def installed_version(dist: str) -> str | None:
    return venv_query(f"import importlib.metadata as m; print(m.version({dist!r}))")


def pip(*args: str, log_name: str, env: dict | None = None) -> None:
    run_logged([str(VPY), "-m", "pip", "--disable-pip-version-check", "--no-input", *args], log_name, env=env)


def stamp_digest() -> str:
    h = hashlib.sha256()
    for rel in STAMP_INPUTS:
        h.update((ROOT / rel).read_bytes())
    return h.hexdigest()


# --------------------------------------------------------------------------- checks
def find_python() -> str:
    """The interpreter to build the venv with: $PYTHON, this one if it is 3.11, or python3.11 on PATH."""
    want = "%d.%d" % PYTHON_VERSION
    candidates = [
        os.environ.get("PYTHON"),
        sys.executable if sys.version_info[:2] == PYTHON_VERSION else None,
        shutil.which(f"python{want}"),
    ]
    for cand in filter(None, candidates):
        out = subprocess.run(
            [cand, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True
        )
        if out.returncode == 0 and out.stdout.strip() == want:
            return cand
    raise SetupError(
        f"depthbench needs Python {want} (this is {sys.version.split()[0]}); install python{want} "
        f"(with its venv module) or set PYTHON=/path/to/python{want}"
    )


def check_disk(path: Path, need_gb: float, what: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(path).free / 2**30
    if free < need_gb:
        raise SetupError(
            f"only {free:.1f} GiB free at {path}, {what} needs about {need_gb:.0f} GiB; "
            f"free some space and re-run make setup"
        )


def check_compiler() -> str:
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not cxx:
        raise SetupError(
            "no C++ compiler found; building mmcv's ops needs g++ >= 10 "
            "(Debian/Ubuntu: apt-get install g++) and Python headers (python3.11-dev)"
        )
    probe = subprocess.run(
        [cxx, "-std=c++20", "-x", "c++", "-fsyntax-only", "-"],
        input="#include <concepts>\n",
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        raise SetupError(
            f"{cxx} cannot compile C++20, which torch {TORCH}'s headers require; install g++ >= 10 or set CXX to one"
        )
    include = venv_query("import sysconfig; print(sysconfig.get_paths()['include'])")
    if include and not (Path(include) / "Python.h").exists():
        raise SetupError(
            f"Python.h not found in {include}; install the Python {PYTHON_VERSION[0]}."
            f"{PYTHON_VERSION[1]} headers (Debian/Ubuntu: python3.11-dev)"
        )
    return cxx


# --------------------------------------------------------------------------- steps
def ensure_venv() -> None:
    version = venv_python_version()
    if version == PYTHON_VERSION:
        say(f"venv {VENV} exists (Python {version[0]}.{version[1]})")
        return
    if VENV.exists() and version is not None:
        raise SetupError(
            f"{VENV} uses Python {version[0]}.{version[1]}, depthbench needs "
            f"{PYTHON_VERSION[0]}.{PYTHON_VERSION[1]}; remove it (rm -rf {VENV}) and re-run make setup"
        )
    check_disk(VENV.parent, MIN_FREE_GB_FRESH, "a fresh environment")
    python = find_python()
    say(f"creating {VENV} with {python}")
    if VENV.exists():
        shutil.rmtree(VENV)  # a half-made venv without a working python
    run_logged([python, "-m", "venv", str(VENV)], "venv")


def ensure_torch() -> None:
    have_torch, have_tv = installed_version("torch"), installed_version("torchvision")
    # "compatible" = same minor release: a user-installed 2.14.x with its torchvision 0.29.x is kept
    if (
        have_torch
        and have_tv
        and have_torch.split("+")[0].rsplit(".", 1)[0] == TORCH.rsplit(".", 1)[0]
        and have_tv.split("+")[0].rsplit(".", 1)[0] == TORCHVISION.rsplit(".", 1)[0]
    ):
        say(f"torch {have_torch} / torchvision {have_tv} already installed, keeping them")
        return
    say(f"installing torch {TORCH} + torchvision {TORCHVISION} (CUDA build, runs on CPU too; ~5.5 GB, a few minutes)")
    pip("install", f"torch=={TORCH}", f"torchvision=={TORCHVISION}", log_name="install-torch")


def ensure_build_tools() -> None:
    # setuptools<82 keeps pkg_resources, which mmengine 0.10.7 still imports at run time.
    say("installing build tools (setuptools<82, wheel, ninja, psutil, numpy)")
    # numpy too: torch imports it in the mmcv build, which runs beside the install of the rest of the stack
    pip(
        "install",
        "-c",
        str(ROOT / "requirements/lock.txt"),
        "setuptools<82",
        "wheel",
        "ninja",
        "psutil",
        "packaging",
        "numpy",
        log_name="install-build-tools",
    )


def mmcv_build_config() -> tuple[str, dict]:
    """(cache key, extra environment) for building mmcv against the venv's torch."""
    info = json.loads(
        venv_query(
            "import json, sys, torch; c = torch.cuda.is_available(); print(json.dumps(dict("
            "torch=torch.__version__.split('+')[0], cuda=torch.version.cuda, gpu=c, "
            "cap=(torch.cuda.get_device_capability() if c else None), py='%d%d' % sys.version_info[:2])))"
        )
        or "{}"
    )
    if not info:
        raise SetupError("torch does not import in the venv; remove .venv and re-run make setup")
    want_cuda = os.environ.get("DEPTHBENCH_MMCV_CUDA")
    nvcc = shutil.which("nvcc")
    use_cuda = (want_cuda == "1") or (want_cuda is None and nvcc is not None and info["gpu"])
    env: dict = {}
    if use_cuda:
        if not nvcc:
            raise SetupError(
                "DEPTHBENCH_MMCV_CUDA=1 but nvcc is not on PATH; install the CUDA toolkit "
                f"{info['cuda']} or unset DEPTHBENCH_MMCV_CUDA"
            )
        nvcc_out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
        m = re.search(r"release (\d+)\.(\d+)", nvcc_out)
        if not m or m.group(1) != str(info["cuda"]).split(".")[0]:
            raise SetupError(
                f"nvcc ({m.group(0) if m else 'unknown version'}) does not match torch's CUDA "
                f"{info['cuda']}; put a CUDA {info['cuda']} nvcc on PATH, or set "
                "DEPTHBENCH_MMCV_CUDA=0 to build CPU-only ops"
            )
        arch = os.environ.get("TORCH_CUDA_ARCH_LIST") or "%d.%d" % tuple(info["cap"] or (9, 0))
        env.update(FORCE_CUDA="1", TORCH_CUDA_ARCH_LIST=arch)
        flavour = (
            f"cu{str(info['cuda']).replace('.', '')}-sm{arch.replace('.', '').replace(';', '_').replace(' ', '_')}"
        )
    else:
        env.update(FORCE_CUDA="0")
        flavour = "cpu"
    key = f"mmcv-{MMCV}_torch-{info['torch']}_{flavour}_cp{info['py']}"
    return key, env


MMCV_OPS_PROBE = "import mmcv, mmcv.ops; from mmcv.ops import nms; print(mmcv.__version__)"


def mmcv_ops_ok() -> bool:
    return venv_query(MMCV_OPS_PROBE) == MMCV


def mmcv_ops_error() -> str:
    out = subprocess.run([str(VPY), "-c", MMCV_OPS_PROBE], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    lines = [ln for ln in out.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"mmcv {out.stdout.strip().splitlines()[-1:]} is not {MMCV}"


def mmcv_wheel() -> Path | None:
    """The cached mmcv wheel for this venv's torch (built first when missing); None when mmcv is installed."""
    if mmcv_ops_ok():
        say(f"mmcv {MMCV} with compiled ops already installed")
        return None
    key, build_env = mmcv_build_config()
    wheel_dir = CACHE / "wheels" / key
    wheels = sorted(wheel_dir.glob(f"mmcv-{MMCV}-*.whl"))
    if not wheels:
        build_mmcv(wheel_dir, build_env)
        wheels = sorted(wheel_dir.glob(f"mmcv-{MMCV}-*.whl"))
    return wheels[-1]


def ensure_mmcv(wheel: Path | None = None) -> None:
    wheel = wheel or mmcv_wheel()
    if wheel is None:
        return
    wheels = [wheel]
    say(f"installing cached mmcv wheel {wheels[-1]}")
    pip("install", "--no-deps", "--force-reinstall", str(wheels[-1]), log_name="install-mmcv")
    pip("install", "-c", str(ROOT / "requirements/lock.txt"), str(wheels[-1]), log_name="install-mmcv-deps")
    if not mmcv_ops_ok():
        raise SetupError(
            f"mmcv installed from {wheels[-1]} but mmcv.ops does not load ({mmcv_ops_error()}); "
            f"if the wheel is broken, delete it and re-run make setup to rebuild it"
        )


def patch_mmcv_setup(setup_py: Path) -> None:
    """Make mmcv 2.1.0's setup.py build on torch 2.14 (see README 'Why mmcv is built here')."""
    src = setup_py.read_text()
    # pkg_resources is gone from setuptools >= 82; packaging/importlib.metadata do the same job.
    src = src.replace(
        "from pkg_resources import DistributionNotFound, get_distribution, parse_version",
        "from importlib.metadata import PackageNotFoundError as DistributionNotFound\n"
        "from importlib.metadata import distribution as get_distribution\n"
        "from packaging.version import parse as parse_version",
    )
    # torch 2.14's ATen headers refuse anything below C++20.
    src = re.sub(r"-std=c\+\+1[47]", "-std=c++20", src)
    if "-std=c++20" not in src or "pkg_resources" in src:
        raise SetupError(f"could not patch {setup_py}: the mmcv {MMCV} sdist is not the expected one")
    setup_py.write_text(src)


# The CPU build (77 op files against torch's precompiled headers) took 2.5 min wall on a fresh 2-core machine
# (27 Nov 2026): ~5 core-minutes, shared by the build's jobs.
MMCV_CPU_BUILD_CORE_MINUTES = 5.0


def mmcv_build_estimate(jobs: int, cuda: bool) -> str:
    """How long the mmcv build will take, for the line that announces it."""
    if cuda:
        return "the CUDA kernels take longer than the CPU build (not timed here)"
    minutes = max(1.0, MMCV_CPU_BUILD_CORE_MINUTES / max(jobs, 1))
    return f"~{minutes:.1f} min on {jobs} idle cores, longer on a busy machine"


def build_mmcv(wheel_dir: Path, build_env: dict) -> None:
    check_compiler()
    check_disk(CACHE, 3, "the mmcv build")
    sdist_dir = CACHE / "sdist"
    sdist = sdist_dir / f"mmcv-{MMCV}.tar.gz"
    if not sdist.exists():
        say(f"downloading the mmcv {MMCV} sdist")
        pip(
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--no-build-isolation",
            f"mmcv=={MMCV}",
            "-d",
            str(sdist_dir),
            log_name="download-mmcv",
        )
    jobs = os.environ.get("MAX_JOBS") or str(os.cpu_count() or 2)
    cuda = build_env.get("FORCE_CUDA") == "1"
    estimate = mmcv_build_estimate(int(jobs) if jobs.isdigit() else 1, cuda)
    say(
        f"building mmcv {MMCV} with compiled ops ({'CUDA arch ' + build_env['TORCH_CUDA_ARCH_LIST'] if cuda else 'CPU'}"
        f", {jobs} jobs) - once per torch/CUDA/Python version; {estimate}"
    )
    with tempfile.TemporaryDirectory(prefix="depthbench-mmcv-") as tmp:
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp, filter="data")
        src = Path(tmp) / f"mmcv-{MMCV}"
        patch_mmcv_setup(src / "setup.py")
        # distutils lets CFLAGS/CXXFLAGS *replace* Python's default "-DNDEBUG -g -fwrapv -O3 -Wall", so keep
        # those and append -g0: the same optimised code without debug info, about twice as fast to build.
        default_flags = venv_query("import sysconfig; print(sysconfig.get_config_var('CFLAGS') or '')") or "-O3"
        flags = f"{default_flags} {os.environ.get('CFLAGS', '')} -g0"
        if not cuda:  # every op file spends ~80 % of its compile time parsing torch's headers: parse them once
            flags += precompiled_torch_header(Path(tmp) / "pch", src, flags)
        env = dict(os.environ, **build_env, MMCV_WITH_OPS="1", MAX_JOBS=jobs, CFLAGS=flags, CXXFLAGS=flags)
        start = time.time()
        last_report = [0.0]

        def progress(line: str) -> None:
            m = re.match(r"\s*\[(\d+)/(\d+)\]\s+\S+.*?(\S+\.(?:cpp|cu))\b", line)
            if m and (time.time() - last_report[0] > 20 or m.group(1) == m.group(2)):
                last_report[0] = time.time()
                done, total = int(m.group(1)), int(m.group(2))
                elapsed = time.time() - start
                eta = elapsed / done * (total - done)
                say(
                    f"  mmcv build [{done}/{total}] {Path(m.group(3)).name}  "
                    f"{elapsed / 60:.1f} min elapsed, ~{eta / 60:.0f} min left"
                )

        out = Path(tmp) / "dist"
        run_logged(
            [str(VPY), "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v", "-w", str(out), str(src)],
            "build-mmcv",
            env=env,
            on_line=progress,
        )
        built = sorted(out.glob(f"mmcv-{MMCV}-*.whl"))
        if not built:
            raise SetupError(f"the mmcv build produced no wheel (full log: {LOGS / 'build-mmcv.log'})")
        wheel_dir.mkdir(parents=True, exist_ok=True)
        partial = wheel_dir / (built[0].name + ".partial")
        shutil.copy2(built[0], partial)
        partial.rename(wheel_dir / built[0].name)  # atomic: a killed copy never looks like a wheel
        say(f"built mmcv in {(time.time() - start) / 60:.1f} min, cached as {wheel_dir / built[0].name}")


def precompiled_torch_header(folder: Path, src: Path, flags: str) -> str:
    """Build a GCC precompiled header of torch's ``<torch/types.h>`` (what mmcv's ``pytorch_cpp_helper.hpp`` includes
    first) with exactly the flags, include paths and macros torch's cpp_extension gives each op file, and return
    the flags that make every compile start from it (`-include` + `-Winvalid-pch`). The objects are the same code:
    a precompiled header is GCC's cache of the parsed header, used only when the flags match (otherwise GCC warns
    and parses the header as before). Measured here: 10.4 s -> 2.2 s per op file, 25 s once for the header; the
    CPU build of mmcv's 77 files drops from ~9 min to ~3 min on 2 cores. CUDA builds (nvcc) are left as they are.
    Returns "" (no precompiled header) when building it fails."""
    cxx = os.environ.get("CXX") or shutil.which("c++") or "c++"
    paths = json.loads(
        venv_query(
            "import json, sys, sysconfig; from torch.utils.cpp_extension import include_paths; "
            "print(json.dumps(include_paths() + [sysconfig.get_paths()['include']]))"
        )
        or "[]"
    )
    includes = [str(src / "mmcv" / "ops" / "csrc" / "common"), *paths[:-1], str(VENV / "include"), *paths[-1:]]
    header = folder / "depthbench_torch_pch.h"
    folder.mkdir(parents=True, exist_ok=True)
    header.write_text("#include <torch/types.h>\n#include <vector>\n")
    cmd = [
        cxx,
        *flags.split(),
        "-fPIC",
        *(f"-I{i}" for i in includes),
        "-std=c++20",
        "-DTORCH_API_INCLUDE_EXTENSION_H",
        "-DTORCH_EXTENSION_NAME=_ext",
        "-x",
        "c++-header",
        str(header),
        "-o",
        f"{header}.gch",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        say("  (torch's precompiled header did not build; compiling without it)")
        return ""
    return f" -include {header} -Winvalid-pch"


def install_locked_packages() -> None:
    """Every pinned package of requirements/lock.txt, without resolving (the lock is the resolution): runs while
    mmcv builds, and never asks the index for mmcv (mmdet requires it; it is installed from our wheel after)."""
    say("installing the pinned stack (requirements/lock.txt, while mmcv builds)")
    pip("install", "--no-deps", "-r", str(ROOT / "requirements/lock.txt"), log_name="install-locked")


def ensure_packages() -> None:
    say("checking the stack against requirements/base.txt (versions from requirements/lock.txt)")
    pip(
        "install",
        "-r",
        str(ROOT / "requirements/base.txt"),
        "-c",
        str(ROOT / "requirements/lock.txt"),
        log_name="install-packages",
    )
    say("installing depthbench itself (editable)")
    pip("install", "--no-deps", "--no-build-isolation", "-e", str(ROOT), log_name="install-depthbench")


def concurrently(*steps) -> list:
    """Run the setup steps side by side (threads: each waits on a subprocess), all to the end; re-raise the first
    failure. The mmcv build keeps both cores busy while pip and apt wait on the disk and the network."""
    with ThreadPoolExecutor(len(steps)) as pool:
        futures = [pool.submit(step) for step in steps]
        results, errors = [], []
        for future in futures:
            try:
                results.append(future.result())
            except BaseException as e:  # let every step finish or fail before reporting
                results.append(None)
                errors.append(e)
    if errors:
        raise errors[0]
    return results


def system_packages() -> None:
    """What comes from Debian and the timm sdist (independent of the venv's packages)."""
    ensure_timm_tests()
    ensure_chromium()
    ensure_kjv_bible()
    ensure_glyph_fonts()


def pinned_version(dist: str) -> str:
    """The exact version of ``dist`` in requirements/lock.txt."""
    m = re.search(rf"^{re.escape(dist)}==(\S+)", (ROOT / "requirements/lock.txt").read_text(), re.M | re.I)
    if not m:
        raise SetupError(f"requirements/lock.txt pins no {dist} version; add '{dist}==X.Y.Z' to it")
    return m.group(1)


def timm_tests_dir(version: str) -> Path:
    """Where timm's own test-suite (its sdist's ``tests/``) is unpacked; tests/models/timm_contract runs it from
    there."""
    return CACHE / "timm-tests" / f"timm-{version}" / "tests"


def ensure_timm_tests() -> None:
    """Unpack the pinned timm's ``tests/`` from its sdist (the PyPI wheel has no tests) into the cache.

    ``tests/models/timm_contract`` runs timm's unchanged ``tests/test_models.py`` against depthbench's models.
    """
    version = pinned_version("timm")
    target = timm_tests_dir(version)
    if (target / "test_models.py").exists():
        return
    sdist_dir = CACHE / "sdist"
    sdist = sdist_dir / f"timm-{version}.tar.gz"
    if not sdist.exists():
        say(f"downloading the timm {version} sdist (for timm's own model tests)")
        pip(
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"timm=={version}",
            "-d",
            str(sdist_dir),
            log_name="download-timm-sdist",
        )
    prefix = f"timm-{version}/tests/"
    with tarfile.open(sdist) as tar, tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        if not any(m.name == prefix + "test_models.py" for m in members):
            raise SetupError(f"{sdist} has no {prefix}test_models.py; delete it and re-run make setup")
        tar.extractall(tmp, members=members, filter="data")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(target, ignore_errors=True)
        (Path(tmp) / prefix).rename(target)  # atomic: a half-unpacked suite never looks complete
    say(f"timm {version}'s test-suite unpacked to {target}")


def ensure_debian_packages(command: str, packages: list[str], purpose: str) -> None:
    """Install Debian ``packages`` with apt when ``command`` is missing and we are root (refreshing a stale
    package list once); otherwise say how. Used for what tests need from Debian rather than PyPI."""
    if not shutil.which(command):
        install_debian_packages(packages, purpose)


def install_debian_packages(packages: list[str], purpose: str) -> None:
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        say(f"{packages[0]} is missing: {purpose} needs it (Debian/Ubuntu: apt-get install {' '.join(packages)})")
        return
    say(f"installing {' '.join(packages)} with apt ({purpose})")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "--no-install-recommends", *packages]
    try:
        run_logged(install, f"apt-{packages[0]}", env=env)
    except SetupError:  # a stale package list: refresh it once and retry
        run_logged(["apt-get", "update"], "apt-update", env=env)
        run_logged(install, f"apt-{packages[0]}", env=env)


def ensure_chromium() -> None:
    """Debian's chromium for the HTML report's browser test (playwright drives it; its own browser download
    cannot work without internet)."""
    ensure_debian_packages("chromium", ["chromium"], "the HTML report's headless browser test")


def ensure_kjv_bible() -> None:
    """Debian's bible-kjv (the King James Bible, public domain, and the ``bible`` program that decompresses it):
    the embedded real-text corpus of the language-model presets and tests (harness/tasks/lm.py)."""
    ensure_debian_packages("bible", ["bible-kjv", "bible-kjv-text"], "the embedded language-model corpus")


# the typefaces the embedded glyphs dataset renders (harness/tasks/glyphs.py FONT_PACKAGES; a test keeps the two
# lists equal: setup runs before the venv exists, so it cannot import the package)
GLYPH_FONT_PACKAGES = (
    "fonts-adf-accanthis",
    "fonts-anonymous-pro",
    "fonts-cabin",
    "fonts-cantarell",
    "fonts-cmu",
    "fonts-comfortaa",
    "fonts-crosextra-caladea",
    "fonts-crosextra-carlito",
    "fonts-dancingscript",
    "fonts-dejavu-core",
    "fonts-dejavu-extra",
    "fonts-ebgaramond",
    "fonts-firacode",
    "fonts-freefont-ttf",
    "fonts-gfs-didot",
    "fonts-go",
    "fonts-hack",
    "fonts-inconsolata",
    "fonts-jura",
    "fonts-lato",
    "fonts-league-spartan",
    "fonts-liberation2",
    "fonts-linuxlibertine",
    "fonts-noto-mono",
    "fonts-oldstandard",
    "fonts-open-sans",
    "fonts-paratype",
    "fonts-quicksand",
    "fonts-roboto-unhinted",
    "fonts-sil-andika",
    "fonts-sil-charis",
    "fonts-sil-gentium",
    "fonts-stix",
    "fonts-urw-base35",
    "fonts-yanone-kaffeesatz",
)


def ensure_glyph_fonts() -> None:
    """Debian's font packages for the glyphs dataset (`depthbench claims`, tests/harness/tasks/test_glyphs.py):
    82 MB of .deb files, ~20 s with apt; only the missing ones are installed."""
    if not shutil.which("dpkg-query"):
        say("not a Debian system: the glyphs dataset needs these font packages: " + " ".join(GLYPH_FONT_PACKAGES))
        return
    out = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${Status}\n", *GLYPH_FONT_PACKAGES], capture_output=True, text=True
    ).stdout
    installed = {line.split()[0] for line in out.splitlines() if line.endswith(" installed")}
    missing = [p for p in GLYPH_FONT_PACKAGES if p not in installed]
    if missing:
        install_debian_packages(missing, "the embedded glyphs dataset")


def smoke_test() -> None:
    out = subprocess.run(
        [str(VPY), "-c", SMOKE_IMPORTS],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ, DS_ACCELERATOR="cpu"),
    )
    if out.returncode != 0:
        last = [ln for ln in out.stderr.strip().splitlines() if ln.strip()][-1:] or ["unknown error"]
        raise SetupError(
            f"the environment does not import: {last[0]}; re-run make setup (or rm -rf {VENV} for a clean one)"
        )


def main() -> int:
    start = time.time()
    try:
        if STAMP.exists() and venv_python_version() == PYTHON_VERSION:
            stamp = json.loads(STAMP.read_text())
            if stamp.get("digest") == stamp_digest():
                smoke_test()
                ensure_timm_tests()
                ensure_chromium()
                ensure_kjv_bible()
                ensure_glyph_fonts()
                say(f"environment up to date ({VENV}); nothing to do ({time.time() - start:.0f} s)")
                return 0
        ensure_venv()
        ensure_torch()
        ensure_build_tools()
        wheel, _, _ = concurrently(mmcv_wheel, install_locked_packages, system_packages)
        ensure_mmcv(wheel)
        ensure_packages()
        smoke_test()
        STAMP.write_text(json.dumps({"digest": stamp_digest(), "finished": time.strftime("%Y-%m-%d %H:%M:%S")}))
        say(f"done in {(time.time() - start) / 60:.1f} min; activate with: source {VENV}/bin/activate")
        return 0
    except SetupError as e:
        print(f"setup: error: {e}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print("setup: interrupted; re-run make setup to continue where it stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
