# SReT_LT on ImageNet-1K, conventional training (paper Table 6; batch 512, lr 5e-4). Drop path 0.1 (DeiT code default;
# S 0.2 from the code history).
_base_ = ['../_base_/datasets/imagenet.py', '../_base_/schedules/sret_300e.py']
model = dict(name='SReT_LT', drop_path_rate=0.1)
