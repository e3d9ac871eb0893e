"""harness.engine.loop: the progress lines' unit and the run's ETA; a non-finite skip on one ZeRO shard counted;
a training step never waits on the host (issue 40): sync counting and the device-side non-finite guard.

The host-sync tests: two gloo ranks run the real ``depthbench train`` path in this test's own processes (this file
run as a script in forks of the preloaded server, :mod:`harness.engine.forked`: no fresh interpreter importing torch
per rank), with the loop (``harness.engine.loop.train_one_epoch``) under a ``TorchDispatchMode`` that counts host reads
(``aten._local_scalar_dense``: ``.item()``, ``bool(t)``, ``float(t)``; plus ``Tensor.tolist``) and tensors made from
host data (``aten.lift_fresh``: ``torch.tensor``/``as_tensor``/``from_numpy``, which on CUDA is a blocking
host-to-device copy that ``set_sync_debug_mode("error")`` raises on), and with the
``torch.distributed`` collectives wrapped and counted by size. The gradient traffic (DDP's C++ reducer, ZeRO's
reduce-scatter and parameter all-gather) is large; everything else must fit one small all-reduce and one host read
per log interval. The injected-NaN test makes one rank's loss NaN at a step between two log steps and checks that
no update is applied from it, the run stops at the next log step with the message, and ``last.pth`` is the last
good state.

Through ``depthbench train`` (the tiny runs of tests/fixtures/training.py): a diverging run stops at a non-finite loss
and keeps its last good checkpoint; the stop handlers: a second Ctrl-C stops at once.
"""

import collections
import json
import os
import runpy
import socket
import subprocess
import sys
import traceback
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from harness.engine.checkpoint import read_checkpoint
from harness.engine.forked import start_forked_call

if __name__ != "__main__":  # a rank runs this file as a script, without tests/ on its path (train_two_ranks)
    from fixtures.training import TINY, finish, launch, load, training_env  # noqa: F401 (training_env: the env fixture)

ROOT = Path(__file__).resolve().parents[3]
PRESET = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"
LOG_INTERVAL, STEPS = 4, 20  # 160 images / batch 8 -> 20 updates: 5 log intervals
BASE = [
    "model.width=8",
    "data.input_size=8",
    "data.train_subset=160",
    "data.val_subset=16",
    "batch_size=8",
    "epochs=1",
    f"log_interval={LOG_INTERVAL}",
    "ckpt.interval_minutes=None",
    "log.tensorboard=False",
    "data.workers=0",
]
SMALL = 64  # elements: larger collectives are gradient/parameter traffic

pytestmark = pytest.mark.tier(
    "integration",
    tests=(
        "test_a_log_interval_costs_one_host_read_and_one_small_all_reduce",
        "test_a_nan_between_log_steps_is_never_applied_and_stops_at_the_next_log_step",
    ),
)


@pytest.mark.slow
def test_progress_lines_name_the_unit_and_the_run_eta(capsys):
    from harness.engine.loop import RunLog, TrainState, duration

    assert duration(59) == "00:00:59" and duration(90061) == "1d 01:01:01"
    run = SimpleNamespace(log_metrics=lambda **kw: None, log=lambda text: None)
    state = TrainState(epoch=1, global_step=30)
    log = RunLog(run, state, True, tensorboard=False, unit="seq", epochs=4, steps_per_epoch=20)
    log.train_step(
        state, loss=1.0, lr=0.1, grad_norm=None, images_per_s=12.5, step_time=2.0, peak_mem_mb=100, eta_s=20.0
    )
    line = capsys.readouterr().out.strip()
    # epoch 1 of 0..3 has 20 s left; epochs 2 and 3 are 2 x 20 steps x 2 s more
    assert "12.5 seq/s" in line and "epoch eta 00:00:20" in line and "run eta 00:01:40" in line
    bar = log.progress(10, 0, "epoch 1")
    bar.close()


def test_a_skip_on_one_zero_shard_is_reported_as_a_skip():
    """Under ZeRO 1-3 each rank's guard sees only its gradient shard: one rank of 4 skipping summed to 1, divided by
    the world size printed "0 update(s) skipped". Rounded up, the stop message counts it."""
    from harness.engine.loop import NonFiniteLoss, TrainState, check_finite, updates_skipped

    assert updates_skipped(1.0, 4) == 1 and updates_skipped(8.0, 4) == 2 and updates_skipped(0.0, 4) == 0
    read = {"skipped": updates_skipped(1.0, 4), "bad_ranks": 0}
    with pytest.raises(NonFiniteLoss, match=r"; 1 update\(s\) skipped"):
        check_finite(read, TrainState())


class HostLoader:
    """The data loader under the device loader, with counting paused while it yields a batch: sampling and the
    CPU transforms of ``data.workers=0`` read CPU tensors of the input pipeline (worker processes, on a real run),
    not the training device's."""

    def __init__(self, loader, counter):
        self.loader, self.counter = loader, counter

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        self.counter.paused = True
        try:
            batches = iter(self.loader)
            while True:
                try:
                    batch = next(batches)
                except StopIteration:
                    return
                self.counter.paused = False
                yield batch
                self.counter.paused = True
        finally:
            self.counter.paused = False


class SyncCounter(torch.utils._python_dispatch.TorchDispatchMode):
    """Host reads and collectives while active."""

    def __init__(self):
        super().__init__()
        self.host_reads = 0
        self.host_to_device = 0  # tensors made from host data (torch.tensor, as_tensor, from_numpy)
        self.collectives = []  # (name, elements)
        self.where = collections.Counter()  # the code that read: the failure message names it
        self.paused = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            self.read()
        elif func is torch.ops.aten.lift_fresh.default:  # torch.tensor(host data): on CUDA a blocking copy
            self.read("host-to-device copy")
        return func(*args, **(kwargs or {}))

    def read(self, kind="host read"):
        if self.paused:
            return
        self.host_reads += kind == "host read"
        self.host_to_device += kind != "host read"
        frames = [
            f
            for f in traceback.extract_stack()[:-2]
            if not f.filename.endswith(("test_loop.py", "_python_dispatch.py"))
        ]
        self.where[f"{kind}: " + " < ".join(f"{Path(f.filename).name}:{f.lineno}" for f in frames[-3:][::-1])] += 1

    def __enter__(self):
        import torch.distributed as dist

        self.saved = {}
        counter = self

        def wrap(name, real):
            def counted(*args, **kwargs):
                if counter.paused:
                    return real(*args, **kwargs)
                tensor = args[0] if args else next(iter(kwargs.values()), None)
                elements = tensor.numel() if torch.is_tensor(tensor) else 0
                counter.collectives.append((name, elements))
                return real(*args, **kwargs)

            return counted

        for name in (
            "all_reduce",
            "broadcast",
            "all_gather",
            "all_gather_into_tensor",
            "reduce_scatter",
            "reduce_scatter_tensor",
            "reduce",
            "gather",
            "scatter",
            "barrier",
            "broadcast_object_list",
            "all_gather_object",
            "gather_object",
            "all_to_all_single",
        ):
            self.saved[name] = getattr(dist, name)
            setattr(dist, name, wrap(name, self.saved[name]))
        real_tolist = self.saved["tolist"] = torch.Tensor.tolist

        def tolist(tensor):
            counter.read()
            return real_tolist(tensor)

        torch.Tensor.tolist = tolist
        return super().__enter__()

    def __exit__(self, *exc):
        import torch.distributed as dist

        torch.Tensor.tolist = self.saved.pop("tolist")
        for name, real in self.saved.items():
            setattr(dist, name, real)
        return super().__exit__(*exc)


def rank_main(rank, world, port, work_dir, engine, overrides, nan_at, out):
    """One rank: train through ``harness.commands.train.run`` with the loop counted (and a NaN injected)."""
    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        OMP_NUM_THREADS="1",
        DS_ACCELERATOR="cpu",
    )
    torch.set_num_threads(1)
    from harness.commands.train import run
    from harness.engine import runner

    real_epoch = runner.train_one_epoch
    report = {"host_reads": 0, "host_to_device": 0, "collectives": [], "epochs": 0}

    def counted_epoch(objects, loader, backend, state, cfg, log, checkpoint=None):
        model = backend.unwrap(objects.model)
        criterion = objects.criterion

        def injecting(images, outputs, targets):
            loss = criterion(images, outputs, targets)
            if nan_at is not None and state.global_step + 1 == nan_at:
                report["before_nan"] = {n: p.detach().clone() for n, p in model.named_parameters()}
                if rank == world - 1:  # one rank only: the others must learn of it through the gradients
                    loss = loss * float("nan")
            return loss

        objects.criterion = injecting
        counter = SyncCounter()
        host_loader, loader.loader = loader.loader, HostLoader(loader.loader, counter)
        try:
            with counter:
                return real_epoch(objects, loader, backend, state, cfg, log, checkpoint)
        finally:
            objects.criterion, loader.loader = criterion, host_loader
            report["host_reads"] += counter.host_reads
            report["host_to_device"] += counter.host_to_device
            report["where"] = dict(counter.where.most_common(16))
            report["collectives"] += counter.collectives
            report["epochs"] += 1
            if "before_nan" in report:
                report["unchanged_since_nan"] = all(
                    torch.equal(p.detach(), report["before_nan"][n]) for n, p in model.named_parameters()
                )
                del report["before_nan"]

    runner.train_one_epoch = counted_epoch  # the name the runner calls (the preloaded server imported it already)
    try:
        result = run(str(ROOT / PRESET), work_dir=work_dir, overrides=overrides, engine=engine)
        report["exit_code"] = result.exit_code
    except SystemExit as e:
        report["exit_code"] = e.code
    Path(out).write_text(json.dumps(report))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_two_ranks(tmp_path, engine, overrides, nan_at=None):
    port, work_dir = free_port(), tmp_path / "run"
    outs = [tmp_path / f"rank{r}.json" for r in range(2)]
    # the fork imports functions by module name, and this test module is importable only on pytest's sys.path:
    # the rank runs this file as a script (the __main__ block at the end), with its arguments as globals
    procs = [
        start_forked_call(
            runpy.run_path,
            __file__,
            run_name="__main__",
            init_globals={"RANK_ARGS": (r, 2, port, str(work_dir), engine, BASE + overrides, nan_at, str(outs[r]))},
        )
        for r in range(2)
    ]
    for p in procs:
        p.join(600)
        assert p.exitcode == 0, f"a rank ended with {p.exitcode}"
    return [json.loads(o.read_text()) for o in outs], work_dir


@pytest.mark.slow
@pytest.mark.parametrize(
    "engine, stage",
    [("accelerate", None)] + [("deepspeed", stage) for stage in range(4)],
    ids=["accelerate"] + [f"deepspeed-zero{stage}" for stage in range(4)],
)
def test_a_log_interval_costs_one_host_read_and_one_small_all_reduce(engine, stage, tmp_path):
    """On each engine, and on DeepSpeed at every ZeRO stage the schema allows (0-3: each trains)."""
    zero = [] if stage is None else [f"deepspeed.zero_stage={stage}"]
    reports, work_dir = train_two_ranks(tmp_path, engine, ["ckpt.interval_steps=0"] + zero)
    intervals = STEPS // LOG_INTERVAL
    for report in reports:
        assert report["exit_code"] == 0 and report["epochs"] == 1
        small = [c for c in report["collectives"] if c[1] <= SMALL]
        # the counters see the loop's reads at all (one per sync point), and nothing else -- but for ZeRO-3's own
        # (DeepSpeed reads its gradient norm and checks its parameter trace on the host, with small broadcasts, every
        # step: docs/training.md)
        reads, copies = report["host_reads"], report["host_to_device"]
        if stage == 3:
            reads, copies = (
                sum(
                    n
                    for where, n in report["where"].items()
                    if where.startswith(tuple(f"{kind}: {name}" for name in ("loop.py", "backends.py")))
                )
                for kind in ("host read", "host-to-device copy")
            )
        assert 1 <= reads <= intervals, f"{report['host_reads']} host reads: {report['where']}"
        assert copies == 0, f"blocking host-to-device copies: {report['where']}"
        assert stage == 3 or len(small) <= intervals and all(name == "all_reduce" for name, _ in small), small
    records = [json.loads(line) for line in (work_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["global_step"] for r in records if r["kind"] == "train"] == [4, 8, 12, 16, 20]


@pytest.mark.slow
@pytest.mark.parametrize(
    "engine, optim",
    [("accelerate", []), ("deepspeed", []), ("accelerate", ["optim.fused=True"])],  # the fused kernel's found_inf
    ids=["accelerate", "deepspeed", "accelerate-fused"],
)
def test_a_nan_between_log_steps_is_never_applied_and_stops_at_the_next_log_step(engine, optim, tmp_path):
    # log and checkpoint every 4 updates; rank 1's loss is NaN at update 6
    reports, work_dir = train_two_ranks(tmp_path, engine, ["ckpt.interval_steps=4"] + optim, nan_at=6)
    for report in reports:
        assert report["exit_code"] == 1
        assert report["unchanged_since_nan"], "an update was applied after the non-finite loss"
    log = (work_dir / "log.txt").read_text()
    assert "loss is nan at epoch 0, step 6" in log and "3 update(s) skipped by step 8" in log
    meta = json.loads((work_dir / "meta.json").read_text())
    assert meta["status"] == "failed"
    checkpoint = read_checkpoint(work_dir / "last.pth")  # weights-only, with DeepSpeed's state classes
    assert checkpoint["global_step"] == 4  # the last good state: no checkpoint after the NaN
    assert all(torch.isfinite(t).all() for t in checkpoint["model"].values() if t.is_floating_point())
    train_steps = [
        json.loads(line)["global_step"]
        for line in (work_dir / "metrics.jsonl").read_text().splitlines()
        if json.loads(line)["kind"] == "train"
    ]
    assert train_steps == [4]


@pytest.mark.slow
@pytest.mark.tier("integration")
def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(env, tmp_path):
    run = tmp_path / "run"
    overrides = [o for o in TINY if not o.startswith("ckpt.interval_steps")] + [
        "ckpt.interval_steps=1",
        "optim.lr=30",
    ]  # diverges within the schema's lr bound (100)
    rc, out, err = finish(launch(env, run, overrides=overrides))
    assert rc == 1
    assert "loss is nan" in out or "loss is inf" in out
    assert out.strip().splitlines()[-1].endswith(f"; the run (its last good checkpoint, last.pth): {run}")  # issue 58
    assert json.loads((run / "meta.json").read_text())["status"] == "failed"
    checkpoint = load(run)
    assert checkpoint["global_step"] >= 1  # some steps were good, and were checkpointed
    assert all(torch.isfinite(t).all() for t in checkpoint["model"].values() if t.is_floating_point())


SECOND_CTRL_C = """
import os, signal, time
from harness.engine.loop import install_stop_handlers, stop_requested
install_stop_handlers(announce=False)
os.kill(os.getpid(), signal.SIGINT)
time.sleep(0.1)
assert stop_requested()
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
except KeyboardInterrupt:
    print("stopped at once")
"""


@pytest.mark.slow
@pytest.mark.tier("integration")
def test_a_second_ctrl_c_stops_at_once():
    out = subprocess.run([sys.executable, "-c", SECOND_CTRL_C], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "stopped at once", out.stderr[-2000:]


if __name__ == "__main__":  # one rank of train_two_ranks
    rank_main(*RANK_ARGS)  # noqa: F821 (run_path's init_globals)
