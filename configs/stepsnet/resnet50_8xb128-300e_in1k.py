# resnet50 on ImageNet-1K with the StepsNet appendix recipe (Swin's; see README.md here). Drop path 0.1 [ASSUMED].
_base_ = ['../_base_/datasets/imagenet.py', '../_base_/schedules/swin_300e.py']
model = dict(name='resnet50', drop_path_rate=0.1)
data = dict(repeated_aug=False)
