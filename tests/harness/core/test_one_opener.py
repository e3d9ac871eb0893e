"""The one opener (issue 54 item 1): outside harness/core, no module opens a file by another route than
harness.core.files -- no ``open()``, ``Path.open``/``read_bytes``/``read_text``, ``np.load``, ``torch.load`` or
``PIL.Image.open`` -- except where :data:`ALLOWED` says why (a file of this repository or of the kernel, the one
checkpoint loader, the one image decoder, ...). A static check over the source (ast): a new reader of a run's,
record's or data root's file that bypasses the opener fails here, in review, before anyone crafts a file for it."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("harness", "downstream", "results", "slurm", "models")
# receivers of a ``.open(...)`` that open no file of ours by path: modules and objects of another kind
NOT_A_PATH = {"os", "tarfile", "zipfile", "gzip", "io", "webbrowser", "archive", "RunDir", "lzma", "bz2"}

# (file, route) -> (how many, why it may bypass harness.core.files). A count is an upper bound: an entry whose calls
# were moved to the opener stays harmless until someone tidies it.
ALLOWED = {
    # files of this repository or of the system: code and packaged assets, not data a user receives
    ("harness/assets/lm_eval_tasks/depthbench_tiny/utils.py", ".read_text()"): (
        1,
        "lm-eval task asset: a file of this repository",
    ),
    ("slurm/submit.py", ".read_text()"): (
        2,
        "the sbatch template of this repository, and a config file (code the "
        "user names, parsed with ast, never executed)",
    ),
    ("results/compare.py", ".read_text()"): (1, "a config file (code the user names), parsed for its fields"),
    ("models/transnext.py", ".read_bytes()"): (
        1,
        "the CPU kernel's C++ source, of this repository: hashed for its build's name",
    ),
    ("harness/engine/launch.py", "open()"): (1, "/proc/self/maps: the kernel's"),
    ("harness/measure/bench.py", "open()"): (1, "/proc/cpuinfo: the kernel's"),
    ("harness/measure/preflight/environment.py", "open()"): (1, "/proc/cpuinfo: the kernel's"),
    ("results/claims_run.py", "open()"): (1, "/proc/cpuinfo: the kernel's"),
    ("harness/engine/backends.py", "open()"): (1, "sysfs local_cpulist of the rank's GPU: the kernel's"),
    ("harness/tasks/glyphs.py", ".read_bytes()"): (
        3,
        "Debian's installed font files, hashed into the glyph cache's key (system files, not a data root)",
    ),
    ("harness/measure/preflight/allreduce.py", ".read_text()"): (
        1,
        "NCCL's own debug log, in a temporary folder this process made",
    ),
    # the one loader of a kind: weights-only, the allow-list of globals, the pixel budget
    ("harness/engine/checkpoint.py", "torch.load"): (
        2,
        "the one checkpoint reader: weights_only=True, SAFE_GLOBALS; it checks for a regular file first",
    ),
    ("harness/engine/checkpoint.py", "open()"): (
        1,
        "the checksum of the file read_checkpoint then loads (a regular file, checked there)",
    ),
    ("downstream/mmengine_compat.py", "torch.load"): (
        1,
        "MMEngine's checkpoint loader, weights-only with its allow-list (read_any_checkpoint checks the file first)",
    ),
    ("harness/tasks/image_files.py", "Image.open"): (
        1,
        "the one image decoder (bytes read by read_image_bytes or a shard; the pixel budget checked on the header)",
    ),
    # written by this process, in a folder it made
    ("harness/workflows/demo.py", "open()"): (2, "demo's own logs in the output folder it creates"),
    ("harness/workflows/demo.py", ".read_text()"): (3, "demo's own logs and CPU-usage file, written by its runs"),
    # the device pipeline's header parse and its CPU fallback decode (bytes from ImageFolder/ShardDataset.read;
    # the budget: image_files.pixel_budget)
    ("harness/tasks/image_device.py", "Image.open"): (
        2,
        "decodes bytes already read through the opener, within the one pixel budget",
    ),
}


def _route(call: ast.Call) -> str | None:
    """How ``call`` opens a file, when it is one of the routes the opener replaces."""
    func = call.func
    if isinstance(func, ast.Name):
        return "open()" if func.id == "open" else None
    if not isinstance(func, ast.Attribute):
        return None
    receiver = func.value.id if isinstance(func.value, ast.Name) else getattr(func.value, "attr", None)
    if func.attr in ("read_bytes", "read_text") and receiver != "files":  # harness.core.files.read_text is the opener
        return f".{func.attr}()"
    if func.attr == "load" and receiver in ("np", "numpy", "torch"):
        return f"{receiver}.load"
    if func.attr == "open" and receiver == "Image":
        return "Image.open"
    if func.attr == "open" and receiver not in NOT_A_PATH:
        return "Path.open"
    return None


def routes(root: Path = ROOT) -> Counter:
    """(file, route) -> calls, over every module outside harness/core."""
    found = Counter()
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            name = path.relative_to(root).as_posix()
            if name.startswith("harness/core/"):
                continue
            for node in ast.walk(ast.parse(path.read_text(), name)):
                if isinstance(node, ast.Call) and (route := _route(node)):
                    found[name, route] += 1
    return found


def test_no_module_outside_core_opens_a_file_by_another_route():
    bypasses = [
        f"{name}: {count} x {route}"
        for (name, route), count in sorted(routes().items())
        if count > ALLOWED.get((name, route), (0, ""))[0]
    ]
    assert not bypasses, (
        "these open files outside harness.core.files (open_file, read_bytes, read_text, read_json, "
        "read_yaml, read_npy, atomic_write): route them through it, or add an ALLOWED entry that "
        "says why:\n" + "\n".join(bypasses)
    )


def test_every_allowed_bypass_says_why():
    assert all(reason.strip() for count, reason in ALLOWED.values() if count), ALLOWED


def test_the_check_sees_each_route(tmp_path):
    """The scan itself can fail: each route, planted in a module, is found."""
    (tmp_path / "harness" / "tasks").mkdir(parents=True)
    (tmp_path / "harness" / "core").mkdir()
    (tmp_path / "harness" / "tasks" / "planted.py").write_text(
        "import numpy as np, torch\nfrom PIL import Image\nfrom pathlib import Path\n"
        "open('x')\nPath('x').read_bytes()\nPath('x').read_text()\nnp.load('x')\ntorch.load('x')\n"
        "Image.open('x')\nPath('x').open()\nfiles.read_text('x')\n"
    )
    (tmp_path / "harness" / "core" / "opener.py").write_text("open('x')\n")
    for package in PACKAGES[1:]:
        (tmp_path / package).mkdir()
    assert routes(tmp_path) == Counter(
        {
            ("harness/tasks/planted.py", r): 1
            for r in ("open()", ".read_bytes()", ".read_text()", "np.load", "torch.load", "Image.open", "Path.open")
        }
    )


CLUSTER_READERS = [
    "slurm/jobs.py",
    "slurm/restart.py",
    "harness/engine/watchdog.py",
    "harness/engine/switches.py",
    "harness/core/faults.py",
]


RAW_FILE_CALLS = {"read_text", "read_bytes", "write_text", "write_bytes", "is_file", "exists", "open"}


@pytest.mark.parametrize("module", CLUSTER_READERS)
def test_the_cluster_modules_open_run_files_only_through_the_opener(module):
    """No route around harness.core.files in the modules that read and write fault records, meta.json and the
    restart history: no open()/Path.read_text()/write_text()/is_file()/exists() (they follow links and block on
    FIFOs), and an os.open only with O_NOFOLLOW. RunDir.open is the run-directory contract's own opener."""
    source = (ROOT / module).read_text()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        owner = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
        if name not in RAW_FILE_CALLS or owner == "RunDir" or isinstance(func, ast.Name) and name != "open":
            continue  # harness.core.files' read_text & co. are called by name: those are the opener
        if owner == "os" and "O_NOFOLLOW" in ast.unparse(node):
            continue
        found.append(f"{module}:{node.lineno}: {ast.unparse(node)[:80]}")
    assert not found, found
