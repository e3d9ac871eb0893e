"""The orchestration behind ``depthbench claims`` (harness/commands/claims.py parses and checks the command line and
calls :func:`run_claims`, or :func:`results.claims_status.read_status` for ``--status``): plan each claim's looks
from its file's design, train the runs a look needs (forks of one preloaded server, ``jobs`` at a time), decide
after each look, evaluate and write the report (claims.json, claims.md, a figure per claim).

The plan's looks -- which fix the boundaries -- are the design's, whatever a ``--seeds`` cap trains: a capped run
stops training early and reads the looks it reached against the whole plan (it never spends the whole alpha at
its "first look"). Holm's family is each file's confirmatory claims (results.claims.evaluate), so the papers named
on the command line change no verdict.
"""

from __future__ import annotations

import collections
import json
import math
import os
import platform
import shlex
import sys
import time
from dataclasses import asdict, replace
from datetime import datetime
from functools import lru_cache
from pathlib import Path

import numpy as np
import timm
import torch
from PIL import Image

from harness.core.config import load_config
from harness.core.errors import DepthbenchError
from harness.core.files import BadFile, atomic_write, check_writable_folder, printable, read_json, read_text
from harness.core.rundir import RunDir
from harness.engine.forked import start_forked, start_forked_call
from harness.tasks.glyphs import DEFAULT_VARIANT, export_glyphs, glyph_fonts, glyphs_folder, sample_sheet
from results import claims as cl
from results.claims_status import ClaimsReport
from results.runs import load_curves


def plan(files, cap: int | None, quick: bool) -> tuple[dict, dict, dict]:
    """Per (paper, claim id): the plan's looks (its boundaries), the seed counts to train (the looks up to ``cap``,
    and ``cap`` itself where it falls between two) and the plan's power. ``--quick``: one seed, no plan."""
    plans, targets, powers = {}, {}, {}
    for f in files:
        for claim in f.claims:
            key = (claim.paper, claim.id)
            looks, power = ((1,), None) if quick else cl.plan_looks(claim, f.design, f.bench)
            plans[key], powers[key] = looks, power
            targets[key] = looks if cap is None else tuple(sorted({min(n, cap) for n in looks}))
    return plans, targets, powers


def run_slots(jobs: int | None, device: str | None) -> tuple[int, dict]:
    """(runs at a time, the runs' added environment) for ``device`` (cpu, cuda or None: the engine's choice):
    by default one run per core, one thread each, or one on cuda (refused where torch sees no GPU)."""
    if device == "cuda" and not torch.cuda.is_available():
        raise DepthbenchError(
            "--device cuda: torch sees no GPU here (torch.cuda.is_available() is False); run "
            "on a GPU node, or drop --device to train on the CPU"
        )
    jobs = jobs or (
        1 if device == "cuda" else max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    )
    return jobs, {"CUDA_VISIBLE_DEVICES": ""} if device == "cpu" else {}


def run_claims(
    files,
    out: Path,
    cap: int | None,
    quick: bool,
    jobs: int | None = None,
    device: str | None = None,
    tier: str = "all",
) -> ClaimsReport:
    """Check, train (what is not trained yet, look by look), compare and report the claims of ``files`` into
    ``out``; then measure the efficiency claims' models (:func:`results.claims.measure_efficiency`, on ``device``:
    cpu, cuda or None for the engine's choice), after the training so that no run shares the machine with the
    timing. ``cap``: the most seeds per arm to train (None: each claim's plan); ``jobs``: runs at a time (default:
    one per core, one thread each; on cuda: 1). ``tier="confirmatory"``: only the confirmatory claims' arms train;
    a descriptive claim is reported when its first look's runs are done in ``out`` (trained by an earlier call, or
    by this one for the confirmatory claims that share them), else listed as not trained with its cost
    (:func:`untrained_claims`)."""
    jobs, env = run_slots(jobs, device)
    check_folder_kind(out, quick)
    check_writable_folder(out, "--out", "the claims' runs and report")
    plans, targets, powers = plan(files, cap, quick)
    claims, untrained, given = [], [], files
    for f in files:
        for claim in f.claims:
            first = cl.plan_runs(f, targets[(claim.paper, claim.id)][0], quick, out, only=[claim])
            if tier == "all" or claim.tier == "confirmatory" or all(cl.run_done(s) for s in first):
                claims.append((claim, f))
            else:
                untrained.append((claim, f, first))
    files = [replace(f, claims=tuple(c for c, g in claims if g is f)) for f in files]
    datasets = check_and_list_data(files, quick)
    open_claims = dict.fromkeys((c.paper, c.id) for c, _ in claims)
    specs: dict = {}
    for look in range(max((len(v) for v in targets.values()), default=0)):
        todo = []
        for claim, f in claims:
            target = targets[(claim.paper, claim.id)]
            if (claim.paper, claim.id) in open_claims and look < len(target):
                todo += cl.plan_runs(f, target[look], quick, out, only=[claim])
        todo = list({s.work_dir: s for s in todo}.values())
        cl.check_not_stale(todo, "move them away (or use another --out) and they are trained again")
        if look == 0:
            prepare_data(datasets, jobs)
        train_runs(todo, jobs, env)
        specs.update({s.work_dir: s for s in todo})
        values = run_values(list(specs.values()))
        for claim, f in claims:
            key = (claim.paper, claim.id)
            if (
                key in open_claims
                and not quick
                and cl.stop_decision(
                    claim, f.design, {a: values.get((claim.paper, a), {}) for a in claim.arm_names}, plans[key]
                )
            ):
                del open_claims[key]  # decided at this look: no more seeds for it
    # a descriptive claim whose runs the confirmatory claims trained in this call (the same arms and seeds) is
    # reported like one an earlier call trained, not listed as untrained with no run left
    still_untrained = []
    for claim, f, first in untrained:
        if all(cl.run_done(s) for s in first):
            claims.append((claim, f))
            specs.update({s.work_dir: s for s in first})
        else:
            still_untrained.append((claim, f, first))
    in_file_order = {(f.paper, c.id): (i, j) for i, f in enumerate(given) for j, c in enumerate(f.claims)}
    claims.sort(key=lambda claim_file: in_file_order[(claim_file[0].paper, claim_file[0].id)])
    files = [replace(f, claims=tuple(c for c, g in claims if g is f)) for f in given]
    all_specs = list(specs.values())
    values, losses, hardware = run_values(all_specs), run_values(all_specs, "loss"), _hardware(all_specs)
    for f in files:
        measured, machine_line = efficiency_values(f, out, device, quick)
        values.update(measured)
        hardware.update({key: machine_line for key in measured})
    results = cl.evaluate([(c, f.design) for c, f in claims], values, plans, powers, quick)
    designs = {(c.paper, c.id): f.design for c, f in claims}
    results = [
        replace(
            r,
            hardware=tuple(
                sorted({hardware.get((r.claim.paper, a), "unknown (trained elsewhere)") for a in r.claim.arm_names})
            ),
            seeds_needed=None
            if quick or r.claim.tier == "descriptive" or r.claim.measure
            else cl.seeds_needed(r.claim, designs[(r.claim.paper, r.claim.id)]),
            **({} if quick or r.claim.measure else _observed(r, designs[(r.claim.paper, r.claim.id)], values, losses)),
        )
        for r in results
    ]
    status_lines = [cl.status_line(f.paper, [r for r in results if r.claim.paper == f.paper], quick) for f in files]
    skipped = untrained_claims(still_untrained, all_specs)
    written = write_report(results, files, all_specs, out, quick, skipped)
    return ClaimsReport(results, out, all_specs, written, status_lines)


def efficiency_values(f, out: Path, device: str | None, quick: bool) -> tuple[dict, str]:
    """The measurement of ``f``'s efficiency claims (:func:`results.claims.measure_efficiency`), written once to
    ``out/efficiency/<paper>.json`` and read back by every later call over the same folder. The measurement is
    those claims' one look, as a trained run is an accuracy claim's: a call that only adds seeds or rewrites the
    report must not draw it again (a second measurement on a busier machine would be a look the plan never had).
    A changed bench plan, device or --quick measures again; so does deleting the file."""
    if not any(c.measure for c in f.claims):
        return {}, ""
    path = out / "efficiency" / f"{f.paper}.json"
    key = {"bench": repr(f.bench), "device": device or "default", "quick": quick}
    if path.exists():
        try:
            record = read_json(path, finite=True, what="efficiency measurement")
            if record.get("key") == key:
                values = {(f.paper, str(k)): {int(i): float(v) for i, v in rounds} for k, rounds in record["values"]}
                _say(
                    f"depthbench claims: {f.paper}'s efficiency claims as measured in {path} (delete it to measure again)"
                )
                return values, str(record["hardware"])
        except (BadFile, KeyError, TypeError, ValueError) as e:
            raise DepthbenchError(
                f"{path} is unreadable ({e}); delete it and the efficiency claims are measured again"
            ) from None
    values, hardware = cl.measure_efficiency(f, device, quick, progress=_say)
    record = {"key": key, "hardware": hardware, "values": [[k, sorted(v.items())] for (_, k), v in values.items()]}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(record, indent=1), inside=out)
    return values, hardware


def _observed(r, design, values, losses) -> dict:
    """What the evaluated seeds say beside the plan: the seeds their spread would need (the plan's power analysis
    at the observed sd) and the validation loss's plain interval at the seeds the verdict used (a second,
    descriptive measure: not pre-registered)."""
    arms = {a: values.get((r.claim.paper, a), {}) for a in r.claim.arm_names}
    seeds = sorted(set.intersection(*(set(v) for v in arms.values())))[: r.treatment.n]
    loss = {a: losses.get((r.claim.paper, a), {}) for a in r.claim.arm_names}
    observed = r.observed_sd if r.observed_sd is not None and math.isfinite(r.observed_sd) else None
    return {
        "observed_seeds_needed": None if observed is None else cl.seeds_needed(r.claim, design, sd=observed),
        "val_loss": cl.plain_interval(r.claim, loss, seeds, design.alpha),
    }


def untrained_claims(untrained, done_specs) -> list[tuple]:
    """``(claim, runs left, minutes of run time or None)`` per descriptive claim a ``--tier confirmatory`` call did
    not train. The minutes: the runs not done, each priced at the wall minutes of this call's finished one-thread runs
    per unit of work (the model's MACs per image x epochs: every arm trains on the same glyphs set), the median
    over those runs; None where no finished run has a start and end time."""
    rates = [m / _work(s) for s in done_specs if (m := run_minutes(s)) is not None]
    rate = float(np.median(rates)) if rates else None
    out = []
    for claim, f, first in untrained:
        left = [s for s in first if not cl.run_done(s)]
        out.append((claim, len(left), None if rate is None else rate * sum(_work(s) for s in left)))
    return out


def run_minutes(spec) -> float | None:
    """A finished run's wall minutes, its meta.json's start to end; None where it is not done or has no times."""
    if not cl.run_done(spec):
        return None
    meta = RunDir.open(spec.work_dir, writer=False).meta()
    try:
        return (datetime.fromisoformat(meta["end"]) - datetime.fromisoformat(meta["start"])).total_seconds() / 60
    except (KeyError, TypeError, ValueError):
        return None


def _cost_line(specs) -> list[str]:
    """What the report's runs cost: their wall times summed, per paper (each run one process: one thread, one per
    core, on CPU; one at a time on a GPU -- the elapsed time is this over the runs at a time)."""
    timed = [(s.paper, m) for s in specs if (m := run_minutes(s)) is not None]
    if not timed:
        return []
    per_paper = collections.defaultdict(float)
    for paper, m in timed:
        per_paper[paper] += m
    untimed = len(specs) - len(timed)
    return [
        f"- Training: {len(specs)} runs, {_hours(sum(m for _, m in timed))} of run time summed (each run's start to "
        f"end; {', '.join(f'{p} {_hours(m)}' for p, m in sorted(per_paper.items()))})"
        + (f"; {untimed} run(s) without times" if untimed else "")
        + ": over the runs trained at a time (one per core on CPU, one on a GPU), the elapsed time"
    ]


def _hours(minutes: float) -> str:
    hours, rest = divmod(round(minutes), 60)
    return f"{hours} h {rest:02d} min" if hours else f"{rest} min"


def _work(spec) -> float:
    """A run's training work in MACs per image x epochs (its resolved config; cached per recipe)."""
    return _recipe_work(spec.config, tuple(o for o in spec.overrides if not o.startswith(("seed=", "experiment="))))


@lru_cache(maxsize=None)
def _recipe_work(config: str, overrides: tuple) -> float:
    cfg = load_config(cl.REPO / config, [o for o in overrides if not o.startswith("model.pretrained=")])
    return cl.arm_size(cfg)["flops"] * cfg.epochs


def check_and_list_data(files, quick: bool) -> set:
    """Check every claim of ``files`` fair and audited (:func:`results.claims.check_claims`: one line, nothing
    trained) and return the glyphs sets their trained arms need, as :func:`prepare_data` takes them."""
    datasets = set()
    for f in files:
        configs = cl.check_claims(f, quick)
        trained = {arm.name for claim in f.claims for arm in f.arms_of(claim)}  # efficiency claims train none
        datasets |= {
            (c.data.input_size, c.data.get("variant") or DEFAULT_VARIANT)  # in the data cache, as training reads them
            for name, c in configs.items()
            if name in trained and c.data.type == "glyphs"
        }
    return datasets


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def check_folder_kind(out: Path, quick: bool) -> None:
    """A --quick report's folder is not a full run's, and the other way round: one line instead of advice to move
    valid runs away (their recipes differ by the quick overrides)."""
    report = out / "claims.json"
    if not report.is_file():
        return
    try:
        stored = cl.read_report(report)
    except DepthbenchError:
        return  # rewritten by this call
    was_quick = any(r.quick or setting.endswith("[--quick]") for r, setting in stored)
    if stored and was_quick != quick:
        raise DepthbenchError(
            f"--out {out} holds a {'--quick' if was_quick else 'full'} report; "
            f"{'add' if was_quick else 'drop'} --quick to continue it, or give another --out"
        )


def run_values(specs, metric: str = "top1") -> dict:
    """(paper, arm) -> {seed: ``metric`` of the last evaluation} of the finished runs (top1, or the validation
    ``loss`` the engine logs with it)."""
    values: dict = {}
    for s in specs:
        curve = _curve(s.work_dir, metric) if cl.run_done(s) else []
        if curve:
            values.setdefault((s.paper, s.arm), {})[s.seed] = (
                cl.metric_value(curve, "top1") if metric == "top1" else curve[-1][1]
            )
    return values


def machine(gpu: bool = True) -> str:
    """This machine in one line: CPU model and ISA extensions that matter for float kernels, GPU, torch, timm."""

    cpu, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name") and cpu in ("", platform.machine(), platform.processor()):
                    cpu = line.split(":", 1)[1].strip()
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = "/".join(f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16") if f in flags) or platform.machine()
    gpu = torch.cuda.get_device_name() if gpu and torch.cuda.is_available() else "no GPU"
    return f"{cpu} ({isa}), {gpu}, torch {torch.__version__}, timm {timm.__version__}"


def _hardware(specs) -> dict:
    """(paper, arm) -> the machine its runs were trained on (from each run's ``<seed>.hardware.txt``)."""
    seen: dict = {}
    for s in specs:
        path = s.work_dir.parent / f"{s.work_dir.name}.hardware.txt"
        try:
            text = read_text(path, inside=s.work_dir.parent, max_bytes=4096, what="hardware record")
        except (OSError, BadFile):  # not written (yet), or not a plain file of the run's folder
            continue
        seen.setdefault((s.paper, s.arm), set()).add(printable(text.strip()))
    return {k: "; ".join(sorted(v)) for k, v in seen.items()}


# ----------------------------------------------------------------------------------------- training
def prepare_data(datasets: set, jobs: int) -> None:
    """Render the glyphs sets the runs need once, here, before the runs start (parallel runs would otherwise each
    render the same missing set: correct -- the cache is written atomically -- but twice the work), ``jobs`` sets at
    a time, the largest first (from nothing: 2.4 min of rendering on one core, 1.3 min on two), each a fork of the
    runs' server. Ctrl-C stops them; a set is never left half-written."""

    waiting = sorted(
        (d for d in datasets if not glyphs_folder(d[0], variant=d[1]).exists()),
        key=lambda d: (-d[0], d[1]),
    )
    if not waiting:
        return
    glyph_fonts()  # a missing font package: one line, before any work
    running, start = [], time.monotonic()
    try:
        while waiting or running:
            while waiting and len(running) < jobs:
                size, variant = waiting.pop(0)
                process = start_forked_call(export_glyphs, size, variant=variant, progress=False)
                running.append((process, size, variant))
            for item in [r for r in running if r[0].exitcode is not None]:
                running.remove(item)
                process, size, variant = item
                if process.exitcode != 0:
                    raise DepthbenchError(
                        f"rendering the glyphs {variant} {size}px set failed (exit "
                        f"{process.exitcode}; its traceback is above); rerun to try again"
                    )
                print(
                    f"depthbench claims: glyphs {variant} {size}px ready ({time.monotonic() - start:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
            time.sleep(0.2)
    finally:  # interrupted or failed: stop the other renders (their sets are not written)
        for process, _, _ in running:
            process.terminate()
            process.join()


def train_runs(specs: list[cl.RunSpec], jobs: int, env_extra: dict | None = None) -> None:
    """Every run not done yet, ``jobs`` at a time (a run starts once its source run is done). Each run is the
    command line its console log starts with, started as a fork of a server that imported the stack once
    (:func:`harness.engine.forked.start_forked`: ~4 s of CPU saved per run, minutes over a full call)."""

    todo = [s for s in specs if not cl.run_done(s)]
    if not todo:
        return
    print(
        f"depthbench claims: {len(todo)} of {len(specs)} runs to train, {jobs} at a time", file=sys.stderr, flush=True
    )
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **(env_extra or {}))
    here = machine(gpu=(env_extra or {}).get("CUDA_VISIBLE_DEVICES") != "")
    running: dict = {}  # id(spec) -> (spec, process): specs hold lists, so they are not hashable
    finished, failed, start = 0, [], time.monotonic()

    def ready(spec):
        return spec.needs is None or spec.needs.is_file()

    try:
        while todo or running:
            for spec in [s for s in todo if ready(s)][: jobs - len(running)]:
                todo.remove(spec)
                spec.work_dir.parent.mkdir(parents=True, exist_ok=True)
                argv = ["train", spec.config, *spec.overrides, "--work-dir", str(spec.work_dir), "--resume", "auto"]
                # the run's command line first, e.g. for Slurm
                spec.console.write_text(f"$ {shlex.join(['depthbench', *argv])}\n")
                (spec.work_dir.parent / f"{spec.work_dir.name}.hardware.txt").write_text(here + "\n")
                running[id(spec)] = (spec, start_forked("harness.cli", argv, env, spec.console), time.monotonic())
            for key, (spec, proc, began) in list(running.items()):
                if proc.exitcode is None:
                    continue
                del running[key]
                finished += 1
                if proc.exitcode != 0:
                    failed.append((spec, proc.exitcode))
                print(
                    f"  [{finished}/{finished + len(todo) + len(running)}] {spec.paper}/{spec.arm} seed "
                    f"{spec.seed}: {'done' if proc.exitcode == 0 else f'exit {proc.exitcode}'} "
                    f"in {time.monotonic() - began:.0f} s ({time.monotonic() - start:.0f} s since the start)",
                    file=sys.stderr,
                    flush=True,
                )
            if todo and not running and not any(ready(s) for s in todo):
                break  # what is left waits for a source run that failed
            time.sleep(0.2)
    except KeyboardInterrupt:  # the runs checkpoint and stop (their own Ctrl-C); a rerun continues them
        for _, proc, _ in running.values():
            proc.join()
        raise
    if failed or todo:
        spec, code = failed[0] if failed else (todo[0], None)
        raise DepthbenchError(
            f"{len(failed)} claims run(s) failed and {len(todo)} could not start, e.g. "
            f"{spec.paper}/{spec.arm} seed {spec.seed} (exit {code}; "
            f"{spec.console}); the finished runs "
            f"are kept, rerun to continue"
        )


# ----------------------------------------------------------------------------------------- statistics
def _curve(work_dir: Path, metric: str = "top1") -> list[tuple[int, float]]:
    """A run's evaluation curve ``[(epoch, value), ...]`` of ``metric`` (top1, loss) from its metrics.jsonl."""

    frame = load_curves(work_dir)
    if frame.empty or "kind" not in frame or metric not in frame:
        return []
    evals = frame[(frame["kind"] == "eval") & frame[metric].notna()]
    return [(int(e) + 1, float(v)) for e, v in zip(evals["epoch"], evals[metric])]


# ----------------------------------------------------------------------------------------- report
def write_report(results, files, specs, out: Path, quick: bool, untrained=()) -> list[Path]:
    """``out``/claims.json (the results, read by the HTML report's Claims page), claims.md, a figure per claim and
    the dataset's sample sheet; returns the files written. ``files``: the papers' ClaimsFile; ``specs``: the runs
    whose curves the figures draw; ``untrained``: the descriptive claims a ``--tier confirmatory`` call left out,
    ``(claim, runs, CPU-minutes)`` (:func:`untrained_claims`)."""

    out.mkdir(parents=True, exist_ok=True)
    settings = {f.paper: f.setting for f in files}
    records = []
    for r in results:
        record = asdict(r)
        record["setting"] = settings[r.claim.paper] + (" [--quick]" if quick else "")
        records.append(record)
    written = [out / "claims.json", out / "claims.md"]
    atomic_write(written[0], json.dumps(records, indent=1, default=str))
    lines = _header(results, quick)
    machines: dict = {}
    for r in results:
        for h in r.hardware:
            machines.setdefault(h, []).append(f"{r.claim.paper}/{r.claim.id}")
    lines += ["## Hardware", ""] + [f"- {h}: {', '.join(ids)}" for h, ids in machines.items()]
    lines += _cost_line(specs) + [""]
    for f in files:
        trains = any(not c.measure for c in f.claims)
        lines += [
            f"## {f.paper}",
            "",
            f"Setting: {f.setting}"
            if trains
            else "Models: " + (f.bench.note or ", ".join(f"{n} ({m.model})" for n, m in f.bench.models.items())),
            "",
            f"Design: alpha {f.design.alpha} familywise (Holm over the file's {f.design.family} confirmatory "
            f"claim(s)), evaluation seeds from {f.design.seeds_from} (tuning seeds "
            f"{list(f.design.tuning_seeds)}), looks every {f.design.look_every} seeds up to "
            f"{f.design.max_seeds}.",
            "",
        ]
        for r in [r for r in results if r.claim.paper == f.paper]:
            c, i = r.claim, r.interval
            if c.measure:
                lines += _efficiency_lines(r, f)
                continue
            versus = (
                f"({c.treatment} − {c.baseline}) − ({c.minus['treatment']} − {c.minus['baseline']})"
                if c.minus
                else f"{c.treatment} − {c.baseline}"
            )
            # a descriptive claim's looks carry no decision: the interval is all it reports
            looks = (
                ", ".join(
                    f"{lk['n']}" if c.tier == "descriptive" else f"{lk['n']}: {lk['decision'] or 'go on'}"
                    for lk in r.looks
                )
                or "none"
            )
            lines += [
                f"- **{c.id}** ({c.kind}, margin {c.margin:g} points, {c.test}): “{c.text}” ({c.where}; "
                f"paper: {c.source.numbers()})",
                f"  - ours: {c.treatment} {r.treatment.mean:.2f} ± {r.treatment.std:.2f} vs {c.baseline} "
                f"{r.baseline.mean:.2f} ± {r.baseline.std:.2f} ({c.metric}, seeds {r.treatment.n}); effect "
                f"{versus} {i.diff:+.2f}, repeated interval {i.bounds()} at {i.level:.2%}: **{r.verdict}**"
                + (f"; {r.ruled_out}" if r.ruled_out else ""),
                _spread_line(r, f.design),
                f"  - plan ({c.tier}): looks at {list(r.planned)} seeds, power {_pct(r.power)} for "
                f"{c.power['effect'] or c.margin:g} points at sd {c.power['sd']:g} ("
                f"{c.power['effect_from']}); {f.design.target_power:.0%} power would need "
                f"{r.seeds_needed or 'more than 60'} seeds per arm; "
                f"looks reached: {looks}; {_stopping(r, f.design)}; repeated p "
                f"{'—' if r.p_value is None else f'{r.p_value:.4f}'}",
                f"  - hardware: {'; '.join(r.hardware) or 'unknown'}; figure: figures/{c.paper}-{c.id}.png",
            ]
            lines += _val_loss_lines(r)
            lines += [f"  - note: {note}" for note in ([c.note] if c.note else []) + list(r.notes)]
        for claim, runs, minutes in [u for u in untrained if u[0].paper == f.paper]:
            cost = (
                "cost unknown: no timed run in this folder"
                if minutes is None
                else f"cost: {minutes:.0f} min of run time"
            )
            lines.append(
                f"- **{claim.id}** ({claim.tier}): not trained in this run ({runs} run(s), {cost}, "
                f"`depthbench claims {f.paper}` trains them): “{claim.text}”"
            )
        if f.exploratory:
            lines += ["", "Exploratory (not trained by `depthbench claims`, no verdict):"]
            lines += [f"- {x.id}: {x.text} — {x.why}" for x in f.exploratory]
        lines.append("")
    atomic_write(written[1], "\n".join(lines))
    written += _figures(results, specs, out / "figures")
    written.append(_glyph_samples(out / "figures" / "glyphs-samples.png"))
    return written


def _header(results, quick: bool) -> list[str]:
    """The report's title and first paragraph: what was trained at reduced scale and what was measured on the
    papers' own models (an efficiency-only report, `claims --efficiency`, trains nothing at any scale)."""
    measured = [r for r in results if r.claim.measure]
    design = (
        "Each claim quotes its paper and was tested with the design fixed in its claims file before any evaluated "
        "run (docs/claims.md)"
    )
    if results and len(measured) == len(results):
        return [
            "# The papers' efficiency claims, measured on the papers' own models (depthbench claims --efficiency)",
            "",
            f"{design}. Nothing here is trained and nothing is at a reduced setting: each claim's two models are "
            "the papers' own at their sizes (each paper's bench section), measured by `depthbench bench` in "
            "interleaved paired rounds on the hardware named below; throughput per round as a log ratio (a paired "
            "interval), memory as one exact peak. Holm over each file's whole confirmatory family (the accuracy "
            "claims not measured here count as not rejected). Verdicts: supported / contradicted / equivalent "
            "(within the margin) / inconclusive."
            + (" `--quick`: 2 rounds at batch 1, no verdicts: it checks the plumbing." if quick else ""),
            "",
        ]
    return [
        "# The papers' claims at reduced scale (depthbench claims)",
        "",
        "Every trained number here is from a reduced setting (stated per paper), never the paper's setting. "
        f"{design}: looks every few seeds with O'Brien-Fleming-type alpha spending, repeated confidence "
        "intervals (paired per seed, Welch where the arms share no initialisation), TOST for 'similar' and "
        "'no worse', Holm over each file's confirmatory family. Verdicts: supported / contradicted / equivalent "
        "(within the margin) / inconclusive (with the effects the data rule out). Validation loss is a second, "
        "descriptive measure beside top-1 (not pre-registered: an interval, never a verdict)."
        + (
            " Efficiency claims are the exception: measured on the papers' own models at their sizes (each "
            "file's bench section), nothing trained."
            if measured
            else ""
        )
        + (" `--quick`: one seed, no verdicts: it checks the plumbing and measures nothing." if quick else ""),
        "",
    ]


def _spread_line(r, design) -> str:
    """The plan's spread (power.sd: its pilot) beside the evaluated seeds' and the seeds each asks for: where the
    plan was wrong."""
    c = r.claim
    observed = (
        "— (fewer than two seeds)"
        if r.observed_sd is None or not math.isfinite(r.observed_sd)
        else f"{r.observed_sd:.2f} over {r.stopped_at} evaluated seeds, which would need "
        f"{r.observed_seeds_needed or 'more than 60'} seeds per arm"
    )
    planned = r.seeds_needed or (None if c.tier == "descriptive" else "more than 60")
    return (
        f"  - spread of one seed's difference: pilot {c.power['sd']:g} ({c.power['sd_from']})"
        + (f", which asked for {planned} seeds per arm" if planned else "")
        + f"; observed {observed} for {design.target_power:.0%} power"
        + (" (as if confirmatory)" if c.tier == "descriptive" else "")
    )


def _stopping(r, design) -> str:
    """Where the verdict was read and what the stopping rule did. The rule decides at alpha / m (the design's
    stopping level) whether more seeds train; the verdict is read at Holm's level, which can decide earlier."""
    read = f"read at {r.stopped_at} of {r.trained_seeds} seeds trained" if r.trained_seeds else "no seeds"
    if r.claim.tier == "descriptive":
        return read
    rule = f"the stopping rule (alpha/m = {design.alpha / design.family:.3g})"
    if r.stop_rule:
        return f"{read}; {rule} stopped: {r.stop_rule}"
    later = [n for n in r.planned if n > r.trained_seeds]
    return f"{read}; {rule} " + (f"trains on to {later[0]} seeds" if later else "reached the plan's last look")


def _val_loss_lines(r) -> list[str]:
    v = r.val_loss
    if not v:
        return []
    return [
        f"  - validation loss (descriptive, not pre-registered: no verdict): {r.claim.treatment} − "
        f"{r.claim.baseline} {v['diff']:+.4f}, [{v['low']:+.4f}, {v['high']:+.4f}] at {v['level']:.0%} "
        f"({r.claim.test} t interval, {v['n']} seeds; lower is better)"
    ]


def _efficiency_lines(r, f) -> list[str]:
    """An efficiency claim in claims.md: the ratio, its interval (exp of the log-ratio interval) and the verdict."""
    c, i = r.claim, r.interval
    what = (
        "throughput ratio (treatment / baseline)"
        if c.measure == "throughput"
        else "memory saving (baseline / treatment peak MiB)"
    )
    bounds = "—" if i.low is None else f"[{math.exp(i.low):.3f}, {math.exp(i.high):.3f}]"
    rounds = f"{r.treatment.n} interleaved rounds" if c.measure == "throughput" else "one exact measurement"
    return [
        f"- **{c.id}** ({c.kind}, margin {cl.ratio_margin(c):.0%} of the ratio, {c.mode}, {c.measure}): "
        f"“{c.text}” ({c.where}; paper: {c.source.numbers()})",
        f"  - ours: {what} {math.exp(i.diff):.3f}, interval {bounds} at {i.level:.2%} ({rounds}): **{r.verdict}**",
        f"  - plan ({c.tier}): power {_pct(r.power)} for a {math.expm1(c.power['effect'] or c.margin):.0%} "
        f"advantage at a per-round log-ratio sd of {c.power['sd']:g} ({c.power['sd_from']}; "
        f"{c.power['effect_from']}); repeated p {'—' if r.p_value is None else f'{r.p_value:.4f}'}",
        f"  - hardware: {'; '.join(r.hardware) or 'unknown'}",
    ] + [f"  - note: {note}" for note in ([c.note] if c.note else []) + list(r.notes)]


def _pct(power) -> str:
    return "—" if power is None else f"{power:.0%}"


def _glyph_samples(path: Path) -> Path:
    """Sample images of the claims' dataset for the report: three rows of training images (one class per
    column) above three rows of validation images from the held-out typefaces, then one row of the same
    validation images in the clean variant (the DeiT claims' data), at 32x32."""

    fonts = glyph_fonts()  # scanned once for the three sheets: ~2.5 s of CPU each time, in every claims call
    parts = [
        sample_sheet(32, "train", rows=3, scale=1, fonts=fonts),
        sample_sheet(32, "val", rows=3, scale=1, fonts=fonts),
        sample_sheet(32, "val", rows=1, scale=1, variant="clean", fonts=fonts),
    ]
    sheet = Image.new("RGB", (parts[0].width, sum(p.height for p in parts) + 8 * (len(parts) - 1)), "white")
    top = 0
    for part in parts:
        sheet.paste(part, (0, top))
        top += part.height + 8
    path.parent.mkdir(parents=True, exist_ok=True)
    sheet.quantize(256).save(path, optimize=True)  # a palette: a quarter of the bytes, no visible change
    return path


def _figures(results, specs: list[cl.RunSpec], folder: Path) -> list[Path]:
    """Per claim: both arms' learning curves (mean over seeds, min-max band) and the difference with its
    interval."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for r in [r for r in results if not r.claim.measure]:  # efficiency claims: no curves, claims.md has them
        c = r.claim
        fig, (curves_ax, diff_ax) = plt.subplots(1, 2, figsize=(9, 3.4), gridspec_kw={"width_ratios": [3, 1]})
        for arm, color in ((c.baseline, "C0"), (c.treatment, "C3")):
            runs = [_curve(s.work_dir) for s in specs if s.paper == c.paper and s.arm == arm]
            runs = [x for x in runs if x]
            if not runs:
                continue
            band = cl.curve_band(arm, runs)
            curves_ax.plot(band.epochs, band.mean, color=color, label=f"{arm} (n={band.seeds})")
            curves_ax.fill_between(band.epochs, band.low, band.high, color=color, alpha=0.2)
        curves_ax.set_xlabel("epoch")
        curves_ax.set_ylabel("val top-1 (%)")
        curves_ax.set_title(f"{c.paper}/{c.id} (reduced setting)", fontsize=9)
        if curves_ax.get_legend_handles_labels()[0]:  # no finished run yet: no curve to name
            curves_ax.legend(fontsize=8)
        curves_ax.grid(alpha=0.3)
        i = r.interval
        diff_ax.axhline(0, color="k", linewidth=0.8)
        for lk in r.looks:  # the repeated interval at each look reached (the last one decides)
            if lk["low"] == lk["low"]:  # not NaN
                diff_ax.errorbar(
                    [lk["n"]],
                    [lk["diff"]],
                    yerr=[[lk["diff"] - lk["low"]], [lk["high"] - lk["diff"]]],
                    fmt="o",
                    color="C3",
                    capsize=6,
                )
        if not r.looks:
            diff_ax.plot([0], [i.diff], "o", color="C3")
        diff_ax.set_xlabel("seeds per arm (look)")
        diff_ax.set_ylabel(f"effect ({c.metric}, points)")
        diff_ax.set_title(r.verdict, fontsize=9)
        fig.tight_layout()
        path = folder / f"{c.paper}-{c.id}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
