"""``depthbench data pack`` and the map-style shard reader (``data.type=shards``): the same samples and labels as the
folder, readable by timm's WebDataset reader, and one global order for any number of ranks and loader workers."""

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine import Config
from PIL import Image

from clitools import run_cli
from fixtures.files import in_time as _in_time
from fixtures.files import refused as _refused
from fixtures.images import bomb_png as _bomb_png
from fixtures.images import jpeg_folder
from fixtures.images import packed_shards as _pack
from fixtures.images import png_folder as _folder
from harness.core.errors import DataError
from harness.engine.data import build_loaders, set_train_epoch

ROOT = Path(__file__).resolve().parents[3]


def shards_cfg(root: Path, pipeline: str = "cpu", workers: int = 0, **data):
    cfg = Config.fromfile(str(ROOT / "configs/_base_/datasets/imagenet.py"))
    cfg.data.update(
        type="shards",
        root=str(root),
        num_classes=3,
        input_size=24,
        workers=workers,
        repeated_aug=False,
        pin_memory=False,
        **data,
    )
    cfg.loader = dict(pipeline=pipeline, persistent_workers=False)
    cfg.seed = 0
    return cfg


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    from harness.commands.data import run_pack

    tmp = tmp_path_factory.mktemp("shards")
    folder = jpeg_folder(tmp / "folder")
    info = run_pack(folder, tmp / "shards", shard_size=4)
    return folder, tmp / "shards", info


def test_pack_keeps_every_image_s_bytes_and_timm_s_label(packed):
    from timm.data import create_dataset

    from harness.tasks.shards import ShardDataset

    folder, shards, info = packed
    for split in ("train", "val"):
        reference = create_dataset("", root=str(folder), split=split)  # timm's ImageFolder (natural class order)
        dataset = ShardDataset(shards, split)
        assert len(dataset) == len(reference) == info["splits"][split]["num_samples"]
        for i in range(len(dataset)):
            data, target = dataset.read(i)
            path, expected = reference.reader.samples[i]
            if path.endswith(".png"):
                assert data.startswith(b"\x89PNG")
            else:
                assert data == Path(path).read_bytes()
            assert target == expected
    assert info["splits"]["train"]["shard_lengths"] == [4, 4, 4, 4, 2]


def test_timm_s_webdataset_reader_reads_the_shards(packed):
    from timm.data import create_dataset

    from harness.tasks.shards import ShardDataset

    _, shards, _ = packed
    streamed = create_dataset("wds/x", root=str(shards), split="val", is_training=False, batch_size=1)
    labels = sorted(int(target) for _, target in streamed)
    assert labels == sorted(ShardDataset(shards, "val").targets.tolist())


def test_a_webdataset_split_is_checked_before_training_like_the_folder(tmp_path):
    """data.type=wds hands timm's WebDataset reader what _info.json says: shard names (joined to the root), and a
    sample count it trusts as the epoch's length (it repeats the shards until it is reached). Checked first, one
    line naming the file: no name out of the root, no link, no FIFO, a count the shards' bytes can hold."""
    import copy

    from harness.tasks.image import check_data
    from harness.tasks.shards import check_wds

    shards = _pack(tmp_path)
    info_path = shards / "_info.json"
    info = json.loads(info_path.read_text())
    assert info["splits"]["train"]["filenames"] == ["train-000000.tar", "train-000001.tar"]
    check_wds(shards, "train")
    check_wds(shards, "train-{000000..000001}.tar|4")
    secret = tmp_path / "secret.tar"
    secret.write_bytes((shards / "train-000000.tar").read_bytes())

    def hostile(**split):
        changed = copy.deepcopy(info)
        changed["splits"]["train"].update(split)
        info_path.write_text(json.dumps(changed))
        return lambda: check_wds(shards, "train")

    for change, needle in (
        ({"filenames": ["../secret.tar", "train-000001.tar"]}, "names the shard '../secret.tar', not a file in"),
        ({"filenames": [str(secret), "train-000001.tar"]}, f"names the shard '{secret}', not a file in"),
        ({"num_samples": 10**9, "shard_lengths": [10**9 - 2, 2]}, "claims 1,000,000,000 samples, but its 2 shards"),
        ({"num_samples": 5}, "num_samples 5 is not the sum of its shard_lengths (4)"),
        ({"shard_lengths": [2, -2], "num_samples": 0}, "shard_lengths is not one sample count per shard"),
        ({"num_samples": True}, "num_samples True is not the sum"),
    ):
        _refused(hostile(**change), str(info_path), needle)
    _refused(lambda: check_wds(shards, "train-{000000..000001}.tar|999999"), "claims 999,999 samples")
    info_path.write_text(json.dumps(info))
    moved = tmp_path / "elsewhere.tar"
    _first_shard_as(shards, "link", moved)
    _refused(lambda: check_wds(shards, "train"), "shard", "train-000000.tar is a symbolic link")
    _first_shard_as(shards, "fifo")
    cfg = shards_cfg(shards, train_split="train", val_split="train")
    cfg.data.type = "wds"
    _refused(lambda: check_data(cfg.data), "shard", "train-000000.tar is a FIFO")
    (shards / "train-000000.tar").unlink()
    os.replace(moved, shards / "train-000000.tar")
    info_path.unlink()
    os.mkfifo(info_path)
    _refused(lambda: check_wds(shards, "train"), "_info.json is a FIFO")


@pytest.mark.tier("integration")
def test_pack_refuses_bad_input_in_one_line(tmp_path, packed):
    folder, shards, _ = packed
    for argv, needle in (
        (["data", "pack", str(tmp_path / "none"), str(tmp_path / "out")], "has no split folder"),
        (["data", "pack", str(folder), str(shards)], "not an empty folder"),
    ):
        result = run_cli(*argv)
        assert result.returncode == 2 and needle in result.stderr and len(result.stderr.strip().splitlines()) == 1
    with pytest.raises(DataError, match="depthbench data pack"):
        from harness.engine.data import check_data

        check_data(shards_cfg(tmp_path).data)


def epoch_samples(cfg, world_size: int, batch: int = 2, epoch: int = 1, start_batch: int = 0) -> list:
    """The epoch's training samples in global order: rank r's sample p sits at slot p * world_size + r."""
    per_rank = []
    for rank in range(world_size):
        train, _ = build_loaders(cfg, rank=rank, world_size=world_size, micro_batch=batch)
        set_train_epoch(train, epoch, start_batch=start_batch)
        finish = train.finish or (lambda x: x)
        per_rank.append([(image, int(t)) for x, y in train for image, t in zip(finish(x), y)])
    length = min(len(samples) for samples in per_rank)
    return [per_rank[r][p] for p in range(length) for r in range(world_size)]


@pytest.mark.parametrize("pipeline", ["cpu", "device"])
def test_one_global_order_for_1_2_and_4_ranks_and_any_worker_count(packed, pipeline):
    """1x1, 1x2 and 2x2 ranks (one process each here) and 0 or 2 workers: the same augmented samples in the same
    global order (each rank's share interleaved), so a run's data does not depend on the cluster's shape."""
    _, shards, _ = packed
    reference = epoch_samples(shards_cfg(shards, pipeline, workers=0), world_size=1)
    assert len(reference) == 18
    for world_size, workers in ((1, 2), (2, 0), (4, 2)):
        samples = epoch_samples(shards_cfg(shards, pipeline, workers=workers), world_size)
        assert len(samples) >= 8
        for (a, ta), (b, tb) in zip(reference, samples):
            assert ta == tb and torch.equal(a, b)


def test_a_resumed_epoch_continues_with_the_uninterrupted_samples(packed):
    _, shards, _ = packed
    cfg = shards_cfg(shards, "device", workers=2)
    whole = epoch_samples(cfg, world_size=2)
    resumed = epoch_samples(cfg, world_size=2, start_batch=2)  # 2 batches of 2 per rank: 8 samples trained already
    assert len(resumed) == len(whole) - 8
    for (a, ta), (b, tb) in zip(whole[8:], resumed):
        assert ta == tb and torch.equal(a, b)


@pytest.mark.parametrize("world_size, start_batch", [(1, 4), (4, 1)])
def test_an_epoch_resumed_on_another_number_of_ranks_continues_with_the_same_samples(packed, world_size, start_batch):
    """Saved on 2 ranks after 8 samples of the epoch's global order (2 batches of 2 per rank), resumed on 1 or 4
    (elastic resume, issue 41): the samples not yet seen, in the same global order, augmented the same."""
    _, shards, _ = packed
    cfg = shards_cfg(shards, "device", workers=0)
    whole = epoch_samples(cfg, world_size=2)
    resumed = epoch_samples(cfg, world_size=world_size, start_batch=start_batch)  # 8 samples in, on any rank count
    # the tail each rank count drops (drop_last) differs; what both train is compared, at least a batch per rank
    assert min(len(resumed), len(whole) - 8) >= 2 * world_size
    for (a, ta), (b, tb) in zip(whole[8:], resumed):
        assert ta == tb and torch.equal(a, b)


def test_every_rank_gets_the_same_number_of_batches_from_uneven_shards(packed):
    _, shards, info = packed
    assert len(set(info["splits"]["train"]["shard_lengths"])) > 1
    lengths = [len(build_loaders(shards_cfg(shards), rank=r, world_size=3, micro_batch=2)[0]) for r in range(3)]
    assert len(set(lengths)) == 1 and lengths[0] > 0
    index = json.loads((shards / "_info.json").read_text())["splits"]["train"]["index"]
    assert (shards / index).is_file()


@pytest.mark.tier("integration")
def test_pack_counts_in_words(tmp_path):
    """Issue 58 item 9: "2 images in 1 shard", not "1 shards" (and a shortened schedule says "1 epoch")."""
    from clitools import run_cli_here
    from harness.engine.schedule import describe_scale

    folder = jpeg_folder(tmp_path / "folder", per_class=2, classes=1)  # 2 train, 2 val images
    code, out, err = run_cli_here("data", "pack", folder, tmp_path / "shards", "--shard-size", "8")
    assert code == 0, err
    assert "train: 2 images in 1 shard\n" in out and "val: 2 images in 1 shard\n" in out
    assert describe_scale(None, 20, 1, "epochs") == "1 epoch (the config's 20)"
    assert describe_scale("coco-shapes 128px, 40 iterations", 40, 1, "iterations") == "coco-shapes 128px, 1 iteration"


# ------------------------------------------------------------------------------------------------ data pack
def test_pack_refuses_a_link_out_of_the_image_folder(tmp_path):
    from harness.tasks.shards import pack

    folder = _folder(tmp_path / "folder")
    secret = tmp_path / "secret.png"
    Image.new("RGB", (4, 4), (1, 2, 3)).save(secret)
    (folder / "train" / "a" / "private.png").symlink_to(secret)
    _refused(lambda: pack(folder, tmp_path / "out", splits=("train",)), "symbolic link out of the data root")
    assert not (tmp_path / "out").exists()


def test_pack_finishes_on_a_link_loop_and_refuses_a_fifo_image(tmp_path):
    from harness.tasks.shards import ShardDataset, pack

    folder = _folder(tmp_path / "folder")
    (folder / "train" / "a" / "loop").symlink_to(folder / "train")
    os.mkfifo(folder / "train" / "b" / "fifo.png")
    _refused(lambda: pack(folder, tmp_path / "out", splits=("train",)), "fifo.png", "is a FIFO", "remove it")
    assert not (tmp_path / "out").exists()
    (folder / "train" / "b" / "fifo.png").unlink()
    info = _in_time(lambda: pack(folder, tmp_path / "out", splits=("train",)))
    assert info["splits"]["train"]["num_samples"] == 4
    assert sorted(ShardDataset(tmp_path / "out", "train").paths.tolist()) == [
        "a/0.png",
        "a/1.png",
        "b/0.png",
        "b/1.png",
    ]


# ------------------------------------------------------------------------------------------------ the shards reader
def _first_shard_as(folder: Path, kind: str, elsewhere: Path | None = None) -> None:
    """The split's first shard made a link to its bytes moved to ``elsewhere`` (outside the root), or a FIFO in
    place of whatever is there."""
    shard = folder / "train-000000.tar"
    if kind == "link":
        os.replace(shard, elsewhere)
        shard.symlink_to(elsewhere)
    else:
        shard.unlink()
        os.mkfifo(shard)


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


def test_wds_data_without_webdataset_is_one_line(tmp_path, monkeypatch):
    """A machine without webdataset (the GPU node has none) reading data.type='wds': one line saying what to
    install, not an import traceback on every rank."""
    from harness.tasks.shards import check_wds

    monkeypatch.setitem(sys.modules, "webdataset.shardlists", None)  # import of it raises ImportError
    _refused(lambda: check_wds(_pack(tmp_path), "train"), "data.type='wds' needs the webdataset package")


def test_a_shard_that_is_a_link_out_of_the_root_or_a_fifo_is_refused(tmp_path):
    from harness.tasks.shards import ShardDataset

    shards = _pack(tmp_path)
    _first_shard_as(shards, "link", tmp_path / "elsewhere.tar")
    _refused(lambda: ShardDataset(shards, "train"), "train-000000.tar", "symbolic link")
    _first_shard_as(shards, "fifo")
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
