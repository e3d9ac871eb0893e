"""``depthbench eval CONFIG --checkpoint CKPT --dataset lm-eval [--tasks T ...]``: zero-shot evaluation of a Llama
recipe (``data.type='alpaca'``, harness/tasks/alpaca.py) with EleutherAI's lm-evaluation-harness (ScaleNet Table X).

``CKPT``: a run directory or its ``best.pth``/``last.pth`` (the recipe's model, weights loaded), or a Hugging Face
checkpoint directory (``save_pretrained``'s, or :func:`models.scalenet_llama.save_llama`'s for an expanded model;
expanded by the recipe's ``model.scalenet`` when it is not already) -- e.g. the pretrained Llama-3.2-1B for the
table's "-" row. ``--tasks`` defaults to Table X's seven; each is reported with the metric the spec names (§2.9:
acc for BoolQ/PIQA/WinoGrande, acc_norm for HellaSwag/ARC-e/ARC-c/OpenBookQA), other tasks with acc and acc_norm,
in percent, zero-shot. Table X's definition (``{task: (metric, column)}``) is the caller's to give (the command
reads it from results/tables/scalenet.yaml; this module sits below the results package). ``harness/assets/
lm_eval_tasks`` adds local tasks (``depthbench_tiny_mc``: 24 questions, no download, for CI); the standard tasks
download their data from the Hugging Face Hub on first use.

Rows: printed as a table and appended to the run's metrics.jsonl (the checkpoint's run, or ``--out-run``) as
``{"kind": "eval_suite", "protocol": "lm-eval", "dataset": <task>, "metric": "acc"|"acc_norm", "value": %,
"stderr": %, "samples": n, "column": <Table X column>, ...}``, plus ``dataset="average"`` (the mean of the seven,
Table X's Average) when all seven ran.
"""

from __future__ import annotations

import difflib
import logging
from pathlib import Path

import torch

from harness.core.config import load_config
from harness.core.errors import DepthbenchError
from harness.engine.builders import check_model
from harness.engine.checkpoint import load_weights
from harness.engine.launch import configure_threads
from harness.tasks.alpaca import build_llama_model, check_llama_run, get_tokenizer, load_tokenizer

# harness/assets/lm_eval_tasks: local lm-eval task definitions (depthbench_tiny_mc)
TASKS_DIR = Path(__file__).resolve().parent.parent / "assets" / "lm_eval_tasks"


def check_recipe(cfg, config, image_options=()) -> None:
    """A Llama recipe, and no image-protocol option (``image_options``: the ones given, e.g. ``["--ema"]``)."""
    if cfg.data.type != "alpaca":
        raise DepthbenchError(
            f"--dataset lm-eval evaluates a Hugging Face Llama recipe (data.type='alpaca', "
            f"configs/scalenet/*llama*); {config} trains {cfg.model.name} on {cfg.data.type}"
        )
    if image_options:
        raise DepthbenchError(f"{' '.join(image_options)}: image-protocol options; --dataset lm-eval takes --tasks")


def load_model(cfg, checkpoint: Path):
    """``(LlamaForCausalLM, tokenizer)`` of ``checkpoint`` under the recipe ``cfg``."""
    # a Hugging Face checkpoint directory; a run directory (meta.json) keeps its resolved config as config.json too
    if checkpoint.is_dir() and (checkpoint / "config.json").is_file() and not (checkpoint / "meta.json").is_file():
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


def load_tasks(names: list[str], table: dict):
    """lm-eval's tasks (their data loaded), before any model is built; one line for an unknown or unloadable task
    (naming ``table``'s tasks, ScaleNet Table X's)."""
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
            raise DepthbenchError(
                f"--tasks {name}: not an lm-eval task"
                + (f" (did you mean {', '.join(close)}?)" if close else "")
                + f"; Table X's are {' '.join(table)}; local: depthbench_tiny_mc"
            )
    try:
        loaded = manager.load(names)
    except Exception as e:
        first = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
        raise DepthbenchError(
            f"lm-eval could not load the data of {' '.join(names)} ({type(e).__name__}: {first}); "
            f"the standard tasks download from the Hugging Face Hub: run where it is reachable, "
            f"or with HF_DATASETS_CACHE holding them"
        ) from None
    for task in loaded["tasks"].values():  # zero-shot (Table X), as simple_evaluate(num_fewshot=0) sets it
        task.set_config(key="num_fewshot", value=0)
        task.set_fewshot_seed(seed=1234)
    return loaded


def rows_of(results: dict, tasks: list[str], base: dict, table: dict) -> list[dict]:
    """One row per (task, reported metric), values in percent: a ``table`` task (``{task: (metric, column)}``,
    Table X's) with its metric, others with acc and acc_norm; the table's average when all its tasks are there."""
    rows = []
    for task in tasks:
        scores = results["results"].get(task, {})
        samples = (results.get("n-samples", {}).get(task) or {}).get("effective")
        metrics = [table[task][0]] if task in table else [m for m in ("acc", "acc_norm") if f"{m},none" in scores]
        for metric in metrics:
            value = scores.get(f"{metric},none")
            stderr = scores.get(f"{metric}_stderr,none")
            if not isinstance(value, (int, float)):
                raise DepthbenchError(f"lm-eval gave no {metric} for {task} (it reported {sorted(scores)})")
            rows.append(
                dict(
                    base,
                    dataset=task,
                    metric=metric,
                    value=100.0 * value,
                    stderr=100.0 * stderr if isinstance(stderr, (int, float)) else None,
                    samples=samples,
                    column=table.get(task, (None, None))[1],
                )
            )
    values = [r["value"] for r in rows if r["dataset"] in table]
    if table and len(values) == len(table):
        rows.append(
            dict(
                base,
                dataset="average",
                metric="mean",
                value=sum(values) / len(values),
                stderr=None,
                samples=None,
                column="average",
            )
        )
    return rows


def run_lm_eval(
    config, checkpoint, *, table: dict, overrides=(), tasks=None, record_into=None, image_options=()
) -> list[dict]:
    """The rows of one ``depthbench eval --dataset lm-eval`` call (see the module docstring), appended to
    ``record_into`` (a RunDir the caller opened as its writer: the checkpoint's run or ``--out-run``) when given.
    ``table``: ScaleNet Table X's ``{task: (metric, column)}``, whose tasks are the default ``tasks``;
    ``image_options``: image-protocol options given (an error here)."""
    cfg = load_config(config, list(overrides))
    check_recipe(cfg, config, image_options)
    check_model(cfg)
    path = Path(checkpoint).expanduser()
    if not path.exists():
        raise DepthbenchError(
            f"--checkpoint {checkpoint}: no such file, run directory or Hugging Face checkpoint directory"
        )
    names = list(dict.fromkeys(tasks or table))
    loaded = load_tasks(names, table)

    configure_threads(1, cfg.data.workers)
    model, tokenizer = load_model(cfg, path)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda" and cfg.precision == "bf16":
        model = model.to(torch.bfloat16)
    model.to(device)
    from lm_eval.evaluator import evaluate
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=cfg.data.eval_batch_size or 16)
    # lm-eval's evaluate() rather than simple_evaluate(): the latter also gathers environment information
    # (torch's collect_env runs pip and more: seconds) that is not stored here; the tasks are set up in load_tasks
    results = evaluate(lm=lm, task_dict=loaded, bootstrap_iters=100, log_samples=False, verbosity="ERROR")
    base = dict(
        kind="eval_suite",
        protocol="lm-eval",
        model=cfg.model.name,
        input_size=None,
        pool_mode=None,
        analysis="none",
        shots=0,
        checkpoint=str(checkpoint),
        ema=False,
    )
    rows = rows_of(results, names, base, table)
    if record_into is not None:
        for row in rows:
            record_into.log_metrics(**row)
    return rows
