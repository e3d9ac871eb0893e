"""The one typed config schema (issue 44 item 2) and its ranges (issue 39 item 3): default_runtime.py is generated
from it, every shipped recipe satisfies it, a runaway value or a section overridden by a value is one line before
any work, ``train --help-config`` prints it, and the per-device batch is worked out in one place."""

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core import schema
from harness.core.config import apply_overrides, load_config, sweep_points
from harness.core.errors import ConfigError, DepthbenchError

ROOT = Path(__file__).resolve().parents[3]
PRESET = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"
DET = "configs/det/mask-rcnn_steps-resnet18-w32_fpn_500it_embedded-coco.py"


def test_default_runtime_is_generated_from_the_schema():
    """One source: editing a default in default_runtime.py by hand (or the schema without regenerating) fails."""
    assert (ROOT / "configs/_base_/default_runtime.py").read_text() == schema.render_default_runtime()
    runtime = load_config(ROOT / "configs/_base_/default_runtime.py").to_dict()
    for key in schema.KEYS:
        if key.default is not schema.FROM_BASE and key.name != "experiment":  # load_config names it after the file
            assert schema.lookup(runtime, key.name, "absent") == key.default, key.name


def training_recipes():
    from fixtures.configs import recipe_files

    return recipe_files()


@pytest.mark.parametrize("path", training_recipes(), ids=lambda p: str(p.relative_to(ROOT / "configs")))
def test_every_recipe_lies_inside_the_schema(path):
    from harness.engine.builders import check_schedule_length

    cfg = load_config(path)
    # a sweep definition: every point of it, as `depthbench submit --sweep` would train it
    points = [overrides for _, overrides in sweep_points(cfg)] if cfg.get("sweep") else [[]]
    for overrides in points:
        point = copy.deepcopy(cfg)
        apply_overrides(point, overrides)
        schema.check_values(point)
        check_schedule_length(point)  # milestones inside the run


@pytest.mark.parametrize(
    "override, message",
    [
        # issue 39's examples: a run of 1.8e24 days, a million workers, a seed torch cannot take, a negative milestone
        (f"epochs={10**30}", f"epochs={10**30}: it must be an integer in [1, 100000]"),
        ("data.workers=1000000", "data.workers=1000000: it must be an integer in [0, 256]"),
        (f"seed={2**70}", f"seed={2**70}: it must be an integer in [0, 4294967295]"),
        (
            "sched.decay_milestones=[-5, 10]",
            "sched.decay_milestones=[-5, 10]: it must be a list of integers in [1, 100000]",
        ),
        (
            "sched.decay_milestones=[10, 25]",
            "sched.decay_milestones=[10, 25]: each must lie inside the run, 1 <= m < epochs=20",
        ),
        ("batch_size=1073741824", "batch_size=1073741824: it must be an integer in [1, 2**20]"),
        ("data.input_size=100000", "data.input_size=100000: it must be an integer in [1, 8192]"),
        ("loader.prefetch_factor=100000", "loader.prefetch_factor=100000: it must be an integer in [1, 64]"),
        ("ckpt.interval_minutes=0", "ckpt.interval_minutes=0: it must be a number in (0, 1000000]"),
        ("optim.lr=float('nan')", None),  # not a literal: a string, refused by the override's type check
        ("compile.enable=1", "compile.enable=1: expected a value like False (bool)"),
        ("sched.warmup_epochs=1000000", "sched.warmup_epochs=1000000: it must be a number in [0, 100000]"),
    ],
)
def test_runaway_values_are_one_line_before_any_work(override, message, tmp_path):
    from harness.commands.train import run

    work_dir = tmp_path / "run"
    with pytest.raises(DepthbenchError) as e:
        run(PRESET, work_dir=work_dir, overrides=[override])
    text = str(e.value)
    assert "\n" not in text and e.value.exit_code == 2 and not work_dir.exists()
    if message:
        assert text == message


@pytest.mark.parametrize(
    "override, keys",
    [
        ("compile=True", "enable, mode, backend, dynamic"),
        ("loader=4", "device_normalize, prefetch_factor, persistent_workers"),
        ("deepspeed='zero3'", "zero_stage, config"),
        ("data=1", "type, root"),
    ],
)
def test_a_section_overridden_by_a_value_is_a_type_error_naming_its_keys(override, keys):
    """``compile=True`` was ``TypeError: 'bool' object is not a mapping`` from deep inside the engine."""
    key = override.split("=")[0]
    with pytest.raises(ConfigError) as e:
        load_config(ROOT / PRESET, [override])
    assert str(e.value).startswith(f"{override}: {key} is a section, not a value; it takes the keys ")
    assert keys in str(e.value) and "\n" not in str(e.value)


def test_a_value_overridden_by_a_section_is_a_type_error():
    with pytest.raises(ConfigError, match=r"epochs=\{'a': 1\}: expected a value like 20 \(int\)"):
        load_config(ROOT / PRESET, ["epochs={'a': 1}"])


@pytest.mark.tier("integration")
def test_help_config_prints_every_key_with_default_range_and_help():
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "train", "--help-config"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0 and out.stderr == ""
    for key in schema.KEYS:
        line = next(line for line in out.stdout.splitlines() if line.split()[:1] == [key.name])
        assert key.describe_type() in line
    assert re.search(r"^  epochs +300 +an integer in \[1, 100000\]$", out.stdout, re.M)


@pytest.mark.parametrize("batch, world, accum, micro", [(64, 1, 1, 64), (64, 2, 2, 16), (1024, 8, 1, 128)])
def test_per_device_batch(batch, world, accum, micro):
    assert schema.per_device_batch(batch, world, accum) == micro


def test_the_per_device_batch_problem_reads_the_same_in_train_preflight_and_estimate():
    """One function, one text: train's check, preflight's plan and submit --estimate's row."""
    from harness.engine.builders import check_config, load_training_config
    from harness.measure.estimate import Job, Layout, estimate

    cfg, _ = load_training_config(PRESET, ["batch_size=10"])
    with pytest.raises(ConfigError) as train_error:
        check_config(cfg, 3, model=False)
    rows = estimate(
        [Job("x", PRESET, ["batch_size=10"])], Layout(nodes=1, gpus_per_node=3), records=[], bench_rows=[]
    ).rows
    assert train_error.value.args[0] == rows[0].problem
    assert rows[0].problem == (
        "batch_size=10 (global) is not divisible by 3 processes x grad_accum=1; use a multiple of 3"
    )


def test_one_schedule_rescaler_places_train_and_finetune_milestones_alike():
    """Issue 44: train (timm's ``sched``) and finetune (MMEngine's ``param_scheduler``) share one rescaler."""
    from mmengine import Config

    from harness.engine.builders import load_training_config
    from harness.engine.schedule import rescale_schedule

    cfg, changes = load_training_config(PRESET, ["epochs=4"])  # the recipe: 20 epochs, milestones 10 and 15
    mm = Config(
        dict(
            train_cfg=dict(type="IterBasedTrainLoop", max_iters=4),
            param_scheduler=[dict(type="MultiStepLR", by_epoch=False, milestones=[10, 15], begin=0, end=20)],
        )
    )
    mm_changes = rescale_schedule(mm, {"type": "IterBasedTrainLoop", "max_iters": 20}, ("train_cfg.max_iters",))
    assert list(cfg.sched.decay_milestones) == list(mm.param_scheduler[0].milestones) == [2, 3]
    assert changes and mm_changes


def test_train_and_finetune_rescale_through_the_one_rescaler(monkeypatch):
    """Both commands' config loaders reach harness.engine.schedule.rescale_schedule (the one rescaler): with it
    replaced, neither rescales."""
    import downstream.finetune
    from harness.engine import builders

    calls = []

    def spy(cfg, planned, explicit):
        calls.append(explicit)
        return []

    monkeypatch.setattr(builders, "rescale_schedule", spy)
    monkeypatch.setattr(downstream.finetune, "rescale_schedule", spy)
    cfg, _ = builders.load_training_config(PRESET, ["epochs=4"])
    downstream.finetune.load_downstream_config(DET, ["train_cfg.max_iters=4"])
    assert calls == [("epochs",), ("train_cfg.max_iters",)]
    assert list(cfg.sched.decay_milestones) == [10, 15]  # not rescaled: no second rescaler took over


@pytest.mark.parametrize(
    "override, message",
    [
        (f"train_cfg.max_iters={10**30}", f"train_cfg.max_iters={10**30}: it must be an integer in [1, 100000000]"),
        (
            "train_dataloader.num_workers=1000000",
            "train_dataloader.num_workers=1000000: it must be an integer in [0, 256]",
        ),
        (f"randomness.seed={2**70}", f"randomness.seed={2**70}: it must be an integer in [0, 4294967295]"),
    ],
)
def test_finetune_runaway_values_are_one_line_before_any_work(override, message):
    from downstream.finetune import load_downstream_config

    with pytest.raises(ConfigError) as e:
        load_downstream_config("configs/det/mask-rcnn_steps-resnet18-w32_fpn_500it_embedded-coco.py", [override])
    assert str(e.value) == message


def test_adding_a_key_that_exists_keeps_its_type():
    """``+compile=True`` took the path for new keys and skipped the type check."""
    with pytest.raises(ConfigError, match=r"^compile=True: compile is a section, not a value"):
        load_config(ROOT / PRESET, ["+compile=True"])
    assert load_config(ROOT / PRESET, ["+model.width=8"]).model.width == 8


@pytest.mark.parametrize(
    "text, missing",
    [
        ("", "model.name, data.type, sched, aug"),
        ("model = dict(name='horesnet10_rk4')\nepochs = 1\n", "data.type, sched, aug"),
    ],
)
def test_a_config_without_its_base_files_is_one_line(tmp_path, text, missing):
    """A config that inherits no dataset or schedule (an empty file, a model alone) is one line naming what it lacks
    and where it comes from, not an AttributeError from deep in the engine."""
    from harness.engine.builders import check_config, load_training_config

    path = tmp_path / "bare.py"
    path.write_text(text)
    cfg, _ = load_training_config(str(path))
    with pytest.raises(ConfigError, match=rf"^the config sets no {missing}: .*_base_"):
        check_config(cfg, 1)


@pytest.mark.tier("integration")
def test_help_config_with_a_config_shows_that_configs_values(capsys):
    """Issue 58 item 9: `train --help-config CONFIG` lists CONFIG's values (the schema default beside a different
    one), not only the defaults; without a config it lists the defaults as before."""
    import re

    from harness import cli

    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", "--help-config", "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    assert re.search(r"^  epochs +20 \[300\] ", out, re.M) and re.search(
        r"^  model\.name +'horesnet10_rk4' ", out, re.M
    )
    with pytest.raises(SystemExit):
        cli.main(["train", "--help-config"])
    assert re.search(r"^  epochs +300 ", capsys.readouterr().out, re.M)
