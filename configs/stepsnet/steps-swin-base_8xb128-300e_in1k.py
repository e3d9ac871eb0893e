# steps_swin_base on ImageNet-1K with the StepsNet appendix recipe (Swin's; see README.md here). Drop path 0.5
# [ASSUMED].
_base_ = ['../_base_/datasets/imagenet.py', '../_base_/schedules/swin_300e.py']
model = dict(name='steps_swin_base', drop_path_rate=0.5)
data = dict(repeated_aug=False)
