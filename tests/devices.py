"""The GPU check's plumbing: tests parametrised over devices, their time limits, and the report they write.

A GPU check test runs on ``cuda`` at the papers' sizes and on ``cpu`` at tiny sizes (CI runs the CPU variant, so
the code stays tested without a GPU). Each variant carries ``pytest.mark.device(kind=..., part=...)``:

- ``kind`` picks a device's variants: ``-m "device(kind='cuda')"`` (tools/gpu_check.sh on a GPU machine),
  ``-m "device(kind='cpu')"`` (its CPU mode); where no CUDA device is visible the CUDA variants are skipped with
  the reason (``pytest -rs`` prints it);
- ``part`` names the GPU check's part (:data:`PARTS`) -- the report groups by it and :data:`LIMITS_S` gives its time
  limit on CUDA (:data:`CPU_LIMIT_S` on the CPU); ``-m "device(part='models')"`` runs one part;
- ``call``: which of the GPU check's two calls runs it (tools/gpu_check.sh ``--call 1|2``; the GPU machine gives 15
  minutes in all, so the two calls' budgets, set there, add up to under 12): 1 the goals' numbers (the
  training steps eager and compiled), 2 the rest, what never ran on a GPU first (:data:`CALL_OF_PART`, or the
  test's own);
- ``alone=True``: a test neither call runs, only when asked for: the optional swattention kernels (the extension
  must be built first);
- ``min_start_s``: a test that cannot finish in less is not started with less left (default :data:`MIN_START_S`);
  ``min_start_after``: the name of a sibling (``test_x[cuda-eager]``) whose run this one's repeats and adds one
  model's compile to: where it ran, it needs that sibling's seconds plus :data:`AFTER_SIBLING_S` too.

Time limits are pytest-timeout's: per test from :data:`LIMITS_S` (tests/conftest.py adds the marker), each cut to
what is left of the call's budget (``--gpu-check-budget``) less what later parts of the call keep for themselves
(:data:`RESERVED_S`); a test with less than :data:`MIN_START_S` of that (or its own ``min_start_s``) is not started,
so a call ends on time.
``--gpu-check-out DIR`` appends every measurement to ``DIR/rows.jsonl`` as it is made (flushed: a call that is cut
off keeps its rows) and writes ``report.json`` and ``report.md`` at the end (:class:`Report`; docs/preflight.md).

A module of its own (not ``conftest``) so test modules can import it by name.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import socket
import sys
import time
from pathlib import Path

import pytest

KINDS = ("cuda", "cpu")
# the parts in the order the GPU check's calls run them, so a call that runs out of time loses the least: call 1 the
# goals' numbers (step: the pairs' steps eager, then DeiT-S through the engine eager and compiled, one model's
# compile each, each cut to what is left less the compiled pairs' RESERVED_S; then compile: the pairs compiled with
# CUDA graphs, in what is left, at least that); call 2 first what has never run on a GPU or is cheap and decisive (the
# device pipeline in a training epoch, host syncs, preflight, the DeepSpeed train test, compiled models), then what
# passed in both earlier GPU sessions (bench, models, TransNeXt). The second session (29 Nov 2026) found the compiled
# pairs alone past a 150 s limit, and its second call's 300 s not enough for them and the engine's compiled step
PARTS = ("step", "compile", "loader", "nosync", "preflight", "train", "compile-check", "bench", "models", "transnext")
CALL_OF_PART = {part: 1 if part in ("step", "compile") else 2 for part in PARTS}
# seconds per test on CUDA at full size, by part: about twice what each test took on the H200 (29 Nov 2026) or is
# expected to take there (step: also the engine's compiled DeiT-S step, one model's compile, 20.6 s on the H200 on
# 26 Nov; compile: seven training steps compiled in parallel processes); each is cut to the call's budget left
LIMITS_S = {
    "step": 120,
    "models": 40,
    "transnext": 60,
    "bench": 60,
    "train": 120,
    "preflight": 90,
    "loader": 120,
    "nosync": 60,
    "compile": 240,
    "compile-check": 150,
}
MIN_START_S = 20  # a test with less of its call's budget left is not started
# what a compiled run needs over its eager sibling's seconds (min_start_after): one model's compile (DeiT-S's step,
# 20.6 s on the H200 on 26 Nov 2026) and a few seconds to spare
AFTER_SIBLING_S = 25
# seconds of its call a part keeps for itself from the tests before it in the call (cut to what is left less these):
# the compiled pairs' seven compiles at once, the slowest (Steps-Swin-T's) timed 132 s after its test's start on the
# H200 on 29 Nov 2026 (in 4 processes), then 35 s to time the seven (gpu_steps.timing_s); without it the eager
# pairs and the engine's two steps, each run to its limit, would leave them 28 s and no compile finished
RESERVED_S = {"compile": 200}
# a call's seconds outside its budget, which the device tool's timeout_s must hold besides it (docs/preflight.md):
# before the budget's clock starts (pytest_configure), the wheels' install and pytest's start (~10 s on the H200 on
# 29 Nov 2026); after the last test, cut to end with the budget, the report's environment (nvidia-smi, up to its 20 s
# time-out: harness/measure/preflight/environment.py) and pytest's exit, stopping the step processes (~5 s)
# (tools/gpu_check.sh sizes call 2 by them and MIN_START_S: --device-left; tests/tools/test_gpu_check.py checks it)
CALL_START_S = 15
CALL_END_S = 25
CPU_LIMIT_S = 900  # a CPU variant at tiny sizes: a guard against a hang, not a budget (a loaded 2-core CI machine
#                    ran the DeepSpeed train test for over 400 s: 20x its idle time)
ALONE_LIMIT_S = 290  # a test run alone (the swattention kernels)
# the bare GPU node's own distributions (../shared/notes/environment.md, "The bare GPU node"): what it lacks beyond
# these (and what they require) is refused in tests/tools/test_gpu_node_env.py; tools/gpu_wheels.sh carries the rest
GPU_NODE = (
    "torch",
    "torchvision",
    "triton",
    "timm",
    "accelerate",
    "transformers",
    "safetensors",
    "numpy",
    "pandas",
    "matplotlib",
    "PyYAML",
    "pytest",
    "pytest-xdist",
    "tensorboard",
    "opencv-python-headless",
    "opencv-python",
    "scikit-image",
    "scikit-learn",
)
# the test modules tools/gpu_check.sh runs
GPU_CHECK_FILES = [
    "tests/tools/test_gpu_check.py",
    "tests/harness/engine/test_runner.py",
    "tests/harness/commands/test_train.py",
]
TOL_FP32 = 1e-3  # max|CUDA fp32 logits - CPU float64 logits| / max|CPU float64 logits|, TF32 off
TOL_BF16 = 5e-2  # the same under bf16 autocast (bf16 keeps 8 bits of mantissa: ~4e-3 per rounding)
FORMAT = "depthbench-gpu-check/2"


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def device_mark(
    kind: str,
    part: str,
    alone: bool = False,
    call: int | None = None,
    min_start_s: float | None = None,
    min_start_after: str | None = None,
):
    """The ``device`` marker of a GPU check test on ``kind``: ``min_start_s``: the time it needs left to start, where
    that is more than :data:`MIN_START_S`; ``min_start_after``: a sibling test whose seconds, plus
    :data:`AFTER_SIBLING_S`, it needs too (:func:`start_minimum`)."""
    assert kind in KINDS and part in PARTS, (kind, part)
    given = {"alone": alone, "min_start_s": min_start_s, "min_start_after": min_start_after}
    return pytest.mark.device(
        kind=kind, part=part, call=call or CALL_OF_PART[part], **{key: value for key, value in given.items() if value}
    )


def device_param(kind: str, *values, id: str | None = None, **mark):
    """One parametrisation of a GPU check test on ``kind``: ``values`` after the device, marked by
    :func:`device_mark` (``mark``: its keywords)."""
    return pytest.param(kind, *values, marks=device_mark(kind, **mark), id=id or kind)


def on_devices(part: str):
    """``@on_devices("train")``: the test once per device (its ``device`` argument: ``"cpu"`` or ``"cuda"``)."""
    return pytest.mark.parametrize("device", [device_param(kind, part=part) for kind in KINDS])


def device_env(env: dict, device: str) -> dict:
    """The environment of a training process on ``device``: on CUDA DeepSpeed's CUDA accelerator (tests/conftest.py
    sets the CPU's) and deterministic cuBLAS (``deterministic=True`` needs it). ``cpu``: ``env`` as it is, as for
    every other training test (a run trains where the engine finds a device: on CI's machines the CPU)."""
    return dict(env, DS_ACCELERATOR="cuda", CUBLAS_WORKSPACE_CONFIG=":4096:8") if device == "cuda" else dict(env)


def device_overrides(device: str) -> list[str]:
    """Config overrides for a run on ``device`` that must reproduce another bit for bit: on CUDA deterministic
    kernels (on the CPU they are already)."""
    return ["deterministic=True"] if device == "cuda" else []


def marks_of(item) -> dict:
    """The ``device`` marker's keyword arguments of a collected test ({} for any other test)."""
    found: dict = {}
    for mark in item.iter_markers("device"):
        found = {**mark.kwargs, **found}
    return found


def prepare(items, gpu_check: bool = False) -> None:
    """tests/conftest.py: each GPU check test gets its time limit; a CUDA variant without CUDA is skipped. In the GPU
    check (``gpu_check``: ``--gpu-check-out``) its tests run in :data:`PARTS` order, within a part in the order
    they are collected."""
    if gpu_check:  # a stable sort
        items.sort(key=lambda item: PARTS.index(marks_of(item)["part"]) if marks_of(item) else -1)
    no_cuda = None
    for item in items:
        marks = marks_of(item)
        if not marks:
            continue
        kind, part = marks["kind"], marks["part"]
        limit = CPU_LIMIT_S if kind == "cpu" else ALONE_LIMIT_S if marks.get("alone") else LIMITS_S[part]
        item.add_marker(pytest.mark.timeout(limit))
        if kind == "cuda":
            if no_cuda is None:
                no_cuda = not cuda_available()
            if no_cuda:
                item.add_marker(
                    pytest.mark.skip(
                        reason="no CUDA device here (torch.cuda.is_available() is False): "
                        "the GPU check's CUDA variant (tools/gpu_check.sh)"
                    )
                )


@pytest.fixture
def record(request):
    """``record(name=..., **numbers)``: a measurement of this test for the GPU check's report (kept with the test's
    report, so it reaches the report from pytest-xdist workers too), and at once one line of ``rows.jsonl`` in the
    report folder, flushed: what a call measured survives its being cut off."""
    out = request.config.getoption("gpu_check_out")

    def add(**item):
        request.node.user_properties.append(("gpu_check", item))
        if out:
            row = {"test": request.node.nodeid, "at": _dt.datetime.now(_dt.timezone.utc).isoformat(), **item}
            with open(Path(out) / "rows.jsonl", "a") as fh:
                fh.write(json.dumps(row, default=str) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        return item  # still the recorded one: a test may add to it (the report, not rows.jsonl, sees the additions)

    return add


# ------------------------------------------------------------------------------------------------ the report
class Report:
    """A pytest plugin (tests/conftest.py registers it with ``--gpu-check-out DIR``): every GPU check test's outcome
    and measurements, by part, into ``DIR/report.json`` and ``DIR/report.md`` when the session ends."""

    def __init__(self, out: Path, budget_s: float | None = None):
        self.out = Path(out).absolute()
        self.out.mkdir(parents=True, exist_ok=True)
        self.budget_s = budget_s
        self.started = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.start = time.monotonic()
        self.selected: dict[str, dict] = {}  # node id -> device marker's keyword arguments
        self.tests: dict[str, dict] = {}

    def pytest_collection_finish(self, session):  # after -m / -k deselected theirs
        self.selected = {item.nodeid: marks_of(item) for item in session.items if marks_of(item)}

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        """Before pytest-timeout reads the test's limit: cut it to the call's budget left, or do not start it."""
        if self.budget_s and item.nodeid in self.selected:
            left = self.budget_s - (time.monotonic() - self.start)
            marks = self.selected[item.nodeid]
            part, minimum = marks["part"], start_minimum(marks, self.tests)
            kept = kept_for_later(part, {other["part"] for other in self.selected.values()})
            limit = start_limit(item.get_closest_marker("timeout").args[0], left, kept, minimum)
            if limit is None:
                item.add_marker(
                    pytest.mark.skip(
                        reason=f"not started: too little time left: {left:.0f} s of the call's {self.budget_s:.0f} s"
                        " budget were left"
                        + (f", {kept:.0f} s of them kept for the parts after {part}" if kept else "")
                        + f"; it starts only with at least {minimum:.0f} s to use"
                    ),
                    append=False,
                )
            else:
                item.add_marker(pytest.mark.timeout(limit), append=False)
        yield

    def pytest_runtest_logreport(self, report):
        if report.nodeid not in self.selected:
            return
        test = self.tests.setdefault(report.nodeid, {"outcome": "passed", "seconds": 0.0, "items": []})
        test["seconds"] += report.duration
        test["items"] += [
            value for key, value in report.user_properties if key == "gpu_check" and value not in test["items"]
        ]
        if report.skipped and report.when != "teardown":
            test["outcome"] = "skipped"
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            test["reason"] = reason.removeprefix("Skipped: ")
        elif report.failed:
            text = str(report.longrepr)
            test["outcome"] = "timeout" if "Timeout (>" in text else "failed"
            test.setdefault("error", _last_lines(text))

    def pytest_sessionfinish(self, session):
        report = assemble(
            self.selected, self.tests, started=self.started, wall_s=round(time.monotonic() - self.start, 1)
        )
        (self.out / "report.json").write_text(json.dumps(report, indent=1, default=str))
        (self.out / "report.md").write_text(markdown(report))


def kept_for_later(part: str, parts) -> float:
    """The seconds that the parts after ``part`` among ``parts`` (those of this call) keep for themselves."""
    return float(sum(RESERVED_S.get(later, 0) for later in set(parts) if PARTS.index(later) > PARTS.index(part)))


def start_minimum(marks: dict, tests: dict[str, dict]) -> float:
    """The least time a test starts with: its ``min_start_s`` (else :data:`MIN_START_S`), and where its marker names
    a sibling (``min_start_after``) among the ``tests`` run so far, that sibling's seconds plus
    :data:`AFTER_SIBLING_S`: a compiled run repeats its eager sibling's and adds a compile."""
    after = marks.get("min_start_after")
    took = [test["seconds"] for nodeid, test in tests.items() if after and nodeid.split("::")[-1] == after]
    return max([marks.get("min_start_s", MIN_START_S)] + [seconds + AFTER_SIBLING_S for seconds in took])


def start_limit(limit: float, left: float, kept: float = 0.0, minimum: float = MIN_START_S) -> float | None:
    """A test's time limit with ``left`` seconds of its call's budget, ``kept`` of them for later parts: its own
    ``limit`` cut to what is left less what is kept, or None (not started) where that is under ``minimum`` (the
    test's ``min_start_s``, else :data:`MIN_START_S`)."""
    usable = left - kept
    return None if usable < minimum else min(limit, usable)


def _last_lines(text: str, lines: int = 6) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])[-1500:]


VERDICT = {"passed": "ok", "failed": "fail", "timeout": "timeout", "skipped": "skip", "not run": "skip"}


def assemble(selected: dict[str, dict], tests: dict[str, dict], started: str, wall_s: float) -> dict:
    """report.json: per part its status, seconds, the tests' outcomes and what they measured. A part's status: fail
    if a test failed, else timeout if one ran out of time, else ok if one passed, else skip."""
    ran = {
        marks["kind"]
        for nodeid, marks in selected.items()
        if tests.get(nodeid, {}).get("outcome") in ("passed", "failed", "timeout")
    }  # a CUDA variant skipped without CUDA ran nowhere
    kinds = sorted(ran or {marks["kind"] for marks in selected.values()})
    parts: dict[str, dict] = {}
    for nodeid, marks in selected.items():
        test = tests.get(
            nodeid,
            {
                "outcome": "not run",
                "seconds": 0.0,
                "items": [],
                "reason": "not started: the session's time limit had passed",
            },
        )
        part = parts.setdefault(marks["part"], {"status": "skip", "seconds": 0.0, "tests": [], "items": []})
        part["seconds"] = round(part["seconds"] + test["seconds"], 1)
        verdict = VERDICT[test["outcome"]]
        part["tests"].append(
            {
                "test": nodeid,
                "verdict": verdict,
                "seconds": round(test["seconds"], 1),
                **{k: test[k] for k in ("error", "reason") if k in test},
            }
        )
        part["items"] += [
            {**item, "verdict": item.get("verdict", verdict) if verdict == "ok" else verdict, "test": nodeid}
            for item in test["items"]
        ]
    for part in parts.values():
        verdicts = {t["verdict"] for t in part["tests"]}
        part["status"] = next(v for v in ("fail", "timeout", "ok", "skip") if v in verdicts or v == "skip")
        if part["status"] == "ok" and any(it["verdict"] == "warn" for it in part["items"]):
            part["status"] = "warn"
    order = {name: i for i, name in enumerate(PARTS)}
    return {
        "format": FORMAT,
        "started": started,
        "device": ",".join(kinds),
        "tiny": kinds == ["cpu"],
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "wall_s": wall_s,
        "environment": environment("cuda" in kinds),
        "tolerances": {"fp32": TOL_FP32, "bf16": TOL_BF16},
        "limits_s": {part: {"cuda": LIMITS_S[part], "cpu": CPU_LIMIT_S} for part in parts},
        "parts": dict(sorted(parts.items(), key=lambda kv: order.get(kv[0], len(order)))),
    }


def environment(cuda: bool) -> dict:
    import importlib.metadata as metadata

    import torch

    from harness.measure.preflight import driver_version
    from models.transnext import swattention_available

    info = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cpu_count": os.cpu_count(),
    }
    for dist in ("timm", "accelerate", "mmengine", "deepspeed", "numpy", "pytest"):
        try:
            info[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            info[dist] = None
    if cuda and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(
            gpu=props.name,
            sm=f"{props.major}{props.minor}",
            gpu_memory_gib=round(props.total_memory / 2**30, 1),
            bf16=torch.cuda.is_bf16_supported(),
            nccl=".".join(map(str, torch.cuda.nccl.version())),
            driver=driver_version(),
        )
    info["swattention"] = swattention_available()
    return info


def markdown(report: dict) -> str:
    env = report["environment"]
    lines = [
        f"# depthbench GPU check: {env.get('gpu') or report['device']}, {report['started'][:10]}",
        "",
        f"Host {report['host']}, {report['platform']}; device {report['device']}"
        + (" (tiny sizes)" if report["tiny"] else "")
        + f"; wall time {report['wall_s']:.0f} s.",
        "",
        "Software: " + ", ".join(f"{k} {v}" for k, v in env.items()),
        "",
        f"Tolerances: max|logits - CPU float64 logits| / max|CPU float64 logits| <= {TOL_FP32:g} in fp32 "
        f"(TF32 off) and <= {TOL_BF16:g} under bf16 autocast.",
        "",
        "| part | status | seconds | ok | warn | fail | timeout | skip |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, part in report["parts"].items():
        counts = [sum(t["verdict"] == v for t in part["tests"]) for v in ("ok", "warn", "fail", "timeout", "skip")]
        lines.append(f"| {name} | {part['status']} | {part['seconds']} | " + " | ".join(map(str, counts)) + " |")
    for name, part in report["parts"].items():
        lines += ["", f"## {name}", ""]
        lines += [
            f"- `{t['test']}`: {t['verdict']}: " + _one_line(t.get("error") or t.get("reason"))
            for t in part["tests"]
            if t["verdict"] != "ok"
        ]
        scalars = [{k: v for k, v in item.items() if not isinstance(v, list)} for item in part["items"]]
        lines += ([""] if lines[-1] else []) + _table(scalars) if scalars else []
        for item in part["items"]:  # a measurement's rows (bench's models and pairs, step timings): a table each
            for key, rows in item.items():
                if isinstance(rows, list) and rows and isinstance(rows[0], dict):
                    lines += ["", f"{item.get('name')}: {key}", ""] + _table(rows)
    return "\n".join(lines) + "\n"


def _one_line(text) -> str:
    return " ".join(str(text or "").split())[:300]


def _table(items: list[dict]) -> list[str]:
    keys = list(dict.fromkeys(k for it in items for k in it))
    rows = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    return rows + ["| " + " | ".join(_cell(it.get(k)) for k in keys) + " |" for it in items]


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "/").replace("\n", " ")
