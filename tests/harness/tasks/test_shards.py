"""``depthbench data pack`` and the map-style shard reader (``data.type=shards``): the same samples and labels as the
folder, readable by timm's WebDataset reader, and one global order for any number of ranks and loader workers."""

import json
from pathlib import Path

import pytest
import torch
from mmengine import Config

from clitools import run_cli
from fixtures.images import jpeg_folder
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
