"""Submission to Slurm, the code behind ``depthbench submit`` (harness/commands/submit.py parses the command line
into :class:`SubmitOptions` and calls :func:`submit`); slurm/jobs.py reads what it records (``jobs``, ``cancel``).

``submit`` renders ``slurm/depthbench.sbatch`` into one plain bash script and hands it to ``sbatch --parsable``
(``--dry-run`` prints it and submits nothing). One config is one job; several configs, a paper table's rows or a
sweep definition's points are ONE job array (``--array=0-N%K``), each element with its own run directory
``<runs>/<experiment>/<submit time>-j<job>[_<index>]``. Every srun task is one rank and takes it from its own
``SLURM_PROCID``; Slurm warns with USR1 ``--warning`` seconds before the time limit, the run checkpoints and exits
75, and the batch script requeues the job, which resumes the same run directory. The submitted script and a record
of the runs (``<jobid>.json``, what ``jobs`` and ``cancel`` read) are kept in ``<runs>/slurm/``, beside the Slurm
logs. Option values are data: each one that reaches an ``#SBATCH`` line is checked against what sbatch accepts
(:func:`check_options`), the commands' words are shell-quoted, comments hold printable text only.

Why not submitit (the submitter of DeiT, Swin and ConvNeXt): it pickles a Python callable and runs it through
``python -m submitit.core._submit`` in a shared folder of pickles, so the job is not a readable command a user can
inspect, edit and resubmit; its checkpoint-and-requeue runs in its own wrapper process (only for ``Checkpointable``
callables), while depthbench's ranks already checkpoint on USR1 themselves and exit 75; its arrays are arrays of
pickled calls rather than of configs; and its job states come from ``sacct`` only, which many clusters (and the
local test cluster) do not run. What we need from a library here -- the sbatch header, srun per task, an array --
is a 60-line template. See docs/slurm.md.
"""

from __future__ import annotations

import ast
import datetime as _dt
import difflib
import json
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable

from downstream.finetune import check_data, load_downstream_config
from harness.core.choices import CLAIMS_SEEDS, MIN_WARNING_S, claims_out as claims_default_out
from harness.core.config import load_config, resolve_config_path, sweep_points
from harness.core.errors import ConfigError, DataError, DepthbenchError
from harness.core.files import atomic_write, printable
from harness.engine.builders import check_config, check_model, load_training_config
from harness.engine.models import model_kwargs
from harness.measure.estimate import Estimate, Layout, estimate as estimate_cost, jobs_from_elements
from results import claims as cl
from results import claims_scale
from results.paper_tables import TableError, load_paper
from slurm.paths import REPO, inside_run_roots, paper_of, runs_root, runs_root_note, slurm_dir

TEMPLATE = Path(__file__).resolve().parent / "depthbench.sbatch"
SIGNAL_EARLY_S = 60  # sbatch(1): the --signal may arrive up to 60 s earlier than asked
DOWNSTREAM_DIRS = ("det", "seg")
PREFLIGHT_TIME = "30:00"  # the preflight job's own limit (the runs' --time goes to it as an argument)


@dataclass
class Element:
    """One run of a submission: what it is called, which command, config and overrides."""

    name: str
    config: str  # relative to the repository when inside it, else absolute
    overrides: list[str]
    experiment: str
    command: str = "train"  # train | finetune
    suffix: str = ""  # appended to the run id (sweep points)
    work_dir: str = ""  # filled in once the job id is known
    log: str = ""
    run_dir: str = ""  # a fixed run directory (claims runs: where `depthbench claims` reads them); empty: the
    # usual <runs>/<experiment>/<submit time>-j<job>


@dataclass
class Submission:
    elements: list[Element]
    job_name: str
    paper: str | None = None
    table: str | None = None
    skipped: list[str] = field(default_factory=list)
    data_notes: list[str] = field(default_factory=list)  # datasets a dry run did not find here
    followup: Submission | None = None  # runs that start from a run of this one: a second job, afterok this one
    workers: int | None = None  # the most loader workers (data.workers) of a rank of any run: --cpus-per-task - 1


@dataclass
class SubmitOptions:
    """How each run is laid out on the cluster and what sbatch is told: ``depthbench submit``'s options."""

    nodes: int = 1
    gpus_per_node: int = 0  # 0: CPU, the ranks talk over gloo
    ntasks_per_node: int | None = None  # ranks per node on CPU partitions (default 1)
    cpus_per_task: int | None = None
    mem: str | None = None  # per node, e.g. 64G
    time: str | None = None  # minutes, HH:MM:SS or D-HH:MM:SS
    warning: int = 120  # seconds before the limit when Slurm sends USR1
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    exclusive: bool = False
    max_concurrent: int | None = None  # array elements running at once (%K)
    job_name: str | None = None
    sbatch: list[str] = field(default_factory=list)  # any other sbatch option, e.g. --reservation=x
    engine: str | None = None  # accelerate | deepspeed (default: each config's)
    dry_run: bool = False
    preflight: bool = False  # submit `depthbench preflight` of the runs instead of the runs
    max_restarts: int = 3  # requeues after crashes and hangs (slurm/restart.py)
    min_nodes: int | None = None  # a requeue without a failed node may continue on this many (elastic)


# ----------------------------------------------------------------------------------------- checks
# What reaches the script. The #SBATCH lines are read by sbatch, which splits each line into words and stops at the
# first line that is not a comment: a newline in a value would start a shell command (and hide the #SBATCH lines
# after it), a space would add an sbatch option of its own. So every value there is checked against what sbatch
# accepts for that option; values in the commands are shell-quoted; comments are built from printable text only.
NAME_LIST = re.compile(r"[\w.+-]+(,[\w.+-]+)*")  # --partition, --qos: one name or a comma-separated list
ACCOUNT = re.compile(r"[\w.+@-]+")
FEATURE = r"!?[\w.+:-]+(\*\d+)?"  # a node feature, optionally negated or with a node count
CONSTRAINT_OPS = r"[&|,]"
# one --key or --key=value: no blanks, quotes, backslashes or # (sbatch reads an unquoted # as a comment's start)
SBATCH_OPTION = re.compile(r"--[a-z][a-z0-9-]*(=[^\s\"'\\#]+)?")
MEM = re.compile(r"\d+[KMGT]?B?", re.I)


def check_text(what: str, value: str) -> str:
    """``value`` without newlines or other control characters (one line, whatever reads it)."""
    if not isinstance(value, str):
        raise DepthbenchError(f"{what} {value!r}: expected text")
    if not value.isprintable():  # \n, \r, \t, escape sequences, Unicode line separators...
        raise DepthbenchError(
            f"{what} {value!r} contains a newline or another control character; give it on one line of printable text"
        )
    return value


def check_constraint(text: str) -> str:
    """sbatch's --constraint: features joined by & | , with optional *count, [ ] and ( ) groups."""
    check_text("--constraint", text)
    tokens = re.fullmatch(rf"[\[(]*{FEATURE}[\])]*({CONSTRAINT_OPS}[\[(]*{FEATURE}[\])]*)*", text)
    depth = 0
    for ch in text:
        depth += (ch in "[(") - (ch in "])")
        if depth < 0:
            break
    if not tokens or depth != 0:
        raise DepthbenchError(
            f"--constraint {text!r} is not a Slurm feature expression (features joined by &, | or a "
            "comma, e.g. 'a100&ib' or '[rack1|rack2]')"
        )
    return text


def comment_text(text: str) -> str:
    """``text`` safe on one ``#`` comment line: anything not printable becomes ``?``."""
    return "".join(ch if ch.isprintable() else "?" for ch in str(text))


def sbatch_word(text: str) -> str:
    """A value on an ``#SBATCH`` line as one word: double-quoted, with backslash escapes, when it has blanks,
    quotes, backslashes or a # (sbatch's own parsing of these lines strips them again)."""
    check_text("a value", text)
    if not re.search(r"[\s\"'\\#]", text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_time(text: str) -> int | None:
    """Slurm's --time formats to seconds (None for UNLIMITED): M, M:S, H:M:S, D-H, D-H:M, D-H:M:S."""
    check_text("--time", text)
    if text.upper() in ("UNLIMITED", "INFINITE"):
        return None
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)
    if not m:
        raise DepthbenchError(f"--time {text!r} is not a Slurm time (minutes, HH:MM:SS or D-HH:MM:SS)")
    days, a, b, c = m.groups()
    if days is not None:  # D-H, D-H:M, D-H:M:S
        return int(days) * 86400 + int(a) * 3600 + int(b or 0) * 60 + int(c or 0)
    if c is not None:
        return int(a) * 3600 + int(b) * 60 + int(c)
    return int(a) * 60 + int(b or 0)


def check_options(options: SubmitOptions) -> int:
    """The numbers and their consistency, before anything is loaded; returns ranks per node."""
    if options.nodes < 1:
        raise DepthbenchError(f"--nodes {options.nodes}: needs at least 1")
    if options.gpus_per_node < 0:
        raise DepthbenchError(f"--gpus-per-node {options.gpus_per_node}: must be 0 (CPU) or more")
    tasks = options.ntasks_per_node
    if options.gpus_per_node and tasks is not None and tasks != options.gpus_per_node:
        raise DepthbenchError(
            f"--ntasks-per-node {tasks} with --gpus-per-node {options.gpus_per_node}: runs use one "
            "rank per GPU; leave --ntasks-per-node out"
        )
    tasks = options.gpus_per_node or tasks or 1
    if tasks < 1:
        raise DepthbenchError(f"--ntasks-per-node {tasks}: needs at least 1")
    if options.cpus_per_task is not None and options.cpus_per_task < 1:
        raise DepthbenchError(f"--cpus-per-task {options.cpus_per_task}: needs at least 1")
    if options.mem is not None and not MEM.fullmatch(check_text("--mem", options.mem)):
        raise DepthbenchError(f"--mem {options.mem!r} is not a Slurm size (e.g. 64G, 500M)")
    for name, pattern, example in (
        ("partition", NAME_LIST, "gpu or gpu,gpu-long"),
        ("qos", NAME_LIST, "normal"),
        ("account", ACCOUNT, "proj123"),
    ):
        value = getattr(options, name)
        if value is not None and not pattern.fullmatch(check_text(f"--{name}", value)):
            raise DepthbenchError(
                f"--{name} {value!r} is not a Slurm {name} name (letters, digits, _ . + -"
                + (", commas between several" if pattern is NAME_LIST else "")
                + f"; e.g. {example})"
            )
    if options.constraint is not None:
        check_constraint(options.constraint)
    if options.engine is not None and options.engine not in ("accelerate", "deepspeed"):
        raise DepthbenchError(f"--engine {options.engine!r}: choose accelerate or deepspeed")
    if options.max_restarts < 0:
        raise DepthbenchError(f"--max-restarts {options.max_restarts}: give 0 (never requeue after a failure) or more")
    if options.min_nodes is not None and not 1 <= options.min_nodes <= options.nodes:
        raise DepthbenchError(f"--min-nodes {options.min_nodes}: give 1 to --nodes ({options.nodes})")
    if options.min_nodes is not None and options.min_nodes < options.nodes and options.engine == "deepspeed":
        raise DepthbenchError(
            "--min-nodes below --nodes: DeepSpeed runs resume on their own number of ranks only "
            "(ZeRO partitions); leave --min-nodes out or use --engine accelerate"
        )
    if options.max_concurrent is not None and options.max_concurrent < 1:
        raise DepthbenchError(f"--max-concurrent {options.max_concurrent}: needs at least 1")
    if options.warning < MIN_WARNING_S:
        raise DepthbenchError(
            f"--warning {options.warning}: the run needs at least {MIN_WARNING_S} s between Slurm's "
            "USR1 and the time limit to checkpoint"
        )
    if options.time:
        limit = parse_time(options.time)
        if limit is not None and limit < options.warning + SIGNAL_EARLY_S:
            raise DepthbenchError(
                f"--time {options.time} ({limit} s) is too short for the {options.warning} s checkpoint warning: "
                f"Slurm may send USR1 up to {SIGNAL_EARLY_S} s early, so use --time of at least "
                f"{-(-(options.warning + SIGNAL_EARLY_S) // 60)} minutes (or a shorter --warning, >= {MIN_WARNING_S})"
            )
    if options.job_name is not None and not re.fullmatch(r"[\w.+-]+", check_text("--job-name", options.job_name)):
        raise DepthbenchError(f"--job-name {options.job_name!r}: use letters, digits, . _ + -")
    for option in options.sbatch:
        if not check_text("--sbatch", option).startswith("--"):
            raise DepthbenchError(f"--sbatch {option!r}: give a long sbatch option, e.g. --sbatch=--reservation=x")
        if not SBATCH_OPTION.fullmatch(option):
            raise DepthbenchError(
                f"--sbatch {option!r}: give one sbatch option per --sbatch, as --key or --key=value "
                "without blanks, quotes or #, e.g. --sbatch=--reservation=x"
            )
    check_text("the runs folder (DEPTHBENCH_RUNS)", str(runs_root()))
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
    return (
        in_dir
        or cfg.get("default_scope") in ("mmdet", "mmseg")
        or "train_dataloader" in cfg
        or (isinstance(model, dict) and "backbone" in model)
    )


class Checker:
    """Loads and checks each run's config exactly as its ranks will (one line on any problem), before anything is
    submitted. A config file is read once and each model built once (on the meta device): a sweep's 40 points
    are one file and 4 models. ``data_required=False`` (a dry run): a dataset that is not here is noted in
    ``data_notes`` instead -- it may live only on the cluster's file systems."""

    def __init__(self, world_size: int, engine: str | None, data_required: bool = True):
        self.world_size, self.engine, self.data_required = world_size, engine, data_required
        self.loaded, self.models = {}, set()
        self.data_notes: list[str] = []
        self.workers: int | None = None  # the most data.workers of the runs checked

    def _data_missing(self, error: DepthbenchError) -> None:
        if self.data_required:
            raise error
        if str(error) not in self.data_notes:
            self.data_notes.append(str(error))

    def load(self, config: Path, overrides=()):
        """The config as its ranks will read it (``epochs`` overrides rescale the schedule, as train does)."""
        key = str(config.resolve())
        if key not in self.loaded:
            self.loaded[key] = load_config(config, ())
        return load_training_config(config, overrides, recipe=self.loaded[key], engine=self.engine)[0]

    def element(self, config: Path, overrides: list[str], name: str | None = None, suffix: str = "") -> Element:
        cfg = self.load(config, overrides)
        name = name or config.stem
        if is_downstream(config, cfg):
            # what finetune checks before it writes (the job builds the detector itself: that takes a while)
            cfg = load_downstream_config(config, overrides)
            try:
                check_data(cfg, ("train", "val"))
            except DepthbenchError as e:
                self._data_missing(e)
            return Element(name, repo_relative(config), list(overrides), cfg.experiment, "finetune", suffix)

        if self.engine:
            cfg.engine = self.engine
        try:
            check_config(cfg, self.world_size, model=False)
        except DataError as e:  # the dataset check comes last in check_config: everything else was checked
            self._data_missing(e)
        workers = cfg.data.get("workers")
        if isinstance(workers, int):
            self.workers = max(self.workers or 0, workers)
        model = (cfg.model.name, repr(sorted(model_kwargs(cfg).items())), cfg.data.input_size, cfg.distill.teacher)
        if model not in self.models:
            check_model(cfg)
            self.models.add(model)
        return Element(name, repo_relative(config), list(overrides), cfg.experiment, suffix=suffix)

    def sweep(self, path: Path, cfg, overrides) -> list[Element]:
        """A sweep definition: one element per point, each the base recipe with the point's keys (as the sweep file
        documents), grouped under the sweep's name as their experiment."""
        base = sweep_base(path)
        return [
            self.element(
                base, [*keys, f"experiment={path.stem!r}", *overrides], name=point, suffix=f"-{safe_name(point)}"
            )
            for point, keys in sweep_points(cfg)
        ]


def sweep_base(path: Path) -> Path:
    """The one ``_base_`` recipe of a sweep definition; a sweep file that sets anything else is refused (its other
    keys would be lost)."""
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
        raise DepthbenchError(
            f"sweep definition {path}: expected exactly one _base_ recipe and only `sweep` besides "
            f"it (found _base_={bases}, other keys {others})"
        )
    return (path.parent / bases[0]).resolve()


def safe_name(text: str) -> str:
    return re.sub(r"[^\w.+-]+", "_", text).strip("_")


def collect(
    configs: Sequence[str],
    overrides: Sequence[str],
    options: SubmitOptions,
    world_size: int,
    *,
    table: str | None = None,
    rows: Sequence[str] | None = None,
    claims: ClaimsRequest | None = None,
) -> Submission:
    """The runs to submit -- config files (a sweep definition gives one run per point), the rows of a paper
    ``table`` ("PAPER:TABLE", only ``rows`` if given) or the runs of papers' ``claims`` -- each checked; raises on
    the first bad one."""
    if claims is not None:
        if configs or table:
            raise DepthbenchError("give either --claims PAPER, --table PAPER:TABLE or config files, not several")
        return claims_submission(claims, overrides, options, world_size)
    if table:
        if configs:
            raise DepthbenchError("give either --table PAPER:TABLE or config files, not both")
        return table_submission(table, rows, overrides, options, world_size)
    if rows:
        raise DepthbenchError("--rows picks rows of a --table; give --table PAPER:TABLE too")
    if not configs:
        raise DepthbenchError(
            "nothing to submit: give a config file (e.g. configs/horesnet/horesnet10-rk4_1xb64-20e_"
            "digits.py), several, a sweep definition, or --table PAPER:TABLE"
        )
    checker, elements = Checker(world_size, options.engine, data_required=not options.dry_run), []
    for text in configs:
        path = resolve_config_path(text)  # the working directory, then the repository; missing: one line
        cfg = checker.load(path)  # a broken file: one line
        if cfg.get("sweep"):
            elements += checker.sweep(path, cfg, overrides)
        else:
            elements.append(checker.element(path, overrides))
    first = Path(configs[0]).stem
    name = f"db-{first}" if len(configs) == 1 else f"db-{len(configs)}configs"
    return Submission(
        elements,
        options.job_name or safe_name(name),
        paper=paper_of(elements[0].config),
        data_notes=checker.data_notes,
        workers=checker.workers,
    )


def table_submission(
    table_spec: str, row_names: Sequence[str] | None, overrides: Sequence[str], options: SubmitOptions, world_size: int
) -> Submission:
    """Every row of the paper table ``table_spec`` ("PAPER:TABLE") that names a training config, or only the rows
    ``row_names`` (each may be a comma-separated group); rows without a config are listed in ``skipped``."""
    paper, sep, table_id = table_spec.partition(":")
    if not sep or not paper or not table_id:
        raise DepthbenchError(f"--table {table_spec!r}: expected PAPER:TABLE, e.g. stepsnet:1")
    try:
        tables = load_paper(paper.lower())
    except TableError as e:
        raise DepthbenchError(str(e)) from None
    table = next((t for t in tables if t.id.lower() == table_id.lower()), None)
    if table is None:
        raise DepthbenchError(f"{paper} has no table {table_id!r}; its tables: {', '.join(t.id for t in tables)}")
    rows = table.rows
    if row_names:
        wanted = [n.strip() for group in row_names for n in group.split(",") if n.strip()]
        by_name = {r.name.lower(): r for r in table.rows}
        unknown = [n for n in wanted if n.lower() not in by_name]
        if unknown:
            close = difflib.get_close_matches(unknown[0], [r.name for r in table.rows], n=3, cutoff=0.5)
            raise DepthbenchError(
                f"table {paper}:{table.id} has no row {unknown[0]!r}"
                + (
                    f"; did you mean {', '.join(close)}?"
                    if close
                    else f"; its rows: {', '.join(r.name for r in table.rows)}"
                )
            )
        rows = [by_name[n.lower()] for n in wanted]
        no_config = next((r for r in rows if not r.config), None)
        if no_config is not None:
            raise DepthbenchError(
                f"row {no_config.name!r} of {paper}:{table.id} has no training config"
                + (f" ({no_config.reason})" if no_config.reason else "")
            )
    skipped = [f"{r.name}: no training config" + (f" ({r.reason})" if r.reason else "") for r in rows if not r.config]
    rows = [r for r in rows if r.config]
    if not rows:
        raise DepthbenchError(f"no row of table {paper}:{table.id} names a training config; nothing to submit")
    checker, elements = Checker(world_size, options.engine, data_required=not options.dry_run), []
    for row in rows:
        kwargs = [f"+model.{k}={v!r}" for k, v in (row.model_kwargs or {}).items()]
        elements.append(checker.element(REPO / row.config, [*kwargs, *overrides], name=row.name))
    name = options.job_name or safe_name(f"db-{paper}-table{table.id}")
    return Submission(
        elements,
        name,
        paper=paper.lower(),
        table=table.id,
        skipped=skipped,
        data_notes=checker.data_notes,
        workers=checker.workers,
    )


@dataclass
class ClaimsRequest:
    """``depthbench submit --claims``: the papers' claims runs, as ``depthbench claims`` plans them."""

    papers: list[str]  # empty: every paper with claims
    out: str  # the folder `depthbench claims --out` reads
    seeds: int = 3
    quick: bool = False
    scale: str = "reduced"  # paper: the papers' own recipes, the next look of the claims still open (claims_scale)


def claims_submission(
    request: ClaimsRequest, overrides: Sequence[str], options: SubmitOptions, world_size: int
) -> Submission:
    """Every run of the papers' claims that is not done yet, each in the run directory ``depthbench claims --out``
    reads (so that, once the jobs are done, ``depthbench claims`` compares them and trains nothing); the claims are
    checked fair and audited first, as ``depthbench claims`` does. Runs that start from another run (ScaleNet's
    expanded arm from its shallow source) whose source is not done yet form a follow-up job that waits for this one
    (``--dependency=afterok``)."""
    if overrides:
        raise DepthbenchError(
            f"--claims trains the claims' own recipes; {overrides[0]!r} would make the runs differ "
            "from what `depthbench claims` compares: drop the key=value overrides"
        )
    seeds = cl.seeds_per_arm(request.seeds, request.quick)
    out = Path(request.out).absolute()  # the jobs run in the checkout, wherever this is called from
    papers = request.papers or cl.available_claims()
    checker = Checker(world_size, options.engine, data_required=not options.dry_run)
    now, later, skipped = [], [], []
    for claims in [cl.load_claims(p) for p in papers]:  # unknown paper / bad claims file: one line
        if request.scale == "paper":  # the papers' own recipes, the plan's first look (claims --scale paper --plan)
            specs = claims_scale.decide(claims, out).next_runs  # the next look of the claims still open
        else:
            cl.check_claims(claims, request.quick)
            specs = cl.plan_runs(claims, seeds, request.quick, out)
        cl.check_not_stale(specs, "move them away to submit them again")  # else skipped as done
        for spec in specs:
            name = f"{spec.paper}/{spec.arm}/seed{spec.seed}"
            if cl.run_done(spec):
                skipped.append(f"{name}: done in {spec.work_dir}")
                continue
            waits = spec.needs is not None and not spec.needs.is_file()
            # a run that waits for its source is checked without the source's weights, which do not exist yet
            checked = [o for o in spec.overrides if not (waits and o.startswith("model.pretrained="))]
            element = checker.element(REPO / spec.config, checked, name=name)
            element.overrides, element.run_dir = list(spec.overrides), str(spec.work_dir)
            (later if waits else now).append(element)
    if not now:
        now, later = later, []
    if not now:
        raise DepthbenchError(
            f"every claims run of {', '.join(papers)} is done in {out}; `depthbench claims "
            f"{' '.join(papers)}{' --scale paper' if request.scale == 'paper' else ''} --out {out}` compares them"
        )
    name = options.job_name or safe_name(f"db-claims-{papers[0] if len(papers) == 1 else f'{len(papers)}papers'}")
    paper = papers[0] if len(papers) == 1 else None
    followup = Submission(later, f"{name}-after", paper=paper, workers=checker.workers) if later else None
    return Submission(
        now,
        name,
        paper=paper,
        skipped=skipped,
        data_notes=checker.data_notes,
        followup=followup,
        workers=checker.workers,
    )


# ----------------------------------------------------------------------------------------- rendering
# PyTorch's documented NCCL watchdog settings (torch.distributed, "Debugging" / ProcessGroupNCCL's environment):
# a failed or timed-out collective ends the rank (the job then requeues), and the flight recorder keeps each rank's
# last collectives, dumped into the run directory on a timeout and by our own watchdog (harness/engine/watchdog.py)
NCCL_ENV = """# ---- GPU partition: NCCL's watchdog ends a rank on a failed or timed-out collective; its flight recorder
# keeps the last collectives of each rank, dumped into the run directory on a timeout (and by depthbench's watchdog)
export TORCH_NCCL_ASYNC_ERROR_HANDLING=1
export TORCH_NCCL_TRACE_BUFFER_SIZE=2000
export TORCH_NCCL_DUMP_ON_TIMEOUT=1
export TORCH_NCCL_DEBUG_INFO_TEMP_FILE=$WORK_DIR/faults/attempt-${SLURM_RESTART_COUNT:-0}/nccl-timeout-rank-
mkdir -p "$WORK_DIR/faults/attempt-${SLURM_RESTART_COUNT:-0}\""""


# every rank sees all of its node's GPUs (--gpu-bind=none): NCCL needs its peers visible (and no per-task device
# cgroup) for NVLink/P2P (NVIDIA/nccl#1066), and DeepSpeed and Accelerate index GPUs by the raw LOCAL_RANK. The rank
# takes cuda:LOCAL_RANK and binds itself to that GPU's closest cores (harness/engine/backends.py, rank_device).
SRUN_GPU = "--gpu-bind=none "
SRUN_GPU_NOTE = """
# --gpu-bind=none: every rank sees all of its node's GPUs (NCCL needs the peers for NVLink/P2P); each rank uses
# cuda:$LOCAL_RANK and binds itself to that GPU's NUMA-local cores before its loader workers start."""


def sbatch_lines(options: SubmitOptions, sub: Submission, tasks: int) -> list[str]:
    """The ``#SBATCH`` lines: every value was checked by :func:`check_options` (names, sizes, times, one option per
    --sbatch); the log path, which comes from the runs folder, is one quoted word."""
    n = len(sub.elements)
    lines = [f"--job-name={sub.job_name}", f"--nodes={options.nodes}", f"--ntasks-per-node={tasks}"]
    if options.gpus_per_node:
        lines.append(f"--gpus-per-node={options.gpus_per_node}")
    for name in ("cpus_per_task", "mem", "time", "partition", "account", "qos", "constraint"):
        value = getattr(options, name)
        if value is not None:
            lines.append(f"--{name.replace('_', '-')}={value}")
    if options.exclusive:
        lines.append("--exclusive")
    memory_note = (
        []
        if options.mem is not None
        else ["# no --mem: the cluster's default applies (DefMemPerNode/CPU/GPU; none set: all of each node's memory)"]
    )
    lines += [
        f"--signal=USR1@{options.warning}",
        "--requeue",
        "--open-mode=append",
        "--output=" + sbatch_word(f"{slurm_dir()}/%x-{'%A_%a' if n > 1 else '%j'}.out"),
    ]
    if n > 1:
        lines.append(f"--array=0-{n - 1}" + (f"%{options.max_concurrent}" if options.max_concurrent else ""))
    lines += options.sbatch
    return [f"#SBATCH {o}" for o in lines] + memory_note


def render(options: SubmitOptions, sub: Submission, tasks: int, stamp: str) -> str:
    """The sbatch script of ``sub``: slurm/depthbench.sbatch with its placeholders filled."""
    venv_bin = Path(sys.executable).parent
    # `python -m harness.cli` (= depthbench) from the checkout the job cds into, whichever checkout the venv's
    # editable install points at
    program = ["python", "-m", "harness.cli"]
    cases = []
    for i, e in enumerate(sub.elements):
        if e.command == "preflight":  # its overrides are its whole argument list (preflight_submission)
            cmd = [*program, "preflight", *e.overrides, "--work-dir", "@WORK_DIR@"]
        else:
            cmd = [*program, e.command, e.config, "--work-dir", "@WORK_DIR@", "--resume", "auto"]
            if options.engine and e.command == "train":
                cmd += ["--engine", options.engine]
            cmd += e.overrides
        words = " ".join('"$WORK_DIR"' if w == "@WORK_DIR@" else shlex.quote(w) for w in cmd)
        suffix = shlex.quote(e.suffix) if e.suffix else ""
        work_dir = (
            shlex.quote(e.run_dir) if e.run_dir else f"$DEPTHBENCH_RUNS/{shlex.quote(e.experiment)}/$RUN_ID{suffix}"
        )
        cases.append(f"    {i}) NAME={shlex.quote(e.name)}\n       WORK_DIR={work_dir}\n       CMD=({words}) ;;")
    what = f"{sub.paper} table {sub.table}" if sub.table else ", ".join(dict.fromkeys(e.config for e in sub.elements))
    title = (
        f"depthbench: {len(sub.elements)} run(s) of {what}, {options.nodes} node(s) x {tasks} rank(s)"
        if len(what) < 80
        else f"depthbench: {len(sub.elements)} runs, {options.nodes} node(s) x {tasks} rank(s)"
    )
    values = {
        "TITLE": comment_text(title),  # config paths and table names are the user's: one comment line, whatever
        "SBATCH": "\n".join(sbatch_lines(options, sub, tasks)),
        "REPO": shlex.quote(str(REPO)),
        "VENV_BIN": shlex.quote(str(venv_bin)),
        "RUNS": shlex.quote(str(runs_root())),
        "ACCELERATOR": "cuda" if options.gpus_per_node else "cpu",
        "BACKEND_NOTE": (
            "GPU partition: the ranks talk over NCCL"
            if options.gpus_per_node
            else "CPU partition: the ranks talk over gloo"
        ),
        "STAMP": stamp,
        "ELEMENTS": "\n".join(cases),
        "TASKS_PER_NODE": str(tasks),
        "WARNING": str(options.warning),
        "MAX_RESTARTS": str(options.max_restarts),
        "NODES": str(options.nodes),
        "MIN_NODES": str(options.min_nodes or options.nodes),
        "NCCL_ENV": NCCL_ENV if options.gpus_per_node else "",
        "SRUN_GPU": SRUN_GPU if options.gpus_per_node else "",
        "SRUN_GPU_NOTE": SRUN_GPU_NOTE if options.gpus_per_node else "",
    }
    text = TEMPLATE.read_text()
    unknown = set(re.findall(r"\{\{(\w+)\}\}", text)) - set(values)
    if unknown:
        raise DepthbenchError(f"{TEMPLATE} has placeholders this depthbench does not fill: {sorted(unknown)}")
    return re.sub(r"\{\{(\w+)\}\}", lambda m: values[m.group(1)], text).rstrip("\n") + "\n"


# ----------------------------------------------------------------------------------------- submit
@dataclass
class SubmitResult:
    """What :func:`submit` did: the rendered script and, unless a dry run, the job id and the record kept beside
    the Slurm logs (``elements``: one dict per run with its job, name, config, overrides and run directory)."""

    script: str
    job_name: str
    elements: list[dict]
    skipped: list[str] = field(default_factory=list)  # table rows without a training config: "name (reason)"
    job_id: str | None = None  # None: a dry run, nothing submitted
    record_path: Path | None = None  # <runs>/slurm/<job>.json
    script_path: Path | None = None  # <runs>/slurm/<job>.sbatch
    estimate: object | None = None  # --estimate: harness.measure.estimate.Estimate of the runs
    notes: list[str] = field(default_factory=list)  # what the user should know: data not checked, runs folder
    followup: SubmitResult | None = None  # --claims: the runs that wait for this job (afterok)


def submit(
    configs: Sequence[str] = (),
    overrides: Sequence[str] = (),
    options: SubmitOptions | None = None,
    *,
    table: str | None = None,
    rows: Sequence[str] | None = None,
    claims: ClaimsRequest | None = None,
    before_submit: Callable[[list[dict]], None] | None = None,
) -> SubmitResult:
    """Check the options and every run (configs, a paper ``table``'s ``rows`` or papers' ``claims`` runs) as their
    ranks will, render one sbatch script and, unless ``options.dry_run``, submit it and keep the script and a record
    of the runs; claims runs that start from another run's weights go to a second job that waits for the first
    (``result.followup``; a dry run renders it without the dependency, which needs the first job's id).
    ``options.preflight``: submit one ``depthbench preflight`` job of the runs instead (:func:`preflight_submission`).
    ``before_submit`` gets the runs (one dict per element) once they are checked, before anything is submitted
    (``depthbench submit --estimate`` prints their cost there)."""
    options = options or SubmitOptions()
    configs, overrides = list(configs), list(overrides)
    tasks = check_options(options)
    for override in overrides:  # quoted in the script; a control character is never meant
        check_text("override", override)
    for what, value in (("--table", table), *(("--rows", r) for r in rows or ())):
        if value is not None:
            check_text(what, value)
    # options and configs first: their errors say more than a missing sbatch
    sub = collect(configs, overrides, options, options.nodes * tasks, table=table, rows=rows, claims=claims)
    if options.min_nodes is not None and options.min_nodes < options.nodes:
        check_elastic_worlds(sub, options, tasks)
    if before_submit is not None:
        later = sub.followup.elements if sub.followup else []
        before_submit([{"index": i, **asdict(e)} for i, e in enumerate([*sub.elements, *later])])
    if options.preflight:
        sub, options = preflight_submission(sub, options, tasks)
    options, cpu_notes = cpus_for_workers(options, sub.workers)
    if not options.dry_run and shutil.which("sbatch") is None:
        raise DepthbenchError(
            "sbatch is not on PATH: run this on a Slurm login node, start the local cluster "
            "(sudo slurm/local-cluster.sh start), or add --dry-run to see the script"
        )
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    script = render(options, sub, tasks, stamp)
    notes = [
        f"data check skipped for this dry run: {e} -- the data may live only on the cluster, where a submit "
        "without --dry-run checks it"
        for e in sub.data_notes
    ]
    notes += [n for n in [runs_root_note()] if n] + cpu_notes
    if options.dry_run:
        # the script's log folder, so that `submit --dry-run > job.sbatch; sbatch job.sbatch` works as it is
        try:
            slurm_dir().mkdir(parents=True, exist_ok=True)
        except OSError as e:
            notes.append(
                f"cannot create the script's log folder {slurm_dir()} here ({e.strerror}); create it where "
                "the job runs before `sbatch` (Slurm does not)"
            )
        result = SubmitResult(
            script,
            sub.job_name,
            [{"index": i, **asdict(e)} for i, e in enumerate(sub.elements)],
            sub.skipped,
            notes=notes,
        )
        if sub.followup:
            later = sub.followup
            result.followup = SubmitResult(
                render(options, later, tasks, stamp),
                later.job_name,
                [{"index": i, **asdict(e)} for i, e in enumerate(later.elements)],
            )
        return result
    job_id = sbatch(script)
    record = write_record(job_id, script, sub, stamp)
    result = SubmitResult(
        script,
        sub.job_name,
        record["elements"],
        sub.skipped,
        job_id,
        slurm_dir() / f"{job_id}.json",
        Path(record["script"]),
        notes=notes,
    )
    if sub.followup:
        # afterok on an array job waits for every element; a failed source leaves the follow-up pending
        # (DependencyNeverSatisfied) for `depthbench cancel`, rather than training from missing weights
        waiting = replace(options, sbatch=[*options.sbatch, f"--dependency=afterok:{job_id}"])
        later_script = render(waiting, sub.followup, tasks, stamp)
        try:
            later_id = sbatch(later_script)
        except DepthbenchError as e:
            raise DepthbenchError(
                f"job {job_id} was submitted ({len(sub.elements)} runs) but not the job of the runs "
                f"that start from its weights: {e}; once {job_id} is done, the same submit "
                "command submits them"
            ) from None
        later_record = write_record(later_id, later_script, sub.followup, stamp)
        result.followup = SubmitResult(
            later_script,
            sub.followup.job_name,
            later_record["elements"],
            job_id=later_id,
            record_path=slurm_dir() / f"{later_id}.json",
            script_path=Path(later_record["script"]),
        )
    return result


def submit_runs(
    configs: Sequence[str] = (),
    overrides: Sequence[str] = (),
    options: SubmitOptions | None = None,
    *,
    table: str | None = None,
    rows: Sequence[str] | None = None,
    claims: Sequence[str] | None = None,
    seeds: int = CLAIMS_SEEDS,
    quick: bool = False,
    claims_out: str | Path | None = None,
    scale: str = "reduced",
    estimate: bool = False,
    show_estimate: Callable[[Estimate], None] | None = None,
) -> SubmitResult:
    """One ``depthbench submit`` (its ``run_submit``, harness/commands/submit.py, documents the arguments):
    :func:`submit` of the configs, a ``table``'s ``rows`` or the papers' ``claims`` runs (``[]``: every paper's;
    in ``claims_out``, by default where ``depthbench claims`` reads them). ``estimate``: each run's cost
    (``result.estimate``, :mod:`harness.measure.estimate`) once the runs are checked, handed to ``show_estimate``
    before anything is submitted."""
    options = options or SubmitOptions()
    cost = []

    def estimate_runs(elements: list[dict]) -> None:
        layout = Layout(
            nodes=options.nodes,
            gpus_per_node=options.gpus_per_node,
            ntasks_per_node=options.ntasks_per_node,
            time_s=parse_time(options.time) if options.time else None,
            warning_s=options.warning,
            max_concurrent=options.max_concurrent,
            partition=options.partition,
        )
        cost.append(estimate_cost(jobs_from_elements(elements), layout))
        if show_estimate is not None:
            show_estimate(cost[0])

    request = None
    if claims is not None:
        if claims_out is not None and not inside_run_roots(claims_out):
            raise ConfigError(
                f"--claims-out {printable(str(claims_out))} is outside the runs root {runs_root()}: `depthbench "
                "jobs` and `cancel` act only on runs under it or the claims folders (a submission record naming "
                f"another folder is refused as untrusted); put it under {runs_root()}"
            )
        out = str(claims_out or claims_default_out(quick, scale=scale))
        request = ClaimsRequest(list(claims), out, seeds, quick, scale)
    result = submit(
        [str(c) for c in configs],
        list(overrides),
        options,
        table=table,
        rows=list(rows) if rows else None,
        claims=request,
        before_submit=estimate_runs if estimate else None,
    )
    result.estimate = cost[0] if cost else None
    return result


def dry_run_text(result: SubmitResult) -> tuple[str, str]:
    """What ``depthbench submit --dry-run`` prints: the script(s), for stdout (``> job.sbatch``), and the line
    saying how to submit them, for stderr."""
    later = result.followup
    script = result.script
    if later:
        script += f"\n# ---- the second job: {len(later.elements)} run(s) that start from the first job's weights\n\n"
        script += later.script
    note = (
        f"depthbench submit: dry run, nothing submitted ({len(result.elements)} run(s)); submit the script "
        "above with `sbatch --parsable SCRIPT`"
        + (
            f", the second ({len(later.elements)} run(s)) with `sbatch --dependency=afterok:<first job id> SCRIPT2`"
            if later
            else ""
        )
    )
    return script, note


def claims_command(papers: Sequence[str], quick: bool = False, out: str | None = None, scale: str | None = None) -> str:
    """The ``depthbench claims`` command that compares the claims runs once their jobs are done (at the paper's
    scale: decides the looks reached and names the next)."""
    return (
        "depthbench claims "
        + " ".join(papers)
        + (" --quick" if quick else "")
        + (" --scale paper" if scale == "paper" else "")
        + (f" --out {out}" if out else "")
    )


def submitted_text(result: SubmitResult, max_concurrent: int | None = None, claims: str | None = None) -> str:
    """What ``depthbench submit`` prints once the job is submitted: the job (array) and its runs' directories and
    Slurm logs, the job that waits for it, how to follow and stop them, and ``claims``, the command that compares
    the claims runs once they are done."""
    job_id, first, later = result.job_id, result.elements[0], result.followup
    if first["command"] == "preflight":
        lines = [
            f"submitted job {job_id}: depthbench preflight of the runs -> {first['work_dir']}/preflight.txt",
            f"  Slurm log {first['log']}",
        ]
    elif len(result.elements) == 1:
        lines = [f"submitted job {job_id}: {first['name']} -> {first['work_dir']}", f"  Slurm log {first['log']}"]
    else:
        lines = [
            f"submitted job array {job_id} ({len(result.elements)} runs"
            + (f", at most {max_concurrent} at once" if max_concurrent else "")
            + "):"
        ]
        lines += [f"  {e['job']}  {e['name']}  -> {e['work_dir']}" for e in result.elements]
        lines.append(f"  Slurm logs {result.record_path.parent}/{result.job_name}-{job_id}_<index>.out")
    if later:
        runs = f"{len(later.elements)} run" + ("s that start" if len(later.elements) > 1 else " that starts")
        lines.append(
            f"submitted job {later.job_id} ({runs} from job {job_id}'s weights; it waits for {job_id} to succeed):"
        )
        lines += [f"  {e['job']}  {e['name']}  -> {e['work_dir']}" for e in later.elements]
    lines.append(
        f"  script {result.script_path}; follow with `depthbench jobs`, stop with `depthbench cancel {job_id}`"
    )
    if claims:
        lines.append(f"  once the jobs are done, `{claims}` compares the runs (it trains nothing that is done)")
    return "\n".join(lines)


def cpus_for_workers(options: SubmitOptions, workers: int | None) -> tuple[SubmitOptions, list[str]]:
    """Every rank gets the cores its loader workers need: ``--cpus-per-task`` is data.workers + 1 (the rank's own
    process) unless given; a smaller given value is kept, with one warning naming both numbers."""
    if workers is None:
        return options, []
    needed = workers + 1
    if options.cpus_per_task is None:
        return replace(options, cpus_per_task=needed), []
    if options.cpus_per_task < needed:
        return options, [
            f"--cpus-per-task {options.cpus_per_task} is less than the {needed} cores a rank uses "
            f"(data.workers={workers} loader workers + 1); its workers will share cores and the GPU may "
            f"wait for data -- give --cpus-per-task {needed} or set "
            f"data.workers={options.cpus_per_task - 1}"
        ]
    return options, []


def check_elastic_worlds(sub: Submission, options: SubmitOptions, tasks: int) -> None:
    """With ``--min-nodes``, a requeue may continue a run on fewer nodes: each run's global batch must split over
    every rank count from ``min_nodes`` to ``nodes`` nodes (elastic resume keeps the global batch)."""
    checker = Checker(options.nodes * tasks, options.engine, data_required=False)
    for e in sub.elements + (sub.followup.elements if sub.followup else []):
        if e.command != "train":
            continue
        cfg = checker.load(REPO / e.config if not Path(e.config).is_absolute() else Path(e.config), e.overrides)
        if (options.engine or cfg.engine) == "deepspeed":
            raise ConfigError(
                f"{e.name}: --min-nodes below --nodes needs the accelerate engine (a DeepSpeed run "
                "resumes on its own number of ranks only); leave --min-nodes out"
            )
        for nodes in range(options.min_nodes, options.nodes):
            per_step = nodes * tasks * cfg.grad_accum
            if cfg.batch_size % per_step:
                raise ConfigError(
                    f"{e.name}: --min-nodes {options.min_nodes}: batch_size={cfg.batch_size} (global) "
                    f"does not split over {nodes} node(s) x {tasks} rank(s) x grad_accum="
                    f"{cfg.grad_accum}; choose a batch_size every such rank count divides"
                )


def preflight_submission(sub: Submission, options: SubmitOptions, tasks: int) -> tuple[Submission, SubmitOptions]:
    """One job on the allocation the runs of ``sub`` would get -- same nodes, ranks, partition and rendering -- that
    runs ``depthbench preflight`` on each distinct training run (its config and overrides) with the runs' layout,
    ``--time`` and ``--warning``; its own limit is :data:`PREFLIGHT_TIME` (or the runs' when shorter)."""
    args, seen = [], set()
    for e in sub.elements:
        if e.command != "train" or (e.config, tuple(e.overrides)) in seen:
            continue  # fine-tuning runs have no preflight; a repeated run is checked once
        seen.add((e.config, tuple(e.overrides)))
        args += ["--config", e.config, *e.overrides]
    if not args:
        raise DepthbenchError("--preflight checks training runs; this submission has none (fine-tuning configs only)")
    args += ["--nodes", str(options.nodes)]
    args += (
        ["--gpus-per-node", str(options.gpus_per_node)]
        if options.gpus_per_node
        else ["--ntasks-per-node", str(tasks), "--device", "cpu"]
    )
    if options.time:
        args += ["--time", options.time]
    args += ["--warning", str(options.warning)]
    limit = (
        options.time
        if options.time and (parse_time(options.time) or 10**9) < parse_time(PREFLIGHT_TIME)
        else PREFLIGHT_TIME
    )
    element = Element("preflight", sub.elements[0].config, args, "preflight", command="preflight")
    job_name = options.job_name or safe_name(f"{sub.job_name}-preflight")
    return (
        Submission(
            [element],
            job_name,
            paper=sub.paper,
            table=sub.table,
            skipped=sub.skipped,
            data_notes=sub.data_notes,
            workers=sub.workers,
        ),
        replace(options, time=limit, max_concurrent=None),
    )


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
        reason = next(
            (ln for ln in reversed(lines) if "submission failed" in ln),
            lines[-1] if lines else f"exit code {out.returncode}",
        )
        raise DepthbenchError(f"sbatch refused the job, nothing submitted: {reason.removeprefix('sbatch: error: ')}")
    job_id = out.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise DepthbenchError(f"sbatch answered {out.stdout.strip()!r}, not a job id; check `squeue --me`")
    return job_id


def write_record(job_id: str, script: str, sub: Submission, stamp: str) -> dict:
    folder = slurm_dir()
    array = len(sub.elements) > 1
    elements = []
    for i, e in enumerate(sub.elements):
        job = f"{job_id}_{i}" if array else job_id
        e.work_dir = e.run_dir or str(runs_root() / e.experiment / f"{stamp}-j{job}{e.suffix}")
        e.log = str(folder / f"{sub.job_name}-{job}.out")
        elements.append({"index": i, "job": job, **asdict(e)})
    script_path = folder / f"{job_id}.sbatch"
    atomic_write(script_path, script)
    record = {
        "job_id": job_id,
        "job_name": sub.job_name,
        "submitted": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "paper": sub.paper,
        "table": sub.table,
        "script": str(script_path),
        "elements": elements,
    }
    atomic_write(folder / f"{job_id}.json", json.dumps(record, indent=1))
    return record
