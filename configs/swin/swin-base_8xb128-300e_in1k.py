# Swin-Base (patch 4, window 7) on ImageNet-1K with Swin's recipe (batch 8 x 128 = 1024).
_base_ = ['../_base_/datasets/imagenet.py', '../_base_/schedules/swin_300e.py']
model = dict(name='swin_base_patch4_window7_224', drop_path_rate=0.5)
data = dict(repeated_aug=False)
