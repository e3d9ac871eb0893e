"""Alpaca-format instruction tuning of a Hugging Face Llama through ``depthbench train`` (ScaleNet Table X).

``data.type='alpaca'`` (``configs/_base_/datasets/alpaca.py``): ``data.root`` is a JSON file in the Stanford Alpaca
format -- a list of ``{"instruction", "input", "output"}`` records (``input`` may be empty or absent). Each record
becomes one sequence: the standard Alpaca prompt (with or without its Input section, :data:`PROMPT_INPUT` /
:data:`PROMPT_NO_INPUT`) followed by the response and the end-of-sequence token, cut at ``data.max_length`` tokens
(512, spec §2.9). The loss is on the response tokens only: the prompt's labels are -100 (Hugging Face's "no loss"
label), as Stanford Alpaca's ``train.py`` masks them. Sequences are right-padded to the longest one of the file
(at most ``data.max_length``) with target -100, so the engine's generic samplers, loop, exact resume and
evaluation (response-token loss/accuracy and perplexity) apply unchanged. ``data.val_size`` records (a fixed
random choice) are held out as the ``val`` split.

Tokenizer: ``data.tokenizer`` -- the checkpoint's (a directory with its tokenizer files, or a tokenizer.json) -- or,
for random-weight models (the CI preset), a byte-level BPE of ``data.vocab_size`` entries trained locally on the
instruction file (``<s>``, ``</s>``, ``<pad>`` = ids 0, 1, 2), cached under ``~/.cache/depthbench/data/alpaca/``.

Model: ``model.config`` (the architecture: a named one in :data:`models.scalenet_llama.LLAMA_ARCHITECTURES`, a
config.json, or a dict of ``LlamaConfig`` fields), ``model.weights`` (a Hugging Face checkpoint directory; None:
random weights), ``model.scalenet`` (``dict(k=2, rank=16)``: ScaleNet's expansion, :func:`expand_llama`) and
``model.trainable`` (``all`` or ``adapters_norms``). :class:`InstructionTask` hands the engine
:func:`check_llama_model`, :func:`check_llama_run` and :func:`build_llama_model` for these configs; nothing here
is in the training loop.
"""

from __future__ import annotations

import hashlib
import json
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from harness.core.errors import ConfigError, DataError
from harness.core.files import BadFile, atomic_write, data_cache, read_json
from harness.engine.checkpoint import read_checkpoint
from harness.engine.models import meta_build
from harness.tasks.lm import LanguageModelTask
from models.scalenet_llama import (
    ARCHITECTURE_FIELDS,
    TRAINABLE,
    CausalLMLogits,
    base_config,
    build_llama,
    expand_llama,
    llama_config,
    load_saved_llama,
    set_trainable,
)

# Stanford Alpaca's prompt templates (tatsu-lab/stanford_alpaca, train.py PROMPT_DICT) -- "the standard Alpaca
# prompt template" of spec §2.9; the response follows "### Response:" directly, as in that train.py.
PROMPT_INPUT = (
    "Below is an instruction that describes a task, paired with an input that provides further context. "
    "Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:"
)
PROMPT_NO_INPUT = (
    "Below is an instruction that describes a task. "
    "Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Response:"
)
IGNORE_INDEX = -100  # Hugging Face's label for "no loss here" (NextTokenLoss ignores every negative target)
BPE_SPECIAL = ("<s>", "</s>", "<pad>")  # the local BPE's bos, eos, pad (ids 0, 1, 2)
SPLITS = ("train", "val")


# ----------------------------------------------------------------------------------------- records and prompts
def format_prompt(example: dict) -> str:
    """The Alpaca prompt of one record (the Input section only when ``input`` is non-empty)."""
    if example.get("input", ""):
        return PROMPT_INPUT.format(instruction=example["instruction"], input=example["input"])
    return PROMPT_NO_INPUT.format(instruction=example["instruction"])


@lru_cache(maxsize=4)
def _read(path: str, key: str) -> tuple:
    try:  # not a FIFO, not nested deeper than a record list needs (a deep file was a RecursionError)
        records = read_json(path, max_bytes=None, expect=None, what="data.root")
    except (OSError, BadFile) as e:
        why = str(e) if isinstance(e, BadFile) else f"{type(e).__name__}: {str(e)[:80]}"
        raise DataError(
            f"{why}; give an Alpaca-format file: a JSON list of {{instruction, input, output}} records"
        ) from None
    if not isinstance(records, list) or not records:
        raise DataError(
            f"data.root={path} holds no list of records; an Alpaca-format file is a JSON list of "
            f"{{instruction, input, output}} records"
        )
    for i, r in enumerate(records):
        ok = (
            isinstance(r, dict)
            and isinstance(r.get("instruction"), str)
            and r["instruction"].strip()
            and isinstance(r.get("output"), str)
            and isinstance(r.get("input", ""), str)
        )
        if not ok:
            raise DataError(
                f"data.root={path}: record {i} is not {{instruction: text, input: text (may be empty), "
                f"output: text}}: {json.dumps(r)[:100]}"
            )
    return tuple(records)


def read_alpaca(path) -> list[dict]:
    """The records of an Alpaca-format JSON file, checked (one line naming the first bad record)."""
    path = Path(str(path)).expanduser()
    if not path.is_file():
        raise DataError(
            f"data.root={path}: no such file; give an Alpaca-format JSON file (a list of {{instruction, "
            f"input, output}} records, e.g. Stanford Alpaca's alpaca_data.json)"
        )
    stat = path.stat()
    return list(_read(str(path.resolve()), f"{stat.st_size}:{stat.st_mtime_ns}"))


def split_indices(n: int, val_size: int) -> dict:
    """A fixed random choice of ``val_size`` records as ``val``, the rest ``train`` (both in file order)."""
    order = np.random.RandomState(0).permutation(n)
    return {"val": sorted(order[:val_size].tolist()), "train": sorted(order[val_size:].tolist())}


# ----------------------------------------------------------------------------------------- tokenizer
def _tokenizer_path(data) -> Path | None:
    return Path(str(data.tokenizer)).expanduser() if data.get("tokenizer") else None


def load_tokenizer(path):
    """A Hugging Face tokenizer from a checkpoint/tokenizer directory or a tokenizer.json (no download)."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    path = Path(str(path)).expanduser()
    try:
        if path.is_dir():
            return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        if path.is_file() and path.suffix == ".json":
            tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(path))
            return _name_special_tokens(tokenizer)
    except Exception as e:
        raise DataError(
            f"data.tokenizer={path} does not load as a Hugging Face tokenizer ({type(e).__name__}: "
            f"{str(e).splitlines()[0][:100] if str(e) else ''})"
        ) from None
    raise DataError(f"data.tokenizer={path}: no such tokenizer directory or tokenizer.json")


def _name_special_tokens(tokenizer):
    vocab = tokenizer.get_vocab()
    if all(t in vocab for t in BPE_SPECIAL):  # the local BPE's tokens
        tokenizer.add_special_tokens(dict(zip(("bos_token", "eos_token", "pad_token"), BPE_SPECIAL)))
    return tokenizer


def train_bpe(texts, vocab_size: int):
    """A byte-level BPE (``tokenizers``, GPT-2's scheme) of ``vocab_size`` entries trained on ``texts``; ``<s>``
    is added before every encoded text (the bos a Llama expects)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(BPE_SPECIAL),
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 0)]
    )
    return tokenizer


def get_tokenizer(data):
    """The run's tokenizer: ``data.tokenizer``, else the local BPE of the instruction file (trained once)."""
    return _tokenizer(str(data.root), str(_tokenizer_path(data) or ""), data.get("vocab_size"))


def _tokenizer(root: str, tokenizer: str, vocab_size):
    if tokenizer:
        return load_tokenizer(tokenizer)
    source = Path(root).expanduser()
    stat = source.stat()
    key = f"{source.resolve()}:{stat.st_size}:{int(stat.st_mtime)}|{vocab_size}"
    path = data_cache() / "alpaca" / hashlib.sha1(key.encode()).hexdigest()[:16] / "tokenizer.json"
    if not path.is_file():
        records = read_alpaca(source)
        bpe = train_bpe([format_prompt(r) + r["output"] for r in records], vocab_size)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, bpe.to_str())
    return load_tokenizer(path)


def tokenizer_size(data) -> int | None:
    """How many ids the run's tokenizer can produce (None when its files are missing: check_data says so)."""
    path = _tokenizer_path(data)
    if path is None:
        return data.vocab_size
    if not path.exists():
        return None
    return len(load_tokenizer(path))


# ----------------------------------------------------------------------------------------- encoding
def encode_example(tokenizer, example: dict, max_length: int) -> tuple[list[int], list[int]]:
    """``(ids, labels)`` of one record: the prompt (with the tokenizer's bos) then the response and eos, cut at
    ``max_length``; labels are the ids with the prompt's set to -100 (loss on the response only)."""
    return encode_examples(tokenizer, [example], max_length)[0]


def encode_examples(tokenizer, examples: list, max_length: int) -> list[tuple[list[int], list[int]]]:
    """:func:`encode_example` of every record, the texts tokenized in batches (52K records in seconds)."""
    out = []
    for start in range(0, len(examples), 4096):
        chunk = examples[start : start + 4096]
        prompts = tokenizer([format_prompt(e) for e in chunk], add_special_tokens=True)["input_ids"]
        outputs = tokenizer([e["output"] for e in chunk], add_special_tokens=False)["input_ids"]
        for prompt, output in zip(prompts, outputs):
            response = list(output) + [tokenizer.eos_token_id]
            out.append(((list(prompt) + response)[:max_length], ([IGNORE_INDEX] * len(prompt) + response)[:max_length]))
    return out


class InstructionDataset(torch.utils.data.Dataset):
    """``(input ids, targets)`` pairs of one length: targets[t] = labels[t + 1] (the next token, -100 on prompt
    and padding); inputs right-padded with the pad id."""

    def __init__(self, encoded: list, length: int, pad_id: int):
        self.encoded, self.length, self.pad_id = encoded, length, pad_id

    def __len__(self):
        return len(self.encoded)

    def __getitem__(self, index):
        ids, labels = self.encoded[index]
        inputs = torch.full((self.length,), self.pad_id, dtype=torch.long)
        inputs[: len(ids)] = torch.tensor(ids, dtype=torch.long)
        targets = torch.full((self.length,), IGNORE_INDEX, dtype=torch.long)
        targets[: len(labels) - 1] = torch.tensor(labels[1:], dtype=torch.long)
        return inputs, targets


@lru_cache(maxsize=2)
def _encoded(path: str, stamp: str, tokenizer_path: str, max_length: int, val_size: int, vocab_size) -> tuple:
    """Every record of the file encoded once per process (``stamp``: the file's size and mtime)."""
    tokenizer = _tokenizer(path, tokenizer_path, vocab_size)
    records = read_alpaca(path)
    encoded = encode_examples(tokenizer, records, max_length)
    kept = [i for i, (_, labels) in enumerate(encoded) if any(t != IGNORE_INDEX for t in labels[1:])]
    if len(kept) < len(encoded):
        print(
            f"depthbench: {len(encoded) - len(kept)} of {len(encoded)} records of {path} have no response token "
            f"within data.max_length={max_length}; left out",
            file=sys.stderr,
        )
    length = max(len(encoded[i][0]) for i in kept)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    splits = split_indices(len(records), val_size)
    keep = set(kept)
    return ({name: [encoded[i] for i in indices if i in keep] for name, indices in splits.items()}, length, pad_id)


def build_instruction_dataset(data, split: str, is_training: bool):
    """The ``train`` or ``val`` split of the instruction file as an :class:`InstructionDataset`."""
    check_alpaca_data(data, read_tokenizer=False)
    path = Path(str(data.root)).expanduser().resolve()
    stat = path.stat()
    splits, length, pad_id = _encoded(
        str(path),
        f"{stat.st_size}:{stat.st_mtime_ns}",
        str(_tokenizer_path(data) or ""),
        data.max_length,
        data.val_size,
        data.get("vocab_size"),
    )
    return InstructionDataset(splits[split], length, pad_id)


def check_alpaca_data(data, read_tokenizer: bool = True) -> Path:
    """Cheap checks of an alpaca data config: the file and its records, the sizes, the tokenizer's files."""
    if data.train_split not in SPLITS or data.val_split not in SPLITS:
        raise DataError(
            f"data.train_split={data.train_split!r}, data.val_split={data.val_split!r}: an Alpaca file "
            f"has the splits train and val (data.val_size records held out)"
        )
    for key, low in (("max_length", 8), ("val_size", 1)):
        value = data.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise DataError(f"data.{key}={value!r}: it must be an integer >= {low}")
    if not data.get("root"):
        raise DataError("data.root is not set; point it at an Alpaca-format JSON file (e.g. alpaca_data.json)")
    records = read_alpaca(data.root)
    if data.val_size >= len(records):
        raise DataError(
            f"data.val_size={data.val_size} leaves no training record of the {len(records)} in "
            f"{data.root}; hold out fewer"
        )
    path = _tokenizer_path(data)
    if path is None:
        size = data.get("vocab_size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 259:
            raise DataError(
                f"data.vocab_size={size!r}: the local BPE needs an integer >= 259 (256 bytes + <s>, "
                f"</s>, <pad>); or set data.tokenizer to the checkpoint's tokenizer"
            )
    elif not path.exists():
        raise DataError(
            f"data.tokenizer={path}: no such tokenizer directory or tokenizer.json (the Llama "
            f"checkpoint's directory holds one)"
        )
    elif read_tokenizer:
        load_tokenizer(path)
    return Path(str(data.root)).expanduser()


# ----------------------------------------------------------------------------------------- the model
def _expansion(model_cfg) -> dict | None:
    scalenet = model_cfg.get("scalenet")
    if scalenet is None:
        return None
    scalenet = dict(scalenet)
    if set(scalenet) - {"k", "rank"} or not all(
        isinstance(scalenet.get(k), int) and scalenet[k] >= 1 for k in ("k", "rank")
    ):
        raise ConfigError(
            f"model.scalenet={scalenet}: give dict(k=<depth multiple>, rank=<adapter rank>), e.g. "
            f"dict(k=2, rank=16), or None for the plain model"
        )
    return scalenet


def architecture(cfg):
    """The recipe's ``LlamaConfig`` (``model.config``), as one ConfigError line when it is not one."""
    source = cfg.model.get("config")
    if source is None:
        raise ConfigError(
            "model.config is not set; name the Llama architecture (e.g. 'llama_3_2_1b'), or give a "
            "config.json or checkpoint directory"
        )
    try:
        return llama_config(source.to_dict() if hasattr(source, "to_dict") else source)
    except ValueError as e:
        raise ConfigError(f"model.config: {e}") from None
    except Exception as e:  # transformers' own validation of the fields
        raise ConfigError(
            f"model.config={source} is not a Llama configuration ({type(e).__name__}: "
            f"{str(e).splitlines()[0][:100] if str(e) else ''})"
        ) from None


def check_llama_model(cfg) -> None:
    """The architecture builds (on the meta device), the expansion and trainable set are valid, the tokenizer's
    ids fit the embedding, ``data.max_length`` fits the positions. No file is needed but the tokenizer's."""
    m = cfg.model
    if m.get("pretrained"):
        raise ConfigError(
            "model.pretrained loads depthbench .pth weights; a Hugging Face Llama checkpoint "
            "directory goes in model.weights"
        )
    if m.get("grow"):
        raise ConfigError(
            "model.grow is the vision models' ScaleNet; a Llama is expanded by model.scalenet=dict(k=2, rank=16)"
        )
    config = architecture(cfg)
    scalenet = _expansion(m)
    trainable = m.get("trainable", "all")
    if trainable not in TRAINABLE:
        raise ConfigError(f"model.trainable={trainable!r} is not one of {', '.join(TRAINABLE)}")
    if trainable == "adapters_norms" and not scalenet:
        raise ConfigError("model.trainable='adapters_norms' needs model.scalenet (a plain Llama has no adapters)")
    try:
        with meta_build("meta"):
            build_llama(config, scalenet)
    except Exception as e:
        raise ConfigError(
            f"model.config does not build a Llama ({type(e).__name__}: "
            f"{str(e).splitlines()[0][:100] if str(e) else ''})"
        ) from None
    size = tokenizer_size(cfg.data)
    if size is not None and size > config.vocab_size:
        raise ConfigError(
            f"the tokenizer ({cfg.data.get('tokenizer') or 'local BPE, data.vocab_size'}) has {size} "
            f"ids but the model's embedding has vocab_size={config.vocab_size}; use the checkpoint's "
            f"own tokenizer (data.tokenizer) or a model with a larger vocabulary"
        )
    if cfg.data.max_length > config.max_position_embeddings:
        raise ConfigError(
            f"data.max_length={cfg.data.max_length} is longer than the model's "
            f"max_position_embeddings={config.max_position_embeddings}"
        )


def check_llama_run(cfg) -> None:
    """What training needs on disk besides the data: ``model.weights`` is a checkpoint directory with weights and
    the recipe's architecture; a checkpoint comes with its own tokenizer."""
    weights = cfg.model.get("weights")
    if not weights:
        return
    path = Path(str(weights)).expanduser()
    if not path.is_dir():
        raise ConfigError(
            f"model.weights={weights}: no such directory; give a Hugging Face Llama checkpoint "
            f"directory (config.json + *.safetensors), e.g. meta-llama/Llama-3.2-1B downloaded there"
        )
    if not (path / "config.json").is_file():
        raise ConfigError(f"model.weights={weights} has no config.json; it is not a Hugging Face checkpoint directory")
    if not (sorted(path.glob("*.safetensors")) + sorted(path.glob("pytorch_model*.bin"))):
        raise ConfigError(
            f"model.weights={weights} holds a config.json but no weights (*.safetensors or "
            f"pytorch_model*.bin); download the model's weights there, or set model.weights=None "
            f"for random weights"
        )
    try:
        saved = llama_config(path)
    except Exception as e:
        raise ConfigError(f"model.weights={weights}: {str(e).splitlines()[0][:120]}") from None
    recipe, saved = architecture(cfg), base_config(saved)
    differ = [
        f"{k} {getattr(saved, k, None)} (recipe {getattr(recipe, k, None)})"
        for k in ARCHITECTURE_FIELDS
        if getattr(saved, k, None) != getattr(recipe, k, None)
    ]
    if differ:
        raise ConfigError(
            f"model.weights={weights} is not the recipe's architecture (model.config): {'; '.join(differ)}"
        )
    if not cfg.data.get("tokenizer"):
        raise ConfigError(
            f"data.tokenizer is not set; a pretrained Llama needs its own tokenizer: data.tokenizer={weights}"
        )


def build_llama_model(cfg, pretrained: bool = True):
    """The engine's model of an alpaca recipe: :class:`CausalLMLogits` around the Llama -- ``model.weights``
    loaded when ``pretrained`` (else random weights of ``model.config``), expanded by ``model.scalenet``, with
    ``model.trainable`` set."""
    m = cfg.model
    scalenet = _expansion(m)
    lm = load_llama(m.weights) if pretrained and m.get("weights") else build_llama(architecture(cfg))
    have = getattr(lm.config, "scalenet", None)
    if have:  # a saved expanded model (save_llama): expanded already
        if scalenet and (have["k"], have["rank"]) != (scalenet["k"], scalenet["rank"]):
            raise ConfigError(
                f"model.weights={m.weights} is expanded with k={have['k']}, rank={have['rank']} but "
                f"model.scalenet={scalenet}"
            )
    elif scalenet:
        expand_llama(lm, **scalenet)
    lm.config.use_cache = False
    set_trainable(lm, m.get("trainable", "all"))
    return CausalLMLogits(lm)


# ----------------------------------------------------------------------------------------- Hugging Face Llama
def load_llama(source, *, expand: dict | None = None):
    """A ``LlamaForCausalLM`` (fp32) from a local checkpoint directory -- ``save_pretrained``'s (config.json +
    weights) or :func:`models.scalenet_llama.save_llama`'s (an expanded model: its ties rebuilt) -- or from a
    ``config.json`` (random weights); optionally expanded by ScaleNet (``expand=dict(k=2, rank=16)``,
    :func:`models.scalenet_llama.expand_llama`). Bad paths are one line before anything is loaded."""
    from transformers import LlamaForCausalLM

    path = Path(source).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise DataError(f"{path} has no config.json; give a Hugging Face checkpoint directory (save_pretrained)")
        weights = sorted(path.glob("*.safetensors")) + sorted(path.glob("pytorch_model*.bin"))
        if not weights:
            raise DataError(
                f"{path} holds a config.json but no weights (*.safetensors or pytorch_model*.bin); "
                f"download the model's weights there, or pass the config.json for random weights"
            )
        config = _llama_config(path)
        if getattr(config, "scalenet", None):  # an expanded model: rebuilt and re-tied, then its tensors loaded
            try:
                model = load_saved_llama(path)
            except ValueError as e:
                raise DataError(str(e)) from None
        else:
            for file in weights:  # a .bin is a pickle: checked weights-only and one line here, before transformers
                if file.suffix == ".bin":
                    read_checkpoint(file, mmap=True)
            model = LlamaForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    elif path.is_file() and path.suffix == ".json":
        model = build_llama(_llama_config(path))
    else:
        raise DataError(f"{path}: no such checkpoint directory or config.json")
    return expand_llama(model, **expand) if expand else model


def _llama_config(path):
    try:
        return llama_config(path)
    except ValueError as e:
        raise DataError(str(e)) from None
    except Exception as e:  # transformers' own validation of the fields
        raise DataError(
            f"{path} is not a Llama config.json ({type(e).__name__}: {str(e).splitlines()[0][:120]})"
        ) from None


class InstructionTask(LanguageModelTask):
    """Instruction tuning of a Hugging Face Llama on an Alpaca-format file: the language-model task's criterion,
    metrics and evaluation (response-token loss, accuracy, perplexity) on instruction data and a Llama."""

    name = "alpaca"
    data_types = ("alpaca",)
    data_keys = ("root", "val_size", "max_length", "tokenizer", "vocab_size")
    generated = ()

    def check_data(self, data) -> Path:
        return check_alpaca_data(data)

    def check_model(self, cfg) -> None:
        check_llama_model(cfg)

    def check_run(self, cfg) -> None:
        check_llama_run(cfg)

    def build_dataset(self, data, aug, split: str, is_training: bool):
        return build_instruction_dataset(data, split, is_training)

    def build_model(self, cfg, pretrained: bool = True):
        return build_llama_model(cfg, pretrained)
