# SReT_LT_distill trained from scratch with soft-label distillation only (paper Table 7, Eq. 17): the teacher's
# softmax is the only target (distill.weight=1: no one-hot term). Teacher RegNetY-16GF; set
# distill.teacher_checkpoint to its ImageNet weights.
_base_ = ['../_base_/datasets/imagenet.py', '../_base_/schedules/sret_300e.py']
model = dict(name='SReT_LT_distill', drop_path_rate=0.1)
distill = dict(
    teacher='regnety_160', teacher_checkpoint='checkpoints/regnety_160-in1k.pth', temperature=1.0, weight=1.0
)
