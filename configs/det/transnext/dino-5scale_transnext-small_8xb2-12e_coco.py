# TransNeXt Table 13, TransNeXt-Small 5-scale: as the Tiny 5-scale config, drop path 0.5 (paper = official).
_base_ = ['./dino-5scale_transnext-tiny_8xb2-12e_coco.py']
pretrained = 'checkpoints/transnext_small_224_1k.pth'
model = dict(
    backbone=dict(
        model_name='transnext_small', drop_path_rate=0.5, init_cfg=dict(type='Pretrained', checkpoint=pretrained)
    ),
    neck=dict(in_channels=[72, 144, 288, 576]),
)
