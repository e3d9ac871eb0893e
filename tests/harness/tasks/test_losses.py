"""harness/tasks/losses.py: SReT's soft-label distillation (Eq. 17) and the DeiT-style baseline, against hand values."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from harness.tasks.losses import BranchSumLoss, HardDistillationLoss, SoftLabelKDLoss
from models.sret import MixedDepthLogits

# Two classes. Student logits (0, 0) → p_S = (1/2, 1/2); teacher logits (ln 3, 0) → p_T = (3/4, 1/4).
STUDENT = torch.tensor([[0.0, 0.0]])
TEACHER = torch.tensor([[math.log(3.0), 0.0]])
KL_BY_HAND = 0.75 * math.log(0.75 / 0.5) + 0.25 * math.log(0.25 / 0.5)  # ≈ 0.130812
TEACHER_ENTROPY = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))


def test_kl_matches_hand_computed_value():
    assert SoftLabelKDLoss()(STUDENT, TEACHER).item() == pytest.approx(KL_BY_HAND, abs=1e-6)


def test_cross_entropy_form_is_eq17_and_equals_kl_plus_teacher_entropy():
    ce_by_hand = -(0.75 * math.log(0.5) + 0.25 * math.log(0.5))  # -Σ p_T log p_S = ln 2
    loss = SoftLabelKDLoss(form="cross_entropy")(STUDENT, TEACHER).item()
    assert loss == pytest.approx(ce_by_hand, abs=1e-6)
    assert loss == pytest.approx(KL_BY_HAND + TEACHER_ENTROPY, abs=1e-6)  # Eq. 17 = KL + H(p_T)


def test_temperature_softens_both_and_scales_by_t_squared():
    # T = 2: p_T = softmax(ln3/2, 0) = (√3, 1)/(√3 + 1); p_S stays uniform
    a = math.sqrt(3) / (math.sqrt(3) + 1)
    kl = a * math.log(a / 0.5) + (1 - a) * math.log((1 - a) / 0.5)
    assert SoftLabelKDLoss(temperature=2.0)(STUDENT, TEACHER).item() == pytest.approx(4 * kl, abs=1e-6)


def test_batch_mean_and_zero_when_student_equals_teacher():
    student = torch.cat([STUDENT, TEACHER])
    teacher = torch.cat([TEACHER, TEACHER])
    assert SoftLabelKDLoss()(student, teacher).item() == pytest.approx(KL_BY_HAND / 2, abs=1e-6)
    assert SoftLabelKDLoss()(TEACHER, TEACHER).item() == pytest.approx(0.0, abs=1e-7)


def test_one_hot_teacher_gives_standard_cross_entropy():
    student = torch.randn(4, 5, generator=torch.Generator().manual_seed(0))
    labels = torch.tensor([0, 3, 1, 4])
    one_hot_teacher = F.one_hot(labels, 5).float() * 1e4  # softmax → one-hot to float precision
    loss = SoftLabelKDLoss(form="cross_entropy")(student, one_hot_teacher)
    torch.testing.assert_close(loss, F.cross_entropy(student, labels))


def test_gradient_reaches_student_only():
    student = STUDENT.clone().requires_grad_(True)
    teacher = TEACHER.clone().requires_grad_(True)
    SoftLabelKDLoss()(student, teacher).backward()
    # d/dz_S of KL at T = 1 is p_S − p_T = (1/2 − 3/4, 1/2 − 1/4)
    torch.testing.assert_close(student.grad, torch.tensor([[-0.25, 0.25]]))
    assert teacher.grad is None


def test_distillation_token_pair_uses_the_dist_output():
    cls_logits = torch.tensor([[5.0, -5.0]])
    loss = SoftLabelKDLoss()((cls_logits, STUDENT), TEACHER)
    assert loss.item() == pytest.approx(KL_BY_HAND, abs=1e-6)


def test_mixed_depth_branches_are_summed():
    out = MixedDepthLogits(deep=STUDENT, shallow=TEACHER)
    assert SoftLabelKDLoss()(out, TEACHER).item() == pytest.approx(KL_BY_HAND + 0.0, abs=1e-6)
    ce = torch.nn.CrossEntropyLoss()
    target = torch.tensor([0])
    expected = ce(STUDENT, target) + ce(TEACHER, target)
    torch.testing.assert_close(BranchSumLoss(ce)(out, target), expected)
    torch.testing.assert_close(BranchSumLoss(ce)(STUDENT, target), ce(STUDENT, target))


def test_hard_distillation_baseline():
    target = torch.tensor([1])  # ground truth class 1; the teacher's argmax is class 0
    loss = HardDistillationLoss()(STUDENT, TEACHER, target).item()
    assert loss == pytest.approx(0.5 * math.log(2) + 0.5 * math.log(2), abs=1e-6)
    cls_logits, dist_logits = torch.tensor([[0.0, math.log(3.0)]]), torch.tensor([[math.log(3.0), 0.0]])
    # cls head: CE to class 1 with p = 3/4; dist head: CE to the teacher's class 0 with p = 3/4
    pair = HardDistillationLoss()((cls_logits, dist_logits), TEACHER, target).item()
    assert pair == pytest.approx(-math.log(0.75), abs=1e-6)


@pytest.mark.parametrize("kwargs", [dict(temperature=0.0), dict(form="kl_div")])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        SoftLabelKDLoss(**kwargs)


def test_shape_mismatch_is_reported():
    with pytest.raises(ValueError, match="differ in shape"):
        SoftLabelKDLoss()(torch.zeros(2, 3), torch.zeros(2, 4))


# ------------------------------------------------------------------------------- the training criterion and loop
class TwoBranch(torch.nn.Module):
    """A mixed-depth stand-in: each branch has its own head, so a branch left out of the loss gets no gradient."""

    def __init__(self):
        super().__init__()
        self.deep, self.shallow = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)

    def forward(self, x):
        return MixedDepthLogits(self.deep(x), self.shallow(x))


def test_training_loss_sums_branches_and_composes_distillation():
    from harness.tasks.losses import TrainingLoss

    torch.manual_seed(0)
    x, y = torch.randn(6, 4), torch.tensor([0, 1, 2, 0, 1, 2])
    model = TwoBranch()
    out = model(x)
    by_hand = F.cross_entropy(out.deep, y) + F.cross_entropy(out.shallow, y)
    assert TrainingLoss(torch.nn.CrossEntropyLoss())(x, out, y).item() == pytest.approx(by_hand.item(), rel=1e-6)
    pair = (out.deep, out.shallow)  # a (cls, dist) pair without a teacher: the class head only, as DeiT
    assert TrainingLoss(torch.nn.CrossEntropyLoss())(x, pair, y).item() == pytest.approx(
        F.cross_entropy(out.deep, y).item(), rel=1e-6
    )
    teacher = torch.nn.Linear(4, 3)
    kd = SoftLabelKDLoss()(out, teacher(x)).item()
    soft = TrainingLoss(torch.nn.CrossEntropyLoss(), teacher=teacher, distill_loss=SoftLabelKDLoss(), weight=0.25)
    assert soft(x, out, y).item() == pytest.approx(0.75 * by_hand.item() + 0.25 * kd, rel=1e-5)
    hard = TrainingLoss(torch.nn.CrossEntropyLoss(), teacher=teacher, distill_loss=HardDistillationLoss())
    assert hard(x, out, y).item() == pytest.approx(HardDistillationLoss()(out, teacher(x), y).item(), rel=1e-6)


def test_the_loop_trains_every_branch_of_a_mixed_depth_model():
    """The bug: the loop kept outputs[0] of a tuple, so SReT_108_mixed_depth's shallow branch never trained."""
    from types import SimpleNamespace

    from torch.utils.data import DataLoader, TensorDataset

    from harness.engine.builders import TrainingObjects
    from harness.engine.backends import AccelerateBackend
    from harness.engine.loop import TrainState, train_one_epoch
    from harness.tasks.losses import TrainingLoss

    torch.manual_seed(0)
    model = TwoBranch()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    backend = AccelerateBackend("fp32", 1)
    # prepared as the runner prepares them: the backend wraps the optimizer in its non-finite guard
    model, optimizer = backend.prepare(model, torch.optim.SGD(model.parameters(), lr=0.5))
    scheduler = SimpleNamespace(step=lambda epoch: None, step_update=lambda num_updates: None)
    objects = TrainingObjects(model, optimizer, scheduler, None, TrainingLoss(torch.nn.CrossEntropyLoss()), None)
    loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(0, 3, (16,))), batch_size=8)
    logged = []
    log = SimpleNamespace(
        progress=lambda *a: SimpleNamespace(update=lambda n: None, close=lambda: None),
        metrics=lambda kind, **v: logged.append((kind, v)),
        train_step=lambda state, **v: logged.append(("train", v)),
        checkpoint_due_by_time=lambda: False,
    )
    cfg = SimpleNamespace(grad_accum=1, clip_grad=None, log_interval=1, ckpt=SimpleNamespace(interval_steps=0))
    assert train_one_epoch(objects, loader, backend, TrainState(), cfg, log) == "done"
    for name in ("deep.weight", "shallow.weight"):
        assert not torch.equal(model.state_dict()[name], before[name]), f"{name} did not train"
    assert [kind for kind, _ in logged] == ["train", "train", "epoch"]
