# Table VII baseline: a 24-layer DeiT-Base trained from scratch with DeiT's recipe (300 epochs; epochs=100 for
# the 100-epoch row).
_base_ = ['../_base_/datasets/imagenet.py', '../_base_/schedules/deit_300e.py']
model = dict(name='scalenet_deit_base_depth24', drop_path_rate=0.1)
