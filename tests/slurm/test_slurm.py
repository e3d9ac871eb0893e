"""``depthbench submit``/``jobs``/``cancel`` against a real Slurm: slurm/local-cluster.sh on this machine.

First the rendered scripts, parsed and their per-task rank logic executed (no snapshots), and bad input. Then real
jobs on the local cluster, one node and then two (``slurmd -N n1``/``-N n2``): a 2-rank gloo training job ends
``done``; the same run preempted by USR1 (delivered like ``--signal`` does: to the job's steps) checkpoints,
requeues itself, resumes and ends with the same weights; a real ``--time``/``--signal`` expiry; an array of 3
configs; ``jobs``/``cancel``; a 2-node job; sbatch refusing an unknown partition. The cluster needs root (apt,
munged, slurmd); CI runs as root.

Every test passes alone and in any order (``make test-random``): the rendering tests each get a runs folder of their
own, and the cluster changes shape (two nodes, then one) only once every job submitted to the first shape has left
the queue -- the fixtures that reshape it pull in the two-node work the selected tests need first, and
``Cluster.start`` (tests/slurmcluster.py) refuses to restart slurmd under a job.
"""

import json
import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from clitools import run_cli_here as cli
from slurmcluster import cluster_fixture, queue, wait_for

pytestmark = pytest.mark.tier("integration")

ROOT = Path(__file__).resolve().parents[2]
# the tiny setting (tests/fixtures/training.py): 8x8 digits, 8 channels, 160 images, batch 8 -> 20 steps an epoch, 2 epochs
from fixtures.training import PRESET, TINY  # noqa: E402

PORT = "6917"  # not the default 6817: a cluster a user started keeps running beside the tests'


# ----------------------------------------------------------------------------------------- helpers
def dry_run(*args) -> str:
    code, out, err = cli("submit", *args, "--dry-run")
    assert code == 0, err
    assert "nothing submitted" in err
    return out


def sbatch_options(script: str) -> dict:
    options = {}
    for line in script.splitlines():
        if line.startswith("#SBATCH "):
            key, _, value = line[len("#SBATCH ") :].partition("=")
            options[key] = value
    return options


def srun_words(script: str) -> list[str]:
    """The script's srun command as shell words (it spans lines: continuations and a quoted newline)."""
    start = script.index("\nsrun ")
    return shlex.split(script[start : script.index("\n", script.index('rank "${CMD[@]}"', start))].replace("\\\n", " "))


def element_commands(script: str) -> dict:
    """``{array index: CMD words}`` from the script's ``case`` of elements."""
    found = re.findall(r"^ +(\d+)\) NAME=.*\n +WORK_DIR=(.*)\n +CMD=\((.*)\) ;;$", script, re.M)
    return {int(i): (work_dir, shlex.split(words)) for i, work_dir, words in found}


def rank_env(script: str, **slurm) -> dict:
    """Run the script's per-task command -- what srun starts in every task -- with one task's SLURM_* variables and
    ``env`` as the program: the environment that rank's process gets."""
    words = srun_words(script)
    body = words[words.index("-c") + 1]
    out = subprocess.run(
        ["bash", "-c", body, "rank", "env"],
        env={"PATH": os.environ["PATH"], **slurm},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def check_rank_logic(script: str, nodes: int, tasks_per_node: int) -> None:
    """Every task gets its own rank from its own SLURM_PROCID/SLURM_LOCALID; nothing in the batch shell assigns a
    rank (a rank evaluated once there would give every task rank 0)."""
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    options = sbatch_options(script)
    assert options["--nodes"] == str(nodes) and options["--ntasks-per-node"] == str(tasks_per_node)
    words = srun_words(script)
    assert words[-2:] == ["rank", "${CMD[@]}"], words  # the element's command, run by every task
    world = nodes * tasks_per_node
    for proc in (0, world - 1):
        env = rank_env(
            script, SLURM_PROCID=str(proc), SLURM_LOCALID=str(proc % tasks_per_node), SLURM_NTASKS=str(world)
        )
        assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"]) == (
            str(proc),
            str(proc % tasks_per_node),
            str(world),
            str(tasks_per_node),
        )
    outside = script.replace(next(w for w in words if "RANK=" in w), "")
    assert not re.search(r"\b(RANK|LOCAL_RANK|NODE_RANK)=|--node_rank|--machine_rank", outside)
    assert re.search(r'^HEAD_NODE=\$\(scontrol show hostnames "\$SLURM_JOB_NODELIST" \| head -n1\)$', script, re.M)
    assert re.search(r"^export MASTER_PORT=\$\(\(20000 \+ SLURM_JOB_ID % 20000\)\)$", script, re.M)
    assert options["--signal"] == "USR1@120" and "--requeue" in options and options["--open-mode"] == "append"


def scontrol_job(job: str) -> dict:
    out = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, check=True).stdout
    return dict(re.findall(r"(\w+)=(\S*)", out.splitlines()[0]))


def queued(job: str) -> bool:
    return bool(
        subprocess.run(["squeue", "-h", "-r", "-j", job.split("_")[0]], capture_output=True, text=True).stdout.strip()
    )


def local_time(text: str):
    """meta.json's ISO time (with its offset) or scontrol's (local, without one) as a naive local datetime."""
    import datetime

    t = datetime.datetime.fromisoformat(text)
    return t.astimezone().replace(tzinfo=None) if t.tzinfo else t


def pace(final: dict, work_dir) -> tuple[float, float]:
    """How fast a finished job of the tiny setting went on this machine, now: (seconds from the job's start to its
    run directory's creation -- the ranks importing torch --, seconds per training step -- the run's whole wall
    time, evaluations and checkpoints included, over its steps, or its slowest logged step if that is longer)."""
    m, records = meta(work_dir), metric_records(work_dir)
    steps = max(r.get("global_step", 0) for r in records) or 1
    run_s = (local_time(m["end"]) - local_time(m["start"])).total_seconds()
    step_s = max([run_s / steps] + [r["step_time"] for r in records if r.get("kind") == "train"])
    return max(1.0, (local_time(m["start"]) - local_time(final["StartTime"])).total_seconds()), step_s


def wait_training(job: str, work_dir, steps: int, reference: tuple[dict, str]) -> None:
    """Event wait until ``job``'s run has logged ``steps`` training steps and is still running: the job leaves the
    queue's PENDING, its ranks start the run (meta.json "running"), the steps arrive. Each stage's bound comes from
    the measured pace of ``reference`` (a finished job of the same setting: its final record and run directory),
    made generous (x10, and a minute of slack for a loaded machine); it fails at once if the job or the run ends."""
    startup_s, step_s = pace(*reference)

    def ended():
        m = meta(work_dir, missing_ok=True)
        if m.get("status") in ("done", "failed", "preempted"):
            return f"the run ended ({m['status']}) before it had trained {steps} steps"
        if not queued(job):
            return f"job {job} left the queue ({scontrol_job(job).get('JobState')})"
        return None

    wait_for(lambda: scontrol_job(job)["JobState"] != "PENDING", 120, f"job {job} to start (queue: {queue()})", ended)
    wait_for(
        lambda: meta(work_dir, missing_ok=True).get("status") == "running",
        60 + 10 * startup_s,
        f"job {job}'s ranks to start its run (reference start-up {startup_s:.0f} s)",
        ended,
    )
    wait_for(
        lambda: len([r for r in metric_records(work_dir) if r.get("kind") == "train"]) >= steps,
        60 + 10 * steps * step_s,
        f"job {job} to train {steps} steps (reference {step_s:.2f} s a step)",
        ended,
    )


def wait_gone(job: str, timeout: float = 300) -> dict:
    """Poll squeue (sbatch --wait backs off to 32 s polls) until the job left the queue; its final record."""
    wait_for(lambda: not queued(job), timeout, f"job {job} to leave the queue")
    return scontrol_job(job)


def submitted(out: str) -> str:
    return re.search(r"submitted job(?: array)? (\d+)", out).group(1)


def record(runs: Path, job: str) -> dict:
    return json.loads((runs / "slurm" / f"{job}.json").read_text())


def meta(work_dir, missing_ok=False) -> dict:
    path = Path(work_dir) / "meta.json"
    return {} if missing_ok and not path.exists() else json.loads(path.read_text())


def metric_records(work_dir) -> list[dict]:
    path = Path(work_dir) / "metrics.jsonl"
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()] if path.exists() else []


def evals(work_dir) -> list[dict]:
    return [r for r in metric_records(work_dir) if r.get("kind") == "eval"]


def weights(work_dir) -> dict:
    return torch.load(Path(work_dir) / "last.pth", map_location="cpu", weights_only=False)["model"]


def slurm_log(runs: Path, job: str) -> str:
    return next((runs / "slurm").glob(f"*-{job}.out")).read_text()


def jobs(*args) -> dict:
    code, out, err = cli("jobs", "--json", *args)
    assert code == 0, err
    return {r["job"]: r for r in map(json.loads, out.splitlines())}


# ----------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Runs, Slurm records/logs and the digits cache in tmp dirs; jobs inherit this environment through sbatch."""
    root = tmp_path_factory.mktemp("runs")
    saved = {k: os.environ.get(k) for k in ("DEPTHBENCH_RUNS", "DEPTHBENCH_DATA", "OMP_NUM_THREADS")}
    os.environ.update(
        DEPTHBENCH_RUNS=str(root), DEPTHBENCH_DATA=str(tmp_path_factory.mktemp("data")), OMP_NUM_THREADS="1"
    )
    yield root
    for k, v in saved.items():
        os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


@pytest.fixture(scope="module")
def fake_datasets(tmp_path_factory):
    """Just the layouts the submit-time checks look at: an ImageFolder and CIFAR-10's six batch files."""
    root = tmp_path_factory.mktemp("datasets")
    for split in ("train", "val"):
        (root / "imagenet" / split / "n01440764").mkdir(parents=True)
        (root / "imagenet" / split / "n01440764" / "a.JPEG").write_bytes(b"")
    (root / "cifar10").mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        (root / "cifar10" / name).write_bytes(b"")
    return root


def wanted(request, fixture: str) -> bool:
    """Whether a test of this module that is going to run (selected, not yet run or running now) uses ``fixture``,
    directly or through other fixtures."""
    return any(
        fixture in getattr(item, "fixturenames", ())
        for item in request.session.items
        if getattr(item, "module", None) is request.module
    )


@pytest.fixture
def fresh_runs(runs, monkeypatch, tmp_path):
    """A runs folder of this test's own (rendering and refusal tests): what it finds there is what it wrote, in
    whatever order the tests run."""
    root = tmp_path / "runs"
    monkeypatch.setenv("DEPTHBENCH_RUNS", str(root))
    return root


cluster = cluster_fixture(PORT)


# ----------------------------------------------------------------------------------------- rendered scripts
def test_dry_run_one_node_two_ranks(fresh_runs):
    script = dry_run(PRESET, *TINY, "--ntasks-per-node", 2)
    check_rank_logic(script, nodes=1, tasks_per_node=2)
    options = sbatch_options(script)
    assert "--array" not in options and "--gpus-per-node" not in options
    assert re.search(r"^export DS_ACCELERATOR=cpu\b", script, re.M)
    ((work_dir, cmd),) = element_commands(script).values()
    assert cmd[:6] == ["python", "-m", "harness.cli", "train", PRESET, "--work-dir"]
    assert cmd[6:9] == ["$WORK_DIR", "--resume", "auto"] and cmd[9:] == TINY
    assert work_dir.startswith("$DEPTHBENCH_RUNS/horesnet10-rk4_1xb64-20e_digits/$RUN_ID")
    # a dry run submits and records nothing; it creates the script's log folder, so `sbatch` of the script works
    assert options["--output"].startswith(f"{fresh_runs}/slurm/") and list((fresh_runs / "slurm").iterdir()) == []


def test_dry_run_four_nodes_of_eight_gpus(fresh_runs):
    script = dry_run(
        PRESET,
        *TINY,
        "batch_size=64",
        "--nodes",
        4,
        "--gpus-per-node",
        8,
        "--cpus-per-task",
        10,
        "--time",
        "2-00:00:00",
        "--partition",
        "gpu",
        "--engine",
        "deepspeed",
    )
    check_rank_logic(script, nodes=4, tasks_per_node=8)
    options = sbatch_options(script)
    assert (options["--gpus-per-node"], options["--cpus-per-task"], options["--time"], options["--partition"]) == (
        "8",
        "10",
        "2-00:00:00",
        "gpu",
    )
    assert re.search(r"^export DS_ACCELERATOR=cuda\b", script, re.M)
    ((_, cmd),) = element_commands(script).values()
    assert cmd[cmd.index("--engine") + 1] == "deepspeed" and cmd[-1] == "batch_size=64"


def test_dry_run_sweep_is_one_array(fresh_runs, fake_datasets):
    sweep = "configs/horesnet/horesnet86_lr-sweep_cifar10.py"
    script = dry_run(sweep, f"data.root={fake_datasets / 'cifar10'}", "--max-concurrent", 4)
    elements = element_commands(script)
    assert sbatch_options(script)["--array"] == f"0-{len(elements) - 1}%4" and len(elements) == 40
    points = set()
    for work_dir, cmd in elements.values():
        assert cmd[4] == "configs/horesnet/horesnet86-euler_1xb128-260e_cifar10.py"  # the sweep's base recipe
        assert "experiment='horesnet86_lr-sweep_cifar10'" in cmd
        assert work_dir.startswith("$DEPTHBENCH_RUNS/horesnet86_lr-sweep_cifar10/$RUN_ID-")
        points.add(tuple(w for w in cmd if w.startswith(("model.name=", "optim.lr="))))
    assert len(points) == 40 and ("model.name='horesnet86_verner'", "optim.lr=0.4") in points


def test_dry_run_paper_table_rows(fresh_runs, fake_datasets):
    script = dry_run(
        "--table",
        "stepsnet:1",
        "--rows",
        "ResNet-18,Steps-ResNet-18",
        "--gpus-per-node",
        8,
        f"data.root={fake_datasets / 'imagenet'}",
    )
    assert sbatch_options(script)["--array"] == "0-1" and sbatch_options(script)["--job-name"] == "db-stepsnet-table1"
    commands = element_commands(script)
    assert [c[4] for _, c in commands.values()] == [
        "configs/stepsnet/resnet18_8xb128-300e_in1k.py",
        "configs/stepsnet/steps-resnet18_8xb128-300e_in1k.py",
    ]
    assert re.search(r"^ +1\) NAME=Steps-ResNet-18$", script, re.M)
    # GPU partitions: PyTorch's NCCL watchdog and flight-recorder settings (issue 41); CPU scripts have none
    for line in (
        "TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
        "TORCH_NCCL_TRACE_BUFFER_SIZE=2000",
        "TORCH_NCCL_DUMP_ON_TIMEOUT=1",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=$WORK_DIR/faults/attempt-${SLURM_RESTART_COUNT:-0}/nccl-timeout-rank-",
    ):
        assert re.search(rf"^export {re.escape(line)}$", script, re.M), line
    assert "--max-restarts 3 --nodes 1" in script and "--min-nodes 1" in script
    assert "TORCH_NCCL" not in dry_run(PRESET, *TINY)


def test_dry_run_fine_tuning_config(fresh_runs):
    """A downstream (MMDetection) config runs `depthbench finetune` through the same template and rank logic."""
    det = "configs/det/mask-rcnn_steps-resnet18-w32_fpn_500it_embedded-coco.py"
    script = dry_run(det, "train_cfg.max_iters=10", "--ntasks-per-node", 2)
    check_rank_logic(script, nodes=1, tasks_per_node=2)
    ((work_dir, cmd),) = element_commands(script).values()
    assert cmd == [
        "python",
        "-m",
        "harness.cli",
        "finetune",
        det,
        "--work-dir",
        "$WORK_DIR",
        "--resume",
        "auto",
        "train_cfg.max_iters=10",
    ]
    assert work_dir.startswith("$DEPTHBENCH_RUNS/mask-rcnn_steps-resnet18-w32_fpn_500it_embedded-coco/$RUN_ID")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--time", "2", "--warning", "90"], "--time 2 (120 s) is too short for the 90 s checkpoint warning"),
        (["--time", "10", "--warning", "30"], "--warning 30: the run needs at least 60 s"),
        (["--time", "1:xx"], "is not a Slurm time"),
        (["--nodes", "3", "--ntasks-per-node", "2"], "batch_size=8 (global) is not divisible by 6 processes"),
        (["--gpus-per-node", "2", "--ntasks-per-node", "4"], "one rank per GPU"),
        (["--mem", "lots"], "--mem 'lots' is not a Slurm size"),
        (["--max-restarts", "-1"], "--max-restarts -1: give 0 (never requeue after a failure) or more"),
        (["--nodes", "2", "--min-nodes", "3"], "--min-nodes 3: give 1 to --nodes (2)"),
        (["--nodes", "4", "--min-nodes", "3"], "--min-nodes 3: batch_size=8 (global) does not split over 3 node(s)"),
        (["--nodes", "2", "--min-nodes", "1", "--engine", "deepspeed"], "DeepSpeed runs resume on their own number"),
    ],
)
def test_bad_options_one_line(fresh_runs, args, message):
    code, out, err = cli("submit", PRESET, *TINY, *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("depthbench submit: error: ") and message in err, err
    assert not (fresh_runs / "slurm").exists()


def test_bad_config_and_table_one_line(fresh_runs, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("model = dict(name='horesnet10_rk4'\n")
    cases = [
        ([str(broken)], f"cannot load config {broken}"),
        (["configs/horesnet/no-such.py"], "does not exist"),
        ([PRESET, "optim.lrr=0.1"], "unknown config key 'optim.lrr'"),
        ([PRESET, "model.name=horesnet10_rk5"], "horesnet10_rk5"),
        (["--table", "stepsnet:99"], "stepsnet has no table '99'"),
        (["--table", "stepsnet:1", "--rows", "ResNet-19"], "did you mean ResNet-18"),
        (["--table", "nopaper:1"], "no tables for paper 'nopaper'"),
    ]
    for args, message in cases:
        code, out, err = cli("submit", *args, "--dry-run")
        assert code == 2 and out == "" and err.count("\n") == 1 and message in err, (args, err)


def test_no_sbatch_on_path(fresh_runs, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm client here
    code, out, err = cli("submit", PRESET, *TINY)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "sbatch is not on PATH" in err and "--dry-run" in err
    assert not (fresh_runs / "slurm").exists()


# ----------------------------------------------------------------------------------------- real jobs, two nodes
# The two-node work comes first whatever the order of the tests: the one-node fixture pulls it in before it restarts
# the cluster (restarting slurmd ends its jobs). The time-limit job, which waits on Slurm's clock, is started first
# when its test is selected, so it runs while the others do.
@pytest.fixture(scope="module")
def time_limit_job(cluster, runs):
    """A real --time/--signal expiry: 2 minutes with a 60 s warning; runs while the next tests do. Its ranks sleep
    1 s after each step (testing.step_delay_s): the job only has to be training when the signal comes, so it idles
    rather than burning a core for the minute or two Slurm's clock takes."""
    cluster.start(nodes=2)
    code, out, err = cli("submit", PRESET, *TINY, "epochs=1000", "testing.step_delay_s=1", "--time", 2, "--warning", 60)
    assert code == 0, err
    job = submitted(out)
    return job, record(runs, job)["elements"][0]["work_dir"], time.monotonic()


@pytest.fixture(scope="module")
def time_limit_result(cluster, runs, time_limit_job):
    """Waits for Slurm's USR1, the checkpoint, the requeue and the resume, then `depthbench cancel RUN`; what each
    step showed. The job (1000 epochs) never outlives this fixture: cancelled here even when a step fails."""
    job, work_dir, _ = time_limit_job

    def resumed():
        m = meta(work_dir, missing_ok=True)
        return m.get("slurm_restart_count") == 1 and m.get("status") == "running" and m.get("resumes")

    result = {}
    try:
        wait_for(
            resumed,
            240,
            "the job to be signalled by Slurm, requeued and resumed",
            lambda: None if queued(job) else f"job {job} left the queue ({scontrol_job(job).get('JobState')})",
        )
        result["log"] = slurm_log(runs, job)
        result["cancel"] = cli("cancel", work_dir)
        result["final"] = wait_gone(job)
        time.sleep(2)  # a cancelled job is not requeued by its script (scancel's SIGTERM ends the batch shell)
        result["after"] = scontrol_job(job)["JobState"]
    finally:
        if queued(job):
            subprocess.run(["scancel", job], check=False)
            wait_gone(job)
    return result


@pytest.fixture(scope="module")
def two_node_run(cluster, runs, request):
    """One rank on each of two nodes, waited for: (job id, final Slurm record, run directory)."""
    if wanted(request, "time_limit_job"):
        request.getfixturevalue("time_limit_job")
    cluster.start(nodes=2)
    code, out, err = cli("submit", PRESET, *TINY, "--nodes", 2, "--time", 10)
    assert code == 0, err
    job = submitted(out)
    return job, wait_gone(job), record(runs, job)["elements"][0]["work_dir"]


@pytest.mark.slow
def test_two_node_job(cluster, runs, two_node_run):
    job, final, work_dir = two_node_run
    assert final["JobState"] == "COMPLETED" and final["NodeList"] == "n[1-2]" and final["NumNodes"] == "2"
    m = meta(work_dir)
    assert m["status"] == "done" and m["world_size"] == 2 and m["slurm_nodelist"] == "n[1-2]"
    assert [e["epoch"] for e in evals(work_dir)] == [0, 1]
    for node in ("n1", "n2"):  # one rank ran on each node: both slurmd launched a task of the step
        assert f"StepId={job}.0" in (cluster.state / "log" / f"slurmd-{node}.log").read_text(), node


@pytest.mark.slow
def test_array_of_three_configs(cluster, runs, tmp_path):
    configs = []
    for width in (4, 6, 8):
        path = tmp_path / f"digits-w{width}.py"
        path.write_text(f"_base_ = ['{ROOT / PRESET}']\nmodel = dict(width={width})\n")
        configs.append(path)
    tiny = [o for o in TINY if not o.startswith("model.width")] + ["epochs=1"]
    code, out, err = cli("submit", *configs, *tiny, "--max-concurrent", 3, "--time", 10)
    assert code == 0, err
    job = submitted(out)
    elements = record(runs, job)["elements"]
    assert [e["job"] for e in elements] == [f"{job}_{i}" for i in range(3)]
    for e in elements:
        wait_gone(e["job"])
    for i, (e, width) in enumerate(zip(elements, (4, 6, 8))):
        m = meta(e["work_dir"])
        assert m["status"] == "done" and m["experiment"] == f"digits-w{width}"
        assert (m["slurm_array_job_id"], m["slurm_array_task_id"]) == (job, str(i))
        assert f"width={width}" in Path(e["work_dir"], "config.py").read_text() and len(evals(e["work_dir"])) == 1
    assert len({e["work_dir"] for e in elements}) == 3
    assert all(jobs()[f"{job}_{i}"]["slurm_state"] == "COMPLETED" for i in range(3))


@pytest.mark.slow
def test_jobs_and_cancel(cluster, runs):
    code, out, err = cli("submit", PRESET, *TINY, "--sbatch=--hold")  # pending until released: never runs
    assert code == 0, err
    job = submitted(out)
    work_dir = record(runs, job)["elements"][0]["work_dir"]
    row = jobs("--paper", "horesnet")[job]
    assert (row["slurm_state"], row["status"], row["work_dir"]) == ("PENDING", "-", work_dir)
    assert job not in jobs("--paper", "sret")
    code, out, _ = cli("jobs")
    assert re.search(rf"^{job} +PENDING +- +- +horesnet10-rk4_1xb64-20e_digits ", out, re.M), out
    code, out, err = cli("cancel", work_dir)  # a run that has not started: found through the submission record
    assert code == 0 and f"cancelled job {job}" in out, err
    assert wait_gone(job)["JobState"] == "CANCELLED" and jobs()[job]["slurm_state"] == "CANCELLED"
    for target, message in [
        ("999999", "Slurm does not know job 999999"),
        (job, f"job {job} has already ended (CANCELLED)"),
        ("results/runs/nothing-here", "neither a Slurm job id"),
    ]:
        code, out, err = cli("cancel", target)
        assert code == 2 and err.count("\n") == 1 and message in err, err
    code, _, err = cli("jobs", "--paper", "nopaper")
    assert code == 2 and "--paper 'nopaper' is not one of" in err


@pytest.mark.slow
def test_unknown_partition_submits_nothing(cluster, runs):
    def listing():  # the folder exists once a job was submitted (by any test, in any order)
        return set(os.listdir(runs / "slurm")) if (runs / "slurm").exists() else None

    before = listing()
    code, out, err = cli("submit", PRESET, *TINY, "--partition", "nosuch")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "sbatch refused the job, nothing submitted: " in err and "Invalid partition name specified" in err, err
    assert listing() == before


@pytest.mark.slow
def test_time_limit_signal_checkpoints_and_requeues(cluster, runs, time_limit_job, time_limit_result):
    """Slurm's own clock: USR1 60 s before the 2-minute limit (up to ~30 s early); the run checkpoints, the job
    requeues and resumes its run directory. Then `depthbench cancel RUN` stops the running job for good."""
    job, work_dir, _ = time_limit_job
    log = time_limit_result["log"]
    assert "preempted: checkpoint written; requeueing" in log and "restart 1" in log
    code, out, err = time_limit_result["cancel"]
    assert code == 0 and f"cancelled job {job}" in out, err
    final = time_limit_result["final"]
    assert final["JobState"] == "CANCELLED" and final["Restarts"] == "1"
    assert time_limit_result["after"] == "CANCELLED"
    paced = [r["step_time"] for r in metric_records(work_dir) if r.get("kind") == "train"]
    assert paced and min(paced) >= 1.0, paced  # every logged step slept its second: the job idled, both attempts


# ----------------------------------------------------------------------------------------- failures (issue 41)
# Two nodes, one rank each; --min-nodes 1: a requeue without a failed node continues on the other one (elastic).
def submit_failing(*args, config=PRESET) -> tuple[str, str]:
    code, out, err = cli("submit", config, *TINY, "--nodes", 2, "--min-nodes", 1, "--time", 10, *args)
    assert code == 0, err
    job = submitted(out)
    return job, jobs()[job]["work_dir"]


def heartbeat(work_dir, rank: int, attempt: int = 0) -> dict:
    path = Path(work_dir) / "faults" / f"attempt-{attempt}" / f"heartbeat-rank-{rank}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def a_rank_of(job, work_dir, rank, steps, reference) -> dict:
    """Wait until the job trains, then the heartbeat of ``rank`` (its pid and node) once it has a step."""
    wait_training(job, work_dir, steps, reference)
    return wait_for(lambda: (h := heartbeat(work_dir, rank)).get("step") and h, 60, f"rank {rank}'s heartbeat")


def cancel_if_queued(job) -> None:
    if queued(job):
        subprocess.run(["scancel", job], check=False)
        wait_gone(job)


@pytest.mark.slow
def test_killed_rank_requeues_without_its_node_and_finishes_elastically(cluster, runs, two_node_run):
    """(a) kill -9 of rank 1 mid-epoch: the job requeues itself without rank 1's node, continues on the other one
    (2 ranks -> 1: elastic resume) from the last checkpoint, and finishes; meta.json and `jobs` show the history.
    While Slurm holds the job for its restart, meta.json says so (``restarting``, restart 1 of 3), never
    ``failed``; once done, `jobs --why` shows the old attempt's error as history (issue 58 item 10)."""
    job, work_dir = submit_failing()
    try:
        victim = a_rank_of(job, work_dir, 1, 4, two_node_run[1:])
        os.kill(victim["pid"], signal.SIGKILL)
        waiting = wait_for(lambda: (m := meta(work_dir)).get("restarts") and m, 300, "the requeue step's record")
        final = wait_gone(job, 600)
    finally:
        cancel_if_queued(job)
    assert final["JobState"] == "COMPLETED" and final["Restarts"] == "1" and final["NodeList"] != victim["node"]
    m = meta(work_dir)
    assert m["status"] == "done" and m["world_size"] == 1
    (failure,) = m["restarts"]
    assert (failure["attempt"], failure["exit"], failure["rank"], failure["node"]) == (0, "SIGKILL", 1, victim["node"])
    assert failure["excluded"] == [victim["node"]]
    assert failure["action"] == f"requeued on 1 node(s) without {victim['node']}"
    assert [(r["ranks"], r["from_ranks"]) for r in m["resumes"]] == [(1, 2)]
    assert "resumed on 1 ranks from 2: same samples in the same order" in (Path(work_dir) / "log.txt").read_text()
    steps = [r["global_step"] for r in metric_records(work_dir) if r["kind"] == "train"]
    assert steps == list(range(1, 41))  # every step once, in order: the epoch continued where it stopped
    assert [e["epoch"] for e in evals(work_dir)] == [0, 1]
    row = jobs()[job]
    assert (row["failures"], row["excluded"], row["slurm_state"]) == (1, [victim["node"]], "COMPLETED")
    assert "requeued (1 of 3 restarts)" in slurm_log(runs, job)
    assert (waiting["status"], waiting["restart"], waiting.get("error")) == ("restarting", "1 of 3", None)
    code, out, err = cli("jobs", "--why", work_dir)
    assert code == 0, err
    assert out.splitlines()[0].endswith("status done, 1 failed attempt(s)") and "\n  error:" not in out, out
    assert out.splitlines()[1].startswith("history (earlier attempts") and "rank 0 on n" in out, out


@pytest.mark.slow
def test_frozen_rank_is_detected_dumped_and_requeued(cluster, runs, two_node_run):
    """(b) SIGSTOP of rank 1 inside a step: rank 0's watchdog (floor 20 s) notices within the bound, writes its
    stacks, exits 76; the frozen rank (no dump) is the suspect; requeued without its node; finishes."""
    # 80 steps an epoch (not TINY's 20): the freeze must land inside a training step, where the watchdog is armed --
    # on a loaded machine the ranks were sometimes past step 20 by then, in the epoch's evaluation and checkpoint,
    # which the collectives' timeout bounds instead (docs/slurm.md)
    job, work_dir = submit_failing("hang.floor_s=20", "hang.factor=5", "data.train_subset=640")
    victim = {}
    try:
        victim = a_rank_of(job, work_dir, 1, 4, two_node_run[1:])
        os.kill(victim["pid"], signal.SIGSTOP)
        stopped = time.monotonic()
        dump = Path(work_dir) / "faults" / "attempt-0" / "stacks-rank-0.txt"
        wait_for(dump.exists, 120, "rank 0's watchdog to dump its stacks (bound: 2 minutes)")
        detected = time.monotonic() - stopped
        final = wait_gone(job, 600)
    finally:
        if victim.get("pid") and Path(f"/proc/{victim['pid']}").exists():
            os.kill(victim["pid"], signal.SIGKILL)
        cancel_if_queued(job)
    assert 15 < detected < 120
    header = json.loads(dump.read_text().splitlines()[0])
    assert header["rank"] == 0 and "no training step ended for" in header["reason"]
    assert final["JobState"] == "COMPLETED" and final["Restarts"] == "1"
    m = meta(work_dir)
    (failure,) = m["restarts"]
    assert (failure["exit"], failure["rank"], failure["node"]) == ("hang", 1, victim["node"])
    assert failure["stacks"].endswith("faults/attempt-0") and m["status"] == "done"
    code, out, err = cli("jobs", "--why", work_dir)
    assert code == 0, err
    assert f"attempt 0: rank 1 on {victim['node']} hang" in out
    assert re.search(r"rank 0 on n\d, last step \d+: stack dump: \w+ \(", out), out
    assert f"rank 1 on {victim['node']}, last step" in out and "no stack dump (the process was frozen" in out


@pytest.mark.slow
def test_a_collective_timeout_blames_the_frozen_rank_not_the_one_that_waited(cluster, runs, two_node_run):
    """Issue 58 item 11: rank 1 SIGSTOPped with the hang watchdog off: rank 0 waits in the all-reduce until the
    collective timeout raises and exits first, yet the frozen rank (its heartbeat stopped) is blamed and its node
    excluded; the job continues on rank 0's node and finishes."""
    job, work_dir = submit_failing("hang.watchdog=False", "hang.collective_timeout_s=60", "data.train_subset=640")
    victim = {}
    try:
        victim = a_rank_of(job, work_dir, 1, 4, two_node_run[1:])
        os.kill(victim["pid"], signal.SIGSTOP)
        final = wait_gone(job, 900)
    finally:
        if victim.get("pid") and Path(f"/proc/{victim['pid']}").exists():
            os.kill(victim["pid"], signal.SIGKILL)
        cancel_if_queued(job)
    m = meta(work_dir)
    (failure,) = m["restarts"]
    assert (failure["exit"], failure["rank"], failure["node"]) == ("hang", 1, victim["node"]), failure
    assert "before rank 0 failed (exit 1)" in failure["error"] and failure["excluded"] == [victim["node"]]
    assert not list((Path(work_dir) / "faults" / "attempt-0").glob("stacks-rank-*"))  # no watchdog: no dumps
    assert final["JobState"] == "COMPLETED" and final["NodeList"] != victim["node"] and m["status"] == "done"


@pytest.mark.slow
def test_config_error_on_the_requeued_attempt_fails_once(cluster, runs, two_node_run, tmp_path):
    """(c) a crash, then bad input on the requeued attempt (the config was edited meanwhile): FAILED at once, no
    loop, the reason in one line."""
    config = tmp_path / "digits.py"
    config.write_text(f"_base_ = ['{ROOT / PRESET}']\n")
    job, work_dir = submit_failing(config=config)
    try:
        victim = a_rank_of(job, work_dir, 1, 4, two_node_run[1:])
        os.kill(victim["pid"], signal.SIGKILL)
        config.write_text(f"_base_ = ['{ROOT / PRESET}']\nema = dict(decay=5.0)\n")
        final = wait_gone(job, 600)
    finally:
        cancel_if_queued(job)
    assert final["JobState"] == "FAILED" and final["Restarts"] == "1" and final["ExitCode"] == "2:0"
    time.sleep(3)
    assert not queued(job)  # not requeued again
    m = meta(work_dir)
    assert [(r["attempt"], r["exit"]) for r in m["restarts"]] == [(0, "SIGKILL"), (1, "exit 2")]
    assert m["status"] == "failed" and "bad input (exit 2)" in m["error"] and "not requeued" in m["error"]
    assert "ema.decay=5.0" in slurm_log(runs, job)
    code, out, _ = cli("jobs")
    assert re.search(r"^    last failure: attempt 1: .*exit 2.*stopped: .*bad input", out, re.M), out


@pytest.mark.slow
def test_rank_crashing_at_the_same_step_stops_with_a_reason(cluster, runs, two_node_run):
    """(d) the last rank dies (SIGKILL) after step 5 on every attempt: requeued once without its node, then the
    same step failing the same way is deterministic: stopped, one line in `jobs`."""
    job, work_dir = submit_failing("testing.kill_at_step=5")
    try:
        final = wait_gone(job, 600)
    finally:
        cancel_if_queued(job)
    assert final["JobState"] == "FAILED" and final["Restarts"] == "1"
    m = meta(work_dir)
    assert [(r["attempt"], r["exit"], r["step"]) for r in m["restarts"]] == [(0, "SIGKILL", 5), (1, "SIGKILL", 5)]
    assert m["restarts"][0]["rank"] == 1 and m["restarts"][1]["rank"] == 0
    assert m["status"] == "failed" and "the same step failed the same way twice" in m["error"]
    code, out, _ = cli("jobs")
    lines = [ln for ln in out.splitlines() if ln.startswith(f"{job} ")]
    assert len(lines) == 1 and re.search(r"FAILED +failed .* 2, excl n\d ", lines[0]), out
    after = out.splitlines()[out.splitlines().index(lines[0]) + 1]
    assert after.startswith("    last failure: attempt 1: rank 0 on n") and "SIGKILL at step 5" in after
    assert "deterministic error -- not requeued" in after


# ----------------------------------------------------------------------------------------- real jobs, one node
@pytest.fixture(scope="module")
def one_node_cluster(cluster, request):
    """The cluster as one node with 4 CPU slots (two 2-rank jobs side by side on 2 cores) -- after the two-node
    work the selected tests need, so that no job is running when slurmd restarts with the new shape."""
    for fixture in ("two_node_run", "time_limit_result"):
        if wanted(request, fixture):
            request.getfixturevalue(fixture)
    cluster.start(nodes=1, cpus=4)
    return cluster


@pytest.fixture(scope="module")
def one_node_plain(one_node_cluster, runs):
    """A 2-rank job on the one-node cluster, left alone: (job id, run directory)."""
    code, out, err = cli("submit", PRESET, *TINY, "--ntasks-per-node", 2, "--time", 10)
    assert code == 0, err
    job = submitted(out)
    return job, record(runs, job)["elements"][0]["work_dir"]


@pytest.fixture
def one_node_jobs(one_node_plain, one_node_cluster, runs):
    """The plain job and an identical one to be preempted, submitted now (beside the plain one when that is still
    running): the test that preempts it is the only one that sees it, so it cannot finish unpreempted before that
    test runs. ``{"plain"|"preempted": (job id, run directory)}``; the preempted job is cancelled if left running."""
    code, out, err = cli("submit", PRESET, *TINY, "--ntasks-per-node", 2, "--time", 10)
    assert code == 0, err
    job = submitted(out)
    yield {"plain": one_node_plain, "preempted": (job, record(runs, job)["elements"][0]["work_dir"])}
    if queued(job):
        subprocess.run(["scancel", job], check=False)
        wait_gone(job)


@pytest.mark.slow
def test_preempted_job_requeues_resumes_and_matches(one_node_jobs, two_node_run, runs):
    """USR1 to the job's steps (what --signal=USR1@N sends at the warning, without waiting for Slurm's clock):
    the ranks checkpoint and exit 75, the batch script requeues, the job restarts into the same run directory
    and finishes with the weights of the uninterrupted runs -- the one-node one and the two-node one."""
    job, work_dir = one_node_jobs["preempted"]
    wait_training(job, work_dir, 4, reference=two_node_run[1:])  # a few steps in, not yet done
    subprocess.run(["scancel", "--signal=USR1", job], check=True)
    final = wait_gone(job)
    assert final["JobState"] == "COMPLETED" and final["Restarts"] == "1"
    m = meta(work_dir)
    assert m["status"] == "done" and m["slurm_restart_count"] == 1 and len(m["resumes"]) == 1
    assert 0 < m["resumes"][0]["global_step"] < 40
    log = slurm_log(runs, job)
    assert "preempted: checkpoint written; requeueing" in log and f"job {job} array - restart 1" in log
    assert [e["epoch"] for e in evals(work_dir)] == [0, 1]
    resumed = weights(work_dir)
    wait_gone(one_node_jobs["plain"][0])
    for uninterrupted in (one_node_jobs["plain"][1], two_node_run[2]):
        expected = weights(uninterrupted)
        assert expected.keys() == resumed.keys()
        for key, value in expected.items():
            assert torch.equal(value, resumed[key]), (uninterrupted, key)


@pytest.mark.slow
def test_two_rank_job_trains_to_done(one_node_plain, runs):
    job, work_dir = one_node_plain
    final = wait_gone(job)
    assert final["JobState"] == "COMPLETED" and final["Restarts"] == "0" and final["NumTasks"] == "2"
    m = meta(work_dir)
    assert m["status"] == "done" and m["world_size"] == 2 and m["engine"] == "accelerate"
    assert (m["slurm_job_id"], m["slurm_restart_count"], m["slurm_nodelist"]) == (job, 0, "n1")
    assert m["slurm_array_task_id"] is None
    assert [e["epoch"] for e in evals(work_dir)] == [0, 1] and all(0 <= e["top1"] <= 100 for e in evals(work_dir))
    assert f"job {job} array - restart 0 nodes n1 (2 tasks, master 127.0.0.1:" in slurm_log(runs, job)
    row = jobs()[job]
    assert (row["slurm_state"], row["status"], row["work_dir"]) == ("COMPLETED", "done", work_dir)
