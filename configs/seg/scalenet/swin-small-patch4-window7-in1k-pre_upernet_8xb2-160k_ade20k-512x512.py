# ScaleNet Table IX, Swin-Small baseline: mmseg's own Swin-S UperNet 160k config (47.72 mIoU segmentor).
_base_ = ['mmseg::swin/swin-small-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py']
custom_imports = dict(imports=['downstream'], allow_failed_imports=False)
