# TransNeXt-Tiny on ImageNet-1K at 224 (paper Table 4). Repeated augmentation is on in the official code.
_base_ = ['../_base_/datasets/imagenet.py', '../_base_/schedules/transnext_300e.py']
model = dict(name='transnext_tiny', drop_path_rate=0.25)
