"""Issue 45 item 2: a setting that does nothing is refused. ``train <digits config> data.root=/data/imagenet``
trained on digits and exited 0; now every key the run's dataset type, engine or switched-off option does not read
is one line naming the key and what reads it. The data keys are enumerated from the dataset bases, for a recipe of
every data type the configs use."""

from pathlib import Path

import pytest

from harness.core.config import load_config, parse_override
from harness.core.errors import ConfigError
from harness.engine.builders import load_training_config

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ROOT / "configs"

# one shipped recipe per data type
RECIPES = {
    "digits": "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py",
    "cifar10": "configs/horesnet/horesnet58-rk4_1xb128-260e_cifar10.py",
    "folder": "configs/deit/deit-small_8xb128-300e_in1k.py",
    "glyphs": "configs/claims/resnet18-w16_1xb64-2e_glyphs.py",
    "kjv": "configs/stepsnet/transformer-lm-w128-d4_1xb32-2e_kjv-lm.py",
    "text": "configs/stepsnet/transformer-lm-63m_8xb128-20e_wikitext103-lm.py",
    "alpaca": "configs/scalenet/scalenet-llama-tiny-2x_1xb8-3e_alpaca-tiny.py",
}
IMAGE_ONLY = {"interpolation", "crop_pct", "crop_mode", "mean", "std"}
TOKENS = {"seq_len", "tokenizer", "vocab_size", "max_length", "val_size"}
FOLDER_ONLY = {"skip_bad_images"}  # image folders decode files; every other type reads pickles, tokens or renders
# what each data type leaves unread of the keys the dataset bases set: the specification this test holds the code to
UNREAD = {
    "digits": {"root", "variant"} | TOKENS | FOLDER_ONLY,
    "glyphs": {"root"} | TOKENS | FOLDER_ONLY,
    "cifar10": {"variant"} | TOKENS | FOLDER_ONLY,
    "folder": {"variant"} | TOKENS,
    "kjv": {"root", "variant", "max_length", "val_size"} | IMAGE_ONLY | FOLDER_ONLY,
    "text": {"variant", "max_length", "val_size"} | IMAGE_ONLY | FOLDER_ONLY,
    "alpaca": {"variant", "seq_len"} | IMAGE_ONLY | FOLDER_ONLY,
}


def base_data_values() -> dict:
    """Every data.* key some dataset base sets, with a value one of them gives it."""
    values = {}
    bases = sorted((CONFIGS / "_base_/datasets").glob("*.py")) + sorted((CONFIGS / "claims/_base_").glob("*.py"))
    for base in bases:
        if "\ndata = dict(" not in "\n" + base.read_text():
            continue
        for key, value in load_config(base).data.items():
            if values.get(key) is None:
                values[key] = value
    return values


def test_the_enumeration_covers_every_data_type_the_configs_use():
    used = set()
    for path in CONFIGS.rglob("*.py"):
        if "_base_" in path.parts or path.parts[len(CONFIGS.parts)] in ("det", "seg"):
            continue
        cfg = load_config(path)
        if isinstance(cfg.get("data"), dict) and cfg.data.get("type"):
            used.add(cfg.data.type)
    assert used <= set(RECIPES), used - set(RECIPES)
    assert set(base_data_values()) >= IMAGE_ONLY | TOKENS | {"root", "variant"}


@pytest.mark.parametrize("data_type", sorted(RECIPES))
def test_every_data_key_a_type_does_not_read_is_refused_and_every_other_accepted(data_type):
    recipe = RECIPES[data_type]
    cfg = load_config(ROOT / recipe)
    assert cfg.data.type == data_type
    refused = set()
    for key, value in base_data_values().items():
        if key == "type":
            continue
        override = f"{'' if key in cfg.data else '+'}data.{key}={cfg.data.get(key, value)!r}"
        try:
            load_training_config(ROOT / recipe, [override])
        except ConfigError as e:
            message = str(e)
            assert message.startswith(f"data.{key}=") and f"does not read data.{key}" in message, message
            assert "\n" not in message and ("is read by data.type" in message or "no data type reads" in message)
            refused.add(key)
    assert refused == UNREAD[data_type]


def test_the_issue_example_digits_with_an_imagenet_root(tmp_path):
    from harness.commands.train import run

    with pytest.raises(ConfigError) as e:
        run(RECIPES["digits"], work_dir=tmp_path / "run", overrides=["data.root=/data/imagenet"])
    assert str(e.value) == (
        "data.root='/data/imagenet': data.type='digits' does not read data.root (its data is generated into the "
        "data cache, $DEPTHBENCH_DATA; docs/training.md); data.root is read by data.type alpaca, cifar10, cifar100, "
        "folder, shards, text, wds: set data.type too, or leave the key out"
    )
    assert not (tmp_path / "run").exists()
    # with the type that reads it, the same key is the run's dataset (checked, and missing here)
    with pytest.raises(ConfigError, match="dataset path /data/imagenet does not exist"):
        run(RECIPES["digits"], work_dir=tmp_path / "run", overrides=["data.type=folder", "data.root=/data/imagenet"])


@pytest.mark.parametrize(
    "recipe, overrides, message",
    [
        ("digits", ["aug.mixup=0.5"], None),  # images: read
        ("kjv", ["aug.mixup=0.5"], "aug.* is read by the image data types"),
        ("digits", ["deepspeed.zero_stage=3"], "read only with the deepspeed engine"),
        ("digits", ["deepspeed.zero_stage=1", "engine=deepspeed"], None),
        ("digits", ["ema.decay=0.9"], "ema.decay is read only with ema.enable=True"),
        ("digits", ["ema.decay=0.9", "ema.enable=True"], None),
        ("digits", ["distill.weight=0.5"], "distill.weight is read only with distill.teacher set"),
        ("digits", ["compile.mode='max-autotune'"], "compile.mode is read only with compile.enable=True"),
        ("digits", ["compile.mode='max-autotune'", "compile.enable=True"], None),
        ("digits", ["sched.decay_milestones=[5]"], None),  # multistep: read
        ("folder", ["sched.decay_milestones=[5]"], "sched.sched='cosine' does not read sched.decay_milestones"),
        ("folder", ["sched.decay_rate=0.5"], "it is read by sched.sched step, multistep, plateau, poly"),
    ],
)
def test_options_of_a_switched_off_engine_or_feature_are_refused(recipe, overrides, message):
    if message is None:
        load_training_config(ROOT / RECIPES[recipe], overrides)
        return
    with pytest.raises(ConfigError) as e:
        load_training_config(ROOT / RECIPES[recipe], overrides)
    key = parse_override(overrides[0])[0]
    assert str(e.value).startswith(f"{key}=") and message in str(e.value)


def test_engine_flag_counts_for_the_deepspeed_keys(tmp_path):
    """``--engine deepspeed`` with ``deepspeed.*`` overrides: the keys are read (no refusal)."""
    cfg, _ = load_training_config(ROOT / RECIPES["digits"], ["deepspeed.zero_stage=1"], engine="deepspeed")
    assert cfg.engine == "deepspeed" and cfg.deepspeed.zero_stage == 1
