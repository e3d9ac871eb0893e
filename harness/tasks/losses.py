"""The training criteria the tasks compose (the criterion owns the loss; the loop only calls it), with the papers'
distillation losses.

SReT trains with soft labels only (Sec. 5.1, Eq. 17, Table 7): no one-hot term, the teacher's (RegNetY-16GF) softmax is
the target of the student's single head. Eq. 17 is the soft cross-entropy ``-Σ_c p_T log p_S`` averaged over
the batch; it differs from ``KL(p_T‖p_S)`` only by the teacher's entropy, which does not depend on the student,
so both give the same gradients. :class:`SoftLabelKDLoss` returns the KL by default (0 when the student matches
the teacher) and Eq. 17's value with ``form="cross_entropy"``.

Student outputs the losses accept (whatever the model returns in training mode):

* a logits tensor (B×K) — SReT and every single-head model;
* a plain 2-tuple ``(cls_logits, dist_logits)`` — DeiT-style models with a distillation token/head (timm's
  ``*_distilled_*`` models in distilled training, SReT built with ``distill_head=True``): the teacher term uses
  the distillation output, as DeiT does;
* a NamedTuple of branch logits, e.g. ``models.sret.MixedDepthLogits(deep, shallow)`` — mixed-depth training:
  the loss is computed for every branch and summed (App. B leaves the fusion open; [ASSUMED], docs/sret.md).

A teacher that returns a tuple (a distilled teacher in training mode) is reduced to the mean of its outputs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from harness.engine.evaluation import is_branch_output, primary_logits

__all__ = ["SoftLabelKDLoss", "HardDistillationLoss", "BranchSumLoss", "TrainingLoss"]


def _teacher_logits(teacher) -> torch.Tensor:
    if isinstance(teacher, (tuple, list)):
        return torch.stack(list(teacher)).mean(0)
    return teacher


def _distillation_output(student) -> torch.Tensor:
    """The student output the teacher supervises: the tensor itself, or the dist head of a (cls, dist) pair."""
    if isinstance(student, (tuple, list)):
        if len(student) != 2:
            raise ValueError(
                f"expected student logits or a (cls_logits, dist_logits) pair, got a tuple of "
                f"{len(student)}; use a NamedTuple for per-branch outputs"
            )
        return student[1]
    return student


class SoftLabelKDLoss(nn.Module):
    """Soft-label distillation (SReT Eq. 17): teacher softmax as the target, no ground-truth term.

    Args:
        temperature: T; both distributions are ``softmax(logits / T)``. The paper does not state T (docs/sret.md);
            1 is its default. The loss is multiplied by T² so that gradient sizes do not shrink with T
            (Hinton et al.); at T = 1 the factor is 1.
        form: ``"kl"`` (default) — ``KL(p_T‖p_S)`` per sample, batch mean; ``"cross_entropy"`` — Eq. 17 exactly,
            ``-Σ_c p_T log p_S`` per sample, batch mean (= KL + H(p_T); the official ``kd_loss.KDLoss``).

    ``forward(student_logits, teacher_logits) -> scalar``; see the module docstring for tuple outputs. The
    teacher is detached.
    """

    def __init__(self, temperature: float = 1.0, form: str = "kl"):
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature={temperature}: it must be positive (the paper's setting is 1.0)")
        if form not in ("kl", "cross_entropy"):
            raise ValueError(f"form={form!r} is not supported; use 'kl' or 'cross_entropy'")
        self.temperature, self.form = float(temperature), form

    def _loss(self, student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
        if student.shape != teacher.shape:
            raise ValueError(
                f"student logits {tuple(student.shape)} and teacher logits {tuple(teacher.shape)} "
                "differ in shape; both must be batch × classes over the same classes"
            )
        t = self.temperature
        log_p_student = F.log_softmax(student.float() / t, dim=-1)
        log_p_teacher = F.log_softmax(teacher.detach().float() / t, dim=-1)
        p_teacher = log_p_teacher.exp()
        per_sample = -(p_teacher * log_p_student).sum(-1)
        if self.form == "kl":
            per_sample = per_sample + (p_teacher * log_p_teacher).sum(-1)
        return per_sample.mean() * t * t

    def forward(self, student_logits, teacher_logits) -> torch.Tensor:
        teacher = _teacher_logits(teacher_logits)
        if is_branch_output(student_logits):
            return sum(self._loss(_distillation_output(branch), teacher) for branch in student_logits)
        return self._loss(_distillation_output(student_logits), teacher)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}, form={self.form!r}"


class HardDistillationLoss(nn.Module):
    """ "GT one-hot + hard distillation" (DeiT), SReT's comparison baseline (Table 3, Fig. 10(1)).

    ``0.5·CE(cls, y) + 0.5·CE(dist, argmax teacher)``. With a single-head student (SReT has no distillation
    token) both terms use the same logits [ASSUMED, docs/sret.md]; with a ``(cls, dist)`` pair each head gets
    its term, as in DeiT. ``base_criterion`` (default: cross-entropy) handles ``y`` — pass timm's
    ``SoftTargetCrossEntropy`` when ``y`` is a mixup soft target.

    ``forward(student_logits, teacher_logits, target) -> scalar``.
    """

    def __init__(self, base_criterion: nn.Module | None = None, alpha: float = 0.5):
        super().__init__()
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha={alpha}: the distillation weight must be within [0, 1]")
        self.base_criterion = base_criterion or nn.CrossEntropyLoss()
        self.alpha = alpha

    def _loss(self, student, teacher: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        cls_logits, dist_logits = student if isinstance(student, (tuple, list)) else (student, student)
        hard = teacher.detach().argmax(dim=-1)
        ground_truth = self.base_criterion(cls_logits, target)
        return (1 - self.alpha) * ground_truth + self.alpha * F.cross_entropy(dist_logits, hard)

    def forward(self, student_logits, teacher_logits, target: torch.Tensor) -> torch.Tensor:
        teacher = _teacher_logits(teacher_logits)
        if is_branch_output(student_logits):
            return sum(self._loss(branch, teacher, target) for branch in student_logits)
        return self._loss(student_logits, teacher, target)


class BranchSumLoss(nn.Module):
    """Wrap any criterion so that a per-branch NamedTuple output (mixed depth) gets the sum of its losses.

    ``BranchSumLoss(nn.CrossEntropyLoss())(output, target)``: a tensor output is passed through unchanged.
    """

    def __init__(self, criterion: nn.Module):
        super().__init__()
        self.criterion = criterion

    def forward(self, output, *args, **kwargs) -> torch.Tensor:
        if is_branch_output(output):
            return sum(self.criterion(branch, *args, **kwargs) for branch in output)
        return self.criterion(output, *args, **kwargs)


class TrainingLoss(nn.Module):
    """The training criterion, composed DeiT-style: the loop calls ``criterion(images, outputs, targets)`` and
    knows nothing of teachers or branches.

    * the task loss ``base_criterion`` (CE, label smoothing or soft-target CE under mixup) on every branch of a
      per-branch NamedTuple, summed (:class:`BranchSumLoss`; SReT mixed depth: the deep and the shallow branch
      both train), on the class head of a ``(cls, dist)`` pair, else on the logits;
    * with a ``teacher`` and :class:`SoftLabelKDLoss` (SReT Eq. 17):
      ``(1 - weight) * task + weight * KD(outputs, teacher(images))`` -- SReT trains with ``weight=1``;
    * with a ``teacher`` and :class:`HardDistillationLoss` (DeiT's hard distillation, SReT Table 3's baseline):
      that loss, which holds the ground-truth term itself (its ``alpha`` is the weight).

    The teacher runs without gradients and is a submodule (it moves with ``.to()``; it has no trainable
    parameters for an optimizer to see).
    """

    def __init__(
        self,
        base_criterion: nn.Module,
        teacher: nn.Module | None = None,
        distill_loss: nn.Module | None = None,
        weight: float = 1.0,
    ):
        super().__init__()
        if (teacher is None) != (distill_loss is None):
            raise ValueError("give both a teacher and a distillation loss, or neither")
        self.task = BranchSumLoss(base_criterion)
        self.teacher, self.distill_loss, self.weight = teacher, distill_loss, float(weight)

    def task_loss(self, outputs, targets) -> torch.Tensor:
        if is_branch_output(outputs):
            return self.task(type(outputs)(*(branch.float() for branch in outputs)), targets)
        return self.task(primary_logits(outputs).float(), targets)

    def forward(self, images: torch.Tensor, outputs, targets: torch.Tensor) -> torch.Tensor:
        if self.teacher is None:
            return self.task_loss(outputs, targets)
        with torch.no_grad():
            teacher_outputs = self.teacher(images)
        if isinstance(self.distill_loss, HardDistillationLoss):
            return self.distill_loss(outputs, teacher_outputs, targets)
        return (1 - self.weight) * self.task_loss(outputs, targets) + self.weight * self.distill_loss(
            outputs, teacher_outputs
        )
