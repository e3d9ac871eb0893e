"""harness.engine.builders: the optimizer's fused and foreach steps, the EMA of a model compiled in place, the fused
optimizer check that makes no CUDA call; the DeiT recipe's features (mixup, EMA, bf16 autocast, soft-label
distillation, TensorBoard) in one training run."""

import pytest
import torch

from fixtures.training import ROOT, curve, load, train, training_env  # noqa: F401 (training_env: the env fixture)


@pytest.mark.slow
def test_fused_and_foreach_optimizer_steps_are_torch_s():
    from mmengine import Config

    from harness.engine.builders import build_optimizer

    cfg = Config.fromfile(str(ROOT / "configs/_base_/schedules/deit_300e.py"))
    model = torch.nn.Linear(4, 2)
    assert build_optimizer(model, cfg).defaults["fused"] is None  # off: torch's default, as before
    cfg.optim.fused = True
    assert build_optimizer(model, cfg).defaults["fused"] is True
    cfg.optim.fused, cfg.optim.foreach = None, True
    assert build_optimizer(model, cfg).defaults["foreach"] is True


@pytest.mark.slow
def test_the_ema_of_a_model_compiled_in_place_runs_its_own_weights_eagerly():
    """An epoch hook hands build_optimization the module the previous build compiled in place; its EMA (timm's
    ModelEmaV3, a deep copy) must not carry that compiled forward, which would run the training weights: torch's
    nn.Module.__getstate__ leaves it out of copies, which builders.build_optimization relies on."""
    from timm.utils import ModelEmaV3

    graphs = []

    def counting_backend(graph, example_inputs):
        graphs.append(graph)
        return graph.forward

    try:
        model = torch.nn.Linear(3, 2)
        model.compile(backend=counting_backend)
        x = torch.ones(1, 3)
        trained = model(x)
        assert len(graphs) == 1  # compiled in place
        ema = ModelEmaV3(model, decay=0.5)
        with torch.no_grad():
            ema.module.weight.zero_()
            ema.module.bias.fill_(1.0)
        assert torch.equal(ema.module(x), torch.ones(1, 2)) and len(graphs) == 1  # its own weights, eagerly
        assert torch.equal(model(x), trained) and ema.module.state_dict().keys() == model.state_dict().keys()
    finally:
        torch.compiler.reset()


class CudaTouched(BaseException):  # not an Exception: no except clause in the code under test swallows it
    pass


@pytest.mark.parametrize("opt", ["adamw", "adam", "sgd", "adagrad"])
def test_the_fused_optimizer_check_makes_no_cuda_call(opt, monkeypatch):
    """The config check runs before the rank's device is chosen: a CUDA tensor there made a CUDA context on GPU 0 in
    every rank (and stops the --nproc launcher from forking), and so did step() even on a CPU tensor (its CUDA-graph
    health check asks for the current CUDA stream). The check builds the optimizer on the CPU and never steps it."""
    from harness.engine.builders import check_fused_optimizer

    def touched(*args, **kwargs):
        raise CudaTouched()

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for name in ("_lazy_init", "init", "current_device", "set_device", "device_count", "synchronize"):
        monkeypatch.setattr(torch.cuda, name, touched)
    check_fused_optimizer(opt)


@pytest.mark.slow
@pytest.mark.tier("integration")
def test_deit_recipe_features(env, tmp_path):
    """The DeiT digits preset with mixup, EMA, bf16 autocast, soft-label distillation, TensorBoard."""
    teacher = tmp_path / "teacher.pth"
    import timm

    import models  # noqa: F401

    torch.save({"model": timm.create_model("horesnet10_euler", num_classes=10, width=8).state_dict()}, teacher)
    run = tmp_path / "run"
    train(
        env,
        run,
        config="configs/deit/deit-tiny-p4_1xb64-30e_digits.py",
        overrides=[
            "epochs=1",
            "data.train_subset=64",
            "data.val_subset=32",
            "batch_size=16",
            "model.depth=1",
            "precision=bf16",
            "distill.teacher=horesnet10_euler",
            f"distill.teacher_checkpoint={teacher}",
            "distill.weight=0.5",
            "+distill.teacher_kwargs.width=8",
        ],
    )
    evals = [r for r in curve(run) if r["kind"] == "eval"]
    assert "ema_top1" in evals[0] and 0 <= evals[0]["ema_top1"] <= 100
    assert list((run / "tb").glob("events.out.tfevents.*"))
    ema = load(run, "best.pth")["ema"]
    model = load(run, "best.pth")["model"]
    assert ema.keys() == model.keys() and any(not torch.equal(ema[k], model[k]) for k in model)
