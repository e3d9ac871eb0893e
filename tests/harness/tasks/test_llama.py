"""ScaleNet on a Hugging Face Llama (ScaleNet Table X): Alpaca-format instruction tuning through the engine, zero-shot
evaluation through lm-eval, save/load of an expanded model, the verify rows, and bad input in one line.

The tiny setting is the CI preset: a random 2-layer Llama of width 64 (vocabulary 512) expanded 2x with rank-4
adapters, 126 hand-written instructions (110 train / 16 held out), a 512-entry byte-level BPE, batch 8, 3 epochs
(42 optimizer steps); lm-eval on the 24-question local task depthbench_tiny_mc.
"""

import json
from pathlib import Path

import pytest
import torch

from harness.core.errors import DepthbenchError
from harness.commands.train import run
from clitools import run_cli

ROOT = Path(__file__).resolve().parents[3]
PRESET = ROOT / "configs/scalenet/scalenet-llama-tiny-2x_1xb8-3e_alpaca-tiny.py"
ASSETS = ROOT / "harness/assets/llama"
QUIET = ["log.tensorboard=False", "ckpt.interval_minutes=None"]


@pytest.fixture(autouse=True)
def data_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DEPTHBENCH_DATA", str(tmp_path_factory.getbasetemp() / "cache"))


def preset(overrides=()):
    from harness.core.config import load_config

    return load_config(PRESET, [*QUIET, *overrides])


def records(path: Path, kind: str) -> list[dict]:
    return [r for r in map(json.loads, path.read_text().splitlines()) if r.get("kind") == kind]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One run of the CI preset (module-wide: the training and the lm-eval tests share it)."""
    import os

    os.environ["DEPTHBENCH_DATA"] = str(tmp_path_factory.getbasetemp() / "cache")
    result = run(PRESET, work_dir=tmp_path_factory.mktemp("runs") / "tiny", overrides=QUIET)
    assert result.status == "done", result
    return result.run_dir


# ----------------------------------------------------------------------------------------- prompt and masking
def test_alpaca_prompt_is_the_standard_template_and_only_the_response_carries_loss():
    from harness.tasks.alpaca import (
        IGNORE_INDEX,
        build_instruction_dataset,
        encode_example,
        format_prompt,
        get_tokenizer,
        split_indices,
    )
    from harness.tasks.lm import NextTokenLoss

    # Stanford Alpaca's two templates (with / without an input)
    assert format_prompt({"instruction": "Add.", "input": "1 and 2", "output": "3"}) == (
        "Below is an instruction that describes a task, paired with an input that provides further context. Write a "
        "response that appropriately completes the request.\n\n### Instruction:\nAdd.\n\n### Input:\n1 and 2\n\n"
        "### Response:"
    )
    assert format_prompt({"instruction": "Smile.", "input": "", "output": ":)"}) == (
        "Below is an instruction that describes a task. Write a response that appropriately completes the request."
        "\n\n### Instruction:\nSmile.\n\n### Response:"
    )
    cfg = preset()
    tokenizer = get_tokenizer(cfg.data)
    example = {"instruction": "Name the capital of France.", "input": "", "output": "The capital of France is Paris."}
    prompt = tokenizer(format_prompt(example))["input_ids"]
    response = tokenizer(example["output"], add_special_tokens=False)["input_ids"]
    assert prompt[0] == tokenizer.bos_token_id and len(response) > 3
    ids, labels = encode_example(tokenizer, example, max_length=256)
    assert ids == prompt + response + [tokenizer.eos_token_id]
    assert labels == [IGNORE_INDEX] * len(prompt) + response + [tokenizer.eos_token_id]
    short_ids, short_labels = encode_example(tokenizer, example, max_length=len(prompt) + 2)  # cut at max_length
    assert short_ids == ids[: len(prompt) + 2] and short_labels == labels[: len(prompt) + 2]

    # a dataset item: inputs right-padded, targets = the next token on response positions, -100 elsewhere
    dataset = build_instruction_dataset(cfg.data, "train", is_training=True)
    inputs, targets = dataset[0]
    every = json.loads((ASSETS / "alpaca_tiny.json").read_text())
    first = every[split_indices(len(every), cfg.data.val_size)["train"][0]]
    ids, labels = encode_example(tokenizer, first, cfg.data.max_length)
    n = len(ids)
    assert inputs.shape == targets.shape and inputs[:n].tolist() == ids
    assert (inputs[n:] == tokenizer.pad_token_id).all()
    assert targets[: n - 1].tolist() == labels[1:] and (targets[n - 1 :] == IGNORE_INDEX).all()

    # the loss is the mean cross-entropy over exactly the response positions
    logits = torch.randn(1, len(targets), 512)
    response_positions = [t for t in range(len(targets)) if targets[t] >= 0]
    by_hand = -torch.stack([logits[0, t].log_softmax(-1)[targets[t]] for t in response_positions]).mean()
    assert len(response_positions) == n - len(tokenizer(format_prompt(first))["input_ids"])
    assert torch.allclose(NextTokenLoss()(logits, targets[None]), by_hand)


# ----------------------------------------------------------------------------------------- training and lm-eval
def test_the_tiny_preset_trains_its_loss_falls_and_it_reports_response_perplexity(trained):
    meta = json.loads((trained / "meta.json").read_text())
    assert meta["status"] == "done"
    train = records(trained / "metrics.jsonl", "train")
    assert len(train) >= 10 and train[-1]["global_step"] == 3 * (110 // 8)
    assert train[0]["loss"] > 5.5 and train[-1]["loss"] < train[0]["loss"] - 1.0  # from ~ln(512) = 6.2 down
    evals = records(trained / "metrics.jsonl", "eval")
    assert len(evals) == 3 and evals[-1]["ppl"] < evals[0]["ppl"]
    assert evals[-1]["ppl"] == pytest.approx(2.718281828 ** evals[-1]["loss"], rel=1e-6)
    assert (trained / "best.pth").is_file() and (trained / "last.pth").is_file()


@pytest.mark.slow
def test_instruction_tuning_resumes_mid_epoch_exactly(trained, tmp_path, monkeypatch):
    import harness.engine.loop

    timing = {"images_per_s", "step_time", "eta_s", "peak_mem_mb", "epoch_time_s", "train_time_s"}

    def curve(run_dir):
        return [
            {k: v for k, v in r.items() if k not in timing}
            for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
            if r["kind"] in ("train", "eval", "epoch")
        ]

    calls = {"n": 0}

    # a stop request (Slurm's SIGUSR1) during the 4th batch of epoch 0: the loop asks at its sync points only
    # (every log_interval=2 updates, issue 40), so the request is seen at the second one, after batch 4
    def stop_after_four():
        calls["n"] += 1
        return calls["n"] == 2

    monkeypatch.setattr(harness.engine.loop, "stop_requested", stop_after_four)
    stopped = run(PRESET, work_dir=tmp_path / "run", overrides=QUIET)
    assert stopped.status == "preempted"
    assert torch.load(stopped.run_dir / "last.pth", map_location="cpu", weights_only=True)["batch_in_epoch"] == 4
    monkeypatch.setattr(harness.engine.loop, "stop_requested", lambda: False)
    resumed = run(PRESET, work_dir=tmp_path / "run", resume="auto", overrides=QUIET)
    assert resumed.status == "done"
    assert curve(resumed.run_dir) == curve(trained)
    ours = torch.load(resumed.run_dir / "last.pth", map_location="cpu", weights_only=True)["model"]
    reference = torch.load(trained / "last.pth", map_location="cpu", weights_only=True)["model"]
    assert ours.keys() == reference.keys() and all(torch.equal(ours[k], reference[k]) for k in ours)


@pytest.mark.tier("integration")
def test_lm_eval_end_to_end_on_the_tiny_model_and_local_task(trained, capsys):
    from harness.tasks.alpaca import build_llama_model, get_tokenizer
    from harness.engine.checkpoint import load_weights

    from harness.cli import main

    # in this process (the command line's own entry point): a subprocess would import torch/lm-eval again (~20 s)
    code = main(
        [
            "eval",
            str(PRESET),
            *QUIET,
            "--checkpoint",
            str(trained),
            "--dataset",
            "lm-eval",
            "--tasks",
            "depthbench_tiny_mc",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    rows = records(trained / "metrics.jsonl", "eval_suite")
    assert [(r["dataset"], r["metric"], r["protocol"], r["samples"]) for r in rows] == [
        ("depthbench_tiny_mc", "acc", "lm-eval", 24),
        ("depthbench_tiny_mc", "acc_norm", "lm-eval", 24),
    ]
    assert "depthbench_tiny_mc" in out and "acc_norm" in out

    # lm-eval's acc is the share of questions whose answer has the highest log-likelihood after the question:
    # recomputed here from the same weights, without lm-eval
    cfg = preset()
    model = build_llama_model(cfg, pretrained=False)
    load_weights(model, str(trained))
    tokenizer = get_tokenizer(cfg.data)
    questions = [
        json.loads(line)
        for line in (ROOT / "harness/assets/lm_eval_tasks/depthbench_tiny/tiny_mc.jsonl").read_text().splitlines()
    ]
    hits = 0
    with torch.no_grad():
        for q in questions:
            context = f"Question: {q['question']}\nAnswer:"
            context_ids = tokenizer(context, add_special_tokens=False)["input_ids"]
            scores = []
            for choice in q["choices"]:
                whole = tokenizer(f"{context} {choice}", add_special_tokens=False)["input_ids"]
                logprobs = model(torch.tensor([whole[:-1]]))[0].log_softmax(-1)
                scores.append(sum(logprobs[t - 1, whole[t]].item() for t in range(len(context_ids), len(whole))))
            hits += max(range(len(scores)), key=scores.__getitem__) == q["label"]
    assert rows[0]["value"] == pytest.approx(100.0 * hits / len(questions))


# ----------------------------------------------------------------------------------------- save / load
def test_an_expanded_llama_keeps_its_ties_through_save_and_load(tmp_path):
    from safetensors.torch import load_file

    from harness.tasks.alpaca import load_llama
    from models.scalenet_llama import AdaptedLinear, build_llama, save_llama, unique_parameters

    torch.manual_seed(0)
    model = build_llama(str(ASSETS / "tiny-llama.json"), dict(k=2, rank=4)).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.mlp.down_proj.adapter_up.weight.normal_()  # trained adapters differ per instance
    save_llama(model, tmp_path / "expanded")
    stored = load_file(str(tmp_path / "expanded" / "model.safetensors"))
    assert sum(t.numel() for t in stored.values()) == unique_parameters(model)  # every shared tensor once
    loaded = load_llama(tmp_path / "expanded")
    layers = loaded.model.layers
    assert len(layers) == 4 and [layer.self_attn.layer_idx for layer in layers] == [0, 1, 2, 3]
    for a, b in ((0, 1), (2, 3)):
        assert layers[a].self_attn.q_proj.weight is layers[b].self_attn.q_proj.weight
        assert isinstance(layers[a].mlp.up_proj, AdaptedLinear)
        assert layers[a].mlp.up_proj.base.weight is layers[b].mlp.up_proj.base.weight
        assert layers[a].mlp.up_proj.adapter_up.weight is not layers[b].mlp.up_proj.adapter_up.weight
    assert layers[0].self_attn.q_proj.weight is not layers[2].self_attn.q_proj.weight
    assert loaded.lm_head.weight is loaded.model.embed_tokens.weight
    tokens = torch.randint(0, 512, (2, 12))
    with torch.no_grad():
        assert torch.equal(loaded(tokens).logits, model(tokens).logits)
    # training the loaded model moves both instances of a shared weight together
    loaded.train()
    loaded(tokens, labels=tokens).loss.backward()
    with torch.no_grad():
        layers[0].mlp.gate_proj.base.weight.sub_(layers[0].mlp.gate_proj.base.weight.grad)
    assert torch.equal(layers[1].mlp.gate_proj.base.weight, layers[0].mlp.gate_proj.base.weight)


# ----------------------------------------------------------------------------------------- verify
def test_verify_audits_the_llama_counts_and_flags_the_printed_1265m():
    from harness.commands import verify

    checks = {(c.row, c.column): c for c in verify.run(papers=["scalenet"], table="X", progress=False)}
    base, scaled = checks[("Llama-3.2-1B", "params")], checks[("Llama-3.2-1B ScaleNet", "params")]
    # spec §2.9 / §7 item 11: 1,235,814,400 base; 2x with rank-16 gate/up/down adapters + 16 new RMSNorm pairs
    assert (base.status, base.ours) == ("pass", 1_235_814_400)
    assert (scaled.status, scaled.ours) == ("pass", 1_251_608_576)
    assert checks[("Llama-3.2-1B", "params_m")].status == "pass"  # prints 1236M
    flagged = checks[("Llama-3.2-1B ScaleNet", "params_m")]
    assert flagged.status == "reason" and "1265" in flagged.note


# ----------------------------------------------------------------------------------------- bad input
@pytest.mark.tier("integration")
def test_bad_input_is_one_line_before_any_work(tmp_path, capsys):
    from harness.cli import main

    work = tmp_path / "run"
    with pytest.raises(DepthbenchError, match="no such file; give an Alpaca-format JSON file"):
        run(PRESET, work_dir=work, overrides=[*QUIET, f"data.root={tmp_path / 'missing.json'}"])
    (tmp_path / "bad.json").write_text(json.dumps([{"instruction": "Hi", "output": 3}]))
    with pytest.raises(DepthbenchError, match="record 0 is not"):
        run(PRESET, work_dir=work, overrides=[*QUIET, f"data.root={tmp_path / 'bad.json'}"])
    (tmp_path / "llama").mkdir()
    (tmp_path / "llama" / "config.json").write_text((ASSETS / "tiny-llama.json").read_text())
    with pytest.raises(DepthbenchError, match="holds a config.json but no weights"):
        run(PRESET, work_dir=work, overrides=[*QUIET, f"model.weights={tmp_path / 'llama'}"])
    with pytest.raises(DepthbenchError, match="has 1024 ids but the model's embedding has vocab_size=512"):
        run(PRESET, work_dir=work, overrides=[*QUIET, "data.vocab_size=1024"])
    with pytest.raises(DepthbenchError, match="data.max_length=300 is longer than the model's"):
        run(PRESET, work_dir=work, overrides=[*QUIET, "data.max_length=300"])
    assert not work.exists()
    done = run_cli("eval", PRESET, "--checkpoint", tmp_path, "--dataset", "lm-eval", "--input-size", "224")
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "depthbench eval: error: --input-size: image-protocol options; --dataset lm-eval takes --tasks"
    ]
    image_recipe = ROOT / "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"
    assert main(["eval", str(image_recipe), "--checkpoint", str(tmp_path), "--dataset", "lm-eval"]) == 2
    assert "evaluates a Hugging Face Llama recipe" in capsys.readouterr().err
    assert main(["eval", str(PRESET), "--checkpoint", str(tmp_path / "none"), "--dataset", "lm-eval"]) == 2
    assert "no such file, run directory or Hugging Face checkpoint directory" in capsys.readouterr().err
