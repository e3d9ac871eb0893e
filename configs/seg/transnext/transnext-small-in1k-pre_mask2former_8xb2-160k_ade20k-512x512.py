# TransNeXt Table 15, TransNeXt-Small: as the Tiny Mask2Former config, drop path 0.5 (paper = official).
_base_ = ['./transnext-tiny-in1k-pre_mask2former_8xb2-160k_ade20k-512x512.py']
pretrained = 'checkpoints/transnext_small_224_1k.pth'
model = dict(
    backbone=dict(
        model_name='transnext_small', drop_path_rate=0.5, init_cfg=dict(type='Pretrained', checkpoint=pretrained)
    ),
    decode_head=dict(in_channels=[72, 144, 288, 576]),
)
