"""``depthbench preflight`` (harness/commands/preflight.py, harness/measure/preflight/): here, and on the local Slurm
cluster through ``depthbench submit --preflight`` -- one node with two ranks, and two nodes (two ``slurmd`` on this
machine, so the gloo all-reduce crosses nodes) -- with the loader and run-folder checks on the embedded data.

Every check has a verdict and its number; the record (``preflight.json``) is what ``submit --estimate`` reads. The
verdicts that depend on this machine's speed are not asserted (a loader may be the bottleneck here or not); the
ones that follow from arithmetic are, with the numbers forced (a step longer than the warning window, a step faster
than the loader).
"""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clitools import run_cli_here as cli
from slurmcluster import cluster_fixture

from harness.measure import preflight as pf

ROOT = Path(__file__).resolve().parents[3]
DIGITS = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"
TINY = ["model.width=8", "data.input_size=8", "batch_size=16"]
LOCAL = {"versions", "devices", "bf16", "memory", "step", "loader"}
PORT = "6957"  # neither the default 6817 nor test_slurm's 6917: clusters started elsewhere keep running


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """Runs and the digits cache in tmp dirs (Slurm jobs inherit this environment through sbatch)."""
    saved = {k: os.environ.get(k) for k in ("DEPTHBENCH_RUNS", "DEPTHBENCH_DATA", "OMP_NUM_THREADS")}
    runs = tmp_path_factory.mktemp("runs")
    os.environ.update(
        DEPTHBENCH_RUNS=str(runs), DEPTHBENCH_DATA=str(tmp_path_factory.mktemp("data")), OMP_NUM_THREADS="1"
    )
    yield runs
    for k, v in saved.items():
        os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


def by_check(record: dict) -> dict:
    out = {}
    for c in record["checks"]:
        out.setdefault((c["rank"], c["check"]), []).append(c)
    return out


def assert_every_check_reported(record: dict) -> None:
    for c in record["checks"]:
        assert c["verdict"] in pf.VERDICTS and c["text"], c
        assert c["verdict"] != "fail", c["text"]
    assert sum(record["summary"].values()) == len(record["checks"])


# ----------------------------------------------------------------------------------------------- here
def test_one_process_here(env, tmp_path):
    from harness.commands.preflight import run

    report = run([DIGITS], overrides=TINY, steps=2, loader_seconds=2, time="30", warning=90, work_dir=tmp_path / "pf")
    record = json.loads((tmp_path / "pf" / "preflight.json").read_text())
    assert report.exit_code == 0 and report.path == tmp_path / "pf" / "preflight.json"
    assert record["format"] == pf.FORMAT and record["world_size"] == 1 and record["device"] == "cpu"
    assert_every_check_reported(record)
    checks = by_check(record)
    assert LOCAL | {"checkpoint", "space"} <= {name for rank, name in checks if rank == 0}
    assert checks[(None, "all-reduce")][0]["text"].startswith("1 rank: nothing to all-reduce")
    (step,) = checks[(0, "step")]
    assert step["value"] > 0 and step["unit"] == "ms" and "at batch 16 (fp32" in step["text"]
    (loader,) = checks[(0, "loader")]
    assert loader["data"]["train_images"] == 1437 and loader["data"]["data_root"].endswith("digits-8")
    (window,) = checks[(0, "checkpoint")]
    assert "of the 90 s --warning window before the 0:30:00 limit" in window["text"]
    (config,) = record["configs"]
    assert (config["model"], config["micro_batch"], config["precision"], config["input_size"]) == (
        "horesnet10_rk4",
        16,
        "fp32",
        [3, 8, 8],
    )
    assert config["step_ms"] == step["value"] and config["train_images"] == 1437 and config["params"] > 0
    # the rendering: one line per check, verdict first, then the tally
    text = (tmp_path / "pf" / "preflight.txt").read_text()
    for c in record["checks"]:
        assert re.search(rf"^\s+{c['verdict']}\s+{re.escape(c['check'])}\s+{re.escape(c['text'])}$", text, re.M)
    assert text.rstrip().endswith(f"record {tmp_path / 'pf' / 'preflight.json'}")
    assert str(report.path) not in {r["path"] for r in pf.read_records(env)}  # kept where it was asked to go
    assert report.record["summary"]["fail"] == 0


def test_loader_bound_says_how_many_workers(env):
    plan = pf.make_plan(pf.Target(DIGITS, tuple(TINY)), 1)
    rank = pf.Rank(0, 0, 1, "here", "cpu")
    opts = pf.Options(loader_seconds=1.0).resolved("cpu")
    check, numbers = pf.loader_check(rank, plan, opts, step_ms=0.1)  # a step that consumes 160,000 images/s
    assert check.verdict == "warn" and check.check == "loader"
    assert check.value == pytest.approx(numbers["step_per_s"] / numbers["loader_per_s"], rel=1e-3)
    assert re.search(
        rf"loader-bound by {check.value:.1f}x: the loader delivers [\d,]+ img/s per rank "
        rf"\(data.workers=0\), the step consumes 160,000",
        check.text,
    ), check.text
    assert re.search(r"(raise data.workers to \d+|even data.workers=\d+ \(this rank's \d+ cores\))", check.text)


def test_checkpoint_window_and_space_verdicts(env, tmp_path):
    plan = pf.make_plan(pf.Target(DIGITS, tuple(TINY)), 1)
    rank = pf.Rank(0, 0, 1, "here", "cpu")
    opts = pf.Options().resolved("cpu")
    slow = {plan.label: {"step_ms": 200_000.0}}  # a 200 s step cannot finish inside a 120 s warning
    checks = {
        c.check: c for c in pf.checkpoint_checks(rank, [plan], [plan], slow, tmp_path, pf.Layout(warning_s=120), opts)
    }
    window = checks["checkpoint"]
    assert window.verdict == "fail" and window.value > 200 and "raise --warning to 420" in window.text
    assert checks["space"].verdict == "ok" and checks["space"].data["need_bytes"] > 0
    fast = {plan.label: {"step_ms": 1.0}}
    checks = {
        c.check: c for c in pf.checkpoint_checks(rank, [plan], [plan], fast, tmp_path, pf.Layout(warning_s=120), opts)
    }
    assert checks["checkpoint"].verdict == "ok" and checks["checkpoint"].data["bandwidth_mbs"] > 0
    assert not list(tmp_path.glob(".preflight-*"))  # the test checkpoint is removed


def test_preflight_checks_the_layout_submit_estimates_and_records_it_or_none():
    from harness.measure import estimate as est
    from harness.measure.preflight.record import layout_record

    assert pf.Layout is est.Layout  # one layout: what preflight checks is what submit --estimate costs
    unplanned = {"nodes": None, "ranks_per_node": None, "time_s": None, "warning_s": 120}
    assert layout_record(pf.Layout(nodes=None)) == unplanned
    planned = pf.Layout(nodes=2, gpus_per_node=4, time_s=600, warning_s=300)
    assert layout_record(planned) == {"nodes": 2, "ranks_per_node": 4, "time_s": 600, "warning_s": 300}
    assert (planned.world, pf.Layout(nodes=3, ntasks_per_node=2).world, pf.Layout(nodes=None).planned) == (8, 6, False)


def test_a_sweep_is_measured_once_per_distinct_run(env):
    plans = [pf.make_plan(pf.Target(DIGITS, (*TINY, f"optim.lr={lr}")), 1) for lr in (0.1, 0.2)]
    plans.append(pf.make_plan(pf.Target(DIGITS, ("model.width=16", "data.input_size=8", "batch_size=16")), 1))
    unique, same = pf.distinct(plans)
    assert [p.label for p in unique] == [plans[0].label, plans[2].label]
    assert same == {plans[1].label: plans[0].label}


@pytest.mark.tier("integration")
@pytest.mark.parametrize(
    "args, message",
    [
        ([DIGITS, "optim.lrr=0.1"], "unknown config key 'optim.lrr'"),
        (["configs/horesnet/no-such.py"], "does not exist"),
        ([DIGITS, "--nproc", "0"], "--nproc must be at least 1"),
        ([DIGITS, "--time", "1:xx"], "is not a Slurm time"),
        ([DIGITS, "--gpus-per-node", "2", "--ntasks-per-node", "4"], "one rank per GPU"),
    ],
)
def test_bad_input_is_one_line(env, args, message, tmp_path):
    code, out, err = cli("preflight", *args, "--work-dir", tmp_path / "pf")
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "pf").exists()


@pytest.mark.tier("integration")
@pytest.mark.slow
def test_two_local_processes_all_reduce(env, tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "preflight",
            DIGITS,
            *TINY,
            "--nproc",
            "2",
            "--steps",
            "2",
            "--loader-seconds",
            "2",
            "--work-dir",
            str(tmp_path / "pf"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    record = json.loads((tmp_path / "pf" / "preflight.json").read_text())
    assert record["world_size"] == 2 and record["allreduce"]["backend"] == "gloo"
    assert len(re.findall(r"^preflight: \d+ ok", out.stdout, re.M)) == 1  # once (rank 0's process), not per process
    assert_every_check_reported(record)
    checks = by_check(record)
    for rank in (0, 1):
        assert LOCAL <= {name for r, name in checks if r == rank}
    row = checks[(None, "grad-sync")][0]
    assert row["unit"] == "x step" and row["data"]["time_ms"] > 0
    transport = checks[(None, "transport")][0]  # issue 41: what carries the all-reduce, as each rank reports it
    assert transport["verdict"] == "ok" and transport["text"] == "gloo between 1 node(s): gloo over TCP sockets"
    assert [v["transport"] for v in transport["data"]["views"]] == ["gloo over TCP sockets"] * 2


# ----------------------------------------------------------------------------------------------- Slurm
# ours start at job 41, clear of another test file's cluster running beside this one (its ids from 1)
cluster = cluster_fixture(PORT, first_job=41)


def submit_preflight(runs: Path, *layout) -> tuple[dict, dict, str]:
    """``depthbench submit DIGITS --preflight``, waited for: (Slurm's final record, preflight.json, the job log)."""
    code, out, err = cli("submit", DIGITS, *TINY, "--time", 10, "--preflight", *layout)
    assert code == 0, err
    job = re.search(r"submitted job (\d+): depthbench preflight", out).group(1)
    deadline, final = time.monotonic() + 400, {}
    while final.get("JobState") not in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"):
        assert time.monotonic() < deadline, f"preflight job {job} still queued or running: {final}"
        time.sleep(0.5)
        final = dict(
            re.findall(
                r"(\w+)=(\S*)",
                subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True).stdout,
            )
        )
    (element,) = json.loads((runs / "slurm" / f"{job}.json").read_text())["elements"]
    assert element["command"] == "preflight" and element["work_dir"].startswith(str(runs / "preflight"))
    log = Path(element["log"]).read_text()
    path = Path(element["work_dir"]) / "preflight.json"
    assert path.is_file(), f"job {job} ({final.get('JobState')}) wrote no record:\n{log[-4000:]}"
    record = json.loads(path.read_text())
    return final, record, log


@pytest.mark.slow
def test_slurm_one_node_two_ranks(cluster, env):
    final, record, log = submit_preflight(env, "--ntasks-per-node", 2)
    assert final["JobState"] == "COMPLETED" and final["NumNodes"] == "1", final
    assert record["world_size"] == 2 and len(record["hosts"]) == 1 and record["partition"] == "debug"
    assert record["layout"] == {"nodes": 1, "ranks_per_node": 2, "time_s": 600, "warning_s": 120}
    assert_every_check_reported(record)
    checks = by_check(record)
    for rank in (0, 1):
        assert LOCAL <= {name for r, name in checks if r == rank}, rank
    assert {"checkpoint", "space"} <= {name for r, name in checks if r == 0}
    assert record["configs"][0]["micro_batch"] == 8  # batch 16 over the two ranks
    assert record["allreduce"]["backend"] == "gloo" and record["allreduce"]["correct"] is True
    assert "preflight: " in log and "all-reduce" in log


@pytest.mark.slow
def test_slurm_two_nodes_gloo_all_reduce(cluster, env):
    final, record, log = submit_preflight(env, "--nodes", 2)
    assert final["JobState"] == "COMPLETED" and final["NodeList"] == "n[1-2]", final
    assert record["hosts"] == ["n1", "n2"] and record["world_size"] == 2
    assert_every_check_reported(record)
    checks = by_check(record)
    nodes = {c["rank"]: c["node"] for c in record["checks"] if c["rank"] is not None}
    assert nodes == {0: "n1", 1: "n2"}
    assert (1, "run-folder") in checks  # the second node's first rank can write the run folder
    (reduce,) = checks[(None, "all-reduce")]
    rows = record["allreduce"]["rows"]
    assert reduce["value"] == max(r["busbw_gbs"] for r in rows) > 0 and "on 2 node(s)" in reduce["text"]
    for r in rows:  # nccl-tests' definitions, with n = 2 ranks
        assert r["algbw_gbs"] == pytest.approx(r["bytes"] / (r["time_ms"] / 1000) / 1e9, rel=1e-2)
        assert r["busbw_gbs"] == pytest.approx(r["algbw_gbs"] * 2 * (2 - 1) / 2, abs=1e-3)
    loader = checks[(1, "loader")][0]
    assert loader["data"]["data_root"].endswith("digits-8") and loader["data"]["train_images"] == 1437
    (config,) = record["configs"]
    assert config["world"] == 2 and len(config["step_ms_ranks"]) == 2 and config["allreduce_ms"] > 0
    # the record feeds the estimate: the same run on the same layout finds its step time
    code, out, err = cli("submit", DIGITS, *TINY, "--nodes", 2, "--time", 10, "--dry-run", "--estimate")
    assert code == 0 and re.search(r"\b1,780\s+0\.\d+ s\s.*preflight \d{4}-\d\d-\d\d .*partition debug", err), err
