"""harness/engine/data.py: dataset layout checks, the samplers behind exact resume, seeded augmentation, the
loaders (with and without workers, WebDataset shards, uint8 batches normalised on the device, a pipeline's own
background feeder)."""

from pathlib import Path

import pytest
import torch
from mmengine import Config

from harness.core.errors import DataError
from harness.engine.data import (
    EvalSampler,
    SeededSamples,
    TrainSampler,
    build_dataset,
    build_loaders,
    check_data,
    set_train_epoch,
)
from harness.tasks.image import export_digits

from fixtures.configs import digits_cfg, imagenet_digits_cfg

ROOT = Path(__file__).resolve().parents[3]


def test_missing_and_malformed_datasets_fail_in_one_line(tmp_path):
    cfg = Config.fromfile(str(ROOT / "configs/_base_/datasets/imagenet.py"))
    cfg.data.root = str(tmp_path / "nowhere")
    with pytest.raises(DataError) as e:
        check_data(cfg.data)
    assert str(tmp_path / "nowhere") in str(e.value) and "<class>/<image>" in str(e.value)
    (tmp_path / "in1k" / "train").mkdir(parents=True)
    cfg.data.root = str(tmp_path / "in1k")
    with pytest.raises(DataError, match="no class folders"):
        check_data(cfg.data)
    (tmp_path / "in1k" / "train" / "n01").mkdir()
    (tmp_path / "in1k" / "train" / "n01" / "notes.txt").write_text("x")
    with pytest.raises(DataError, match="holds no images"):
        check_data(cfg.data)
    cifar = Config.fromfile(str(ROOT / "configs/_base_/datasets/cifar10.py"))
    cifar.data.root = str(tmp_path)
    with pytest.raises(DataError) as e:
        check_data(cifar.data)
    assert "data_batch_1" in str(e.value) and "\n" not in str(e.value)


def test_train_sampler_resumes_where_it_stopped(tmp_path):
    dataset = list(range(50))
    full = list(TrainSampler(dataset, rank=0, world_size=1, seed=3))
    sampler = TrainSampler(dataset, rank=0, world_size=1, seed=3)
    sampler.set_epoch(0, start=20)
    assert list(sampler) == full[20:] and len(sampler) == 30
    # a new epoch is a new order with new augmentation seeds
    sampler.set_epoch(1)
    epoch1 = list(sampler)
    assert [i for i, _, _ in epoch1] != [i for i, _, _ in full] and sorted(i for i, _, _ in epoch1) == dataset
    assert {s for _, s, _ in epoch1}.isdisjoint({s for _, s, _ in full})


def test_ranks_split_an_epoch_and_eval_covers_every_sample_once():
    dataset = list(range(11))
    shares = [list(TrainSampler(dataset, rank=r, world_size=2, seed=0)) for r in range(2)]
    assert [len(share) for share in shares] == [5, 5]  # the tail of 1 sample is left out: no padding duplicates
    indices = [i for share in shares for i, _, _ in share]
    assert len(set(indices)) == 10 and set(indices) <= set(dataset)
    seeds = [s for share in shares for _, s, _ in share]
    assert len(set(seeds)) == len(seeds)  # every slot of the epoch gets its own augmentation seed
    evals = [list(EvalSampler(dataset, r, 3)) for r in range(3)]
    assert len({len(e) for e in evals}) == 1  # equal lengths: collective-safe
    valid = sorted(i for e in evals for i, _, ok in e if ok)
    assert valid == dataset


def global_stream(dataset, world: int, micro: int, epoch: int, start: int = 0, **kwargs) -> list:
    """What all ``world`` ranks train on, micro-batch by micro-batch, as the loader's drop_last batches of each
    rank's sampler: one list of (index, seed) per global micro-batch, each sorted (the ranks see it at once)."""
    shares = []
    for rank in range(world):
        sampler = TrainSampler(dataset, rank=rank, world_size=world, seed=7, **kwargs)
        sampler.set_epoch(epoch, start)
        items = [(i, s) for i, s, _ in sampler]
        shares.append([items[k : k + micro] for k in range(0, len(items) // micro * micro, micro)])
    assert len({len(share) for share in shares}) == 1  # every rank the same number of batches
    return [sorted(x for share in shares for x in share[k]) for k in range(len(shares[0]))]


@pytest.mark.parametrize("repeated", [False, True])
def test_train_order_is_the_same_on_1_2_and_4_ranks_and_resumes_across_them(repeated):
    """Elastic resume (issue 41): the global micro-batches (batch_size / grad_accum = 8 samples) are the same
    samples with the same augmentation seeds on 1, 2 and 4 ranks; a run that consumed 3 of them on N ranks and
    continues on M trains exactly the rest."""
    dataset = list(range(300 if repeated else 53))
    kwargs = dict(repeated_aug=repeated, num_repeats=3)
    streams = {world: global_stream(dataset, world, 8 // world, 2, **kwargs) for world in (1, 2, 4)}
    assert streams[1] == streams[2] == streams[4]
    assert len(streams[1]) == (256 if repeated else 53) // 8
    seen = [x for batch in streams[1] for x in batch]
    assert len({s for _, s in seen}) == len(seen)  # one augmentation seed per slot
    for before, after in ((4, 1), (1, 2), (2, 4)):
        head = global_stream(dataset, before, 8 // before, 2, **kwargs)[:3]
        rest = global_stream(dataset, after, 8 // after, 2, start=3 * 8, **kwargs)
        assert head + rest == streams[1], (before, after)
    with pytest.raises(ValueError, match="not a whole number of rounds"):
        TrainSampler(dataset, rank=0, world_size=4, seed=7).set_epoch(0, start=6)


def test_augmentation_depends_only_on_the_sample_seed(tmp_path):
    cfg = digits_cfg(tmp_path, input_size=16)
    cfg.aug.auto_augment = "cifar10"  # a random pipeline: crop + AutoAugment
    dataset = SeededSamples(build_dataset(cfg.data, cfg.aug, "train", is_training=True))
    torch.manual_seed(123)
    a = dataset[(5, 77, True)][0]
    torch.manual_seed(456)  # the global RNG state does not matter ...
    state = torch.get_rng_state()
    b = dataset[(5, 77, True)][0]
    assert torch.equal(a, b)
    assert torch.equal(torch.get_rng_state(), state)  # ... and is left untouched in the main process
    assert not torch.equal(a, dataset[(5, 78, True)][0])


def test_loader_batches_are_identical_with_and_without_workers(tmp_path):
    cfg = digits_cfg(tmp_path, input_size=8, train_subset=24, val_subset=10)
    cfg.aug.auto_augment = "cifar10"
    batches = []
    for workers in (0, 1):
        cfg.data.workers = workers
        train, val = build_loaders(cfg, rank=0, world_size=1, micro_batch=4)
        set_train_epoch(train, 1, start_batch=2)
        batches.append(next(iter(train)))
        assert len(val.dataset) == 10
    assert torch.equal(batches[0][0], batches[1][0]) and torch.equal(batches[0][1], batches[1][1])


def test_webdataset_shards(tmp_path):
    import json

    import webdataset as wds

    digits = export_digits(8, tmp_path / "cache")
    shards = tmp_path / "wds"
    shards.mkdir()
    info = {"name": "digits", "splits": {}}
    for split in ("train", "val"):
        files = sorted((digits / split).rglob("*.png"))[:40]
        names = []
        for s in range(2):
            name = f"digits-{split}-{s:04d}.tar"
            with wds.TarWriter(str(shards / name)) as sink:
                for i, path in enumerate(files[s::2]):
                    sink.write({"__key__": f"{s}_{i}", "png": path.read_bytes(), "cls": path.parent.name})
            names.append(name)
        info["splits"][split] = {
            "name": split,
            "num_samples": len(files),
            "filenames": names,
            "shard_lengths": [len(files[0::2]), len(files[1::2])],
        }
    (shards / "_info.json").write_text(json.dumps(info))
    cfg = digits_cfg(tmp_path, type="wds", input_size=8)
    cfg.data.root = str(shards)
    check_data(cfg.data)
    train, val = build_loaders(cfg, rank=0, world_size=1, micro_batch=4)
    set_train_epoch(train, 0)
    images, targets = next(iter(train))
    assert images.shape == (4, 3, 8, 8) and targets.dtype == torch.int64
    assert sum(len(t) for _, t in val) == 40
    cfg.data.val_split = "test"
    cfg.data.root = str(tmp_path)
    with pytest.raises(DataError, match="_info.json"):
        check_data(cfg.data)


# ----------------------------------------------------------------------------------------- uint8 batches (issue 27)


@pytest.mark.parametrize("mode", ["pixel", "rand", "const"])
def test_uint8_batches_normalised_on_the_device_equal_the_cpu_batches(tmp_path, mode):
    """loader.device_normalize: uint8 from the workers, then float / 255, (x - mean) / std and the erasing patches
    the worker drew -- the batch today's CPU transform makes (equal on a CPU; the test's bound is 1e-6)."""
    from harness.engine.data import DeviceLoader
    from harness.tasks.image import UInt8Images

    cfg = imagenet_digits_cfg(tmp_path)
    cfg.aug.remode = mode
    out = {}
    for device_normalize, workers in ((False, 0), (True, 2)):
        cfg.loader = dict(device_normalize=device_normalize, prefetch_factor=3)
        cfg.data.workers = workers
        train, val = build_loaders(cfg, rank=0, world_size=1, micro_batch=4)
        set_train_epoch(train, 1, start_batch=2)  # mid-epoch, as a resumed run starts
        if device_normalize:
            raw = next(iter(train))[0]
            assert isinstance(raw, UInt8Images) and raw.images.dtype == torch.uint8 and raw.patches
            assert train.prefetch_factor == 3
        out[device_normalize] = [b for _, b in zip(range(3), DeviceLoader(train, "cpu"))] + list(
            DeviceLoader(val, "cpu")
        )
    assert len(out[True]) == len(out[False]) == 3 + 5
    for (a, ya), (b, yb) in zip(out[False], out[True]):
        assert a.dtype == b.dtype == torch.float32 and a.shape == b.shape
        assert (a - b).abs().max() <= 1e-6 and torch.equal(ya, yb)


def test_device_loader_channels_last_and_the_wrapped_loader_s_attributes(tmp_path):
    from harness.engine.data import DeviceLoader, TrainSampler, batches_per_epoch

    cfg = digits_cfg(tmp_path, input_size=8, train_subset=24, val_subset=10)
    train, _ = build_loaders(cfg, rank=0, world_size=1, micro_batch=4)
    loader = DeviceLoader(train, "cpu", channels_last=True)
    assert isinstance(loader.sampler, TrainSampler) and loader.batch_size == 4 and len(loader) == len(train)
    assert batches_per_epoch(loader) == 6
    set_train_epoch(loader, 0, start_batch=4)
    batches = list(loader)
    assert len(batches) == 2 and batches[0][0].is_contiguous(memory_format=torch.channels_last)


def test_a_pipeline_with_its_own_background_feeder_hands_batches_straight_to_the_step():
    """On CUDA the device pipeline feeds batches from its own thread and stream (BackgroundFeeder): DeviceLoader
    yields them as they come, without a second side stream of its own (which would copy and wait once more)."""
    from harness.engine.data import DeviceLoader

    class Finish:
        def __call__(self, inputs):
            raise AssertionError("the feeder finishes the batches, not DeviceLoader")

        def background_batches(self, loader, device, channels_last):
            assert device == torch.device("cuda", 1) and channels_last
            return iter([("batch", i) for i in loader])

    class Loader(list):
        finish = Finish()

    batches = list(DeviceLoader(Loader([0, 1, 2]), "cuda:1", channels_last=True))
    assert batches == [("batch", 0), ("batch", 1), ("batch", 2)]
