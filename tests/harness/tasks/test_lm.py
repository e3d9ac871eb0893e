"""Language-model path (StepsNet Table 4): packing, the local BPE tokenizer, perplexity, a tiny LM training run
with exact mid-epoch resume, and bad input in one line.

The tiny setting: the first 600 verses of the embedded King James Bible (Debian's bible-kjv, installed by
``make setup``) as a raw-text corpus, a 300-entry byte-level BPE, 16-token blocks, a 2-step Steps-Transformer
of widths 32/48, 64 training blocks in batches of 8 -> 8 optimizer steps per epoch, 2 epochs.
"""

import json
import math
import shutil
from pathlib import Path

import pytest
import torch

import harness.engine.loop
from harness.core.errors import DepthbenchError
from harness.tasks.lm import PackedTokens, encode_lines, evaluate_lm, export_kjv, perplexity, train_tokenizer
from harness.commands.train import run
import numpy as np
from fixtures.files import refused as _refused

ROOT = Path(__file__).resolve().parents[3]
PRESET = ROOT / "configs/stepsnet/steps-lm-w128-d8_1xb32-2e_kjv-lm.py"
STEPS_PER_EPOCH = 8


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Real text in the ``text`` layout: the first 600 KJV verses to train on, the next 100 to validate."""
    if shutil.which("bible") is None:
        pytest.fail(
            "the embedded text corpus needs Debian's bible-kjv package: run make setup (or apt-get install bible-kjv)"
        )
    root = tmp_path_factory.mktemp("text")
    verses = (export_kjv(root / "kjv") / "train.txt").read_text().splitlines()
    assert len(verses) > 29000  # the whole Bible minus the held-out chapters
    (root / "train.txt").write_text("\n".join(verses[:600]) + "\n")
    (root / "valid.txt").write_text("\n".join(verses[600:700]) + "\n")
    return root


def tiny(corpus, **extra):
    settings = {
        "data.type": "text",
        "data.root": str(corpus),
        "data.train_split": "train.txt",
        "data.val_split": "valid.txt",
        "data.vocab_size": 300,
        "data.seq_len": 16,
        "data.train_subset": 64,
        "data.val_subset": 16,
        "model.vocab_size": 300,
        "model.seq_len": 16,
        "model.steps": "((32,1,1),(48,1,1))",
        "batch_size": 8,
        "epochs": 2,
        "log_interval": 1,
        "ckpt.interval_minutes": None,
        "log.tensorboard": False,
        "optim.lr": 3e-3,
        **extra,
    }
    return [f"{k}={v}" for k, v in settings.items()]


@pytest.fixture(autouse=True)
def data_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DEPTHBENCH_DATA", str(tmp_path_factory.getbasetemp() / "cache"))


# ----------------------------------------------------------------------------------------- units
def test_packing_predicts_every_token_once():
    ids = list(range(11))
    data = PackedTokens(ids, seq_len=3)
    assert len(data) == 3  # (11 - 1) // 3; the tail token 10 is only a target
    x, y = data[1]
    assert x.tolist() == [3, 4, 5] and y.tolist() == [4, 5, 6]
    targets = [t for i in range(len(data)) for t in data[i][1].tolist()]
    assert targets == list(range(1, 10))
    with pytest.raises(IndexError):
        data[3]


def test_bpe_tokenizer_round_trip(tmp_path):
    text = tmp_path / "train.txt"
    text.write_text("In the beginning God created the heaven and the earth.\nAnd the earth was without form.\n" * 20)
    tokenizer = train_tokenizer([text], vocab_size=300)
    assert tokenizer.token_to_id("<eos>") == 0 and 257 <= tokenizer.get_vocab_size() <= 300
    sentence = "And the earth was void; naïve café — 1611!"  # unseen bytes still encode (byte level)
    ids = tokenizer.encode(sentence).ids
    assert tokenizer.decode(ids) == sentence
    assert len(tokenizer.encode("the earth").ids) < len("the earth")  # merges were learnt
    packed = encode_lines(tokenizer, ["the earth", "void"])
    assert packed.tolist() == tokenizer.encode("the earth").ids + [0] + tokenizer.encode("void").ids + [0]


def test_perplexity_of_a_hand_example():
    # two positions: the right token gets probability 1/2, then 1/8 -> mean NLL (ln 2 + ln 8) / 2 = 2 ln 2, PPL 4
    p = torch.tensor([[[0.5, 0.25, 0.25, 1e-30], [1 / 8, 5 / 8, 1 / 8, 1 / 8]]])
    logits = p.log()

    class Fixed(torch.nn.Module):
        def forward(self, tokens):
            return logits

    from harness.engine.evaluation import evaluation_backend

    backend = evaluation_backend("fp32")  # one process: the real reduction and host read
    loader = [(torch.zeros(1, 2, dtype=torch.long), torch.tensor([[0, 2]]))]
    metrics = evaluate_lm(Fixed(), loader, backend)
    assert metrics["loss"] == pytest.approx(2 * math.log(2), rel=1e-6)
    assert metrics["ppl"] == pytest.approx(4.0, rel=1e-6)
    assert metrics["tokens"] == 2 and metrics["top1"] == 50.0  # position 1 is right, position 2 is not
    assert perplexity(1e4) == float("inf")


# ----------------------------------------------------------------------------------------- training
def curve(work_dir) -> list:
    timing = {"images_per_s", "step_time", "eta_s", "peak_mem_mb", "epoch_time_s", "train_time_s"}
    records = [json.loads(line) for line in (Path(work_dir) / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in timing} for r in records]


@pytest.mark.slow
def test_lm_trains_reports_perplexity_and_resumes_mid_epoch_exactly(corpus, tmp_path, monkeypatch):
    reference = run(PRESET, work_dir=tmp_path / "reference", overrides=tiny(corpus))
    assert reference.status == "done", reference
    records = curve(reference.run_dir)
    losses = [r["loss"] for r in records if r["kind"] == "train"]
    assert len(losses) == 2 * STEPS_PER_EPOCH and sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.5
    evals = [r for r in records if r["kind"] == "eval"]
    assert len(evals) == 2 and all(r["ppl"] == pytest.approx(math.exp(r["loss"])) for r in evals)
    assert evals[1]["ppl"] < evals[0]["ppl"] < 300  # better than uniform over the vocabulary
    meta = json.loads((reference.run_dir / "meta.json").read_text())
    assert meta["best_metric"] == pytest.approx(min(r["ppl"] for r in evals))

    # a stop request (Slurm's SIGUSR1) after the 3rd batch of epoch 0, then --resume auto
    calls = {"n": 0}

    def stop_after_three():
        calls["n"] += 1
        return calls["n"] == 3

    monkeypatch.setattr(harness.engine.loop, "stop_requested", stop_after_three)
    stopped = run(PRESET, work_dir=tmp_path / "run", overrides=tiny(corpus))
    assert stopped.status == "preempted"
    checkpoint = torch.load(stopped.run_dir / "last.pth", map_location="cpu", weights_only=True)
    assert checkpoint["epoch"] == 0 and checkpoint["batch_in_epoch"] == 3
    monkeypatch.setattr(harness.engine.loop, "stop_requested", lambda: False)
    resumed = run(PRESET, work_dir=tmp_path / "run", resume="auto", overrides=tiny(corpus))
    assert resumed.status == "done"
    assert curve(resumed.run_dir) == records
    got = torch.load(resumed.run_dir / "last.pth", map_location="cpu", weights_only=True)["model"]
    want = torch.load(reference.run_dir / "last.pth", map_location="cpu", weights_only=True)["model"]
    assert all(torch.equal(got[k], want[k]) for k in want)


# ----------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "extra, message",
    [
        (
            {"data.root": "/nonexistent/wikitext-103-raw", "data.train_split": "wiki.train.tokens"},
            "wikitext-103-raw/wiki.train.tokens does not exist",
        ),
        ({"data.vocab_size": 8000}, "data.vocab_size=8000 is larger than model"),
        ({"model.name": "resnet18"}, "model resnet18 does not build"),
        ({"data.seq_len": 1}, "data.seq_len=1"),
    ],
)
def test_bad_lm_input_is_one_line_before_anything_is_written(corpus, tmp_path, extra, message):
    with pytest.raises(DepthbenchError) as error:
        run(PRESET, work_dir=tmp_path / "run", overrides=tiny(corpus, **extra))
    assert message in str(error.value) and "\n" not in str(error.value)
    assert not (tmp_path / "run").exists()


def test_a_tokenizer_larger_than_the_vocabulary_is_refused(corpus, tmp_path):
    tokenizer = train_tokenizer([corpus / "train.txt"], vocab_size=400)
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    overrides = tiny(corpus, **{"data.tokenizer": tmp_path / "tokenizer.json"})
    with pytest.raises(DepthbenchError, match=r"has 4\d\d tokens but data.vocab_size=300"):
        run(PRESET, work_dir=tmp_path / "run", overrides=overrides)
    assert not (tmp_path / "run").exists()


# ----------------------------------------------------------------------------------------- ScaleNet on Llama
def tiny_llama(seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        max_position_embeddings=64,
    )
    return LlamaForCausalLM(config).eval()


def test_llama_expansion_shares_layers_starts_as_duplication_and_counts_by_formula():
    import copy

    from models.scalenet_llama import AdaptedLinear, expand_llama, llama_parameter_count, unique_parameters

    model = tiny_llama()
    base = unique_parameters(model)
    duplicated = copy.deepcopy(model)  # the plain Interpolate duplication, independent copies
    duplicated.model.layers = torch.nn.ModuleList(
        [copy.deepcopy(layer) for layer in duplicated.model.layers for _ in range(2)]
    )
    for index, layer in enumerate(duplicated.model.layers):
        layer.self_attn.layer_idx = index
    duplicated.config.num_hidden_layers = 4
    if getattr(duplicated.config, "layer_types", None):
        duplicated.config.layer_types = duplicated.config.layer_types * 2
    expand_llama(model, k=2, rank=4)
    layers = model.model.layers
    assert len(layers) == 4 and [layer.self_attn.layer_idx for layer in layers] == [0, 1, 2, 3]
    for a, b in ((0, 1), (2, 3)):
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            assert getattr(layers[a].self_attn, name).weight is getattr(layers[b].self_attn, name).weight
        for name in ("gate_proj", "up_proj", "down_proj"):
            ours, theirs = getattr(layers[a].mlp, name), getattr(layers[b].mlp, name)
            assert isinstance(ours, AdaptedLinear) and ours.base.weight is theirs.base.weight
            assert ours.adapter_up.weight is not theirs.adapter_up.weight
        assert layers[a].input_layernorm.weight is not layers[b].input_layernorm.weight
    assert layers[0].self_attn.q_proj.weight is not layers[2].self_attn.q_proj.weight
    tokens = torch.randint(0, 64, (2, 10))
    with torch.no_grad():
        assert torch.equal(model(tokens).logits, duplicated(tokens).logits)  # zero-init adapters: no change
    # 4 instances x 3 adapters x r (in + out) + 2 new instances x 2 RMSNorms of 32
    assert unique_parameters(model) == base + 4 * 3 * 4 * (32 + 64) + 2 * 2 * 32
    assert unique_parameters(model) == llama_parameter_count(32, 64, 2, k=2, rank=4, base=base)


def test_llama_3_2_1b_counts_on_the_meta_device():
    from transformers import LlamaConfig, LlamaForCausalLM

    from models.scalenet_llama import expand_llama, llama_parameter_count, unique_parameters

    # Llama-3.2-1B's published architecture (ScaleNet's LLM experiment); no weights needed on the meta device
    config = LlamaConfig(
        vocab_size=128256,
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        tie_word_embeddings=True,
    )
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
        assert unique_parameters(model) == 1_235_814_400  # the paper's "1236M"
        expand_llama(model, k=2, rank=16)
    # 32 instances x 491,520 adapter parameters + 16 new instances x 2 RMSNorms; the paper prints 1265M (flagged)
    assert unique_parameters(model) == 1_251_608_576 == llama_parameter_count(2048, 8192, 16, base=1_235_814_400)


def test_llama_expansion_keeps_sharing_through_save_and_load(tmp_path):
    from models.scalenet_llama import expand_llama

    model = expand_llama(tiny_llama(), k=2, rank=4)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.mlp.up_proj.adapter_up.weight.normal_()  # trained adapters differ per instance
    torch.save(model.state_dict(), tmp_path / "model.pth")
    loaded = expand_llama(tiny_llama(seed=1), k=2, rank=4)
    loaded.load_state_dict(torch.load(tmp_path / "model.pth", weights_only=True), strict=True)
    layers = loaded.model.layers
    assert layers[0].mlp.gate_proj.base.weight is layers[1].mlp.gate_proj.base.weight
    assert loaded.lm_head.weight is loaded.model.embed_tokens.weight  # Llama's tied embeddings
    tokens = torch.randint(0, 64, (1, 8))
    with torch.no_grad():
        assert torch.equal(loaded(tokens).logits, model(tokens).logits)


def test_load_llama_from_a_directory_and_bad_directories_are_one_line(tmp_path):
    from harness.tasks.alpaca import load_llama

    model = tiny_llama()
    model.save_pretrained(tmp_path / "ckpt")
    loaded = load_llama(tmp_path / "ckpt", expand=dict(k=2, rank=4))
    assert len(loaded.model.layers) == 4
    assert torch.equal(loaded.model.embed_tokens.weight, model.model.embed_tokens.weight)
    (tmp_path / "empty").mkdir()
    model.config.to_json_file(tmp_path / "empty" / "config.json")
    with pytest.raises(DepthbenchError, match="holds a config.json but no weights"):
        load_llama(tmp_path / "empty")
    with pytest.raises(DepthbenchError, match="no such checkpoint"):
        load_llama(tmp_path / "missing")
    assert len(load_llama(tmp_path / "empty" / "config.json").model.layers) == 2  # a config: random weights


def test_an_lm_token_cache_holding_a_pickled_or_huge_array_is_one_line(tmp_path, monkeypatch):
    from harness.core.config import load_config
    from harness.tasks.lm import cache_dir, token_ids

    monkeypatch.setenv("DEPTHBENCH_DATA", str(tmp_path / "cache"))
    (tmp_path / "train.txt").write_text("in the beginning\n" * 20)
    cfg = load_config(
        "configs/stepsnet/steps-lm-w128-d8_1xb32-2e_kjv-lm.py",
        [
            "data.type=text",
            f"data.root={tmp_path}",
            "data.train_split=train.txt",
            "data.val_split=train.txt",
            "data.vocab_size=300",
        ],
    )
    cache = cache_dir(cfg.data) / "train.txt.ids.npy"
    cache.parent.mkdir(parents=True)
    with open(cache, "wb") as fh:
        np.save(fh, np.asarray([1, "x", None], object), allow_pickle=True)
    _refused(lambda: token_ids(cfg.data, "train.txt"), "token cache", "holds object", "delete it")
    with open(cache, "wb") as fh:  # a header claiming 2**40 ids over 8 bytes
        np.lib.format.write_array_header_1_0(fh, {"descr": "<i4", "fortran_order": False, "shape": (1 << 40,)})
        fh.write(b"\0" * 8)
    _refused(lambda: token_ids(cfg.data, "train.txt"), "token cache", "claims 4,398,046,511,104 bytes")
