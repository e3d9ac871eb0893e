"""``depthbench demo [--quick] [--out DIR]`` (``make demo``): the main job on the embedded default, end to end.

On a fresh machine with no dataset and no GPU, with the real engine and the bundled data, it runs a reduced-scale
version of the papers' core comparisons, then renders the tables, figures, status view and HTML report:

1. HO-ResNet Table 3's question -- does a higher-order scheme help as depth grows? -- Euler vs RK-4 at depths 10
   and 18 on the embedded glyphs (53 characters, held-out typefaces), with the fair recipes of ``depthbench
   claims`` (configs/claims/horesnet*: one recipe per depth, tuned on Euler);
2. StepsNet Table 1's question at equal parameters and FLOPs: ResNet-18 vs Steps-ResNet-18 at a quarter width on
   the glyphs (configs/claims/*resnet18-w16*), audited equal with the one FLOP counter (harness/measure/flops.py)
   before training;
3. pretraining + fine-tuning: a half-width Steps-ResNet-18 classifier on the digits, whose ``best.pth`` initialises
   the backbone of Mask R-CNN on the embedded COCO-format set (``init_cfg`` -> the one weights loader);
4. ``depthbench results`` over the demo's runs: Markdown tables + figures, the status view and the HTML report.

Each run is a ``depthbench train`` / ``depthbench finetune`` process in a fixed run directory
``OUT/runs/<experiment>/<run>``: a rerun reuses runs whose ``meta.json`` says done and continues the others with
``--resume auto``. Ctrl-C asks the running process to checkpoint and stop (SIGTERM, the engines' preemption path:
every file is written atomically), so the next ``depthbench demo`` continues where it stopped. ``--quick`` is the
same job at one epoch (on a tenth of the glyphs) / 20 iterations per run, for CI. One seed per run: the seeds,
intervals and verdicts of these comparisons are ``depthbench claims``'.

    from harness.commands.demo import run
    result = run(quick=True, out="results/demo-quick")   # DemoResult(out, runs, products, summary, seconds)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.workflows.demo import DemoResult

__all__ = ["run", "add_parser", "main"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "demo",
        help="the main job on bundled data: pretrain, fine-tune, paper tables, report",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--quick", action="store_true", help="one epoch / 20 iterations per run (a few minutes, for CI)")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="where runs, tables and the report go (default results/demo, results/demo-quick with --quick)",
    )
    p.set_defaults(func=main)


def main(args) -> int:
    from harness.workflows.demo import clock

    result = run(quick=bool(args.quick), out=args.out)
    print(result.summary, flush=True)
    print(f"demo finished in {clock(result.seconds)}:")
    out = result.out
    for what, where in result.products + [("this summary", out / "summary.md"), ("run logs", out / "logs")]:
        print(f"  {what}: {where}")
    print(
        f"open the report: xdg-open {out / 'report' / 'index.html'}   (or: python3 -m http.server -d "
        f"{out / 'report'} 8000, then http://localhost:8000)"
    )
    return 0


def run(quick: bool = False, out: str | Path | None = None) -> DemoResult:
    """Run the demo into ``out`` (default results/demo, results/demo-quick with ``quick``): every stage's runs as
    child ``depthbench train``/``finetune`` processes (finished runs are reused), then the tables, figures, status
    view and HTML report (:func:`harness.workflows.demo.run_demo`). Progress is printed as it goes; bad input
    raises :class:`DepthbenchError` first."""
    from harness.workflows.demo import run_demo

    return run_demo(quick, out)
