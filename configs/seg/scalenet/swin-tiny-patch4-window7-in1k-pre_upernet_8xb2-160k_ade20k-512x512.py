# ScaleNet Table IX, Swin-Tiny baseline: mmseg's own Swin-T UperNet 160k config, whose released segmentor
# (44.41 mIoU) is the ScaleNet paper's starting point.
_base_ = ['mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py']
custom_imports = dict(imports=['downstream'], allow_failed_imports=False)
