"""Language-model data for ``depthbench train`` (StepsNet Table 4): text -> byte-level BPE ids -> packed blocks.

``data.type`` (``configs/_base_/datasets/*_lm.py``):

- ``text``  raw text files, one per split, in ``data.root`` -- WikiText-103's ``wiki.train.tokens``,
            ``wiki.valid.tokens``, ``wiki.test.tokens`` (StepsNet Sec. 4.4 trains on WikiText-103).
- ``kjv``   the embedded default: the King James Bible (public domain, 1611) from Debian's ``bible-kjv`` package
            (``make setup`` installs it), exported once by its ``bible`` program to
            ``~/.cache/depthbench/data/kjv/{train,valid}.txt``: one verse a line, every 20th chapter held out.

Tokenizer: Hugging Face ``tokenizers`` byte-level BPE trained locally on the training split with
``data.vocab_size`` entries (50K, the paper's "vocabulary of size 50K"; the tokenizer itself is [ASSUMED], see
docs/lm.md), cached next to the token ids; or ``data.tokenizer=/path/tokenizer.json`` to use a given one.
Packing: the split's ids (a ``<eos>`` after every line) are concatenated and cut into ``data.seq_len`` + 1
windows that overlap by one token: sample i is ``(ids[iL:(i+1)L], ids[iL+1:(i+1)L+1])`` -- every token is
predicted exactly once per epoch; the tail shorter than a block is dropped.
Each sample is a pair of tensors, so the generic samplers (exact mid-epoch resume) and loop apply unchanged.
"""

from __future__ import annotations

import hashlib
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from harness.core.errors import ConfigError, DataError
from harness.core.files import BadFile, atomic_write, data_cache, is_regular, read_npy, read_text
from harness.engine.evaluation import evaluate
from harness.tasks.losses import TrainingLoss
from harness.engine.models import config_model_on_meta, create_config_model
from harness.engine.tasks import Task

LM_DATA_TYPES = ("text", "kjv")
EOS = "<eos>"
KJV_HELDOUT_EVERY = 20  # every 20th chapter of the Bible is the validation split


# ----------------------------------------------------------------------------------------- corpus files
def export_kjv(root: str | Path | None = None) -> Path:
    """The embedded corpus: the KJV text from Debian's ``bible-kjv`` (its ``bible`` program decompresses it),
    written once as ``train.txt`` / ``valid.txt`` (one verse a line, references dropped)."""
    root = Path(root) if root else data_cache() / "kjv"
    if (root / "valid.txt").is_file():
        return root
    program = shutil.which("bible")
    if program is None:
        raise DataError(
            "the embedded text corpus needs Debian's bible-kjv package (the King James Bible): "
            "run make setup, or apt-get install bible-kjv; or train on WikiText-103 with "
            "configs/stepsnet/*wikitext103* (data.root=/path/to/wikitext-103-raw)"
        )
    out = subprocess.run(
        [program, "-f", "gen1:1-rev22:21"], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120
    )
    lines = out.stdout.splitlines()
    if out.returncode != 0 or len(lines) < 30000:
        raise DataError(
            f"{program} -f gen1:1-rev22:21 gave {len(lines)} verses (exit {out.returncode}); "
            f"reinstall bible-kjv-text (apt-get install --reinstall bible-kjv-text)"
        )
    splits = {"train": [], "valid": []}
    chapters = []
    for line in lines:
        ref, _, verse = line.partition(" ")
        chapter = ref.split(":")[0]  # "Ge1:1" -> "Ge1"
        if not chapters or chapters[-1] != chapter:
            chapters.append(chapter)
        held_out = len(chapters) % KJV_HELDOUT_EVERY == 0
        splits["valid" if held_out else "train"].append(verse.strip())
    root.mkdir(parents=True, exist_ok=True)
    for name, verses in splits.items():  # valid.txt last: its presence means the export is complete
        atomic_write(root / f"{name}.txt", "\n".join(verses) + "\n")  # concurrent first uses each write whole
    return root


def split_file(data, split: str) -> Path:
    """The text file of ``split``, checked (one line naming the path and the layout)."""
    if data.type == "kjv":
        root = export_kjv(data.root)
        path = root / f"{split}.txt"
        if not path.is_file():
            raise DataError(f"data.type=kjv has splits train and valid, not {split!r}")
        return path
    if not data.root:
        raise DataError(
            "data.root is not set; point it at the folder holding wiki.train.tokens, "
            "wiki.valid.tokens and wiki.test.tokens (WikiText-103 raw)"
        )
    path = Path(data.root).expanduser() / split
    if not path.is_file():
        raise DataError(
            f"{path} does not exist; data.root must hold the raw text of each split "
            f"(WikiText-103: wiki.train.tokens, wiki.valid.tokens, wiki.test.tokens)"
        )
    return path


def check_text_data(data) -> Path:
    """Cheap checks of an LM data config (files exist, sizes sane, a given tokenizer loads); returns the root."""
    if data.type not in LM_DATA_TYPES:
        raise DataError(f"data.type={data.type!r} is not a text type ({', '.join(LM_DATA_TYPES)})")
    for key in ("seq_len", "vocab_size"):
        value = data.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < (2 if key == "seq_len" else 260):
            raise DataError(
                f"data.{key}={value!r}: it must be an integer"
                + (" >= 2" if key == "seq_len" else " >= 260 (256 bytes + <eos> + merges)")
            )
    paths = [split_file(data, data.train_split), split_file(data, data.val_split)]
    if data.get("tokenizer"):
        tokenizer = load_tokenizer(data.tokenizer)
        if tokenizer.get_vocab_size() > data.vocab_size:
            raise DataError(
                f"data.tokenizer={data.tokenizer} has {tokenizer.get_vocab_size()} tokens but "
                f"data.vocab_size={data.vocab_size}; set data.vocab_size (and the model's vocab_size) "
                f"to at least {tokenizer.get_vocab_size()}"
            )
    return paths[0].parent


# ----------------------------------------------------------------------------------------- tokenizer
def load_tokenizer(path):
    from tokenizers import Tokenizer

    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"data.tokenizer={path}: no such file (a Hugging Face tokenizer.json)")
    try:
        return Tokenizer.from_file(str(path))
    except Exception as e:
        raise DataError(
            f"data.tokenizer={path} is not a Hugging Face tokenizer.json ({type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''})"
        ) from None


def train_tokenizer(files, vocab_size: int):
    """Byte-level BPE (GPT-2's scheme) trained on ``files`` with ``tokenizers``; ``<eos>`` is id 0."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train([str(f) for f in files], trainer)
    return tokenizer


def _file_key(path: Path) -> str:
    stat = path.stat()
    return f"{path.resolve()}:{stat.st_size}:{int(stat.st_mtime)}"


def cache_dir(data) -> Path:
    """Where this data config's tokenizer and token ids are cached (keyed by the files and the vocabulary)."""
    train = split_file(data, data.train_split)
    key = f"{_file_key(train)}|{data.vocab_size}|{data.get('tokenizer') or 'bpe'}"
    return data_cache() / "lm" / hashlib.sha1(key.encode()).hexdigest()[:16]


def get_tokenizer(data):
    """The run's tokenizer: ``data.tokenizer``, else the cached local BPE (trained on first use)."""
    if data.get("tokenizer"):
        return load_tokenizer(data.tokenizer)
    path = cache_dir(data) / "tokenizer.json"
    if not path.is_file():
        tokenizer = train_tokenizer([split_file(data, data.train_split)], data.vocab_size)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, tokenizer.to_str())
    return load_tokenizer(path)


def encode_lines(tokenizer, lines, batch: int = 4096) -> np.ndarray:
    """Token ids of ``lines``, each followed by ``<eos>``, concatenated (int32)."""
    eos = tokenizer.token_to_id(EOS)
    if eos is None:
        raise DataError(f"the tokenizer has no {EOS} token; train one with depthbench (leave data.tokenizer unset)")
    out = []
    for start in range(0, len(lines), batch):
        for encoding in tokenizer.encode_batch(lines[start : start + batch]):
            out.extend(encoding.ids)
            out.append(eos)
    return np.asarray(out, dtype=np.int32)


def token_ids(data, split: str) -> np.ndarray:
    """The split's token ids (cached as .npy next to the tokenizer)."""
    path = cache_dir(data) / f"{Path(split).name}.ids.npy"
    if is_regular(path):  # a link or a FIFO is no cache: rebuilt below (the write replaces it)
        try:
            return read_npy(path, max_bytes=None, kinds="iu", what="token cache")
        except BadFile as e:
            raise DataError(f"{e}; delete it and depthbench rebuilds it from the text") from None
    tokenizer = get_tokenizer(data)
    if tokenizer.get_vocab_size() > data.vocab_size:
        raise DataError(
            f"the tokenizer has {tokenizer.get_vocab_size()} tokens but data.vocab_size="
            f"{data.vocab_size}; the model's embedding would not cover it"
        )
    text = read_text(split_file(data, split), max_bytes=None, what="text split", errors="strict")  # no FIFO
    # WikiText's raw files: one paragraph or heading a line, blank lines between; the blank ones carry no text
    ids = encode_lines(tokenizer, [line.strip() for line in text.splitlines() if line.strip()])
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda fh: np.save(fh, ids))
    return ids


# ----------------------------------------------------------------------------------------- dataset
class PackedTokens(torch.utils.data.Dataset):
    """Fixed-length next-token samples cut from one long id sequence (see the module docstring)."""

    def __init__(self, ids, seq_len: int):
        self.ids = torch.as_tensor(np.asarray(ids, dtype=np.int64))
        self.seq_len = seq_len
        self.blocks = max(0, (len(self.ids) - 1) // seq_len)

    def __len__(self):
        return self.blocks

    def __getitem__(self, index):
        if not 0 <= index < self.blocks:
            raise IndexError(index)
        window = self.ids[index * self.seq_len : (index + 1) * self.seq_len + 1]
        return window[:-1], window[1:]


def build_token_dataset(data, split: str, is_training: bool):
    dataset = PackedTokens(token_ids(data, split), data.seq_len)
    if len(dataset) == 0:
        raise DataError(f"split {split} has fewer than {data.seq_len + 1} tokens: no {data.seq_len}-token block")
    return dataset


# ----------------------------------------------------------------------------------------- loss and metric
class NextTokenLoss(nn.Module):
    """Mean cross-entropy of every position's next token (logits ``(B, T, V)``, targets ``(B, T)``); negative
    targets carry no loss (-1: the engine's padding of an evaluation batch; -100: Hugging Face's label for
    prompt tokens and padding, harness/tasks/alpaca.py)."""

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        targets = targets.reshape(-1)
        targets = torch.where(targets < 0, torch.full_like(targets, -100), targets)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets, ignore_index=-100)


def perplexity(mean_nll: float) -> float:
    """exp of the mean per-token negative log-likelihood (nats); inf where it would overflow."""
    return math.exp(mean_nll) if mean_nll < 700 else float("inf")


def evaluate_lm(model, loader, backend) -> dict:
    """The engine's evaluation over every validation token (loss = mean token NLL, top1/top5 = next-token
    accuracy %) plus ``ppl`` = exp(loss); ``tokens`` counts what was scored."""
    metrics = evaluate(model, loader, backend)
    metrics["tokens"] = metrics.pop("images")
    metrics["ppl"] = perplexity(metrics["loss"])
    return metrics


class LanguageModelTask(Task):
    """Next-token prediction on packed token blocks (``text``: WikiText-103, ``kjv``: the embedded corpus);
    the loss and accuracy are per token, plus perplexity."""

    name = "lm"
    data_types = LM_DATA_TYPES
    data_keys = ("root", "seq_len", "tokenizer", "vocab_size")
    generated = ("kjv",)  # exported once into the data cache ($DEPTHBENCH_DATA)
    metrics = ("top1", "top5", "loss", "ppl")
    lower_is_better = ("loss", "ppl")
    unit = "seq"

    def check_data(self, data) -> Path:
        return check_text_data(data)

    def check_model(self, cfg) -> None:
        """A language model (it has ``vocab_size``) whose embedding covers the tokenizer's ids and whose positions
        hold ``data.seq_len`` tokens."""
        model = config_model_on_meta(cfg)
        name = cfg.model.name
        vocab, seq_len = getattr(model, "vocab_size", None), getattr(model, "seq_len", None)
        if vocab is None:
            raise ConfigError(
                f"model {name} is not a language model (no vocab_size); data.type={cfg.data.type} "
                f"needs one, e.g. transformer_lm_30m or steps_lm_30m"
            )
        if cfg.data.vocab_size > vocab:
            raise ConfigError(
                f"data.vocab_size={cfg.data.vocab_size} is larger than model {name}'s vocab_size="
                f"{vocab}; set model.vocab_size={cfg.data.vocab_size}"
            )
        if seq_len is not None and cfg.data.seq_len > seq_len:
            raise ConfigError(f"data.seq_len={cfg.data.seq_len} is longer than model {name}'s seq_len={seq_len}")

    def build_dataset(self, data, aug, split: str, is_training: bool):
        return build_token_dataset(data, split, is_training)

    def build_model(self, cfg, pretrained: bool = True):
        return create_config_model(cfg, pretrained)

    def build_criterion(self, cfg, device=None, input_dtype=None):
        """Next-token cross-entropy; no mixup or teacher for token data."""
        return None, TrainingLoss(NextTokenLoss())

    def evaluate(self, model, loader, backend) -> dict:
        return evaluate_lm(model, loader, backend)
