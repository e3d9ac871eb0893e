"""Issue 54, the data and record surfaces: ``data pack``, the shards reader, the image files they share, the
estimate's preflight records, config values, and the files of fine-tuning and language modelling obey the trust
model -- no link out of its place, no FIFO, bounded sizes and pixels, typed values, one line.

Each test builds a crafted input that got through before this pass (checked against main's code). Every call that
could hang on a FIFO or a link loop runs under a timeout (``_in_time``), so a regression fails instead of blocking.
"""

from __future__ import annotations

import os
import pickle
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from clitools import run_cli_here
from fixtures.files import in_time as _in_time  # fails a test that blocks (a FIFO opened, a link loop walked)
from harness.core.errors import DepthbenchError

pytestmark = pytest.mark.tier("integration", tests=("test_data_pack_with_a_link_out_is_one_line_exit_2",))  # the CLI

ROOT = Path(__file__).resolve().parents[3]


def _refused(fn, *needles):
    """``fn()`` raises a one-line DepthbenchError holding every needle and no control character."""
    with pytest.raises(DepthbenchError) as error:
        _in_time(fn)
    message = str(error.value)
    assert "\n" not in message and "\x1b" not in message, message
    for needle in needles:
        assert needle in message, message
    return message


def _folder(root: Path, classes=("a", "b"), per_class: int = 2) -> Path:
    for cls in classes:
        (root / "train" / cls).mkdir(parents=True)
        for i in range(per_class):
            Image.new("RGB", (8, 8), (60 * i, 0, 0)).save(root / "train" / cls / f"{i}.png")
    return root


def _pack(tmp_path: Path, folder: Path | None = None) -> Path:
    from harness.tasks.shards import pack

    pack(folder or _folder(tmp_path / "folder"), tmp_path / "shards", splits=("train",), shard_size=2)
    return tmp_path / "shards"


def _bomb_png(side: int = 10000) -> bytes:
    """A valid, complete 1-bit PNG of ``side``² pixels (100 Mpx: over Pillow's 89.5 Mpx threshold, under twice it,
    so Pillow itself only warns and decodes ~400 MB) in ~20 kB."""

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    row = b"\0" + b"\0" * ((side + 7) // 8)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(row * side, 9))
        + chunk(b"IEND", b"")
    )


# ------------------------------------------------------------------------------------------------ data pack
def test_pack_refuses_a_link_out_of_the_image_folder(tmp_path):
    from harness.tasks.shards import pack

    folder = _folder(tmp_path / "folder")
    secret = tmp_path / "secret.png"
    Image.new("RGB", (4, 4), (1, 2, 3)).save(secret)
    (folder / "train" / "a" / "private.png").symlink_to(secret)
    _refused(lambda: pack(folder, tmp_path / "out", splits=("train",)), "symbolic link out of the data root")
    assert not (tmp_path / "out").exists()


def test_pack_finishes_on_a_link_loop_and_skips_a_fifo_image(tmp_path):
    from harness.tasks.shards import ShardDataset, pack

    folder = _folder(tmp_path / "folder")
    (folder / "train" / "a" / "loop").symlink_to(folder / "train")
    os.mkfifo(folder / "train" / "b" / "fifo.png")
    info = _in_time(lambda: pack(folder, tmp_path / "out", splits=("train",)))
    assert info["splits"]["train"]["num_samples"] == 4
    assert sorted(ShardDataset(tmp_path / "out", "train").paths.tolist()) == [
        "a/0.png",
        "a/1.png",
        "b/0.png",
        "b/1.png",
    ]


def test_data_pack_with_a_link_out_is_one_line_exit_2(tmp_path):
    folder = _folder(tmp_path / "folder")
    (folder / "train" / "a" / "out").symlink_to(tmp_path)
    code, _, err = run_cli_here("data", "pack", folder, tmp_path / "shards", "--splits", "train")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "symbolic link out of the data root" in lines[0], err


# ------------------------------------------------------------------------------------------------ the shards reader
def _rewrite_index(folder: Path, **changes):
    from harness.tasks.shards import index_name

    path = folder / index_name("train")
    with np.load(path) as index:
        arrays = {key: index[key] for key in index.files}
    arrays.update(changes)
    path.unlink()
    with open(path, "wb") as fh:  # np.savez writes object arrays pickled
        np.savez(fh, **arrays)


def test_a_shard_named_by_an_absolute_path_or_a_parent_is_refused(tmp_path):
    from harness.tasks.shards import ShardDataset

    shards = _pack(tmp_path)
    secret = tmp_path / "secret.tar"
    secret.write_bytes((shards / "train-000000.tar").read_bytes())
    for name in (str(secret), "../secret.tar"):
        _rewrite_index(shards, shards=np.asarray([name, "train-000001.tar"]))
        _refused(lambda: ShardDataset(shards, "train"), "not a file name in")


def test_a_shard_that_is_a_link_out_of_the_root_or_a_fifo_is_refused(tmp_path):
    from harness.tasks.shards import ShardDataset

    shards = _pack(tmp_path)
    moved = tmp_path / "elsewhere.tar"
    os.replace(shards / "train-000000.tar", moved)
    (shards / "train-000000.tar").symlink_to(moved)
    _refused(lambda: ShardDataset(shards, "train"), "train-000000.tar", "symbolic link")
    (shards / "train-000000.tar").unlink()
    os.mkfifo(shards / "train-000000.tar")
    _refused(lambda: ShardDataset(shards, "train"), "train-000000.tar", "FIFO")


@pytest.mark.parametrize(
    "change, needle",
    [
        (dict(size=np.asarray([1 << 40, 10, 10, 10])), "size outside"),
        (dict(offset=np.asarray([-512, 512, 0, 512])), "negative offset"),
        (dict(label=np.asarray([0, 0, 1, 7])), "label outside the 2 classes"),
        (dict(shard=np.asarray([0, 0, 1, 5], np.int32)), "outside its 2 shards"),
        (dict(offset=np.asarray([512, 512, 0, 1 << 20])), "past the end of its shard"),
        (dict(label=np.asarray([0, 0, 1, 1], object)), "holds object"),  # a pickled array
        (dict(label=np.asarray([[0, 0], [1, 1]])), "not a list of integers"),
        (dict(path=np.asarray([1, 2, 3, 4])), "not a list of strings"),
    ],
)
def test_a_bad_shard_index_is_one_line_before_any_read(tmp_path, change, needle):
    from harness.tasks.shards import ShardDataset

    shards = _pack(tmp_path)
    _rewrite_index(shards, **change)
    _refused(lambda: ShardDataset(shards, "train"), "shard index", needle)


def test_an_index_whose_header_claims_a_huge_array_is_refused_before_numpy_allocates_it(tmp_path):
    from harness.tasks.shards import ShardDataset, index_name

    shards = _pack(tmp_path)
    path = shards / index_name("train")
    with np.load(path) as index:
        arrays = {key: index[key] for key in index.files}
    import zipfile

    path.unlink()
    with zipfile.ZipFile(path, "w") as archive:
        for key, array in arrays.items():
            with archive.open(f"{key}.npy", "w") as member:
                if key == "label":  # a header claiming 2^40 int64 labels over 32 bytes of data
                    np.lib.format.write_array_header_1_0(
                        member, {"descr": "<i8", "fortran_order": False, "shape": (1 << 40,)}
                    )
                    member.write(array.tobytes())
                else:
                    np.lib.format.write_array(member, array)
    _refused(lambda: ShardDataset(shards, "train"), "claims 8,796,093,022,208 bytes of data but holds 32")


@pytest.mark.parametrize(
    "info, needle",
    [
        ("[" * 100000 + "]" * 100000, "nested more than"),
        ("[1, 2]", "holds a list"),
        ('{"class_to_idx": [1, 2]}', "class_to_idx"),
        ('{"class_to_idx": {"a": "x"}}', "class_to_idx"),
    ],
)
def test_a_deep_or_list_typed_info_json_is_one_line(tmp_path, info, needle):
    from harness.tasks.shards import ShardDataset

    shards = _pack(tmp_path)
    (shards / "_info.json").write_text(info)
    _refused(lambda: ShardDataset(shards, "train"), "_info.json", needle)


def test_a_decompression_bomb_inside_a_shard_is_refused_as_in_a_folder(tmp_path):
    from harness.tasks.image import ImageFolder
    from harness.tasks.shards import ShardDataset

    folder = _folder(tmp_path / "folder")
    (folder / "train" / "b" / "bomb.png").write_bytes(_bomb_png())
    bomb = next(i for i, (path, _) in enumerate(ImageFolder(folder / "train").samples) if path.endswith("bomb.png"))
    _refused(lambda: ImageFolder(folder / "train")[bomb], "bomb.png", "more than the 89,478,485")
    dataset = ShardDataset(_pack(tmp_path, folder), "train")
    bomb = next(i for i, path in enumerate(dataset.paths) if path.endswith("bomb.png"))
    _refused(lambda: dataset[bomb], "bomb.png", "more than the 89,478,485")


def test_image_and_shard_names_reach_an_error_line_without_terminal_escapes(tmp_path):
    from harness.tasks.image import ImageFolder
    from harness.tasks.shards import ShardDataset

    folder = _folder(tmp_path / "folder")
    (folder / "train" / "b" / "x\x1b]0;owned\x07\x1b[2J.jpg").write_text("<html>not an image</html>")
    dataset = ImageFolder(folder / "train")
    bad = next(i for i, (path, _) in enumerate(dataset.samples) if "owned" in path)
    assert "x?]0;owned??[2J.jpg" in _refused(lambda: dataset[bad], "does not decode")
    shards = ShardDataset(_pack(tmp_path, folder), "train")
    bad = next(i for i, path in enumerate(shards.paths) if "owned" in path)
    assert "x?]0;owned??[2J.jpg" in _refused(lambda: shards[bad], "does not decode")


def _random_array(rng):
    kinds = [np.int8, np.int64, np.uint64, np.float64, "U3", "S3", bool, object]
    shape = tuple(int(n) for n in rng.integers(0, 6, rng.integers(0, 3)))
    kind = kinds[rng.integers(len(kinds))]
    values = (
        rng.integers(-(1 << 62), 1 << 62, shape, dtype=np.int64) if rng.random() < 0.5 else rng.integers(-3, 5, shape)
    )
    return values.astype(kind) if kind is not object else np.asarray(values.tolist(), object)


def _binary_documents(rng, good: bytes, save) -> list[bytes]:
    """Random bytes, truncations of a good file, and ``save(buffer)`` of random arrays, 40 times."""
    import io

    documents = [b"", b"PK", b"\x93NUMPY", good[: len(good) // 2], good[:-30], rng.bytes(4000)]
    for _ in range(40):
        buffer = io.BytesIO()
        save(buffer)
        documents.append(buffer.getvalue())
    return documents


def _survives(path: Path, documents: list[bytes], read) -> list[str]:
    failures = []
    for document in documents:
        path.write_bytes(document)
        try:
            _in_time(read)
        except DepthbenchError as e:
            if "\n" in str(e):
                failures.append(f"not one line: {e}")
        except Exception as e:  # noqa: BLE001 - what the test looks for
            failures.append(f"{type(e).__name__}: {str(e)[:100]}")
    return failures


def test_the_binary_readers_survive_random_and_adversarial_files(tmp_path):
    """The shard index (.npz) and every .npy (the LM token cache's reader, read_npy) are binary: a fuzz of their
    own (random bytes, truncations, random arrays of random types and shapes); ``_info.json`` is in the record fuzz
    (test_trust_files.py). Each read returns or raises one DepthbenchError line."""
    from harness.core.files import read_npy
    from harness.tasks.shards import ShardDataset, index_name

    rng = np.random.default_rng(int(os.environ.get("DEPTHBENCH_FUZZ_SEED", "0")))
    shards = _pack(tmp_path)
    index = shards / index_name("train")
    keys = ("shard", "offset", "size", "label", "path", "shards")
    failures = _survives(
        index,
        _binary_documents(
            rng,
            index.read_bytes(),
            lambda fh: np.savez(fh, **{key: _random_array(rng) for key in keys if rng.random() > 0.1}),
        ),
        lambda: ShardDataset(shards, "train"),
    )
    cache = tmp_path / "train.txt.ids.npy"
    with open(cache, "wb") as fh:
        np.save(fh, np.arange(10, dtype=np.int32))
    failures += _survives(
        cache,
        _binary_documents(rng, cache.read_bytes(), lambda fh: np.save(fh, _random_array(rng), allow_pickle=True)),
        lambda: read_npy(cache, what="token cache"),
    )
    assert not failures, "\n".join(failures[:10])


# ------------------------------------------------------------------------------------------------ preflight records
def test_bad_all_reduce_rows_and_gmacs_in_a_preflight_record_never_reach_the_estimate(tmp_path):
    import json

    from harness.core.config import load_config
    from harness.measure import estimate as est
    from harness.measure.preflight import read_records

    config = "configs/stepsnet/resnet18_8xb128-300e_in1k.py"
    cfg = load_config(config, ["data.train_subset=2560"])
    ident = est.identity(cfg, None)
    layout = est.Layout(nodes=2, gpus_per_node=8)
    folder = tmp_path / "preflight"
    (folder / "empty").mkdir(parents=True)
    (folder / "empty" / "preflight.json").write_bytes(b"")  # a zero-byte record: skipped
    record = {
        "format": "depthbench-preflight/1",
        "time": "2026-11-29",
        "device": "cuda",
        "world_size": 8,
        "allreduce": {
            "ranks": 8,
            "rows": [
                {"bytes": 0, "busbw_gbs": 10.0},
                {"bytes": 4096, "busbw_gbs": "9"},
                {"busbw_gbs": 5.0},
                {"bytes": 1 << 20, "busbw_gbs": -1.0},
            ],
        },
        "configs": [
            {**ident, "micro_batch": 64, "step_ms": 250.0, "world": 8, "grad_bytes": 46_000_000},
            {**ident, "model": "resnet50", "micro_batch": 64, "step_ms": 400.0, "gmacs": -4.1},
        ],
    }
    (folder / "r").mkdir()
    (folder / "r" / "preflight.json").write_text(json.dumps(record))
    records = read_records(tmp_path)
    assert len(records) == 1
    job = est.Job("ResNet-18", config, ["data.train_subset=2560"])
    (row,) = est.estimate([job], layout, records=records, bench_rows=[]).rows
    assert row.step_s == pytest.approx(0.25) and row.scaling is not None and row.scaling.allreduce_s is None
    other = {**ident, "model": "steps_resnet18", "micro_batch": 64}
    assert est.timing_by_flops(other, layout, records, gmacs=lambda _: 1.8) is None  # the -4.1 GMACs entry is out


# ------------------------------------------------------------------------------------------------ config values
@pytest.mark.parametrize(
    "override, message",
    [
        ("data.mean=[1e999, 0.5, 0.5]", "data.mean=[inf, 0.5, 0.5]: it must be a list of numbers in [0, 1]"),
        ("data.std=[0, 0, 0]", "data.std=[0, 0, 0]: it must be a list of numbers in (0, 1]"),
        ("data.std=[]", "data.std=[]: it must be a list of numbers in (0, 1]"),
        ("optim.lr=1e999", "optim.lr=inf: it must be a number in (0, 100]"),
        ("optim.lr=1000.0", "optim.lr=1000.0: it must be a number in (0, 100]"),
        ("aug.mixup=1e999", "aug.mixup=inf: it must be a number in [0, inf)"),  # NaN/inf: no value of any key
    ],
)
def test_normalisation_and_learning_rate_values_are_typed_and_bounded(override, message, tmp_path):
    from harness.commands.train import run

    work_dir = tmp_path / "run"
    with pytest.raises(DepthbenchError) as error:
        run("configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py", work_dir=work_dir, overrides=[override])
    assert str(error.value) == message and error.value.exit_code == 2 and not work_dir.exists()


# ------------------------------------------------------------------------------------------------ runs, caches, weights
def test_a_fifo_as_load_from_is_one_line_at_once(tmp_path):
    from downstream.finetune import read_any_checkpoint

    os.mkfifo(tmp_path / "weights.pth")
    _refused(lambda: read_any_checkpoint(str(tmp_path / "weights.pth")), "weights.pth", "not a regular file")


def test_a_log_txt_or_metrics_link_in_a_run_is_one_line_before_the_run_starts(tmp_path):
    from harness.core.rundir import RunDir

    target = tmp_path / "precious.txt"
    target.write_text("precious\n")
    for name in ("log.txt", "metrics.jsonl"):
        run = tmp_path / name.replace(".", "-")
        run.mkdir()
        (run / name).symlink_to(target)
        _refused(lambda: RunDir.create("exp", path=run), name, "symbolic link")
        (run / "meta.json").write_text('{"status": "preempted"}')
        _refused(lambda: RunDir.open(run), name, "symbolic link")  # a resume
    assert target.read_text() == "precious\n"


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


def test_a_llama_bin_of_pickles_is_one_line(tmp_path):
    from harness.tasks.alpaca import load_llama

    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "config.json").write_text((ROOT / "harness/assets/llama/tiny-llama.json").read_text())

    class Payload:
        def __reduce__(self):
            return (os.system, ("true",))

    (folder / "pytorch_model.bin").write_bytes(pickle.dumps({"w": Payload()}))
    _refused(lambda: load_llama(folder), "pytorch_model.bin", "not a readable PyTorch state dict")


def test_diagnose_reads_an_image_folder_as_every_image_reader_does(tmp_path):
    """``diagnose --data FOLDER`` used torchvision's ImageFolder, which follows a link out of the folder."""
    import timm

    from harness.measure.diagnose import example_batch

    folder = _folder(tmp_path / "folder")
    (folder / "train" / "a" / "out").symlink_to(tmp_path)
    model = timm.create_model("resnet18", num_classes=2)
    _refused(lambda: example_batch(model, str(folder / "train"), 32, 2, 0, "cpu"), "symbolic link out of the data root")
