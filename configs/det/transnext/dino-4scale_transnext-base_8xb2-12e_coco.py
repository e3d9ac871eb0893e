# TransNeXt-Base in DINO 4-scale (the paper prints only the 5-scale row for Base; kept for comparisons):
# as the Tiny 4-scale config, drop path 0.6 (paper = official).
_base_ = ['./dino-4scale_transnext-tiny_8xb2-12e_coco.py']
pretrained = 'checkpoints/transnext_base_224_1k.pth'
model = dict(
    backbone=dict(
        model_name='transnext_base', drop_path_rate=0.6, init_cfg=dict(type='Pretrained', checkpoint=pretrained)
    ),
    neck=dict(in_channels=[192, 384, 768]),
)
