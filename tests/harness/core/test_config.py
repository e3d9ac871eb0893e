"""Config loading: ``_base_`` inheritance, ``key=value`` overrides and their validation, sweep definitions, and
every shipped recipe (each loads, and its model builds with the recipe's arguments)."""

import re
from pathlib import Path

import pytest

from fixtures.configs import recipe_files
from harness.core.config import load_config, parse_override, sweep_points
from harness.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ROOT / "configs"
HORESNET58_RK4 = CONFIGS / "horesnet/horesnet58-rk4_1xb128-260e_cifar10.py"


def test_base_inheritance_gives_the_spec_recipe():
    cfg = load_config(HORESNET58_RK4)
    # HO-ResNet §3.1: SGD momentum 0.9 without Nesterov, lr 0.1, wd 1e-4, milestones 100/150/200/230,
    # gamma 0.1, 260 epochs, batch 128, AutoAugment with the CIFAR-10 policy, no label smoothing.
    assert cfg.optim.opt == "momentum" and cfg.optim.lr == 0.1 and cfg.optim.weight_decay == 1e-4
    assert cfg.optim.lr_base_batch is None
    assert list(cfg.sched.decay_milestones) == [100, 150, 200, 230] and cfg.sched.decay_rate == 0.1
    assert cfg.sched.warmup_epochs == 0
    assert cfg.epochs == 260 and cfg.batch_size == 128
    assert cfg.aug.pipeline == "cifar" and cfg.aug.auto_augment == "cifar10" and cfg.aug.smoothing == 0
    assert cfg.model.name == "horesnet58_rk4"
    assert cfg.experiment == "horesnet58-rk4_1xb128-260e_cifar10"
    # keys the child does not set come from the runtime base
    assert cfg.engine == "accelerate" and cfg.ckpt.best_metric == "top1"


def test_deit_and_transnext_recipes_differ_where_the_papers_do():
    deit = load_config(CONFIGS / "deit/deit-small_8xb128-300e_in1k.py")
    transnext = load_config(CONFIGS / "transnext/transnext-tiny_8xb128-300e_in1k.py")
    # DeiT: lr 5e-4 x batch/512, RandAugment m9, mixup 0.8 / cutmix 1.0, smoothing 0.1, RE 0.25, RA, EMA
    assert deit.optim.lr == 5e-4 and deit.optim.lr_base_batch == 512
    assert deit.aug.auto_augment == "rand-m9-mstd0.5-inc1" and deit.aug.reprob == 0.25
    assert (deit.aug.mixup, deit.aug.cutmix, deit.aug.smoothing) == (0.8, 1.0, 0.1)
    assert deit.data.repeated_aug and deit.ema.enable
    # TransNeXt Table 4: lr 1e-3 without scaling, clip 1.0, no EMA, drop path 0.25 for Tiny
    assert transnext.optim.lr == 1e-3 and transnext.optim.lr_base_batch is None
    assert transnext.clip_grad == 1.0 and not transnext.ema.enable and transnext.model.drop_path_rate == 0.25


def test_overrides_set_typed_values():
    cfg = load_config(
        HORESNET58_RK4,
        [
            "optim.lr=0.2",
            "epochs=3",
            "model.name=horesnet58_euler",
            "aug.scale=(0.5, 1.0)",
            "clip_grad=5",
            "+model.width=32",
        ],
    )
    assert cfg.optim.lr == 0.2 and cfg.epochs == 3 and cfg.model.name == "horesnet58_euler"
    assert tuple(cfg.aug.scale) == (0.5, 1.0) and cfg.clip_grad == 5 and cfg.model.width == 32


def test_unknown_override_key_names_close_matches():
    with pytest.raises(ConfigError) as e:
        load_config(HORESNET58_RK4, ["optim.lrr=0.2"])
    message = str(e.value)
    assert "optim.lrr" in message and "optim.lr" in message and "\n" not in message


def test_override_type_mismatch_and_malformed_override_fail():
    with pytest.raises(ConfigError, match="epochs"):
        load_config(HORESNET58_RK4, ["epochs=ten"])
    with pytest.raises(ConfigError, match="epochs"):
        load_config(HORESNET58_RK4, ["epochs=2.5"])
    with pytest.raises(ConfigError, match="key=value"):
        load_config(HORESNET58_RK4, ["epochs"])
    with pytest.raises(ConfigError, match="section"):
        load_config(HORESNET58_RK4, ["+nosuch.key=1"])


def test_parse_override_literals_and_strings():
    assert parse_override("a.b=1e-3") == ("a.b", 1e-3, False)
    assert parse_override("+m.x=None") == ("m.x", None, True)
    assert parse_override("data.root=/data/in1k") == ("data.root", "/data/in1k", False)


def test_missing_config_file_is_one_line():
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(CONFIGS / "nope.py")


def test_misspelled_config_suggests_the_existing_one():
    typo = "configs/seg/upernet_steps-resnet18-w32_500it_embeded-ade.py"
    with pytest.raises(ConfigError, match="did you mean configs/seg/upernet_steps-resnet18-w32_500it_embedded-ade.py"):
        load_config(typo)


def test_learning_rate_sweep_definition():
    cfg = load_config(CONFIGS / "horesnet/horesnet86_lr-sweep_cifar10.py")
    points = sweep_points(cfg)
    # HO-ResNet §3.3/Fig. 9 (grid: docs/horesnet.md): 4 schemes (Euler, mid-point, RK4 (82 layers), Verner)
    # x the 10 suggested learning rates
    assert len(points) == 4 * 10
    names = {dict(p.split("=", 1) for p in overrides)["model.name"] for _, overrides in points}
    assert names == {"'horesnet86_euler'", "'horesnet86_midpoint'", "'horesnet82_rk4'", "'horesnet86_verner'"}
    name, overrides = points[0]
    point = load_config(CONFIGS / "horesnet/horesnet86-euler_1xb128-260e_cifar10.py", overrides)
    assert point.optim.lr == 0.05 and point.precision == "fp32" and "lr-0.05" in name


@pytest.mark.parametrize("path", recipe_files(), ids=lambda p: str(p.relative_to(CONFIGS)))
def test_every_recipe_loads_and_its_model_builds(path):
    from harness.engine.builders import check_model

    cfg = load_config(path)
    # the OpenMMLab name says <gpus>xb<batch per gpu>-<epochs>e: the global batch and the length of the recipe
    gpus, per_gpu, epochs = map(int, re.search(r"_(\d+)xb(\d+)-(\d+)e_", path.name).groups())
    assert (cfg.batch_size, cfg.epochs) == (gpus * per_gpu, epochs)
    check_model(cfg)  # builds the model on the meta device with the recipe's arguments
    assert learning_rates(cfg, [0])[0] > 0  # timm builds its optimizer and scheduler


def learning_rates(cfg, epochs, updates_per_epoch=10):
    import torch

    from harness.engine.builders import build_optimizer, build_scheduler

    model = torch.nn.Linear(2, 2)
    optimizer = build_optimizer(model, cfg)
    scheduler = build_scheduler(optimizer, cfg, updates_per_epoch)
    rates = []
    for epoch in epochs:
        scheduler.step(epoch)
        scheduler.step_update(epoch * updates_per_epoch)
        rates.append(optimizer.param_groups[0]["lr"])
    return rates


def test_horesnet_schedule_matches_the_paper_epoch_by_epoch():
    # HO-ResNet §3.1: lr 0.1 for epochs 0-99, 1e-2 for 100-149, 1e-3 for 150-199, 1e-4 for 200-229, 1e-5 for 230-259
    rates = learning_rates(load_config(HORESNET58_RK4), [0, 99, 100, 149, 150, 199, 200, 229, 230, 259])
    assert rates == pytest.approx([0.1, 0.1, 1e-2, 1e-2, 1e-3, 1e-3, 1e-4, 1e-4, 1e-5, 1e-5])


def test_deit_schedule_scales_lr_with_batch_and_warms_up():
    cfg = load_config(CONFIGS / "deit/deit-small_8xb128-300e_in1k.py", ["batch_size=512"])
    # lr 5e-4 x 512/512; linear warm-up from 1e-6 over 5 epochs; cosine to the 1e-5 floor at the end (timm's
    # cosine, as DeiT uses it, counts the warm-up epochs: at epoch 5 it is 5/300 into its decay)
    warm, peak, end = learning_rates(cfg, [0, 5, 299])
    assert warm == pytest.approx(1e-6) and peak == pytest.approx(5e-4, rel=1e-3)
    assert 1e-5 <= end < 1.1e-5
    default_batch = load_config(CONFIGS / "deit/deit-small_8xb128-300e_in1k.py")  # 1024: lr 1e-3
    assert learning_rates(default_batch, [5])[0] == pytest.approx(1e-3, rel=1e-3)


def test_an_override_mmengine_cannot_merge_is_one_config_error(tmp_path):
    # a dict over a key that is None in the config: MMEngine raises a TypeError deep in merge_from_dict
    config = tmp_path / "c.py"
    config.write_text("model = dict(backbone=dict(init_cfg=None))\nepochs = 1\n")
    with pytest.raises(ConfigError, match="cannot apply overrides model.backbone.init_cfg=") as error:
        load_config(config, ["model.backbone.init_cfg={'type': 'Pretrained', 'checkpoint': 'x.pth'}"])
    assert "\n" not in str(error.value)


def test_an_epochs_override_rescales_the_schedule_or_fails_in_one_line():
    """Issue 26: a shortened run's schedule follows its length (milestones and warm-up scaled from the recipe's
    epochs); keys the command line sets stay as given; a schedule that cannot follow is one line."""
    from harness.engine.builders import check_schedule_length, load_training_config

    preset = CONFIGS / "horesnet/horesnet10-rk4_1xb64-20e_digits.py"
    cfg, changes = load_training_config(preset, ["epochs=4"])
    assert load_config(preset).sched.decay_milestones == [10, 15]
    assert cfg.sched.decay_milestones == [2, 3] and changes == ["sched.decay_milestones [10, 15] -> [2, 3]"]
    cfg, changes = load_training_config(preset, ["epochs=1"])  # both milestones would land at the end: no decay
    assert cfg.sched.decay_milestones == [] and changes == ["sched.decay_milestones [10, 15] -> []"]
    check_schedule_length(cfg)
    cfg, changes = load_training_config(preset, ["epochs=4", "sched.decay_milestones=[1]"])
    assert cfg.sched.decay_milestones == [1] and changes == []
    cfg, _ = load_training_config(preset, ["epochs=4", "sched.decay_milestones=[30]"])
    with pytest.raises(ConfigError, match=r"all lie at or beyond epochs=4: .* set sched.decay_milestones"):
        check_schedule_length(cfg)
    deit, changes = load_training_config(CONFIGS / "deit/deit-small_8xb128-300e_in1k.py", ["epochs=30"])
    assert deit.sched.warmup_epochs == round(5 * 30 / 300)
    assert any("warmup_epochs 5 -> " in c for c in changes)
