"""``depthbench eval CONFIG --checkpoint CKPT --dataset lm-eval [--tasks T ...]``: zero-shot evaluation of a Llama
recipe (``data.type='alpaca'``, harness/alpaca.py) with EleutherAI's lm-evaluation-harness (ScaleNet Table X).

``CKPT``: a run directory or its ``best.pth``/``last.pth`` (the recipe's model, weights loaded), or a Hugging Face
checkpoint directory (``save_pretrained``'s, or :func:`models.scalenet_llama.save_llama`'s for an expanded model;
expanded by the recipe's ``model.scalenet`` when it is not already) -- e.g. the pretrained Llama-3.2-1B for the
table's "-" row. ``--tasks`` defaults to Table X's seven; each is reported with the metric the spec names (§2.9:
acc for BoolQ/PIQA/WinoGrande, acc_norm for HellaSwag/ARC-e/ARC-c/OpenBookQA), other tasks with acc and acc_norm,
in percent, zero-shot. ``harness/assets/lm_eval_tasks`` adds local tasks (``depthbench_tiny_mc``: 24 questions,
no download, for CI); the standard tasks download their data from the Hugging Face Hub on first use.

Rows: printed as a table and appended to the run's metrics.jsonl (the checkpoint's run, or ``--out-run``) as
``{"kind": "eval_suite", "protocol": "lm-eval", "dataset": <task>, "metric": "acc"|"acc_norm", "value": %,
"stderr": %, "samples": n, "column": <Table X column>, ...}``, plus ``dataset="average"`` (the mean of the seven,
Table X's Average) when all seven ran.
"""
from __future__ import annotations

import json
import math
import sys
from functools import lru_cache
from pathlib import Path

from harness.errors import DepthbenchError

TASKS_DIR = Path(__file__).resolve().parent / "assets" / "lm_eval_tasks"
IMAGE_OPTIONS = ("input_size", "pool_mode", "analysis", "data", "real_labels", "corrupt_from")


@lru_cache(maxsize=1)
def table_x() -> dict[str, tuple[str, str]]:
    """ScaleNet Table X's tasks, ``{lm-eval task: (metric, table column)}``, from the table's one definition
    (results/tables/scalenet.yaml: the evals of its first row; the metrics are the spec's, §2.9). Read once: the
    YAML holds all of ScaleNet's tables. Callers only read the mapping."""
    from results.paper_tables import load_paper

    table = next(t for t in load_paper("scalenet") if t.id == "X")
    return {sel["dataset"]: (sel["metric"], column) for column, sel in table.rows[0].evals.items()
            if sel["dataset"] != "average"}


def check_args(args, cfg) -> None:
    if cfg.data.type != "alpaca":
        raise DepthbenchError(f"--dataset lm-eval evaluates a Hugging Face Llama recipe (data.type='alpaca', "
                              f"configs/scalenet/*llama*); {args.config} trains {cfg.model.name} on {cfg.data.type}")
    used = [f"--{o.replace('_', '-')}" for o in IMAGE_OPTIONS if getattr(args, o, None)]
    if used or getattr(args, "ema", False):
        raise DepthbenchError(f"{' '.join(used + (['--ema'] if args.ema else []))}: image-protocol options; "
                              f"--dataset lm-eval takes --tasks")


def load_model(cfg, checkpoint: Path):
    """``(LlamaForCausalLM, tokenizer)`` of ``checkpoint`` under the recipe ``cfg``."""
    from harness.alpaca import build_llama_model, check_llama_run, get_tokenizer, load_tokenizer
    from harness.checkpoint import load_weights

    if checkpoint.is_dir() and (checkpoint / "config.json").is_file():  # a Hugging Face checkpoint directory
        cfg.model.weights = str(checkpoint)
        if not cfg.data.get("tokenizer") and (checkpoint / "tokenizer.json").is_file():
            cfg.data.tokenizer = str(checkpoint)
        check_llama_run(cfg)
        model = build_llama_model(cfg, pretrained=True)
    else:
        model = build_llama_model(cfg, pretrained=False)
        load_weights(model, str(checkpoint))
    tokenizer = load_tokenizer(cfg.data.tokenizer) if cfg.data.get("tokenizer") else get_tokenizer(cfg.data)
    return model.lm.eval(), tokenizer


def load_tasks(names: list[str]):
    """lm-eval's tasks (their data loaded), before any model is built; one line for an unknown or unloadable task."""
    import difflib
    import logging

    from lm_eval.tasks import TaskManager

    for name in ("lm_eval", "lm-eval"):
        logging.getLogger(name).setLevel(logging.ERROR)
    # the local tasks alone when they are all that is asked for: indexing lm-eval's ~15K task files takes ~30 s
    manager = TaskManager(include_path=str(TASKS_DIR), include_defaults=False)
    if not all(name in manager.all_tasks for name in names):
        manager = TaskManager(include_path=str(TASKS_DIR))
    for name in names:
        if name not in manager.all_tasks:
            close = difflib.get_close_matches(name, manager.all_tasks, n=3)
            raise DepthbenchError(f"--tasks {name}: not an lm-eval task" + (f" (did you mean {', '.join(close)}?)"
                                                                           if close else "")
                                  + f"; Table X's are {' '.join(table_x())}; local: depthbench_tiny_mc")
    try:
        loaded = manager.load(names)
    except Exception as e:
        first = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
        raise DepthbenchError(f"lm-eval could not load the data of {' '.join(names)} ({type(e).__name__}: {first}); "
                              f"the standard tasks download from the Hugging Face Hub: run where it is reachable, "
                              f"or with HF_DATASETS_CACHE holding them") from None
    for task in loaded["tasks"].values():  # zero-shot (Table X), as simple_evaluate(num_fewshot=0) sets it
        task.set_config(key="num_fewshot", value=0)
        task.set_fewshot_seed(seed=1234)
    return loaded


def rows_of(results: dict, tasks: list[str], base: dict) -> list[dict]:
    """One row per (task, reported metric), values in percent; Table X's Average when all seven are there."""
    rows, table = [], table_x()
    for task in tasks:
        scores = results["results"].get(task, {})
        samples = (results.get("n-samples", {}).get(task) or {}).get("effective")
        metrics = [table[task][0]] if task in table else [m for m in ("acc", "acc_norm") if f"{m},none" in scores]
        for metric in metrics:
            value = scores.get(f"{metric},none")
            stderr = scores.get(f"{metric}_stderr,none")
            if not isinstance(value, (int, float)):
                raise DepthbenchError(f"lm-eval gave no {metric} for {task} (it reported {sorted(scores)})")
            rows.append(dict(base, dataset=task, metric=metric, value=100.0 * value,
                             stderr=100.0 * stderr if isinstance(stderr, (int, float)) else None,
                             samples=samples, column=table.get(task, (None, None))[1]))
    values = [r["value"] for r in rows if r["dataset"] in table]
    if len(values) == len(table):
        rows.append(dict(base, dataset="average", metric="mean", value=sum(values) / len(values), stderr=None,
                         samples=None, column="average"))
    return rows


def run_lm_eval(args) -> list[dict]:
    """The rows of one ``depthbench eval --dataset lm-eval`` call (see the module docstring)."""
    import torch

    from harness.builders import check_model
    from harness.config import load_config
    from harness.evaluate_cmd import checkpoint_run
    from harness.launch import configure_threads

    cfg = load_config(args.config, list(args.overrides))
    check_args(args, cfg)
    check_model(cfg)
    checkpoint = Path(args.checkpoint).expanduser()
    if not checkpoint.exists():
        raise DepthbenchError(f"--checkpoint {args.checkpoint}: no such file, run directory or Hugging Face "
                              f"checkpoint directory")
    run = Path(args.out_run) if args.out_run else checkpoint_run(checkpoint)
    if args.out_run and not (run / "meta.json").is_file():
        raise DepthbenchError(f"--out-run {run} is not a run directory (no meta.json)")
    names = list(dict.fromkeys(args.tasks or table_x()))
    tasks = load_tasks(names)

    configure_threads(1, cfg.data.workers)
    model, tokenizer = load_model(cfg, checkpoint)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda" and cfg.precision == "bf16":
        model = model.to(torch.bfloat16)
    model.to(device)
    from lm_eval.evaluator import evaluate
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=cfg.data.eval_batch_size or 16)
    # lm-eval's evaluate() rather than simple_evaluate(): the latter also gathers environment information
    # (torch's collect_env runs pip and more: seconds) that is not stored here; the tasks are set up in load_tasks
    results = evaluate(lm=lm, task_dict=tasks, bootstrap_iters=100, log_samples=False, verbosity="ERROR")
    base = dict(kind="eval_suite", protocol="lm-eval", model=cfg.model.name, input_size=None, pool_mode=None,
                analysis="none", shots=0, checkpoint=str(args.checkpoint), ema=False)
    rows = rows_of(results, names, base)
    if run is not None:
        from harness.rundir import RunDir

        rundir = RunDir(run)
        for row in rows:
            rundir.log_metrics(**row)
    return rows


def format_rows(rows: list[dict]) -> str:
    lines = [f"{'task':<22} {'metric':<9} {'value':>7} {'stderr':>7} {'samples':>8}"]
    for r in rows:
        stderr = f"{r['stderr']:.2f}" if isinstance(r.get("stderr"), float) and math.isfinite(r["stderr"]) else "-"
        lines.append(f"{r['dataset']:<22} {r['metric']:<9} {r['value']:>7.2f} {stderr:>7} {r['samples'] or '-':>8}")
    return "\n".join(lines)


def main(args) -> int:
    rows = run_lm_eval(args)
    if args.out:
        import pandas as pd

        from harness.rundir import atomic_write

        atomic_write(args.out, pd.DataFrame(rows).to_csv(index=False))
    print("\n".join(json.dumps(r) for r in rows) if args.json else format_rows(rows))
    sys.stdout.flush()
    return 0
