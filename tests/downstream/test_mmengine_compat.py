"""MMEngine 0.10.7 on torch 2.14: resuming a run works, every checkpoint loads weights-only (with MMEngine's allow-list)."""

import pickle

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import Dataset

from mmengine.model import BaseModel
from mmengine.runner import Runner

from downstream.mmengine_compat import DepthbenchRunner
from fixtures.files import evil_mmengine_checkpoint as _evil_mmengine_checkpoint


class _Pairs(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return dict(inputs=torch.full((4,), float(i)), labels=torch.tensor(i % 2))


class _Tiny(BaseModel):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, inputs, labels, mode="tensor"):
        out = self.fc(torch.stack(inputs))
        return dict(loss=nn.functional.cross_entropy(out, torch.stack(labels))) if mode == "loss" else out


def _runner(cls, work_dir, epochs, resume):
    return cls(
        model=_Tiny(),
        work_dir=str(work_dir),
        resume=resume,
        train_dataloader=dict(dataset=_Pairs(), sampler=dict(type="DefaultSampler", shuffle=True), batch_size=4),
        optim_wrapper=dict(optimizer=dict(type="SGD", lr=0.1)),
        train_cfg=dict(by_epoch=True, max_epochs=epochs),
        default_hooks=dict(checkpoint=dict(type="CheckpointHook", interval=1), logger=None),
        default_scope="mmengine",
    )


@pytest.mark.tier("integration")
def test_a_plain_weights_only_load_refuses_an_mmengine_checkpoint_and_the_allow_list_admits_it(tmp_path):
    """The breakage we work around: torch >= 2.6 loads weights-only and refuses MMEngine's HistoryBuffer (MMEngine
    0.10.7 fails to resume). With downstream imported, MMEngine's local loader adds exactly the allow-list its
    checkpoints need, so even the stock Runner resumes -- and nothing executes code
    (test_the_mmengine_allow_list_admits_its_own_state_and_nothing_else)."""
    from downstream.mmengine_compat import load_mmengine_checkpoint

    _runner(Runner, tmp_path, 1, False).train()
    with pytest.raises(pickle.UnpicklingError, match="HistoryBuffer|getattr"):
        torch.load(tmp_path / "epoch_1.pth", map_location="cpu", weights_only=True)
    checkpoint = load_mmengine_checkpoint(tmp_path / "epoch_1.pth")
    assert type(checkpoint["message_hub"]["log_scalars"]["train/loss"]).__name__ == "HistoryBuffer"
    runner = _runner(Runner, tmp_path, 2, True)
    runner.train()
    assert runner.epoch == 2


@pytest.mark.tier("integration")
def test_depthbench_runner_resumes_its_own_checkpoint(tmp_path):
    _runner(DepthbenchRunner, tmp_path, 1, False).train()
    runner = _runner(DepthbenchRunner, tmp_path, 2, True)
    runner.train()
    assert runner.epoch == 2
    assert (tmp_path / "epoch_2.pth").exists()


def test_pretrained_loading_stays_weights_only(tmp_path):
    """A checkpoint carrying an arbitrary global does not load (there is no trusted path any more)."""
    from mmengine.runner.checkpoint import _load_checkpoint

    evil = tmp_path / "evil.pth"
    torch.save({"state_dict": {"w": torch.zeros(1)}, "payload": _Pairs}, evil)
    with pytest.raises(pickle.UnpicklingError):
        _load_checkpoint(str(evil), map_location="cpu")
    plain = tmp_path / "plain.pth"
    torch.save({"state_dict": {"w": torch.ones(1)}}, plain)
    assert _load_checkpoint(str(plain), map_location="cpu")["state_dict"]["w"].item() == 1.0


def test_the_mmengine_allow_list_admits_its_own_state_and_nothing_else(tmp_path):
    from mmengine.logging.history_buffer import HistoryBuffer

    from downstream.mmengine_compat import load_mmengine_checkpoint

    buffer = HistoryBuffer()
    for value in (1.0, 3.0):
        buffer.update(value)
    torch.save(
        {
            "message_hub": {"log_scalars": {"loss": buffer}, "eta": np.float64(2.5)},
            "meta": {"dataset_meta": {"classes": ("a", "b")}},
            "state_dict": {"w": torch.ones(2)},
            "array": np.arange(3, dtype=np.int64),
        },
        tmp_path / "good.pth",
    )
    loaded = load_mmengine_checkpoint(tmp_path / "good.pth")
    assert type(loaded["message_hub"]["log_scalars"]["loss"]) is HistoryBuffer
    assert loaded["message_hub"]["log_scalars"]["loss"].mean() == 2.0 and loaded["array"].tolist() == [0, 1, 2]

    class _Sneaky:  # pickles as getattr(HistoryBuffer, "register_statistics"): an attribute outside the four
        def __reduce__(self):
            return getattr, (HistoryBuffer, "register_statistics")

    torch.save({"x": _Sneaky()}, tmp_path / "getattr.pth")
    with pytest.raises(pickle.UnpicklingError, match="is not allowed"):
        load_mmengine_checkpoint(tmp_path / "getattr.pth")
    before = dict(HistoryBuffer._statistics_methods)
    HistoryBuffer._statistics_methods["mean"] = np.ndarray  # an allowed global planted as a statistics method
    try:
        torch.save({"buffer": buffer}, tmp_path / "planted.pth")
    finally:
        HistoryBuffer._statistics_methods.update(before)
    with pytest.raises(pickle.UnpicklingError, match="statistics methods other than its own"):
        load_mmengine_checkpoint(tmp_path / "planted.pth")
    assert HistoryBuffer._statistics_methods == before
    marker = tmp_path / "pwned"
    _evil_mmengine_checkpoint(tmp_path / "evil.pth", marker)
    with pytest.raises(pickle.UnpicklingError):
        load_mmengine_checkpoint(tmp_path / "evil.pth")
    assert not marker.exists()
