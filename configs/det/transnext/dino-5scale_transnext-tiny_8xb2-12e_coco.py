# TransNeXt Table 13, TransNeXt-Tiny 5-scale: the 4-scale config on backbone stages 1-4 (+ one extra level).
_base_ = ['./dino-4scale_transnext-tiny_8xb2-12e_coco.py']
num_levels = 5
model = dict(
    num_feature_levels=num_levels,
    backbone=dict(out_indices=(0, 1, 2, 3)),
    neck=dict(in_channels=[72, 144, 288, 576], num_outs=num_levels),
    encoder=dict(layer_cfg=dict(self_attn_cfg=dict(num_levels=num_levels))),
    decoder=dict(layer_cfg=dict(cross_attn_cfg=dict(num_levels=num_levels))),
)
