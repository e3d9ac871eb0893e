"""The demo's work (``depthbench demo``, harness/commands/demo.py, documents what it does): its stages and runs, the
equal-size audit, each run as a forked ``depthbench train``/``finetune`` process with a progress bar, then the
paper tables, figures, status view and HTML report over the demo's runs (:func:`results.reporting.regenerate`, the
dense rows counted by downstream) and the demo's own summary.md."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from harness.core.config import load_config
from harness.core.config_paths import REPO
from harness.core.errors import EXIT_INTERRUPTED, DepthbenchError
from harness.core.files import BadFile, check_writable_folder, open_file, read_json, read_text
from harness.core.rundir import RunDir, read_metrics
from harness.engine.forked import start_forked
from harness.workflows.audit import dense_counter
from results.claims import arm_size
from results.reporting import regenerate

DEFAULT_OUT = {False: REPO / "results" / "demo", True: REPO / "results" / "demo-quick"}  # the checkout's
DIGITS = "embedded digits"
GLYPHS = "embedded glyphs"
# a stage compared at equal size (Steps-ResNet vs ResNet) is refused if its configs drift further apart
MAX_SIZE_GAP = 0.03
# --quick on the glyphs: one epoch on a tenth of the images (as `depthbench claims --quick`)
GLYPHS_QUICK = ["epochs=1", "data.train_subset=2120", "data.val_subset=1060"]


@dataclass
class DemoRun:
    name: str  # run directory name under OUT/runs/<experiment>/
    config: str
    kind: str  # "train" (depthbench train) or "finetune"
    scale: str  # meta.json["scale"]: how this run is reduced from the paper's setting
    overrides: list = field(default_factory=list)
    total_steps: int | None = None  # finetune: max_iters; train: read from its first log line
    after: str | None = None  # the run whose best.pth initialises this one's backbone

    def path(self, out: Path) -> Path:
        return out / "runs" / self.name


@dataclass
class Stage:
    title: str
    runs: list
    equal_size: bool = False  # audit the runs' parameters and FLOPs equal (two runs) before training


def plan(quick: bool) -> list[Stage]:
    """The demo's stages; ``quick``: one epoch per classification run and 20 fine-tuning iterations."""
    epochs = 1 if quick else 8
    train_overrides = ["log.tensorboard=False"] + ([f"epochs={epochs}"] if quick else [])

    def digits(config: str, name: str, px: int, **kw) -> DemoRun:
        return DemoRun(
            name,
            f"configs/demo/{config}",
            "train",
            f"{DIGITS} {px}px, {epochs} epoch{'s' * (epochs > 1)}, reduced width",
            train_overrides,
            **kw,
        )

    def glyphs(config: str, name: str, px: int, claim_epochs: int) -> DemoRun:
        n = 1 if quick else claim_epochs
        subset = ", a tenth of the images" if quick else ""
        return DemoRun(
            name,
            f"configs/claims/{config}",
            "train",
            f"{GLYPHS} {px}px, {n} epoch{'s' * (n > 1)}{subset}, reduced width",
            ["log.tensorboard=False"] + (GLYPHS_QUICK if quick else []),
        )

    iters = 20 if quick else 200
    finetune_overrides = (
        [
            f"train_cfg.max_iters={iters}",
            f"train_cfg.val_interval={iters}",
            f"default_hooks.checkpoint.interval={iters}",
        ]
        if quick
        else []
    )
    schemes = [
        glyphs(f"horesnet{d}-{s}-w16_1xb64-{e}e_glyphs-16px.py", f"horesnet{d}-{s}", 16, e)
        for d, e in ((10, 4), (18, 5))
        for s in ("euler", "rk4")
    ]
    return [
        Stage("HO-ResNet Table 3: Euler vs RK-4 at depths 10 and 18 (glyphs 16px)", schemes),
        Stage(
            "StepsNet Table 1: ResNet-18 vs Steps-ResNet-18 at equal params/FLOPs (quarter width, glyphs 32px)",
            [
                glyphs("resnet18-w16_1xb64-2e_glyphs.py", "resnet18-w16", 32, 2),
                glyphs("steps-resnet18-w16_1xb64-2e_glyphs.py", "steps-resnet18-w16", 32, 2),
            ],
            equal_size=True,
        ),
        Stage(
            "Pretraining: half-width Steps-ResNet-18 classifier (digits 32px)",
            [digits("steps-resnet18-w32_1xb64-8e_digits.py", "steps-resnet18-w32", 32)],
        ),
        Stage(
            "Fine-tuning: Mask R-CNN + the pretrained backbone (embedded COCO-format shapes)",
            [
                DemoRun(
                    "mask-rcnn-steps-resnet18-w32",
                    "configs/demo/mask-rcnn_steps-resnet18-w32-digits-pre_fpn_200it_embedded-coco.py",
                    "finetune",
                    f"embedded coco-shapes 128px, {iters} iterations, "
                    f"backbone pretrained on digits ({epochs} epoch{'s' * (epochs > 1)})",
                    finetune_overrides,
                    total_steps=iters,
                    after="steps-resnet18-w32",
                )
            ],
        ),
    ]


# ----------------------------------------------------------------------------------------- checks
def check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise DepthbenchError(f"--out {out} is a file; give a directory for the demo's runs and report")
    check_writable_folder(out, "--out", "the demo's runs and report")


def audit_equal_size(out: Path, configs: list[str]) -> str:
    """Parameters and FLOPs of a baseline/treatment pair of configs with the one counter; refuse a pair that is not
    equal."""
    sizes = []
    for path in configs:
        cfg = load_config(path)
        size = arm_size(cfg)  # the claims' audit: the one FLOP counter on the meta device
        sizes.append((cfg.model.name, size["params"], size["flops"]))
    (base, base_p, base_f), (steps, steps_p, steps_f) = sizes
    gap_p, gap_f = steps_p / base_p - 1, steps_f / base_f - 1
    (out / "audit.json").write_text(json.dumps({name: {"params": p, "flops": f} for name, p, f in sizes}))
    px = cfg.data.input_size
    line = (
        f"{base} {base_p / 1e3:.1f}k params {base_f / 1e6:.2f} MFLOPs, {steps} {steps_p / 1e3:.1f}k params "
        f"{steps_f / 1e6:.2f} MFLOPs ({gap_p:+.1%}, {gap_f:+.1%}; harness/measure/flops.py at {px}x{px})"
    )
    if max(abs(gap_p), abs(gap_f)) > MAX_SIZE_GAP:
        raise DepthbenchError(f"{' and '.join(configs)} are not of equal size ({line}); fix the widths")
    return line


# ----------------------------------------------------------------------------------------- runs
def run_status(path: Path) -> str | None:
    try:
        return read_json(path / "meta.json", inside=path, what="meta.json").get("status")
    except (OSError, BadFile):
        return None


NAMES = {"top1": "top-1", "coco/bbox_mAP": "bbox AP", "coco/segm_mAP": "mask AP"}


def best_metric(path: Path, keys=tuple(NAMES)) -> str:
    """The run's best evaluation, e.g. "top-1 91.4"; read from metrics.jsonl (the run contract)."""
    best = {}
    for record in read_metrics(path / "metrics.jsonl"):
        if record.get("kind") == "eval":
            for key in keys:
                value = record.get(key)
                if isinstance(value, (int, float)):
                    best[key] = max(best.get(key, value), value)
    # MMDetection's COCO metric is a fraction; shown in % like the papers' tables
    return (
        "  ".join(f"{NAMES[k]} {v * (100 if k.startswith('coco/') else 1):.2f}" for k, v in best.items())
        or "no evaluation"
    )


def execute(run: DemoRun, out: Path, extra: list) -> tuple[float, float]:
    """One run as a ``depthbench train``/``finetune`` process with a progress bar; returns its wall-clock and
    CPU seconds (the CPU time is what to compare on a shared machine). The process is a fork of the server that
    imported the stack once (:func:`harness.engine.forked.start_forked`): ~4 s of CPU less per run."""
    path = run.path(out)
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    args = [run.kind, run.config, "--work-dir", str(path), "--resume", "auto", *run.overrides, *extra]
    log_path, usage_path = logs / f"{run.name}.log", logs / f".{run.name}.cpu"
    usage_path.unlink(missing_ok=True)
    start = time.monotonic()
    try:  # the run's CPU file is read once it ends well, and never left behind
        with (
            open(log_path, "a") as log,
            tqdm(
                total=run.total_steps,
                desc=f"  {run.name}",
                unit="step",
                leave=True,
                file=sys.stdout,
                dynamic_ncols=True,
                mininterval=1.0,
            ) as bar,
        ):
            log.write(f"\n$ {' '.join([sys.executable, '-m', 'harness.cli', *args])}\n")
            log.flush()
            # a session of its own: Ctrl-C reaches the demo only, which then stops the run the preemption way
            process = start_forked(
                "harness.cli", args, dict(os.environ), log_path, new_session=True, usage_path=usage_path
            )
            try:
                while process.exitcode is None:
                    process.join(0.5)
                    _advance(bar, path, log_path)
            except KeyboardInterrupt:
                os.kill(process.pid, signal.SIGTERM)  # finish the step, checkpoint, exit 75
                process.join(120)
                if process.exitcode is None:
                    process.kill()
                raise DepthbenchError(
                    f"interrupted during {run.name} (stopped at its last checkpoint); run the same "
                    f"command again to continue, finished runs are reused",
                    exit_code=EXIT_INTERRUPTED,
                ) from None
            _advance(bar, path, log_path)
        if process.exitcode != 0 or run_status(path) != "done":
            lines = [line for line in log_path.read_text().splitlines() if line.strip()] or ["(empty log)"]
            reason = next((line for line in reversed(lines) if "error" in line.lower()), lines[-1]).strip()
            raise DepthbenchError(
                f"{run.name} ended with exit code {process.exitcode}: {reason[:300]} "
                f"(log {log_path}); fix it and run the demo again to continue"
            )
        return time.monotonic() - start, float(usage_path.read_text())
    finally:
        usage_path.unlink(missing_ok=True)


def _advance(bar, path: Path, log_path: Path) -> None:
    """Move the bar to the run's last logged step; a training run's length comes from its first log line."""
    if bar.total is None:
        match = re.search(r"(\d+) steps/epoch", log_path.read_text())
        if match:
            bar.total = int(match.group(1)) * _epochs_of(path)
            bar.refresh()
    step = 0
    try:
        with open_file(path / "metrics.jsonl", inside=path, max_bytes=None) as f:
            f.seek(max(0, f.seek(0, 2) - 4096))
            for line in f.read().decode(errors="replace").splitlines()[-5:]:
                try:
                    step = max(step, int(json.loads(line).get("global_step", 0)))
                except (ValueError, AttributeError, TypeError):
                    continue
    except (OSError, BadFile):
        return
    if step > bar.n:
        bar.update(step - bar.n)


def _epochs_of(path: Path) -> int:
    """The epochs of a training run, from the resolved config it wrote (config.py)."""
    try:
        text = read_text(path / "config.py", inside=path, what="config.py")
    except (OSError, BadFile):
        text = ""
    match = re.search(r"^epochs\s*=\s*(\d+)", text, re.M)
    return int(match.group(1)) if match else 1


# ----------------------------------------------------------------------------------------- report
def render(out: Path) -> list[tuple[str, Path]]:
    """Tables + figures (Markdown), the status view and the HTML report, as ``depthbench results`` makes them (in
    this process: its imports and the cached architecture audit are shared by the three calls); its output goes to
    ``OUT/logs/results.log``."""
    runs = [str(out / "runs")]
    papers = ["horesnet", "stepsnet"]
    products = [
        ("tables and figures", dict(format="md", out=out / "tables"), out / "tables"),
        ("status view", dict(status=True, out=out / "tables"), out / "tables" / "status.txt"),
        ("HTML report", dict(format="html", out=out / "report"), out / "report" / "index.html"),
    ]
    with (
        open(out / "logs" / "results.log", "w") as log,
        contextlib.redirect_stdout(log),
        contextlib.redirect_stderr(log),
    ):
        for _, options, _ in products:  # a DepthbenchError propagates: one line
            report = regenerate(runs=runs, papers=papers, dense=dense_counter(), **options)
            log.write(report.text)
            print(report.summary, file=log)
    return [(what, where) for what, _, where in products]


def summary(stages: list[Stage], out: Path, audit_line: str) -> str:
    """The demo's own comparison, one Markdown table per stage, each caption naming the reduced setting."""
    lines = [
        "# depthbench demo (reduced scale: embedded data, not the papers' setting)",
        "",
        "One seed per run; `depthbench claims` runs these comparisons with seeds, intervals and verdicts.",
        "",
    ]
    for stage in stages:
        lines += [f"## {stage.title}", "", f"Setting: {stage.runs[0].scale}.", ""]
        if stage.equal_size:
            lines += [f"Architecture audit: {audit_line}.", ""]
        lines += ["| run | config | best |", "|---|---|---|"]
        lines += [f"| {r.name} | {r.config} | {best_metric(r.path(out))} |" for r in stage.runs]
        lines.append("")
    text = "\n".join(lines)
    (out / "summary.md").write_text(text)
    return text


# ----------------------------------------------------------------------------------------- main
@dataclass
class DemoResult:
    """A finished demo: its folder, each run's directory, what it rendered (``(what, where)``), the summary
    (summary.md's text) and how long it took."""

    out: Path
    runs: dict
    products: list
    summary: str
    seconds: float


def run_demo(quick: bool = False, out: str | Path | None = None) -> DemoResult:
    """Run the demo into ``out`` (default results/demo, results/demo-quick with ``quick``): every stage's runs as
    child ``depthbench train``/``finetune`` processes (finished runs are reused), then the tables, figures, status
    view and HTML report. Progress is printed as it goes; bad input raises :class:`DepthbenchError` first."""
    quick = bool(quick)
    out = Path(out) if out else DEFAULT_OUT[quick]
    check_out(out)
    stages = plan(quick)
    for stage in stages:
        for job in stage.runs:
            if not Path(job.config).is_file():
                raise DepthbenchError(f"{job.config} is missing; the demo runs from the repository root (cd there)")
    out.mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    started = time.monotonic()
    print(
        f"depthbench demo{' --quick' if quick else ''}: {sum(len(s.runs) for s in stages)} runs in {len(stages)} "
        f"stages + tables and report, into {out}/ (rerun to reuse finished runs)",
        flush=True,
    )
    audit_line = ""
    for number, stage in enumerate(stages, 1):
        stage_start = time.monotonic()
        print(f"[{number}/{len(stages) + 1}] {stage.title}  (elapsed {clock(stage_start - started)})", flush=True)
        if stage.equal_size:
            audit_line = audit_equal_size(out, [job.config for job in stage.runs])
            print(f"  audit: {audit_line}", flush=True)
        for job in stage.runs:
            path = job.path(out)
            if run_status(path) == "done":
                print(f"  {job.name}: reused ({best_metric(path)}; {path})", flush=True)
                continue
            extra = []
            if job.after:
                weights = next(r for s in stages for r in s.runs if r.name == job.after).path(out) / "best.pth"
                extra = [f"model.backbone.init_cfg.checkpoint={weights}"]
            seconds, cpu = execute(job, out, extra)
            RunDir.open(path).update_meta(scale=job.scale, demo=True)
            print(f"  {job.name}: done in {clock(seconds)}, {cpu:.0f} s CPU ({best_metric(path)})", flush=True)
    print(
        f"[{len(stages) + 1}/{len(stages) + 1}] Tables, figures, status view and HTML report "
        f"(elapsed {clock(time.monotonic() - started)})",
        flush=True,
    )
    products = render(out)
    text = summary(stages, out, audit_line)
    return DemoResult(
        out, {r.name: r.path(out) for s in stages for r in s.runs}, products, text, time.monotonic() - started
    )


def clock(seconds: float) -> str:
    return time.strftime("%M:%S" if seconds < 3600 else "%H:%M:%S", time.gmtime(seconds))
