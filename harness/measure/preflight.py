"""The checks behind ``depthbench preflight`` (harness/commands/preflight.py): is this allocation ready for the runs
it is about to get, and what will they cost on it?

Every rank of the allocation runs :func:`preflight_process` (one process locally; each ``srun`` task under Slurm,
the ranks found as ``depthbench train`` finds them, harness/engine/launch.py). Each check gives one
:class:`Check` -- a verdict (ok / warn / fail), the number behind it and one line of text:

- per rank: ``versions`` (torch, CUDA, NCCL, driver), ``devices``, ``bf16`` (support, and its matmul rate against
  fp32's: on a CPU without bf16 units autocast is ~70x slower), ``memory`` (free GPU memory, or host memory);
- per rank and CONFIG: ``step`` -- a training step of the config's model at its per-device batch and precision,
  timed with ``depthbench bench``'s code (harness/measure/bench.py), its peak memory and whether it fits; ``loader``
  -- the images/s the config's training loader (its data, transforms and ``data.workers``; harness/engine/data.py)
  delivers on this rank, against the images/s the step consumes, with the ``data.workers`` that would feed it;
- all ranks: ``all-reduce`` -- bus bandwidth over message sizes as nccl-tests reports it (busbw = algbw x 2(n-1)/n;
  NCCL between GPUs, gloo between CPUs), ``grad-sync`` -- the time a step's gradient all-reduce takes for each
  config's model against its step, ``same-software`` -- every rank runs the same torch/CUDA/NCCL;
- rank 0 (the one that writes checkpoints): ``checkpoint`` -- write bandwidth of the run folder's file system for a
  checkpoint of the model's size (written with the engine's own ``save_atomic``), and whether finishing a step
  and writing it fit in the ``--warning`` window before the time limit; ``space`` -- free space for the runs'
  checkpoints; each other node's first rank checks that it can write the run folder too (``run-folder``).

Checks never raise: an exception becomes a ``fail`` line naming it, so one broken check never hides the others and
no rank leaves a collective the others wait in. The ranks meet over gloo (which every node has); NCCL is used for
the bandwidth only when every rank has its GPU. Rank 0 gathers every rank's checks, renders them node by node and
keeps a machine-readable record, ``preflight.json`` (:data:`FORMAT`), in ``<runs>/preflight/<run id>/``:
``depthbench submit --estimate`` (harness/measure/estimate.py) reads the step times it measured.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from harness.core.errors import ConfigError, DepthbenchError
from harness.core.files import BadFile, printable, read_json
from harness.core.schema import per_device_batch

FORMAT = "depthbench-preflight/1"
RECORD = "preflight.json"
EXPERIMENT = "preflight"   # records live in <runs>/preflight/<run id>/
VERDICTS = ("ok", "warn", "fail")
MIB = 2 ** 20
# optimizer states per parameter in a checkpoint (timm optimizer names); unknown ones count as Adam's two
OPTIMIZER_STATES = {"sgd": 1, "momentum": 1, "nesterov": 1, "lion": 1, "adafactor": 0, "adagrad": 1, "rmsprop": 1}


# ----------------------------------------------------------------------------------------------- what is checked
@dataclass
class Target:
    """One CONFIG to check, with its ``key=value`` overrides; ``label`` names it in the report."""
    config: str
    overrides: tuple = ()
    label: str = ""

    def __post_init__(self):
        self.overrides = tuple(self.overrides)
        self.label = self.label or " ".join([Path(self.config).stem, *self.overrides])


@dataclass
class Layout:
    """The allocation the runs will get: their per-device batch follows from it (``batch_size`` is global), and
    ``time_s``/``warning_s`` (Slurm's ``--time`` and ``--signal=USR1@warning``) bound the checkpoint window.
    ``nodes``/``ranks_per_node`` None: as this preflight runs."""
    nodes: int | None = None
    ranks_per_node: int | None = None
    time_s: int | None = None
    warning_s: int = 120


@dataclass
class Options:
    """How hard each check looks. None picks a default by device (CUDA / CPU)."""
    device: str | None = None              # cpu | cuda (None: cuda when visible)
    steps: int | None = None               # timed training steps per config (10 / 3)
    step_seconds: float | None = None      # time box of one config's step measurement (60 / 60 s)
    loader_seconds: float | None = None    # time box of one config's loader measurement (20 / 10 s)
    allreduce_mib: tuple | None = None     # message sizes (1,16,128,512 / 1,4,16 MiB) plus each model's gradients
    disk_mib: int | None = None            # the largest checkpoint the write test writes (4096 / 256 MiB)
    timeout_s: int = 300                   # rendezvous and collectives

    def resolved(self, device: str) -> "Options":
        cuda = device == "cuda"
        return Options(device, self.steps or (10 if cuda else 3), self.step_seconds or 60.0,
                       self.loader_seconds or (20.0 if cuda else 10.0),
                       tuple(self.allreduce_mib or ((1, 16, 128, 512) if cuda else (1, 4, 16))),
                       self.disk_mib or (4096 if cuda else 256), self.timeout_s)


@dataclass
class Check:
    """One line of the report: which check, its verdict, the line itself and the number behind it."""
    check: str
    verdict: str                 # ok | warn | fail
    text: str
    value: float | None = None   # the number the verdict rests on, in ``unit``
    unit: str = ""
    config: str | None = None    # the CONFIG's label, for per-config checks
    node: str = ""
    rank: int | None = None      # None: a check of all ranks together
    data: dict = field(default_factory=dict)


@dataclass
class Report:
    """What rank 0 returns: every check, the record written (``path``), its rendering and the exit code."""
    checks: list[Check]
    record: dict
    path: Path | None
    text: str
    exit_code: int
    shown: bool = False          # already printed (by rank 0's own process under ``--nproc``)


# ----------------------------------------------------------------------------------------------- the plan
@dataclass
class Plan:
    """A CONFIG as its runs will see it on the layout: the model, its per-device batch, its checkpoint size."""
    target: Target
    cfg: object
    participant: object
    world: int
    micro_batch: int | None
    problem: str | None
    params: int
    macs: int
    precision: str

    @property
    def label(self) -> str:
        return self.target.label

    def checkpoint_bytes(self) -> int:
        """``last.pth``: model weights, optimizer state and EMA weights, all fp32."""
        opt = str((self.cfg.get("optim") or {}).get("opt", "adamw")).lower().split("_")[-1]
        states = OPTIMIZER_STATES.get(opt, 2)
        ema = 1 if (self.cfg.get("ema") or {}).get("enable") else 0
        return 4 * self.params * (1 + states + ema)

    def best_bytes(self) -> int:
        ema = 1 if (self.cfg.get("ema") or {}).get("enable") else 0
        return 4 * self.params * (1 + ema)

    def keep(self) -> int:
        return int((self.cfg.get("ckpt") or {}).get("keep") or 1)

    def identity(self) -> dict:
        """What makes a step time reusable: the model, its arguments and input, the precision, the batch."""
        p = self.participant
        return {"model": p.name, "model_kwargs": p.kwargs, "input_size": list(p.input_size),
                "precision": self.precision, "micro_batch": self.micro_batch, **self.speed_options()}

    def speed_options(self) -> dict:
        """The engine options that change a step's time and memory and that the step check applies (compile is
        not: its compile time does not fit the check's time box; the step is timed eagerly and says so)."""
        return {"channels_last": bool(self.cfg.get("channels_last")),
                "grad_checkpointing": bool(self.cfg.get("grad_checkpointing"))}


def make_plan(target: Target, world: int) -> Plan:
    """Load ``target``'s config (bad input raises :class:`DepthbenchError` here, before any work) and size its
    model on the meta device. ``world``: the ranks the runs will have."""
    from harness.engine.builders import load_training_config
    from harness.measure.bench import build, participant_from_config
    from harness.measure.flops import count_flops, count_params, example_inputs

    cfg, _ = load_training_config(target.config, list(target.overrides))  # as `depthbench train` reads it
    participant = participant_from_config(target.config, target.overrides)
    model = build(participant)
    params = count_params(model)
    try:
        macs = count_flops(model, inputs=example_inputs(model, participant.input_size)).total
    except Exception:  # a model the counter cannot follow still gets every other check
        macs = 0
    accum = int(cfg.get("grad_accum") or 1)
    problem, micro = None, None
    try:
        micro = per_device_batch(cfg.batch_size, world, accum)
    except ConfigError as e:
        problem = f"{e} or another layout"
    precision = str(cfg.get("precision") or "fp32")
    return Plan(target, cfg, participant, world, micro, problem, params, macs, precision)


# ----------------------------------------------------------------------------------------------- one rank
def preflight_process(targets: list[Target], layout: Layout, options: Options, work_dir: str | Path | None = None,
                      progress: Callable[[str], None] | None = None) -> Report:
    """Run every check on this rank; rank 0 gathers, renders and writes ``preflight.json`` into ``work_dir``
    (default ``<runs>/preflight/<run id>``) and returns the :class:`Report`; other ranks return one without checks
    or record, with the exit code rank 0 decided."""
    import torch

    from harness.engine.launch import configure_threads, export_distributed_env

    env = export_distributed_env()
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    local_rank, local_world = int(env.get("LOCAL_RANK", 0)), int(env.get("LOCAL_WORLD_SIZE", world))
    say = progress if (progress and rank == 0) else (lambda line: None)
    planned = (layout.nodes or 1) * (layout.ranks_per_node or 1) if layout.nodes or layout.ranks_per_node else world
    try:
        plans = [make_plan(t, planned) for t in targets]  # config errors: one line, before any work
    except DepthbenchError as e:
        if rank != 0:  # rank 0 says it once
            raise SystemExit(e.exit_code) from None
        raise
    workers = max([int(p.cfg.data.get("workers") or 0) for p in plans] or [0])
    configure_threads(local_world, workers)
    device = options.device or ("cuda" if torch.cuda.is_available() else "cpu")
    opts = options.resolved(device)
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    group = _Group(world, opts.timeout_s)
    try:
        if world > 1 and rank == 0:
            say(f"depthbench preflight: {world} ranks met")
        cuda_ready = device == "cuda" and torch.cuda.is_available() and torch.cuda.device_count() > 0
        if cuda_ready:
            torch.cuda.set_device(local_rank % torch.cuda.device_count())
        run_path = Path(group.broadcast(str(work_dir or _new_record_path())))
        mine = _Rank(rank, local_rank, local_world, node, device if cuda_ready or device == "cpu" else "cpu")
        checks: list[Check] = []
        say("depthbench preflight: versions, devices, bf16, memory")
        checks += mine.environment(device, plans)
        measured: dict[str, dict] = {}
        unique, same = distinct(plans)  # a sweep's points differ in the learning rate: one measurement for all
        for plan in unique:
            group.barrier()  # every rank steps at once (shared nodes, shared links), then loads at once
            say(f"depthbench preflight: {plan.label}: training step at batch {plan.micro_batch}, {plan.precision}")
            check, numbers = mine.step(plan, opts)
            checks.append(check)
            measured[plan.label] = numbers
            group.barrier()
            say(f"depthbench preflight: {plan.label}: loader ({plan.cfg.data.type}, workers {plan.cfg.data.workers})")
            check, loader = mine.loader(plan, opts, numbers.get("step_ms"))
            checks.append(check)
            measured[plan.label].update(loader)
        say("depthbench preflight: all-reduce bandwidth")
        nccl = group.all(cuda_ready)  # every rank asks (a collective), NCCL only when every rank has its GPU
        collective = group.allreduce_sweep(opts, unique, nccl)
        if rank == 0:
            run_path.mkdir(parents=True, exist_ok=True)
        group.barrier()
        say("depthbench preflight: checkpoint write, free space")
        if rank == 0:
            checks += mine.disk(plans, unique, measured, run_path, layout, opts)
        elif local_rank == 0:
            checks.append(mine.probe(run_path))
        for label, first in same.items():
            measured[label] = dict(measured.get(first, {}))
        gathered = group.gather({"rank": rank, "local_rank": local_rank, "node": node, "checks": checks,
                                 "measured": measured, "versions": mine.versions, "device_name": mine.device_name})
        report = None
        code = 0
        if rank == 0:
            report = _assemble(gathered, collective, plans, same, layout, opts, run_path, world)
            code = report.exit_code
        code = group.broadcast(code)
        # a rank other than 0 shows nothing itself; it exits with the code rank 0 decided
        return report if rank == 0 else Report([], {}, None, "", code)
    finally:
        group.close()


def distinct(plans: list[Plan]) -> tuple[list[Plan], dict[str, str]]:
    """The plans whose step, loader and checkpoint differ, and ``{label: the label measured for it}`` for the rest
    (same model, arguments, input, precision, per-device batch, optimizer state and data pipeline)."""
    unique, same, seen = [], {}, {}
    for plan in plans:
        if plan.problem:
            unique.append(plan)
            continue
        cfg = plan.cfg
        key = json.dumps([plan.identity(), _plain(cfg.get("data") or {}), _plain(cfg.get("aug") or {}),
                          plan.checkpoint_bytes(), plan.keep()], sort_keys=True, default=str)
        if key in seen:
            same[plan.label] = seen[key]
        else:
            seen[key] = plan.label
            unique.append(plan)
    return unique, same


def runs_root() -> Path:
    """``$DEPTHBENCH_RUNS`` as it is now (a test or a notebook may set it after import), else the default root."""
    from harness.core.rundir import DEFAULT_ROOT

    return Path(os.environ.get("DEPTHBENCH_RUNS") or DEFAULT_ROOT)


def _new_record_path() -> Path:
    from harness.core.rundir import new_run_path

    return new_run_path(EXPERIMENT, runs_root())


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:300]}" if not isinstance(e, DepthbenchError) else text


class _Group:
    """The ranks together: gloo for meeting and objects (every node has it), NCCL for the GPU bandwidth test."""

    def __init__(self, world: int, timeout_s: int):
        import torch.distributed as dist

        self.world, self.dist, self.timeout_s = world, dist, timeout_s
        self.started = False
        if world > 1 and not dist.is_initialized():
            dist.init_process_group("gloo", timeout=_dt.timedelta(seconds=timeout_s))
            self.started = True

    def barrier(self):
        if self.world > 1:
            self.dist.barrier()

    def broadcast(self, value):
        if self.world == 1:
            return value
        box = [value]
        self.dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, obj) -> list:
        if self.world == 1:
            return [obj]
        out = [None] * self.world if self.dist.get_rank() == 0 else None
        self.dist.gather_object(obj, out, dst=0)
        return out

    def all(self, flag: bool) -> bool:
        if self.world == 1:
            return bool(flag)
        import torch

        t = torch.tensor([0.0 if flag else 1.0])
        self.dist.all_reduce(t)
        return t.item() == 0

    def allreduce_sweep(self, opts: Options, plans: list[Plan], nccl: bool) -> dict:
        """Every rank: all-reduce of each message size and of each model's gradients; the slowest rank's time."""
        import torch

        if self.world == 1:
            return {"backend": None, "ranks": 1, "rows": [], "grad": {}}
        backend = "nccl" if nccl else "gloo"
        nccl_log = _nccl_debug_to_file() if nccl else None  # NCCL reads it when the group's communicator starts
        group = self.dist.new_group(backend="nccl", timeout=_dt.timedelta(seconds=self.timeout_s)) if nccl else None
        device = torch.device("cuda", torch.cuda.current_device()) if nccl else torch.device("cpu")
        result = {"backend": backend, "ranks": self.world, "rows": [], "grad": {}, "error": None, "correct": None}
        try:
            probe = torch.full((1024,), float(self.dist.get_rank() + 1), device=device)
            self.dist.all_reduce(probe, group=group)
            expected = self.world * (self.world + 1) / 2
            result["correct"] = bool(torch.allclose(probe.cpu(), torch.full((1024,), expected)))
            sizes = sorted({int(m * MIB) for m in opts.allreduce_mib})
            grads = {p.label: 4 * p.params for p in plans if p.params}
            for nbytes in sizes + sorted(set(grads.values()) - set(sizes)):
                seconds = self._time_allreduce(nbytes, device, group)
                row = _bandwidth_row(nbytes, seconds, self.world)
                result["rows"].append(row)
            result["rows"].sort(key=lambda r: r["bytes"])
            by_size = {r["bytes"]: r for r in result["rows"]}
            result["grad"] = {label: by_size[n] for label, n in grads.items()}
            result["transport"] = self._transport(nccl_log)
            result["pairs"] = self._pair_bandwidths(device, nccl, max(sizes))
        except Exception as e:  # a broken link: a fail line, and the other checks still run
            result["error"] = _one_line(e)
        finally:
            if group is not None:
                self.dist.destroy_process_group(group)
        return result

    def _transport(self, nccl_log: Path | None) -> list:
        """Every rank's view of the transport between nodes (:func:`nccl_transport` of its NCCL log; gloo: TCP)."""
        if nccl_log is None:
            mine = {"transport": "gloo over TCP sockets", "gdr": None,
                    "interface": os.environ.get("GLOO_SOCKET_IFNAME")}  # None: the hostname's address
        elif nccl_log == Path():
            mine = {"transport": "unknown (NCCL_DEBUG is set: see NCCL's own INFO lines)", "gdr": None}
        else:
            text = "".join(f.read_text(errors="replace") for f in nccl_log.parent.glob(nccl_log.name + "*"))
            mine = nccl_transport(text)
        views = [None] * self.world
        self.dist.all_gather_object(views, {"node": os.environ.get("SLURMD_NODENAME") or socket.gethostname(),
                                            **mine})
        return views

    def _pair_bandwidths(self, device, nccl: bool, nbytes: int) -> list:
        """All-reduce bus bandwidth between neighbouring nodes on a ring of the nodes (their first ranks), one
        pair at a time -- (0,1), (1,2), ..., (n-1,0) -- so each node is measured with two different peers: a slow
        node shows in both of its pairs, a good one in at most one. Needs 3 nodes (with 2 there is one pair:
        nobody to compare with); [] otherwise."""
        import torch

        nodes = [None] * self.world
        self.dist.all_gather_object(nodes, os.environ.get("SLURMD_NODENAME") or socket.gethostname())
        order = list(dict.fromkeys(nodes))
        if len(order) < 3:
            return []
        leaders = [nodes.index(n) for n in order]
        pairs = [(i, (i + 1) % len(order)) for i in range(len(order))]
        me, results = self.dist.get_rank(), []
        for a, b in pairs:  # every rank creates every group, in the same order (torch.distributed's rule)
            ranks = sorted({leaders[a], leaders[b]})
            sub = self.dist.new_group(ranks, backend="nccl" if nccl else "gloo",
                                      timeout=_dt.timedelta(seconds=self.timeout_s))
            if me in ranks:
                buffer = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=device)
                for _ in range(2):
                    self.dist.all_reduce(buffer, group=sub)
                sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
                sync()
                start = time.perf_counter()
                for _ in range(5):
                    self.dist.all_reduce(buffer, group=sub)
                sync()
                seconds = (time.perf_counter() - start) / 5
                if me == ranks[0]:
                    results.append({"nodes": [order[a], order[b]], **_bandwidth_row(nbytes, seconds, 2)})
            self.dist.destroy_process_group(sub)
        gathered = [None] * self.world
        self.dist.all_gather_object(gathered, results)
        return [r for part in gathered for r in part]

    def _time_allreduce(self, nbytes: int, device, group) -> float:
        import torch

        buffer = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=device)
        iters = 10 if nbytes <= 16 * MIB else 5
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        for _ in range(2):
            self.dist.all_reduce(buffer, group=group)
        sync()
        start = time.perf_counter()
        for _ in range(iters):
            self.dist.all_reduce(buffer, group=group)
        sync()
        seconds = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
        self.dist.all_reduce(seconds, op=self.dist.ReduceOp.MAX)  # nccl-tests reports the slowest rank
        return float(seconds.item())

    def close(self):
        if self.started:
            self.dist.destroy_process_group()


def _bandwidth_row(nbytes: int, seconds: float, ranks: int) -> dict:
    """nccl-tests' all-reduce columns: algbw = bytes / time, busbw = algbw x 2(n-1)/n (GB/s = 1e9 B/s)."""
    algbw = nbytes / seconds / 1e9
    return {"bytes": nbytes, "count": nbytes // 4, "type": "float", "time_ms": _sig(1000 * seconds),
            "algbw_gbs": _sig(algbw), "busbw_gbs": _sig(algbw * 2 * (ranks - 1) / ranks)}


def _sig(x: float) -> float:
    return float(f"{x:.5g}")  # significant digits: latency-bound sizes run at MB/s, large ones at hundreds of GB/s


# ----------------------------------------------------------------------------------------------- the checks
class _Rank:
    """The checks one rank runs on itself."""

    def __init__(self, rank: int, local_rank: int, local_world: int, node: str, device: str):
        self.rank, self.local_rank, self.local_world, self.node, self.device = rank, local_rank, local_world, node, device
        self.versions: dict = {}
        self.device_name = ""
        self.free_bytes = None
        self.fp32_gflops = self.bf16_gflops = None

    def check(self, check_name: str, verdict: str, text: str, value=None, unit="", config=None, **data) -> Check:
        return Check(check_name, verdict, text, None if value is None else round(float(value), 4), unit, config,
                     self.node, self.rank, data)

    def guarded(self, name: str, config: str | None, fn):
        try:
            return fn()
        except Exception as e:
            return self.check(name, "fail", f"{name} check failed: {_one_line(e)}", config=config)

    # -------------------------------------------------------------------------------------------- environment
    def environment(self, requested: str, plans: list[Plan]) -> list[Check]:
        return [self.guarded("versions", None, lambda: self._versions(requested)),
                self.guarded("devices", None, lambda: self._devices(requested)),
                self.guarded("bf16", None, lambda: self._bf16(plans)),
                self.guarded("memory", None, self._memory)]

    def _versions(self, requested: str) -> Check:
        import torch

        nccl = None
        try:
            if torch.cuda.is_available():
                nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:
            pass
        driver = _driver_version()
        self.versions = {"torch": torch.__version__, "cuda": torch.version.cuda, "nccl": nccl, "driver": driver,
                         "python": sys.version.split()[0]}
        text = (f"torch {torch.__version__}, CUDA {torch.version.cuda or '-'}, NCCL {nccl or '-'}, "
                f"driver {driver or '-'}, Python {self.versions['python']}")
        if requested == "cuda" and not torch.cuda.is_available():
            why = "torch has no CUDA build" if not torch.version.cuda else "no GPU visible to this rank"
            return self.check("versions", "fail", f"{text}: {why}", **self.versions)
        return self.check("versions", "ok", text, **self.versions)

    def _devices(self, requested: str) -> Check:
        import torch

        if self.device == "cuda":
            count = torch.cuda.device_count()
            index = torch.cuda.current_device()
            props = torch.cuda.get_device_properties(index)
            self.device_name = props.name
            text = (f"{count} GPU(s) visible, this rank on cuda:{index}: {props.name} (sm_{props.major}{props.minor}, "
                    f"{props.multi_processor_count} SMs, {props.total_memory / 2**30:.1f} GiB)")
            if self.local_world > count:
                return self.check("devices", "fail", f"{text}; {self.local_world} ranks on this node share "
                                  f"{count} GPU(s): one rank per GPU (--gpus-per-node)", count, "GPUs")
            return self.check("devices", "ok", text, count, "GPUs", device_name=props.name)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        self.device_name = _cpu_name()
        text = (f"CPU {self.device_name}: {cores} core(s) for this rank, {torch.get_num_threads()} thread(s), "
                f"{self.local_world} rank(s) on this node")
        if requested == "cuda":
            return self.check("devices", "fail", f"no GPU: {text}", 0, "GPUs")
        return self.check("devices", "ok", text, cores, "cores", device_name=self.device_name)

    def _bf16(self, plans: list[Plan]) -> Check:
        import torch

        from harness.measure.bench import bf16_supported, peak_matmul_gflops

        cuda = self.device == "cuda"
        n = 4096 if cuda else 256
        wants = [p.label for p in plans if p.precision in ("bf16", "fp16")]
        supported = bf16_supported(self.device)
        if cuda:
            torch.backends.cuda.matmul.allow_tf32 = False  # plain fp32, as the comparison means
        fp32 = peak_matmul_gflops(n, torch.float32, self.device)
        self.fp32_gflops = fp32
        if not supported:
            verdict = "fail" if (wants and cuda) else ("warn" if wants else "ok")
            return self.check("bf16", verdict, f"no bf16 support here (fp32 matmul {fp32:,.1f} GFLOP/s)"
                              + (f"; {', '.join(wants)} train in {plans[0].precision}: use precision=fp32" if wants
                                 else ""), 0, "x fp32", fp32_gflops=round(fp32, 1))
        bf16 = peak_matmul_gflops(n, torch.bfloat16, self.device)
        self.bf16_gflops = bf16
        ratio = bf16 / fp32
        text = f"bf16 matmul {bf16:,.1f} GFLOP/s = {ratio:.2f}x fp32 ({fp32:,.1f}; n={n})"
        data = dict(bf16_gflops=round(bf16, 1), fp32_gflops=round(fp32, 1))
        if ratio < 1 and wants:
            return self.check("bf16", "warn", f"{text}: slower than fp32 here, yet {', '.join(wants)} use "
                              f"autocast; set precision=fp32 for this device", ratio, "x fp32", **data)
        return self.check("bf16", "ok", text, ratio, "x fp32", **data)

    def _memory(self) -> Check:
        import torch

        if self.device == "cuda":
            free, total = torch.cuda.mem_get_info()
            self.free_bytes = free
            text = f"GPU memory {free / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB"
            if free < 0.9 * total:
                return self.check("memory", "warn", f"{text}: another process holds "
                                  f"{(total - free) / 2**30:.1f} GiB of this GPU", free / 2**30, "GiB free")
            return self.check("memory", "ok", text, free / 2**30, "GiB free", total_gib=round(total / 2**30, 2))
        import psutil

        vm = psutil.virtual_memory()
        self.free_bytes = vm.available // max(1, self.local_world)
        return self.check("memory", "ok", f"host memory {vm.available / 2**30:.1f} GiB available of "
                          f"{vm.total / 2**30:.1f} GiB ({self.local_world} rank(s) share it)", vm.available / 2**30,
                          "GiB free", total_gib=round(vm.total / 2**30, 2))

    # -------------------------------------------------------------------------------------------- per config
    def step(self, plan: Plan, opts: Options) -> tuple[Check, dict]:
        try:
            return self._step(plan, opts)
        except Exception as e:
            if self.device == "cuda":
                import torch

                torch.cuda.empty_cache()
            return self.check("step", "fail", f"{plan.label}: {_one_line(e)}", config=plan.label), {}

    def _step(self, plan: Plan, opts: Options) -> tuple[Check, dict]:
        import torch

        from harness.measure.bench import amp_dtype, build, measure

        if plan.problem:
            return self.check("step", "fail", f"{plan.label}: {plan.problem}", config=plan.label), {}
        batch, precision = plan.micro_batch, plan.precision
        amp = None if precision == "fp32" else ("bf16" if precision == "fp16" and self.device == "cpu" else precision)
        # a step predicted far beyond the time box is not started (from the model's FLOPs and this device's matmul
        # rate; a training step reaches ~30 % of it on a GPU, ~10 % on a CPU): a CPU without bf16 units runs autocast
        # ~70x slower than fp32, and an 8-GPU recipe's batch on a CPU takes minutes per step
        efficiency = 0.3 if self.device == "cuda" else 0.1
        rate = (self.bf16_gflops if amp == "bf16" else None) or self.fp32_gflops or 1.0
        per_step = 6 * plan.macs * batch / max(1e9 * efficiency * rate, 1.0)
        if per_step > 3 * opts.step_seconds:
            return self.check("step", "warn", f"{plan.label}: not measured: a step at batch {batch} ({precision}) "
                              f"would take ~{per_step:,.0f} s on this device (6 x {plan.macs / 1e9:.2f} GMACs x "
                              f"{batch} at {efficiency:.0%} of its {rate:,.1f} GFLOP/s); run preflight where the runs "
                              f"will run", per_step * 1000, "ms (predicted)", config=plan.label, predicted=True), {}
        model = build(plan.participant, device="cpu")
        try:
            # one cold step first (allocations, cuDNN's choices): the memory peak, and how many timed steps fit the box
            first = measure(model, plan.participant.input_size, batch, "train", warmup=0, iters=1,
                            device=self.device, amp_dtype=amp_dtype(amp), **plan.speed_options())
            cold = first["step_ms"] / 1000
            iters = min(opts.steps, int((opts.step_seconds - cold) / max(cold, 1e-4)) - 1)
            if iters >= 1:
                numbers = measure(model, plan.participant.input_size, batch, "train", warmup=1, iters=iters,
                                  device=self.device, amp_dtype=amp_dtype(amp), **plan.speed_options())
                numbers["peak_mem_mb"] = max(numbers["peak_mem_mb"], first["peak_mem_mb"])
            else:  # only the cold step fit the box: its time is an upper bound
                numbers, iters = first, 0
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            return self.check("step", "fail", f"{plan.label}: out of GPU memory at batch {batch} per device "
                              f"({precision}); lower batch_size, raise grad_accum or use more GPUs (ZeRO: "
                              f"--engine deepspeed)", 0, "ms", config=plan.label), {}
        finally:
            del model
            if self.device == "cuda":
                torch.cuda.empty_cache()
        step_ms, peak = numbers["step_ms"], numbers["peak_mem_mb"] * MIB
        # measure() trains with SGD + momentum (one state); the config's optimizer and EMA may keep more
        opt = str((plan.cfg.get("optim") or {}).get("opt", "adamw")).lower().split("_")[-1]
        extra = 4 * plan.params * (max(0, OPTIMIZER_STATES.get(opt, 2) - 1)
                                   + (1 if (plan.cfg.get("ema") or {}).get("enable") else 0))
        need = peak + extra
        free = self.free_bytes
        where = "GPU" if self.device == "cuda" else "host"
        timed = f"{iters} timed" if iters else "1 cold step only: an upper bound"
        timed += "".join(f", {name.replace('_', ' ')}" for name, on in plan.speed_options().items() if on)
        if (plan.cfg.get("compile") or {}).get("enable"):
            timed += ", eager (compile.enable: not timed compiled here)"
        text = (f"{plan.label}: {step_ms:,.1f} ms/step at batch {batch} ({precision}, {timed}), "
                f"{batch / step_ms * 1000:,.1f} {_unit(plan)}/s; peak {need / 2**30:.2f} GiB of "
                + (f"{free / 2**30:.1f} GiB free {where} memory" if free is not None else "? (free memory unknown)"))
        numbers = {"step_ms": round(step_ms, 3), "samples_per_s": round(numbers["samples_per_s"], 3),
                   "peak_mem_mb": round(need / MIB, 1), "timed_steps": iters}
        if free is None:  # the memory check failed and said why; the step itself ran
            return self.check("step", "ok", text, numbers["step_ms"], "ms", plan.label, **numbers), numbers
        verdict = "ok" if need <= 0.9 * free else ("warn" if need <= free else "fail")
        if verdict == "warn":
            text += ": fits with under 10 % to spare"
        elif verdict == "fail":
            text += f": does not fit; lower batch_size or raise grad_accum (batch {batch} per device now)"
        else:
            text += ": fits"
        return self.check("step", verdict, text, numbers["step_ms"], "ms", plan.label, **numbers), numbers

    def loader(self, plan: Plan, opts: Options, step_ms: float | None) -> tuple[Check, dict]:
        try:
            return self._loader(plan, opts, step_ms)
        except Exception as e:
            return self.check("loader", "fail", f"{plan.label}: {_one_line(e)}", config=plan.label), {}

    def _loader(self, plan: Plan, opts: Options, step_ms: float | None) -> tuple[Check, dict]:
        import gc

        import torch

        from harness.engine.data import DeviceLoader, build_loaders, check_data, loader_options, set_train_epoch

        if plan.problem:
            return self.check("loader", "fail", f"{plan.label}: {plan.problem}", config=plan.label), {}
        cfg, batch, unit = plan.cfg, plan.micro_batch, _unit(plan)
        root = check_data(cfg.data)
        workers = int(cfg.data.workers or 0)
        train, val = build_loaders(cfg, self.rank, plan.world, batch)
        del val
        try:
            images = len(train.dataset)
        except TypeError:  # a stream (WebDataset) has no length
            images = None
        set_train_epoch(train, 0)
        # steady state: worker start-up is paid once per run, and the workers prefetch 2 batches each while they
        # start, which arrive at once; the rate is taken after those
        skip = 2 * workers
        stamps, start = [], time.perf_counter()

        def enough() -> bool:
            seconds = time.perf_counter() - stamps[0]
            return seconds >= opts.loader_seconds or (len(stamps) >= skip + max(10, 4 * workers)
                                                     and seconds >= min(2.0, opts.loader_seconds))

        # the configured pipeline as training runs it: batches finished on the device (loader.pipeline='device'
        # decodes and augments there, loader.device_normalize normalises), each one waited for
        pipeline = loader_options(cfg)["pipeline"]
        source = DeviceLoader(train, self.device) if getattr(train, "finish", None) is not None else train
        synchronize = torch.cuda.synchronize if str(self.device).startswith("cuda") else (lambda: None)
        for _ in _limited(source, enough):
            synchronize()
            stamps.append(time.perf_counter())
        del train, source
        gc.collect()  # persistent workers end with their loader
        if not stamps:
            return self.check("loader", "fail", f"{plan.label}: the loader gave no batch of {batch}",
                              config=plan.label), {}
        first = stamps[0] - start
        steady = stamps[skip:] if len(stamps) - skip >= 3 else stamps
        if len(steady) >= 3:
            rate = (len(steady) - 1) * batch / (steady[-1] - steady[0])
        else:
            rate = len(stamps) * batch / (stamps[-1] - start)
        numbers = {"loader_per_s": round(rate, 2), "loader_first_batch_s": round(first, 3), "train_images": images,
                   "workers": workers, "data_root": str(root), "pipeline": pipeline}
        base = (f"{plan.label}: loader {rate:,.0f} {unit}/s per rank from {root} ({pipeline} pipeline, "
                f"data.workers={workers}, "
                f"{len(stamps)} batches, first after {first:.1f} s"
                + (": start-up included, a lower bound)" if len(steady) < 3 else ")"))
        if not step_ms:
            return self.check("loader", "ok", base, rate, f"{unit}/s", plan.label, **numbers), numbers
        consume = batch / step_ms * 1000
        numbers["step_per_s"] = round(consume, 2)
        ratio = consume / rate
        cores = _cores_per_rank(self.local_world)
        if ratio <= 1:
            text = f"{base} >= the step's {consume:,.0f} {unit}/s ({1 / ratio:.1f}x headroom)"
            verdict = "ok"
            if workers == 0:  # loading in the training process is not overlapped with the step
                wait = batch / rate * 1000
                text += f"; with data.workers=0 each step also waits {wait:,.0f} ms for its batch"
                verdict = "ok"
                if wait > 0.1 * step_ms:
                    verdict, text = "warn", text + f" (+{wait / step_ms:.0%}): data.workers=1 would overlap it"
            return self.check("loader", verdict, text, ratio, "x", plan.label, **numbers), numbers
        per_worker = rate / max(workers, 1)
        needed = math.ceil(consume * 1.2 / per_worker)
        if needed <= max(cores - 1, 1):
            advice = f"raise data.workers to {needed}"
        else:
            reach = per_worker * max(cores - 1, 1)
            advice = (f"even data.workers={max(cores - 1, 1)} (this rank's {cores} cores) gives ~{reach:,.0f} "
                      f"{unit}/s: faster storage or decoding (WebDataset shards, a local copy), or more CPU cores "
                      f"per GPU (--cpus-per-task)")
        numbers["suggested_workers"] = needed
        text = (f"{plan.label}: loader-bound by {ratio:.1f}x: the loader delivers {rate:,.0f} {unit}/s per rank "
                f"(data.workers={workers}), the step consumes {consume:,.0f}; {advice}")
        return self.check("loader", "warn", text, ratio, "x", plan.label, **numbers), numbers

    # -------------------------------------------------------------------------------------------- the run folder
    def disk(self, plans: list[Plan], unique: list[Plan], measured: dict, run_path: Path, layout: Layout,
             opts: Options) -> list[Check]:
        """The checkpoint window for each distinct plan, the free space for all of them."""
        checks = []
        sizes = {p.label: p.checkpoint_bytes() for p in plans}
        largest = max(sizes.values(), default=2**30)  # no config: a 1 GiB checkpoint (capped by opts.disk_mib)
        result = self.guarded("checkpoint", None, lambda: self._write(run_path, largest, opts))
        if isinstance(result, Check):
            return [result]
        bandwidth, written, seconds = result
        base = (f"run folder {run_path.parent}: {bandwidth / 1e6:,.0f} MB/s writing a {written / MIB:,.0f} MiB "
                f"checkpoint (torch.save, SHA-256, fsync, rename)")
        if not plans:
            checks.append(self.check("checkpoint", "ok", base, bandwidth / 1e6, "MB/s"))
        for plan in unique:
            write_s = sizes[plan.label] / bandwidth
            step_ms = measured.get(plan.label, {}).get("step_ms")
            need = write_s + (step_ms or 0) / 1000
            measured.setdefault(plan.label, {}).update(checkpoint_bytes=sizes[plan.label],
                                                       checkpoint_write_s=round(write_s, 3))
            step = f"a step ({_secs(step_ms / 1000)}) and the write need" if step_ms else \
                "the write (the step was not measured) needs"
            text = (f"{plan.label}: last.pth {_size(sizes[plan.label])} in {_secs(write_s)} at "
                    f"{bandwidth / 1e6:,.0f} MB/s; {step} {_secs(need)} of the {layout.warning_s} s --warning window")
            if layout.time_s is not None:
                text += f" before the {_duration(layout.time_s)} limit"
            interval = (plan.cfg.get("ckpt") or {}).get("interval_minutes")
            if interval:
                text += f"; every {interval} min that is {write_s / (60 * interval):.2%} of the run"
            if need <= 0.5 * layout.warning_s:
                verdict = "ok"
            elif need <= layout.warning_s:
                verdict, text = "warn", text + f": tight; raise --warning to {_round_up(2 * need)}"
            else:
                verdict, text = "fail", (text + f": the run would be killed mid-write; raise --warning to "
                                         f"{_round_up(2 * need)}")
            if layout.time_s is not None and layout.time_s < layout.warning_s + 60:
                verdict, text = "fail", text + f"; --time leaves less than --warning + 60 s"
            checks.append(self.check("checkpoint", verdict, text, need, "s", plan.label,
                                     bandwidth_mbs=round(bandwidth / 1e6, 1), write_s=round(write_s, 3)))
        free = shutil.disk_usage(run_path).free
        # during an atomic write the old and the new last.pth both exist; best.pth beside them
        need = sum((p.keep() + 1) * sizes[p.label] + p.best_bytes() for p in plans)
        if plans:
            text = (f"{free / 2**30:,.1f} GiB free in {run_path.parent}; the {len(plans)} config(s)' checkpoints need "
                    f"{_size(need)} (last.pth x (keep + 1 while writing) + best.pth)")
            verdict = "ok" if free >= 2 * need else ("warn" if free >= need else "fail")
            if verdict != "ok":
                text += ": " + ("little to spare" if verdict == "warn" else "not enough; free space or choose "
                                                                           "another runs folder (DEPTHBENCH_RUNS)")
            checks.append(self.check("space", verdict, text, free / 2**30, "GiB free", need_bytes=need))
        return checks

    def _write(self, run_path: Path, nbytes: int, opts: Options) -> tuple[float, int, float]:
        import torch

        from harness.engine.checkpoint import checksum_path, save_atomic

        size = int(min(max(nbytes, 16 * MIB), opts.disk_mib * MIB))
        block = torch.rand(4 * MIB // 4, generator=torch.Generator().manual_seed(0))  # incompressible
        tensor = block.repeat(max(1, size // (4 * MIB)))
        path = run_path / ".preflight-checkpoint.pth"
        start = time.perf_counter()
        try:
            save_atomic({"model": tensor}, path)
            seconds = time.perf_counter() - start
        finally:
            path.unlink(missing_ok=True)
            checksum_path(path).unlink(missing_ok=True)
        written = tensor.numel() * 4
        return written / seconds, written, seconds

    def probe(self, run_path: Path) -> Check:
        from harness.core.files import atomic_write

        path = run_path / f".preflight-probe-{self.node}-{os.getpid()}"
        try:
            atomic_write(path, os.urandom(MIB))
            path.unlink()
        except OSError as e:
            return self.check("run-folder", "fail", f"cannot write {run_path} from this node ({e.strerror}): the run "
                              f"folder must be on a file system every node mounts (DEPTHBENCH_RUNS)")
        return self.check("run-folder", "ok", f"{run_path} is writable from this node (rank 0 may run here after a "
                          f"requeue)")


def _limited(loader, stop: Callable[[], bool]):
    """The loader's batches until ``stop()`` says enough (checked after each batch)."""
    for batch in loader:
        yield batch
        if stop():
            return


def _unit(plan: Plan) -> str:
    from harness.engine.tasks import task_for

    try:
        return task_for(plan.cfg.data.type).unit
    except Exception:
        return "img"


def _cores_per_rank(local_world: int) -> int:
    if os.environ.get("SLURM_CPUS_PER_TASK", "").isdigit():
        return int(os.environ["SLURM_CPUS_PER_TASK"])
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(local_world, 1))


def _driver_version() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.split()[0] if out.returncode == 0 and out.stdout.split() else None


def _cpu_name() -> str:
    import platform

    try:
        with open("/proc/cpuinfo") as fh:
            return next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")),
                        platform.machine())
    except OSError:
        return platform.machine()


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    days, rest = divmod(seconds, 86400)
    text = f"{rest // 3600:{'02d' if days else 'd'}}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def _secs(seconds: float) -> str:
    return f"{seconds:,.1f} s" if seconds >= 1 else f"{seconds * 1000:,.0f} ms"


def _round_up(seconds: float) -> int:
    return int(math.ceil(max(seconds, 60) / 30) * 30)


# ----------------------------------------------------------------------------------------------- rank 0: together
def _assemble(gathered: list[dict], collective: dict, plans: list[Plan], same: dict, layout: Layout, opts: Options,
              run_path: Path, world: int) -> Report:
    from harness.core.files import atomic_write
    from harness.core.rundir import slurm_meta

    gathered = sorted(gathered, key=lambda g: g["rank"])
    checks = [c for g in gathered for c in g["checks"]]
    together = _collective_checks(gathered, collective, [p for p in plans if p.label not in same])
    together += [Check("same-as", "ok", f"{label}: the same model, batch, precision and data as {first}: measured once",
                       config=label) for label, first in same.items()]
    checks += together
    counts = {v: sum(c.verdict == v for c in checks) for v in VERDICTS}
    node_order = list(dict.fromkeys(g["node"] for g in gathered))
    configs = []
    for plan in plans:
        per_rank = [g["measured"].get(plan.label, {}) for g in gathered]
        steps = [m["step_ms"] for m in per_rank if m.get("step_ms")]
        loaders = [m["loader_per_s"] for m in per_rank if m.get("loader_per_s")]
        first = per_rank[0]
        grad = (collective.get("grad") or {}).get(plan.label) or {}
        configs.append({
            "label": plan.label, "config": plan.target.config, "overrides": list(plan.target.overrides),
            **_plain(plan.identity()), "batch_size": plan.cfg.batch_size,
            "grad_accum": int(plan.cfg.get("grad_accum") or 1), "world": plan.world, "params": plan.params,
            "gmacs": round(plan.macs / 1e9, 4), "epochs": plan.cfg.get("epochs"),
            "data_type": plan.cfg.data.type, "data_root": first.get("data_root"),
            "train_images": first.get("train_images"),
            "step_ms": max(steps) if steps else None, "step_ms_ranks": steps,
            "samples_per_s": round(plan.micro_batch / max(steps) * 1000, 3) if steps else None,
            "peak_mem_mb": first.get("peak_mem_mb"), "loader_per_s": min(loaders) if loaders else None,
            "grad_bytes": 4 * plan.params, "allreduce_ms": grad.get("time_ms"),
            "checkpoint_bytes": plan.checkpoint_bytes(), "checkpoint_write_s": first.get("checkpoint_write_s"),
            "problem": plan.problem})
    record = {
        "format": FORMAT, "time": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": " ".join(sys.argv), "hosts": node_order, "world_size": world,
        "device": opts.device, "device_name": gathered[0]["device_name"],
        "partition": os.environ.get("SLURM_JOB_PARTITION"), **slurm_meta(),
        "layout": asdict(layout), "summary": counts, "versions": gathered[0]["versions"],
        "allreduce": {k: collective.get(k) for k in ("backend", "ranks", "rows", "correct", "error", "transport",
                                                     "pairs")},
        "configs": configs, "checks": [asdict(c) for c in checks]}
    text = render(checks, record, run_path / RECORD)
    path = run_path / RECORD
    atomic_write(path, json.dumps(record, indent=1, default=str))
    atomic_write(run_path / "preflight.txt", text + "\n")
    return Report(checks, record, path, text, 1 if counts["fail"] else 0)


def _plain(value):
    from harness.measure.bench import _plain as plain

    return plain(value)


SLOW_NODE_FRACTION = 0.5  # a node whose pairwise all-reduce bandwidth is under half its peers' median fails


def _nccl_debug_to_file() -> Path:
    """Point NCCL's INFO log (init and network) at a file of this process, to read the transport from; Path()
    when the user set NCCL_DEBUG (their log goes where they asked; we do not take it over)."""
    import tempfile

    if os.environ.get("NCCL_DEBUG"):
        return Path()
    folder = Path(tempfile.mkdtemp(prefix="depthbench-nccl-"))
    os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET", NCCL_DEBUG_FILE=str(folder / "nccl.%p.log"))
    return folder / f"nccl.{os.getpid()}.log"


def nccl_transport(log: str) -> dict:
    """What NCCL says it uses between nodes, from its INFO lines: ``NET/IB : Using [0]mlx5_0:1/IB`` (InfiniBand)
    or ``.../RoCE``, ``NET/Socket : Using [0]eth0:...`` (TCP sockets), ``NET/OFI`` / a plugin (libfabric: EFA,
    Slingshot); GPUDirect RDMA from ``GPU Direct RDMA Enabled`` or a ``GDRDMA`` channel."""
    transport, interface = None, None
    for line in log.splitlines():
        m = re.search(r"NET/IB\s*:\s*Using\s+(.*)", line)
        if m:
            kinds = set(re.findall(r"/(IB|RoCE)\b", m.group(1)))
            transport = "RoCE" if kinds == {"RoCE"} else "InfiniBand" + (" + RoCE" if "RoCE" in kinds else "")
            interface = re.sub(r"\s+", " ", m.group(1)).strip()[:120]
            break
        m = re.search(r"NET/Socket\s*:\s*Using\s+(.*)", line)
        if m and transport is None:
            transport, interface = "TCP sockets", m.group(1).strip()[:120]
        m = re.search(r"NET/(OFI|AWS Libfabric|Plugin)\b", line)
        if m and transport is None:
            transport = "libfabric (OFI)" if m.group(1) != "Plugin" else "a NCCL net plugin"
    gdr = bool(re.search(r"GPU Direct RDMA Enabled|/GDRDMA", log)) if transport else None
    if transport is None:
        transport = ("no network between nodes (one node: NVLink/PCIe/shared memory)" if "Init COMPLETE" in log
                     or "comm " in log else "unknown (no NCCL network line in its log)")
    return {"transport": transport, "interface": interface, "gdr": gdr}


def slow_nodes(pairs: list[dict], fraction: float = SLOW_NODE_FRACTION) -> tuple[dict, list[str]]:
    """``({node: its best pair bandwidth}, [nodes under fraction x the median of the others' best])``."""
    import statistics

    best: dict[str, float] = {}
    for row in pairs:
        for node in row["nodes"]:
            best[node] = max(best.get(node, 0.0), row["busbw_gbs"])
    slow = [n for n, bw in best.items() if len(best) > 2
            and bw < fraction * statistics.median([v for m, v in best.items() if m != n])]
    return best, slow


def _transport_check(views: list[dict], backend: str, nodes: int) -> Check:
    """One line: what carries the all-reduce between nodes, as each node's NCCL (or gloo) reports it."""
    if not views:
        return Check("transport", "ok", f"{backend}: no transport reported", None, "")
    kinds = sorted({v.get("transport") or "?" for v in views})
    gdr = {v.get("gdr") for v in views}
    text = f"{backend} between {nodes} node(s): {', '.join(kinds)}"
    if backend == "nccl":
        text += ("; GPUDirect RDMA on" if gdr == {True} else "; GPUDirect RDMA off" if gdr == {False} else
                 "; GPUDirect RDMA on some ranks only" if True in gdr else "")
    interfaces = sorted({str(v.get("interface")) for v in views if v.get("interface")})
    if interfaces:
        text += f" (via {', '.join(interfaces[:3])})"
    verdict = "ok"
    if backend == "nccl" and nodes > 1 and any(k == "TCP sockets" for k in kinds):
        verdict, text = "warn", text + ": NCCL fell back to sockets between nodes; is the InfiniBand/RoCE driver " \
                                       "loaded and NCCL_IB_DISABLE unset?"
    if len(kinds) > 1:
        verdict, text = "warn", text + ": the nodes do not agree on one transport"
    return Check("transport", verdict, text, None, "", data={"views": views})


def _pair_checks(pairs: list[dict], nodes: int) -> list[Check]:
    if nodes < 3:
        return [Check("node-bandwidth", "ok", f"{nodes} node(s): the per-node bandwidth rule needs 3 or more (a "
                      "slow node is one under {:.0%} of its peers' median; with 2 there is no one to compare)".format(
                          SLOW_NODE_FRACTION), None, "")] if nodes == 2 else []
    best, slow = slow_nodes(pairs)
    text = ", ".join(f"{n} {bw:,.2f}" for n, bw in best.items())
    if slow:
        return [Check("node-bandwidth", "fail", f"{', '.join(slow)}: all-reduce bus bandwidth under "
                      f"{SLOW_NODE_FRACTION:.0%} of the other nodes' median (GB/s by node, best pair: {text}); "
                      f"exclude it (--sbatch=--exclude={','.join(slow)}) or have it checked", len(slow), "nodes",
                      data={"pairs": pairs})]
    return [Check("node-bandwidth", "ok", f"every node within {SLOW_NODE_FRACTION:.0%} of its peers' median "
                  f"(GB/s by node, best pair: {text})", 0, "nodes", data={"pairs": pairs})]


def _collective_checks(gathered: list[dict], collective: dict, plans: list[Plan]) -> list[Check]:
    checks = []
    versions = {(g["versions"].get("torch"), g["versions"].get("cuda"), g["versions"].get("nccl")) for g in gathered
                if g["versions"]}
    drivers = {g["versions"].get("driver") for g in gathered if g["versions"]}
    if len(gathered) > 1:
        if len(versions) > 1:
            checks.append(Check("same-software", "fail", f"ranks run different torch/CUDA/NCCL builds: "
                                f"{sorted(versions, key=str)}; every node must use the same environment",
                                len(versions), "builds"))
        elif len(drivers) > 1:
            checks.append(Check("same-software", "warn", f"one torch/CUDA/NCCL build, but GPU drivers differ "
                                f"between nodes: {sorted(map(str, drivers))}", len(drivers), "drivers"))
        else:
            checks.append(Check("same-software", "ok", f"every rank runs torch {next(iter(versions))[0]} "
                                f"(CUDA {next(iter(versions))[1] or '-'}, NCCL {next(iter(versions))[2] or '-'})",
                                1, "builds"))
    ranks = collective.get("ranks", 1)
    if ranks == 1:
        checks.append(Check("all-reduce", "ok", "1 rank: nothing to all-reduce (no gradient synchronisation)", 0,
                            "GB/s"))
        return checks
    backend, rows = collective["backend"], collective.get("rows") or []
    nodes = len({g["node"] for g in gathered})
    if collective.get("error") or not rows:
        checks.append(Check("all-reduce", "fail", f"{backend} all-reduce over {ranks} ranks failed: "
                            f"{collective.get('error') or 'no result'}; check the network between the nodes "
                            f"(NCCL_DEBUG=INFO, NCCL_SOCKET_IFNAME)", None, "GB/s"))
        return checks
    if collective.get("correct") is False:
        checks.append(Check("all-reduce", "fail", f"{backend} all-reduce over {ranks} ranks returned a wrong sum",
                            None, "GB/s"))
    best = max(rows, key=lambda r: r["busbw_gbs"])
    text = (f"{backend}, {ranks} ranks on {nodes} node(s): bus bandwidth {best['busbw_gbs']:,.2f} GB/s at "
            f"{_size(best['bytes'])} (algbw {best['algbw_gbs']:,.2f} GB/s; nccl-tests' busbw = algbw x 2(n-1)/n)")
    verdict = "ok"
    if backend == "nccl" and nodes > 1 and best["busbw_gbs"] < 5:
        verdict, text = "warn", (text + ": slower than a 40 Gb/s link; is NCCL on the fast interconnect? "
                                 "(NCCL_DEBUG=INFO shows the transport)")
    checks.append(Check("all-reduce", verdict, text, best["busbw_gbs"], "GB/s", data={"rows": rows}))
    checks.append(_transport_check(collective.get("transport") or [], backend, nodes))
    checks += _pair_checks(collective.get("pairs") or [], nodes)
    steps = {}
    for g in gathered:
        for label, m in g["measured"].items():
            if m.get("step_ms"):
                steps[label] = max(steps.get(label, 0), m["step_ms"])
    for plan in plans:
        row = (collective.get("grad") or {}).get(plan.label)
        if not row:
            continue
        step = steps.get(plan.label)
        text = (f"{plan.label}: {_size(row['bytes'])} of fp32 gradients all-reduced in {row['time_ms']:,.1f} ms "
                f"(busbw {row['busbw_gbs']:,.2f} GB/s)")
        if not step:
            checks.append(Check("grad-sync", "ok", text + "; no step time to compare", row["time_ms"], "ms",
                                plan.label))
            continue
        share = row["time_ms"] / step
        text += f" = {share:.0%} of the {step:,.1f} ms step"
        if share <= 0.5:
            verdict = "ok"
        else:
            verdict = "warn"
            text += (": DDP overlaps it with the backward pass only in part; expect slower steps (a larger batch per "
                     "device, grad_accum or a faster interconnect helps)" if share <= 1 else
                     ": communication-bound; a larger batch per device, grad_accum or a faster interconnect")
        checks.append(Check("grad-sync", verdict, text, share, "x step", plan.label, data={"time_ms": row["time_ms"]}))
    return checks


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.1f} {unit}"
    return f"{nbytes} B"


# ----------------------------------------------------------------------------------------------- rendering
def render(checks: list[Check], record: dict, path: Path | None = None) -> str:
    """The report: one line per check, node by node and rank by rank, then the checks of all ranks together, the
    all-reduce table (nccl-tests' columns) and the tally."""
    layout = record.get("layout") or {}
    lines = [f"depthbench preflight: {record['world_size']} rank(s) on {len(record['hosts'])} node(s) "
             f"({', '.join(record['hosts'])}), {record.get('device') or '-'} {record.get('device_name') or ''}; "
             f"{len(record.get('configs') or [])} config(s)"
             + (f"; runs planned on {layout.get('nodes')} node(s) x {layout.get('ranks_per_node')} rank(s)"
                if layout.get("nodes") else "")]
    width = max((len(c.check) for c in checks), default=8)
    by_rank: dict = {}
    for c in checks:
        if c.rank is not None:
            by_rank.setdefault((c.node, c.rank), []).append(c)
    nodes = list(dict.fromkeys(node for node, _ in sorted(by_rank, key=lambda k: k[1])))
    current = None
    for (node, rank), items in sorted(by_rank.items(), key=lambda kv: (nodes.index(kv[0][0]), kv[0][1])):
        if node != current:
            lines.append(f"node {node}")
            current = node
        lines.append(f"  rank {rank}")
        lines += [f"    {c.verdict:<4}  {c.check:<{width}}  {c.text}" for c in items]
    together = [c for c in checks if c.rank is None]
    if together:
        lines.append("all ranks")
        lines += [f"    {c.verdict:<4}  {c.check:<{width}}  {c.text}" for c in together]
    rows = (record.get("allreduce") or {}).get("rows") or []
    if rows:
        lines.append(f"  all-reduce ({record['allreduce']['backend']}, {record['allreduce']['ranks']} ranks, "
                     f"float32, slowest rank):")
        lines.append(f"    {'size':>10} {'count':>12} {'time (ms)':>10} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13}")
        lines += [f"    {_size(r['bytes']):>10} {r['count']:>12,} {r['time_ms']:>10,.3f} {r['algbw_gbs']:>13,.3f} "
                  f"{r['busbw_gbs']:>13,.3f}" for r in rows]
    s = record["summary"]
    lines.append(f"preflight: {s['ok']} ok, {s['warn']} warn, {s['fail']} fail"
                 + (f"; record {path}" if path else ""))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- records
def read_records(root: str | Path | None = None) -> list[dict]:
    """Every ``preflight.json`` under ``<runs>/preflight/``, newest first (unreadable ones skipped)."""
    folder = Path(root or runs_root()) / EXPERIMENT
    records = []
    for path in folder.glob(f"*/{RECORD}") if folder.is_dir() else []:
        try:
            record = read_json(path, inside=folder, what="preflight record")
        except (OSError, BadFile):
            continue
        if record.get("format") == FORMAT:
            record = checked_record(record)
            record["path"] = str(path)
            records.append(record)
    return sorted(records, key=lambda r: str(r.get("time")), reverse=True)


def _positive(value, kind=(int, float)) -> bool:
    # compared, not math.isfinite: that raises OverflowError on a 400-digit integer; NaN compares False
    return type(value) in (kind if isinstance(kind, tuple) else (kind,)) and 0 < value < 1e308


# the fields that `submit --estimate` computes with, and what each must be; a record is a file anyone with access
# to the runs folder may have written: NaN, a string or a zero batch must not reach the arithmetic
_CONFIG_FIELDS = {"step_ms": _positive, "allreduce_ms": _positive, "micro_batch": lambda v: _positive(v, int),
                  "world": lambda v: _positive(v, int), "train_images": lambda v: _positive(v, int),
                  "model": lambda v: isinstance(v, str), "data_type": lambda v: isinstance(v, str),
                  "data_root": lambda v: isinstance(v, str), "precision": lambda v: isinstance(v, str),
                  "overrides": lambda v: isinstance(v, list) and all(isinstance(o, str) for o in v),
                  "model_kwargs": lambda v: isinstance(v, dict), "input_size": lambda v: isinstance(v, list)}
_RECORD_FIELDS = ("device", "device_name", "partition", "time")


def checked_record(record: dict) -> dict:
    """A preflight record with every field that estimates use checked: a string field that is not a string is
    dropped, and a config entry with a bad number (NaN, infinite, a string, zero or negative) is left out whole --
    its step time is not a measurement."""
    record = {k: printable(v) if k in _RECORD_FIELDS else v for k, v in record.items()
              if k not in _RECORD_FIELDS or isinstance(v, str)}  # printed by --estimate: no terminal escapes
    configs = record.get("configs")
    record["configs"] = [c for c in configs if isinstance(c, dict) and all(
        check(c[key]) for key, check in _CONFIG_FIELDS.items() if c.get(key) is not None)] \
        if isinstance(configs, list) else []
    return record
