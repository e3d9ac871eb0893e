"""``depthbench submit``, ``depthbench jobs``, ``depthbench cancel``: configs and paper tables on a Slurm cluster.

    depthbench submit CONFIG [CONFIG ...] | --table PAPER:TABLE [--rows NAME,...]
                      [--nodes N] [--gpus-per-node G | --ntasks-per-node T] [--cpus-per-task C] [--mem M]
                      [--time T] [--warning S] [--partition P] [--account A] [--qos Q] [--constraint C]
                      [--exclusive] [--max-concurrent K] [--engine accelerate|deepspeed] [--dry-run] [key=value ...]
    depthbench jobs [--paper P] [--json]
    depthbench cancel RUN|JOBID

``submit`` renders ``slurm/depthbench.sbatch`` into one plain bash script and hands it to ``sbatch --parsable``
(``--dry-run`` prints it and submits nothing). One config is one job; several configs, a paper table's rows or a
sweep definition's points are ONE job array (``--array=0-N%K``), each element with its own run directory
``<runs>/<experiment>/<submit time>-j<job>[_<index>]``. Every srun task is one rank and takes it from its own
``SLURM_PROCID``; Slurm warns with USR1 ``--warning`` seconds before the time limit, the run checkpoints and exits
75, and the batch script requeues the job, which resumes the same run directory. The submitted script and a record
of the runs (``<jobid>.json``, what ``jobs`` and ``cancel`` read) are kept in ``<runs>/slurm/``, beside the Slurm
logs.

Why not submitit (the submitter of DeiT, Swin and ConvNeXt): it pickles a Python callable and runs it through
``python -m submitit.core._submit`` in a shared folder of pickles, so the job is not a readable command a user can
inspect, edit and resubmit; its checkpoint-and-requeue runs in its own wrapper process (only for ``Checkpointable``
callables), while depthbench's ranks already checkpoint on USR1 themselves and exit 75; its arrays are arrays of
pickled calls rather than of configs; and its job states come from ``sacct`` only, which many clusters (and the
local test cluster) do not run. What we need from a library here -- the sbatch header, srun per task, an array --
is a 60-line template. See docs/slurm.md.
"""
from __future__ import annotations

import copy
import datetime as _dt
import difflib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.errors import DepthbenchError

REPO = Path(__file__).resolve().parent.parent
TEMPLATE = REPO / "slurm" / "depthbench.sbatch"
MIN_WARNING_S = 60     # a checkpoint needs time; Lightning/submitit use 90 s
SIGNAL_EARLY_S = 60    # sbatch(1): the --signal may arrive up to 60 s earlier than asked
DOWNSTREAM_DIRS = ("det", "seg")
FINISHED = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
            "PREEMPTED"}


@dataclass
class Element:
    """One run of a submission: what it is called, which command, config and overrides."""
    name: str
    config: str            # relative to the repository when inside it, else absolute
    overrides: list[str]
    experiment: str
    command: str = "train"  # train | finetune
    suffix: str = ""        # appended to the run id (sweep points)
    work_dir: str = ""      # filled in once the job id is known
    log: str = ""


@dataclass
class Submission:
    elements: list[Element]
    job_name: str
    paper: str | None = None
    table: str | None = None
    skipped: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------------------- command line
def add_parser(subparsers) -> None:
    p = subparsers.add_parser("submit", help="submit configs, a sweep or a paper table to Slurm (sbatch)")
    p.add_argument("configs", nargs="*", metavar="CONFIG|key=value",
                   help="config file(s) (several: one job array), a sweep definition, then key=value overrides")
    p.add_argument("--table", metavar="PAPER:TABLE",
                   help="every row of a paper table that has a config, e.g. stepsnet:1")
    p.add_argument("--rows", action="append", metavar="NAME[,NAME...]", help="only these rows of --table")
    p.add_argument("--nodes", type=int, default=1, metavar="N", help="nodes per run (default 1)")
    p.add_argument("--gpus-per-node", type=int, default=0, metavar="G",
                   help="GPUs per node, one rank each (default 0: CPU)")
    p.add_argument("--ntasks-per-node", type=int, metavar="T", help="ranks per node on CPU partitions (default 1)")
    p.add_argument("--cpus-per-task", type=int, metavar="C", help="CPU cores per rank (data-loading workers + 1)")
    p.add_argument("--mem", metavar="SIZE", help="memory per node, e.g. 64G")
    p.add_argument("--time", metavar="LIMIT",
                   help="time limit per run: minutes, HH:MM:SS or D-HH:MM:SS (a requeue restarts it)")
    p.add_argument("--warning", type=int, default=120, metavar="SECONDS",
                   help=f"seconds before the time limit when Slurm sends USR1 to checkpoint (>= {MIN_WARNING_S}, "
                        "default 120)")
    for name in ("partition", "account", "qos", "constraint"):
        p.add_argument(f"--{name}")
    p.add_argument("--exclusive", action="store_true", help="whole nodes")
    p.add_argument("--max-concurrent", type=int, metavar="K", help="array elements running at once (%%K)")
    p.add_argument("--job-name", metavar="NAME", help="default: db-<config>, db-<N>configs or db-<paper>-table<id>")
    p.add_argument("--sbatch", action="append", default=[], metavar="OPTION",
                   help="any other sbatch option, e.g. --sbatch=--reservation=x (repeatable)")
    p.add_argument("--engine", choices=["accelerate", "deepspeed"], help="default: each config's `engine`")
    p.add_argument("--dry-run", action="store_true", help="print the sbatch script and submit nothing")
    p.set_defaults(func=submit_main, overrides=[])

    j = subparsers.add_parser("jobs", help="submitted runs with their Slurm job ids, states and run directories")
    j.add_argument("--paper", help="only this paper's runs (stepsnet, sret, transnext, horesnet, scalenet)")
    j.add_argument("--json", action="store_true", help="one JSON object per run")
    j.set_defaults(func=jobs_main)

    c = subparsers.add_parser("cancel", help="cancel a submitted run (scancel)")
    c.add_argument("target", metavar="RUN|JOBID", help="a run directory, or a job id (123 or array element 123_4)")
    c.set_defaults(func=cancel_main)


def runs_root() -> Path:
    return Path(os.environ.get("DEPTHBENCH_RUNS", "results/runs")).absolute()


def slurm_dir() -> Path:
    """Where submitted scripts, records and Slurm logs go."""
    return runs_root() / "slurm"


# ----------------------------------------------------------------------------------------- checks
def parse_time(text: str) -> int | None:
    """Slurm's --time formats to seconds (None for UNLIMITED): M, M:S, H:M:S, D-H, D-H:M, D-H:M:S."""
    if text.upper() in ("UNLIMITED", "INFINITE"):
        return None
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text.strip())
    if not m:
        raise DepthbenchError(f"--time {text!r} is not a Slurm time (minutes, HH:MM:SS or D-HH:MM:SS)")
    days, a, b, c = m.groups()
    if days is not None:  # D-H, D-H:M, D-H:M:S
        return int(days) * 86400 + int(a) * 3600 + int(b or 0) * 60 + int(c or 0)
    if c is not None:
        return int(a) * 3600 + int(b) * 60 + int(c)
    return int(a) * 60 + int(b or 0)


def check_options(args) -> int:
    """The numbers and their consistency, before anything is loaded; returns ranks per node."""
    if args.nodes < 1:
        raise DepthbenchError(f"--nodes {args.nodes}: needs at least 1")
    if args.gpus_per_node < 0:
        raise DepthbenchError(f"--gpus-per-node {args.gpus_per_node}: must be 0 (CPU) or more")
    tasks = args.ntasks_per_node
    if args.gpus_per_node and tasks is not None and tasks != args.gpus_per_node:
        raise DepthbenchError(f"--ntasks-per-node {tasks} with --gpus-per-node {args.gpus_per_node}: runs use one rank "
                              "per GPU; leave --ntasks-per-node out")
    tasks = args.gpus_per_node or tasks or 1
    if tasks < 1:
        raise DepthbenchError(f"--ntasks-per-node {tasks}: needs at least 1")
    if args.cpus_per_task is not None and args.cpus_per_task < 1:
        raise DepthbenchError(f"--cpus-per-task {args.cpus_per_task}: needs at least 1")
    if args.mem and not re.fullmatch(r"\d+[KMGT]?B?", args.mem, re.I):
        raise DepthbenchError(f"--mem {args.mem!r} is not a Slurm size (e.g. 64G, 500M)")
    if args.max_concurrent is not None and args.max_concurrent < 1:
        raise DepthbenchError(f"--max-concurrent {args.max_concurrent}: needs at least 1")
    if args.warning < MIN_WARNING_S:
        raise DepthbenchError(f"--warning {args.warning}: the run needs at least {MIN_WARNING_S} s between Slurm's "
                              "USR1 and the time limit to checkpoint")
    if args.time:
        limit = parse_time(args.time)
        if limit is not None and limit < args.warning + SIGNAL_EARLY_S:
            raise DepthbenchError(
                f"--time {args.time} ({limit} s) is too short for the {args.warning} s checkpoint warning: Slurm may "
                f"send USR1 up to {SIGNAL_EARLY_S} s early, so use --time of at least "
                f"{-(-(args.warning + SIGNAL_EARLY_S) // 60)} minutes (or a shorter --warning, >= {MIN_WARNING_S})")
    if args.job_name and not re.fullmatch(r"[\w.+-]+", args.job_name):
        raise DepthbenchError(f"--job-name {args.job_name!r}: use letters, digits, . _ + -")
    for option in args.sbatch:
        if not option.startswith("--"):
            raise DepthbenchError(f"--sbatch {option!r}: give a long sbatch option, e.g. --sbatch=--reservation=x")
    return tasks


def repo_relative(path: Path) -> str:
    path = path.absolute()
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


def is_downstream(path: Path, cfg) -> bool:
    """An MMEngine/mmdet/mmseg fine-tuning config (``depthbench finetune``), not a pretraining recipe."""
    parts = path.absolute().parts
    in_dir = any(a == "configs" and b in DOWNSTREAM_DIRS for a, b in zip(parts, parts[1:]))
    model = cfg.get("model")
    return (in_dir or cfg.get("default_scope") in ("mmdet", "mmseg") or "train_dataloader" in cfg
            or (isinstance(model, dict) and "backbone" in model))


def finetune_available() -> bool:
    from harness.cli import COMMANDS

    return "finetune" in COMMANDS


class Checker:
    """Loads and checks each run's config exactly as its ranks will (one line on any problem), before anything is
    submitted. A config file is read once and each model built once (on the meta device): a sweep's 40 points
    are one file and 4 models."""

    def __init__(self, world_size: int, engine: str | None):
        self.world_size, self.engine = world_size, engine
        self.loaded, self.models = {}, set()

    def load(self, config: Path, overrides=()):
        from harness.config import apply_overrides, load_config

        key = str(config.resolve())
        if key not in self.loaded:
            self.loaded[key] = load_config(config, ())
        cfg = copy.deepcopy(self.loaded[key])
        apply_overrides(cfg, overrides)
        return cfg

    def element(self, config: Path, overrides: list[str], name: str | None = None, suffix: str = "") -> Element:
        cfg = self.load(config, overrides)
        name = name or config.stem
        if is_downstream(config, cfg):
            if not finetune_available():
                raise DepthbenchError(f"{config} is a fine-tuning (MMEngine) config; `depthbench finetune` is not in "
                                      "this checkout yet, so submit cannot run it (pending)")
            from harness.finetune import check_data, load_downstream_config

            # what finetune checks before it writes (the job builds the detector itself: that takes a while)
            cfg = load_downstream_config(config, overrides)
            check_data(cfg, ("train", "val"))
            return Element(name, repo_relative(config), list(overrides), cfg.experiment, "finetune", suffix)
        from harness.builders import check_config, check_model, model_kwargs

        if self.engine:
            cfg.engine = self.engine
        check_config(cfg, self.world_size, model=False)
        model = (cfg.model.name, repr(sorted(model_kwargs(cfg).items())), cfg.data.input_size, cfg.distill.teacher)
        if model not in self.models:
            check_model(cfg)
            self.models.add(model)
        return Element(name, repo_relative(config), list(overrides), cfg.experiment, suffix=suffix)

    def sweep(self, path: Path, cfg, overrides) -> list[Element]:
        """A sweep definition: one element per point, each the base recipe with the point's keys (as the sweep file
        documents), grouped under the sweep's name as their experiment."""
        from harness.config import sweep_points

        base = sweep_base(path)
        return [self.element(base, [*keys, f"experiment={path.stem!r}", *overrides], name=point,
                             suffix=f"-{safe_name(point)}") for point, keys in sweep_points(cfg)]


def sweep_base(path: Path) -> Path:
    """The one ``_base_`` recipe of a sweep definition; a sweep file that sets anything else is refused (its other
    keys would be lost)."""
    import ast

    tree = ast.parse(path.read_text(), str(path))
    bases, others = [], []
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target = node.targets[0].id
            if target == "_base_":
                value = ast.literal_eval(node.value)
                bases = [value] if isinstance(value, str) else list(value)
            elif target != "sweep":
                others.append(target)
    if len(bases) != 1 or others:
        raise DepthbenchError(f"sweep definition {path}: expected exactly one _base_ recipe and only `sweep` besides "
                              f"it (found _base_={bases}, other keys {others})")
    return (path.parent / bases[0]).resolve()


def safe_name(text: str) -> str:
    return re.sub(r"[^\w.+-]+", "_", text).strip("_")


def collect(args, world_size: int) -> Submission:
    """The runs to submit, each checked; raises on the first bad one."""
    configs = [c for c in args.configs if not ("=" in c and not c.endswith(".py"))]
    args.overrides = [c for c in args.configs if c not in configs] + list(args.overrides)
    if args.table:
        if configs:
            raise DepthbenchError("give either --table PAPER:TABLE or config files, not both")
        return table_submission(args, world_size)
    if args.rows:
        raise DepthbenchError("--rows picks rows of a --table; give --table PAPER:TABLE too")
    if not configs:
        raise DepthbenchError("nothing to submit: give a config file (e.g. configs/horesnet/horesnet10-rk4_1xb64-20e_"
                              "digits.py), several, a sweep definition, or --table PAPER:TABLE")
    checker, elements = Checker(world_size, args.engine), []
    for text in configs:
        path = Path(text)
        if not path.is_file() and (REPO / text).is_file():
            path = REPO / text
        cfg = checker.load(path)  # a missing or broken file: one line
        if cfg.get("sweep"):
            elements += checker.sweep(path, cfg, args.overrides)
        else:
            elements.append(checker.element(path, args.overrides))
    first = Path(configs[0]).stem
    name = f"db-{first}" if len(configs) == 1 else f"db-{len(configs)}configs"
    return Submission(elements, args.job_name or safe_name(name), paper=paper_of(elements[0].config))


def table_submission(args, world_size: int) -> Submission:
    from results.paper_tables import TableError, load_paper

    paper, sep, table_id = args.table.partition(":")
    if not sep or not paper or not table_id:
        raise DepthbenchError(f"--table {args.table!r}: expected PAPER:TABLE, e.g. stepsnet:1")
    try:
        tables = load_paper(paper.lower())
    except TableError as e:
        raise DepthbenchError(str(e)) from None
    table = next((t for t in tables if t.id.lower() == table_id.lower()), None)
    if table is None:
        raise DepthbenchError(f"{paper} has no table {table_id!r}; its tables: {', '.join(t.id for t in tables)}")
    rows = table.rows
    if args.rows:
        wanted = [n.strip() for group in args.rows for n in group.split(",") if n.strip()]
        by_name = {r.name.lower(): r for r in table.rows}
        unknown = [n for n in wanted if n.lower() not in by_name]
        if unknown:
            close = difflib.get_close_matches(unknown[0], [r.name for r in table.rows], n=3, cutoff=0.5)
            raise DepthbenchError(f"table {paper}:{table.id} has no row {unknown[0]!r}"
                                  + (f"; did you mean {', '.join(close)}?" if close else
                                     f"; its rows: {', '.join(r.name for r in table.rows)}"))
        rows = [by_name[n.lower()] for n in wanted]
        no_config = next((r for r in rows if not r.config), None)
        if no_config is not None:
            raise DepthbenchError(f"row {no_config.name!r} of {paper}:{table.id} has no training config"
                                  + (f" ({no_config.reason})" if no_config.reason else ""))
    skipped = [f"{r.name} ({r.reason or 'no config'})" for r in rows if not r.config]
    rows = [r for r in rows if r.config]
    if not rows:
        raise DepthbenchError(f"no row of table {paper}:{table.id} names a training config; nothing to submit")
    checker, elements = Checker(world_size, args.engine), []
    for row in rows:
        kwargs = [f"+model.{k}={v!r}" for k, v in (row.model_kwargs or {}).items()]
        elements.append(checker.element(REPO / row.config, [*kwargs, *args.overrides], name=row.name))
    name = args.job_name or safe_name(f"db-{paper}-table{table.id}")
    return Submission(elements, name, paper=paper.lower(), table=table.id, skipped=skipped)


def paper_of(config: str) -> str | None:
    """The paper a config belongs to, from its folder (configs/<paper>/...)."""
    from harness.model_list import FAMILIES

    parts = Path(config).parts
    return next((p for p in parts if p in FAMILIES), None)


# ----------------------------------------------------------------------------------------- rendering
def sbatch_lines(args, sub: Submission, tasks: int) -> list[str]:
    n = len(sub.elements)
    options = [f"--job-name={sub.job_name}", f"--nodes={args.nodes}", f"--ntasks-per-node={tasks}"]
    if args.gpus_per_node:
        options.append(f"--gpus-per-node={args.gpus_per_node}")
    for name in ("cpus_per_task", "mem", "time", "partition", "account", "qos", "constraint"):
        value = getattr(args, name)
        if value is not None:
            options.append(f"--{name.replace('_', '-')}={value}")
    if args.exclusive:
        options.append("--exclusive")
    options += [f"--signal=USR1@{args.warning}", "--requeue", "--open-mode=append",
                f"--output={slurm_dir()}/%x-{'%A_%a' if n > 1 else '%j'}.out"]
    if n > 1:
        options.append(f"--array=0-{n - 1}" + (f"%{args.max_concurrent}" if args.max_concurrent else ""))
    options += args.sbatch
    return [f"#SBATCH {o}" for o in options]


def render(args, sub: Submission, tasks: int, stamp: str) -> str:
    venv_bin = Path(sys.executable).parent
    # `python -m harness.cli` (= depthbench) from the checkout the job cds into, whichever checkout the venv's
    # editable install points at
    program = ["python", "-m", "harness.cli"]
    cases = []
    for i, e in enumerate(sub.elements):
        cmd = [*program, e.command, e.config, "--work-dir", "@WORK_DIR@", "--resume", "auto"]
        if args.engine and e.command == "train":
            cmd += ["--engine", args.engine]
        cmd += e.overrides
        words = " ".join('"$WORK_DIR"' if w == "@WORK_DIR@" else shlex.quote(w) for w in cmd)
        suffix = shlex.quote(e.suffix) if e.suffix else ""
        cases.append(f"    {i}) NAME={shlex.quote(e.name)}\n"
                     f"       WORK_DIR=$DEPTHBENCH_RUNS/{shlex.quote(e.experiment)}/$RUN_ID{suffix}\n"
                     f"       CMD=({words}) ;;")
    what = f"{sub.paper} table {sub.table}" if sub.table else ", ".join(dict.fromkeys(e.config for e in sub.elements))
    title = (f"depthbench: {len(sub.elements)} run(s) of {what}, {args.nodes} node(s) x {tasks} rank(s)"
             if len(what) < 80 else f"depthbench: {len(sub.elements)} runs, {args.nodes} node(s) x {tasks} rank(s)")
    values = {
        "TITLE": title,
        "SBATCH": "\n".join(sbatch_lines(args, sub, tasks)),
        "REPO": shlex.quote(str(REPO)),
        "VENV_BIN": shlex.quote(str(venv_bin)),
        "RUNS": shlex.quote(str(runs_root())),
        "ACCELERATOR": "cuda" if args.gpus_per_node else "cpu",
        "BACKEND_NOTE": ("GPU partition: the ranks talk over NCCL" if args.gpus_per_node
                         else "CPU partition: the ranks talk over gloo"),
        "STAMP": stamp,
        "ELEMENTS": "\n".join(cases),
        "TASKS_PER_NODE": str(tasks),
        "WARNING": str(args.warning),
    }
    text = TEMPLATE.read_text()
    unknown = set(re.findall(r"\{\{(\w+)\}\}", text)) - set(values)
    if unknown:
        raise DepthbenchError(f"{TEMPLATE} has placeholders this depthbench does not fill: {sorted(unknown)}")
    return re.sub(r"\{\{(\w+)\}\}", lambda m: values[m.group(1)], text).rstrip("\n") + "\n"


# ----------------------------------------------------------------------------------------- submit
def submit_main(args) -> int:
    tasks = check_options(args)
    sub = collect(args, args.nodes * tasks)  # options and configs first: their errors say more than a missing sbatch
    if not args.dry_run and shutil.which("sbatch") is None:
        raise DepthbenchError("sbatch is not on PATH: run this on a Slurm login node, start the local cluster "
                              "(sudo slurm/local-cluster.sh start), or add --dry-run to see the script")
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    script = render(args, sub, tasks, stamp)
    for line in sub.skipped:
        print(f"depthbench submit: not submitted (no training config): {line}", file=sys.stderr)
    if args.dry_run:
        print(script, end="")
        print(f"depthbench submit: dry run, nothing submitted ({len(sub.elements)} run(s)); submit the script above "
              "with `sbatch --parsable SCRIPT`", file=sys.stderr)
        return 0
    job_id = sbatch(script)
    record = write_record(job_id, script, sub, stamp)
    first = record["elements"][0]
    if len(sub.elements) == 1:
        print(f"submitted job {job_id}: {first['name']} -> {first['work_dir']}\n  Slurm log {first['log']}")
    else:
        print(f"submitted job array {job_id} ({len(sub.elements)} runs"
              + (f", at most {args.max_concurrent} at once" if args.max_concurrent else "") + "):")
        for e in record["elements"]:
            print(f"  {e['job']}  {e['name']}  -> {e['work_dir']}")
        print(f"  Slurm logs {slurm_dir()}/{sub.job_name}-{job_id}_<index>.out")
    print(f"  script {record['script']}; follow with `depthbench jobs`, stop with `depthbench cancel {job_id}`")
    return 0


def sbatch(script: str) -> str:
    """Submit ``script`` on stdin; returns the job id. sbatch's own refusal becomes one line, nothing is kept."""
    folder = slurm_dir()
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)  # Slurm does not create the folder of --output
    try:
        out = subprocess.run(["sbatch", "--parsable"], input=script, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        out = None
    if out is None or out.returncode != 0:
        if created:
            shutil.rmtree(folder, ignore_errors=True)
        if out is None:
            raise DepthbenchError("sbatch did not answer within 120 s; is slurmctld up? (`sinfo`)")
        lines = [ln.strip() for ln in out.stderr.splitlines() if ln.strip()]
        reason = next((ln for ln in reversed(lines) if "submission failed" in ln), lines[-1] if lines else
                      f"exit code {out.returncode}")
        raise DepthbenchError(f"sbatch refused the job, nothing submitted: {reason.removeprefix('sbatch: error: ')}")
    job_id = out.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise DepthbenchError(f"sbatch answered {out.stdout.strip()!r}, not a job id; check `squeue --me`")
    return job_id


def write_record(job_id: str, script: str, sub: Submission, stamp: str) -> dict:
    from harness.rundir import atomic_write

    folder = slurm_dir()
    array = len(sub.elements) > 1
    elements = []
    for i, e in enumerate(sub.elements):
        job = f"{job_id}_{i}" if array else job_id
        e.work_dir = str(runs_root() / e.experiment / f"{stamp}-j{job}{e.suffix}")
        e.log = str(folder / f"{sub.job_name}-{job}.out")
        elements.append({"index": i, "job": job, **asdict(e)})
    script_path = folder / f"{job_id}.sbatch"
    atomic_write(script_path, script)
    record = {"job_id": job_id, "job_name": sub.job_name, "submitted": _dt.datetime.now().astimezone().isoformat(
              timespec="seconds"), "paper": sub.paper, "table": sub.table, "script": str(script_path),
              "elements": elements}
    atomic_write(folder / f"{job_id}.json", json.dumps(record, indent=1))
    return record


# ----------------------------------------------------------------------------------------- jobs
def read_records() -> list[dict]:
    records = []
    for path in sorted(slurm_dir().glob("*.json"), key=lambda p: int(p.stem) if p.stem.isdigit() else -1):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            print(f"depthbench jobs: {path} is not a readable submission record; ignored", file=sys.stderr)
    return records


def read_meta(work_dir: str | Path) -> dict:
    try:
        return json.loads((Path(work_dir) / "meta.json").read_text())
    except (OSError, ValueError):
        return {}


def slurm_states(job_ids: set[str]) -> tuple[dict, str]:
    """``{"123" or "123_4": (state, restarts)}`` from squeue, then scontrol (recently finished jobs), then sacct
    where accounting runs; and a note saying which sources were not available."""
    states, notes = {}, []
    if not job_ids:
        return states, ""
    if shutil.which("squeue") is None:
        return states, "no squeue on PATH: Slurm states unknown, run states from the run directories"
    ids = ",".join(sorted(job_ids))
    try:
        queue = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%T", "-j", ids], capture_output=True, text=True,
                               timeout=30)
    except subprocess.TimeoutExpired:
        return states, "squeue did not answer within 30 s: Slurm states unknown"
    if queue.returncode != 0 and "Invalid job id" not in queue.stderr:  # all jobs gone from the queue: that error
        problem = (queue.stderr.strip().splitlines() or [f"exit code {queue.returncode}"])[-1]
        return states, f"squeue failed ({problem}): Slurm states unknown, run states from the run directories"
    out = queue.stdout
    for line in (out or "").splitlines():
        key, _, state = line.partition("|")
        states[key.strip()] = (state.strip(), None)
    for base in sorted(job_ids):
        out = _run(["scontrol", "-o", "show", "job", base])
        for line in (out or "").splitlines():
            fields = dict(re.findall(r"(\w+)=(\S*)", line))
            key = (f"{fields['ArrayJobId']}_{fields['ArrayTaskId']}" if fields.get("ArrayTaskId", "").isdigit()
                   else fields.get("JobId", ""))
            if key and fields.get("JobState"):
                previous = states.get(key, (None, None))[0]
                states[key] = (previous or fields["JobState"], int(fields.get("Restarts", 0) or 0))
    missing = {j for j in job_ids if not any(k == j or k.startswith(j + "_") for k in states)}
    if missing and shutil.which("sacct"):
        out = _run(["sacct", "-n", "-X", "-P", "-o", "JobID,State", "-j", ",".join(sorted(missing))])
        if out is None:
            notes.append("sacct unavailable (no accounting storage)")
        for line in (out or "").splitlines():
            key, _, state = line.partition("|")
            states.setdefault(key.strip(), (state.split()[0] if state else "", None))
    return states, "; ".join(notes)


def _run(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def job_rows(paper: str | None = None) -> tuple[list[dict], str]:
    """One row per submitted run: its job, Slurm state, run status, name, run directory."""
    rows = []
    for record in read_records():
        for e in record["elements"]:
            rows.append({"job": e["job"], "name": e["name"], "paper": record.get("paper"), "table": record.get("table"),
                         "config": e["config"], "work_dir": e["work_dir"], "log": e.get("log")})
    known = {r["work_dir"] for r in rows}
    root = runs_root()
    for meta_path in sorted(root.glob("*/*/meta.json")):  # runs started by hand-written sbatch scripts
        if str(meta_path.parent) in known:
            continue
        meta = read_meta(meta_path.parent)
        if meta.get("slurm_job_id"):
            job = (f"{meta['slurm_array_job_id']}_{meta['slurm_array_task_id']}" if meta.get("slurm_array_task_id")
                   and meta.get("slurm_array_job_id") else str(meta["slurm_job_id"]))
            config = meta.get("config_file") or ""
            rows.append({"job": job, "name": meta.get("experiment"), "paper": paper_of(config), "table": None,
                         "config": config, "work_dir": str(meta_path.parent), "log": None})
    if paper:
        rows = [r for r in rows if (r["paper"] or "").lower() == paper.lower()]
    states, note = slurm_states({r["job"].split("_")[0] for r in rows})
    for r in rows:
        meta = read_meta(r["work_dir"])
        state, restarts = states.get(r["job"], (None, None))
        if state is None:  # a pending array range shows as 123_[2-4] in squeue
            base, _, index = r["job"].partition("_")
            state = next((s for k, (s, _) in states.items() if k.startswith(f"{base}_[") and index
                          and _in_range(int(index), k[len(base) + 2:-1])), None)
        r.update(slurm_state=state or "-", restarts=meta.get("slurm_restart_count", restarts),
                 status=meta.get("status", "-"), best_metric=meta.get("best_metric"))
    return rows, note


def _in_range(index: int, spec: str) -> bool:
    for part in spec.split("%")[0].split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit() and int(lo) <= index <= int(hi or lo):
            return True
    return False


def jobs_main(args) -> int:
    if args.paper:
        from harness.model_list import FAMILIES

        if args.paper.lower() not in FAMILIES:
            raise DepthbenchError(f"--paper {args.paper!r} is not one of {', '.join(FAMILIES)}")
    rows, note = job_rows(args.paper)
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return 0
    if not rows:
        print(f"no submitted runs under {runs_root()}" + (f" for {args.paper}" if args.paper else "")
              + " (depthbench submit ...)")
        return 0
    header = ("JOB", "SLURM", "RUN", "BEST", "NAME", "RUN DIRECTORY")
    table = [header] + [(r["job"], r["slurm_state"], r["status"],
                         f"{r['best_metric']:.2f}" if isinstance(r["best_metric"], (int, float)) else "-",
                         r["name"] or "-", _short(r["work_dir"])) for r in rows]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header) - 1)]
    for row in table:
        print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)) + "  " + str(row[-1]))
    if note:
        print(f"({note})")
    return 0


def _short(path: str) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


# ----------------------------------------------------------------------------------------- cancel
def cancel_main(args) -> int:
    target = args.target.strip()
    if re.fullmatch(r"\d+(_\d+)?", target):
        job, what = target, f"job {target}"
    else:
        path = Path(target).absolute()
        meta = read_meta(path)
        if meta.get("slurm_job_id"):
            job = str(meta["slurm_job_id"])
        else:  # submitted, not started yet: the record knows which job will write it
            job = next((e["job"] for r in read_records() for e in r["elements"]
                        if Path(e["work_dir"]) == path), None)
        if job is None:
            raise DepthbenchError(f"{target} is neither a Slurm job id (123, or 123_4 for an array element) nor the "
                                  "run directory of a submitted run; `depthbench jobs` lists both")
        what = f"job {job} ({_short(str(path))})"
    if shutil.which("scancel") is None:
        raise DepthbenchError("scancel is not on PATH: run this on the cluster's login node")
    # scancel itself exits 0 on unknown jobs: look the job up first
    lookup = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, timeout=60)
    if lookup.returncode != 0:
        problem = (lookup.stderr.strip().splitlines() or [f"exit code {lookup.returncode}"])[-1]
        if "Invalid job id" in problem:
            raise DepthbenchError(f"Slurm does not know job {job} (a typo, or it ended long ago); `depthbench jobs` "
                                  "lists the submitted runs")
        raise DepthbenchError(f"cannot ask Slurm about job {job}: {problem}")
    states = set(re.findall(r"JobState=(\S+)", lookup.stdout))
    if states and states <= FINISHED:
        raise DepthbenchError(f"job {job} has already ended ({', '.join(sorted(states))}); nothing to cancel")
    out = subprocess.run(["scancel", job], capture_output=True, text=True, timeout=60)
    lines = [ln.strip() for ln in out.stderr.splitlines() if ln.strip()]
    if out.returncode != 0 or lines:
        reason = lines[-1].removeprefix("scancel: error: ") if lines else f"exit code {out.returncode}"
        raise DepthbenchError(f"scancel {job}: {reason}")
    print(f"cancelled {what}; a run that had started checkpoints on SIGTERM (status preempted) and can be resumed "
          "with `depthbench train CONFIG --work-dir RUN --resume auto`")
    return 0
