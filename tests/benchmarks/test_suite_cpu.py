"""benchmarks/suite_cpu.py: the CPU it attributes to a test includes processes the test started (alive, reaped,
and reaped by a descendant), and its report sums tests into files."""

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("suite_cpu", ROOT / "benchmarks/suite_cpu.py")
suite_cpu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite_cpu)

BURN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


@pytest.mark.tier("integration")
def test_cpu_of_children_and_grandchildren_counts_alive_and_reaped():
    before = suite_cpu.tree_cpu_seconds()
    child = subprocess.Popen([sys.executable, "-c", BURN.format(s=0.6) + "import time; time.sleep(30)"])
    try:
        deadline = time.monotonic() + 60
        while suite_cpu.tree_cpu_seconds() - before < 0.6:  # alive: read from /proc
            assert time.monotonic() < deadline, "a live child's CPU was not counted"
            time.sleep(0.1)
    finally:
        child.kill()
        child.wait()
    reaped = suite_cpu.tree_cpu_seconds() - before
    assert reaped >= 0.6  # reaped by this process: RUSAGE_CHILDREN
    # a grandchild reaped by a child that lives on: the child's cutime
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time; subprocess.run([sys.executable, "
            f"'-c', {BURN.format(s=0.6)!r}]); print('done', flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout.readline().strip() == "done"
        assert suite_cpu.tree_cpu_seconds() - before >= reaped + 0.6
    finally:
        parent.kill()
        parent.wait()


def test_report_sums_tests_into_files(tmp_path):
    records = tmp_path / "records.jsonl"
    rows = [("tests/test_a.py::one", 3.0, 4.0), ("tests/test_a.py::two", 2.0, 2.5), ("tests/test_b.py::x", 1.0, 9.0)]
    records.write_text(
        "".join(json.dumps({"test": t, "worker": "gw0", "cpu_s": c, "wall_s": w}) + "\n" for t, c, w in rows)
    )
    text = suite_cpu.report(records, tmp_path, wall_s=120.0, machine_cpu_s=12.0, load="0.10", make_args=[], exit_code=0)
    files = [line.split() for line in text.splitlines() if line.endswith(".py")]
    assert files == [["5", "6", "tests/test_a.py"], ["1", "9", "tests/test_b.py"]]
    assert "attributed to tests 6 CPU-s (50%" in text and "3 tests" in text
    assert (tmp_path / "files.png").stat().st_size > 0 and (tmp_path / "tests.csv").read_text().count("\n") == 4
