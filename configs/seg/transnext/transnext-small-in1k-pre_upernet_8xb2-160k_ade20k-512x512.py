# TransNeXt Table 14, TransNeXt-Small, single-scale: as the Tiny config, drop path 0.6 (paper = official).
_base_ = ['./transnext-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py']
pretrained = 'checkpoints/transnext_small_224_1k.pth'
model = dict(
    backbone=dict(
        model_name='transnext_small', drop_path_rate=0.6, init_cfg=dict(type='Pretrained', checkpoint=pretrained)
    ),
    decode_head=dict(in_channels=[72, 144, 288, 576]),
    auxiliary_head=dict(in_channels=288),
)
