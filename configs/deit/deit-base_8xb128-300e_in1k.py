# DeiT-Base on ImageNet-1K with DeiT's recipe (the StepsNet and ScaleNet papers' DeiT baselines; batch 8 x 128).
_base_ = ['../_base_/datasets/imagenet.py', '../_base_/schedules/deit_300e.py']
model = dict(name='deit_base_patch16_224', drop_path_rate=0.1)
