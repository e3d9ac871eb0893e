"""harness/losses.py: SReT's soft-label distillation (Eq. 17) and the DeiT-style baseline, against hand values."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from harness.losses import BranchSumLoss, HardDistillationLoss, SoftLabelKDLoss
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
    assert loss == pytest.approx(KL_BY_HAND + TEACHER_ENTROPY, abs=1e-6)  # spec §7.16


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
